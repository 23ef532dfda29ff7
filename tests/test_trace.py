"""`pathtwin trace` as a user runs it: the Python API and the CLI on small captures written
here byte by byte, Monarch's diagnosis against flows with known losses, malformed input,
and the bridge to a paths topology."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from pathtwin import trace
from pathtwin.cli import main
from pathtwin.errors import PathtwinError

T0 = 1_700_000_000.0


def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4(src: str, dst: str, proto: int, body: bytes, ip_id: int = 0) -> bytes:
    s = bytes(map(int, src.split(".")))
    d = bytes(map(int, dst.split(".")))
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), ip_id, 0, 64, proto, 0, s, d)
    hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
    return hdr + body


def tcp(sport, dport, seq, ack, flags, payload=b"", mss=None) -> bytes:
    opts = struct.pack("!BBH", 2, 4, mss) if mss else b""
    off = (20 + len(opts)) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, off << 4, flags, 65535, 0, 0) + opts + payload


def icmp_echo(kind: int, ident: int, seq: int) -> bytes:
    return struct.pack("!BBHHH", kind, 0, 0, ident, seq) + b"p" * 32


def pcap(packets: list[tuple[float, bytes]], linktype: int = 101) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for t, p in packets:
        out += struct.pack("<IIII", int(t), int(round((t % 1) * 1e6)), len(p), len(p)) + p
    return out


SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08


def http_exchange(t0: float, client: str, cport: int, rtt: float = 0.05) -> list[tuple[float, bytes]]:
    """Handshake, GET, a 2-segment response after a 20 ms server delay, FIN both ways."""
    c, s = client, "192.0.2.80"
    up = lambda t, seq, ack, fl, pl=b"", mss=None: (t, ipv4(c, s, 6, tcp(cport, 80, seq, ack, fl, pl, mss)))
    down = lambda t, seq, ack, fl, pl=b"", mss=None: (t, ipv4(s, c, 6, tcp(80, cport, seq, ack, fl, pl, mss)))
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    resp1 = b"HTTP/1.1 200 OK\r\n" + b"a" * 983
    resp2 = b"b" * 500
    return [
        up(t0, 100, 0, SYN, mss=1460),
        down(t0 + 0.0001, 900, 101, SYN | ACK, mss=1460),
        up(t0 + 0.0001 + rtt, 101, 901, ACK),
        up(t0 + 0.0002 + rtt, 101, 901, ACK | PSH, req),
        down(t0 + 0.0202 + rtt, 901, 101 + len(req), ACK, resp1),
        down(t0 + 0.0203 + rtt, 1901, 101 + len(req), ACK | PSH, resp2),
        up(t0 + 0.0302 + 2 * rtt, 101 + len(req), 1901, ACK),
        up(t0 + 0.0305 + 2 * rtt, 101 + len(req), 2401, ACK),
        down(t0 + 0.031 + 2 * rtt, 2401, 101 + len(req), ACK | FIN),
        up(t0 + 0.031 + 3 * rtt, 101 + len(req), 2402, ACK | FIN),
        down(t0 + 0.0311 + 3 * rtt, 2402, 102 + len(req), ACK),
    ]


@pytest.fixture()
def small_capture(tmp_path: Path) -> Path:
    pkts = http_exchange(T0, "198.51.100.7", 40001) + http_exchange(T0 + 1, "198.51.100.8", 40002, rtt=0.1)
    p = tmp_path / "two.pcap"
    p.write_bytes(pcap(pkts))
    return p


def test_analyze_returns_one_row_per_connection(small_capture):
    conns, stats = trace.analyze(small_capture)
    assert list(conns["client_ip"]) == ["198.51.100.7", "198.51.100.8"]
    assert stats["frames"] == 22 and stats["bad_headers"] == 0
    # The timings the capture was built with.
    assert conns["handshake_rtt_ms"].round(3).tolist() == [50.0, 100.0]
    assert conns["server_delay_ms"].round(3).tolist() == [20.0, 20.0]
    assert conns["http_method"].tolist() == ["GET", "GET"]
    assert conns["http_status"].tolist() == [200, 200]
    assert conns["bytes_s2c"].tolist() == [1500, 1500]
    assert conns["termination"].tolist() == ["fin", "fin"]
    # Two ACKs, 0.3 ms apart, for two segments sent back to back: one ACK pair.
    assert conns["bandwidth_samples"].tolist() == [1, 1]
    assert conns["kept"].all()


def test_server_option_filters_and_names_roles(small_capture):
    conns, _ = trace.analyze(small_capture, server="192.0.2.80:80")
    assert conns["server_ip"].tolist() == ["192.0.2.80"] * 2
    conns, stats = trace.analyze(small_capture, server="192.0.2.99")
    assert len(conns) == 0 and stats["other_packets"] == 22
    with pytest.raises(PathtwinError, match="--server"):
        trace.analyze(small_capture, server="not-an-address")


def test_cli_analyze_writes_parquet_and_csv(small_capture, tmp_path, capsys):
    out = tmp_path / "conns.parquet"
    assert main(["trace", "analyze", str(small_capture), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 connections" in printed
    df = trace.read_table(out)
    assert len(df) == 2 and "bottleneck_bps" in df.columns
    csv = tmp_path / "conns.csv"
    assert main(["trace", "analyze", str(small_capture), "-o", str(csv), "--csv"]) == 0
    assert csv.read_text().startswith("conn_id,")


@pytest.mark.parametrize(
    "content",
    [b"", b"\xd4\xc3", b"not a capture at all", struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 147)],
    ids=["empty", "short", "bad-magic", "unknown-linktype"],
)
def test_cli_malformed_capture_is_one_line_error(tmp_path, capsys, content):
    p = tmp_path / "bad.pcap"
    p.write_bytes(content)
    assert main(["trace", "analyze", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pathtwin: error:") and "\n" not in err


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(PathtwinError, match="no such capture"):
        trace.analyze(tmp_path / "nope.pcap")


def test_garbage_packets_are_counted(tmp_path):
    pkts = http_exchange(T0, "198.51.100.7", 40001)
    rng = random.Random(1)
    junk = [(T0 + 0.5, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))) for _ in range(50)]
    p = tmp_path / "junk.pcap"
    p.write_bytes(pcap(pkts + junk))
    conns, stats = trace.analyze(p)
    assert stats["frames"] == 61
    counted = ("bad_headers", "other_packets", "tcp_packets", "non_ip", "fragments")
    assert sum(stats[k] for k in counted) == 61
    assert conns.loc[0, "bytes_s2c"] == 1500


def remote_flow(n: int, lost_probe: set[int], lost_response: set[int], swap_responses: set[int] = frozenset()):
    """An ICMP echo flow to a remote host whose IP ID counts its replies: probes in
    `lost_probe` never reach it (no reply, no ID used), replies in `lost_response` are sent
    (ID used) but never arrive; a reply in `swap_responses` arrives after the next one."""
    local, remote = "10.0.0.1", "203.0.113.9"
    pkts, ip_id, t = [], 1000, T0
    replies = []
    for i in range(n):
        t += 0.01
        pkts.append((t, ipv4(local, remote, 1, icmp_echo(8, 77, i), ip_id=i)))
        if i in lost_probe:
            continue
        ip_id += 1
        if i not in lost_response:
            replies.append([t + 0.02, i, ip_id])
    for k in range(len(replies) - 1):
        if replies[k][1] in swap_responses:
            replies[k][0], replies[k + 1][0] = replies[k + 1][0], replies[k][0] + 0.000001
    for tr, i, rid in replies:
        pkts.append((tr, ipv4(remote, local, 1, icmp_echo(0, 77, i), ip_id=rid)))
    pkts.sort(key=lambda x: x[0])
    return pkts


def test_diagnose_separates_upstream_and_downstream_loss(tmp_path):
    cases = {
        "clean": remote_flow(100, set(), set()),
        "probe-loss": remote_flow(100, {10, 11, 50}, set()),
        "reply-loss": remote_flow(100, set(), {20, 60, 61}),
        "both": remote_flow(100, {30, 31}, {31, 70}),
    }
    expected = {  # (lost downstream, lost upstream, verdict) by construction
        "clean": (0, 0, "Confirmed"),
        "probe-loss": (3, 0, "Confirmed"),
        "reply-loss": (0, 3, "Inaccurate"),
        "both": (2, 1, "Inaccurate"),
    }
    for name, pkts in cases.items():
        p = tmp_path / f"{name}.pcap"
        p.write_bytes(pcap(pkts))
        flows, _ = trace.diagnose(p)
        assert len(flows) == 1, name
        r = flows.iloc[0]
        assert bool(r.ipid_usable), name
        assert (r.lost_downstream, r.lost_upstream, r.verdict) == expected[name], name


def test_diagnose_reordering_and_unusable_ids(tmp_path):
    p = tmp_path / "reorder.pcap"
    p.write_bytes(pcap(remote_flow(50, set(), set(), swap_responses={10, 30})))
    r = trace.diagnose(p)[0].iloc[0]
    assert r.reordered_upstream_minor == 2 and r.reordered_upstream_harmful == 0
    assert r.verdict == "Confirmed"
    # A host answering with ID 0 (Linux with DF set) gives no usable IDs.
    pkts = [(t, b[:4] + b"\0\0" + b[6:]) if b[12:16] == bytes([203, 0, 113, 9]) else (t, b) for t, b in remote_flow(30, set(), set())]
    p.write_bytes(pcap(pkts))
    flows, _ = trace.diagnose(p)
    assert flows.iloc[0].verdict == "Indeterminate"
    table = trace.verdict_table(flows)
    assert table.set_index("result").loc["Indeterminate", "flows"] == 1
    assert table.set_index("result").loc["Traces total", "percent"] == 100.0


def test_to_paths_bridge(small_capture, tmp_path, capsys):
    conns_file = tmp_path / "conns.parquet"
    assert main(["trace", "analyze", str(small_capture), "-o", str(conns_file)]) == 0
    out = tmp_path / "paths.toml"
    assert main(["trace", "to-paths", str(conns_file), "-o", str(out)]) == 0
    text = out.read_text()
    topo = trace.to_paths(trace.read_table(conns_file))
    assert topo["hosts"] == ["server", "c0", "c1"]
    # Base RTT from the min RTT of each client's connection.
    assert [p["rtt"] for p in topo["path"]] == ["50.000ms", "100.000ms"]
    assert text.count("[[path]]") == 2


def test_to_paths_rejects_foreign_tables(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    assert main(["trace", "to-paths", str(p), "-o", str(tmp_path / "p.toml")]) == 2


def test_threads_do_not_change_the_result(tmp_path):
    pkts = []
    for k in range(40):
        pkts += http_exchange(T0 + 0.01 * k, f"198.51.100.{k + 1}", 40000 + k, rtt=0.02 + 0.001 * k)
    p = tmp_path / "many.pcap"
    p.write_bytes(pcap(sorted(pkts, key=lambda x: x[0])))
    one, stats_one = trace.analyze(p, threads=1)
    three, stats_three = trace.analyze(p, threads=3)
    assert len(one) == 40 and stats_one == stats_three
    assert one.equals(three)
    with pytest.raises(PathtwinError, match="threads"):
        trace.analyze(p, threads=0)
