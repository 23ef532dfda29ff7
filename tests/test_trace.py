"""`pathtwin trace` as a user runs it: the Python API and the CLI on small captures written
here byte by byte, Monarch's diagnosis against flows with known losses, malformed input,
and the bridge to a paths topology."""

from __future__ import annotations

import json
import math
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
    # Written by the schema's serialiser: the file parses, and writing what it parses to
    # gives the same text back; each client's address is named in a comment.
    from pathtwin import _native

    body = text.split("\n\n", 1)[1]
    assert _native.config_toml(text, "toml", str(out)) == body
    assert [line.split(";")[0] for line in text.splitlines() if line.startswith("# c")] == [
        f"# c{i}: client {e['client']} (1 connection(s))" for i, e in enumerate(topo["estimates"])]
    # Two-segment responses whose last ACK may have been delayed: no capacity, so no ABW
    # either; each says so, and the path gets the model's default capacity for both.
    for e in topo["estimates"]:
        for d in ("s2c", "c2s"):
            assert (e[d]["capacity"]["kind"], e[d]["abw"]["kind"]) == ("default", "unknown"), e[d]
            assert e[d]["abw"]["written_bps"] == e[d]["capacity"]["written_bps"] == _native.DEFAULT_PATH_CAPACITY_BPS
    # The estimates beside the topology, as the command printed.
    sidecar = json.loads((tmp_path / "paths.estimates.json").read_text())
    assert sidecar["topology"] == "paths.toml" and sidecar["paths"] == json.loads(json.dumps(topo["estimates"]))
    assert "paths.estimates.json" in capsys.readouterr().out


# A simulated path whose capacity (20 Mbit/s) and ABW (5 Mbit/s) differ, three clients:
# a bulk download (network-limited), one held by a 12-KB receive window, and short
# responses after think times (never more than a first window). Captured at the server.
SIM_PATHS = """
hosts = ["server", "bulk", "rwnd", "short"]
[run]
duration = "6s"
seed = 3
pcap = ["server"]
""" + "".join(f"""
[[path]]
between = ["server", "{h}"]
rtt = "40ms"
capacity = "20mbit"
abw = "5mbit"
""" for h in ("bulk", "rwnd", "short")) + """
[[flow]]
from = "bulk"
to = "server"
app = "reqresp"
request = "300B"
response = "2500KB"
requests = 1
[[flow]]
from = "rwnd"
to = "server"
app = "reqresp"
request = "300B"
response = "800KB"
requests = 1
tcp = { rcv_window = "12KB" }
[[flow]]
from = "short"
to = "server"
app = "reqresp"
request = "300B"
response = "30KB"
think = "100ms"
requests = 20
"""


def test_to_paths_on_a_simulated_capture(tmp_path):
    """The simulator's capture of known paths (no root needed): capacity within three
    standard errors and the bias bound, ABW within its error bound, and only the
    network-limited transfer gives an ABW point estimate; the others bound it from below,
    labelled, and the path is written with ABW = capacity."""
    from pathtwin import _native
    from pathtwin.sim import simulate

    result = simulate(SIM_PATHS, out=tmp_path / "sim")
    conns, _ = trace.analyze(tmp_path / "sim" / "pcap" / "server.pcap")
    assert result.run["complete"]
    topo = trace.to_paths(conns)
    by_limit = {r.limit_s2c: r for r in conns.itertuples()}
    assert set(by_limit) == {"network", "receiver window", "slow start"}, conns.limit_s2c.tolist()
    assert conns.abw_s2c_bps.notna().sum() == 1
    for e in topo["estimates"]:
        c, a = e["s2c"]["capacity"], e["s2c"]["abw"]
        assert abs(c["value_bps"] - 20e6) <= 3 * (c["se_bps"] or 0) + (c["bias_bps"] or math.inf), c
        if a["kind"] == "point":
            assert abs(a["value_bps"] - 5e6) <= a["error_bps"], a
            assert a["limits"] == {"network": 1}
        else:
            assert a["kind"] == "lower bound" and a["value_bps"] <= 5e6 and "written as the capacity" in a["how"], a
            assert a["written_bps"] == c["written_bps"]
        # Nothing went upstream but requests: not measured, and said so; its ABW is the
        # other direction's, so that Eq. 4 rests on the measured one.
        assert e["c2s"]["capacity"]["kind"] == "default" and e["c2s"]["abw"]["kind"] == "assumed"
        assert e["c2s"]["abw"]["written_bps"] == a["written_bps"]
    # The bulk client's queue: its fullest delay × capacity, within the model's bounds.
    (bulk,) = [e for e in topo["estimates"] if e["s2c"]["abw"]["kind"] == "point"]
    assert bulk["s2c"]["queue"]["kind"] == "point" and bulk["s2c"]["queue"]["written_bytes"] == bulk["s2c"]["queue"]["measured_bytes"]
    assert sorted(e["s2c"]["abw"]["kind"] for e in topo["estimates"]) == ["lower bound", "lower bound", "point"]
    # The topology validates and round-trips through the schema.
    text = trace.paths_toml(topo)
    assert _native.config_toml(text, "toml", "") == text.split("\n\n", 1)[1]


# Cross traffic that changes over time (iBox's case): 20 Mbit/s, ABW 12 Mbit/s, then 4 from
# 3 s and 9 from 6 s; one download of 8 MB, which spans them and ends at about 8 s, its window
# far above the BDP so that the queue stands. Captured at the server.
PROFILE_STEPS = [(0.0, 12e6), (3.0, 4e6), (6.0, 9e6)]
SIM_PROFILE = """
hosts = ["server", "bulk"]
[run]
duration = "12s"
seed = 5
pcap = ["server"]
[tcp]
max_window = "1MiB"
rcv_window = "1MiB"
[[path]]
between = ["server", "bulk"]
rtt = "40ms"
capacity = "20mbit"
abw = "12mbit"
queue = "120KB"
enforce_bounds = false
[path.abw_steps]
a_to_b = [["3s", "4mbit"], ["6s", "9mbit"]]
[[flow]]
from = "bulk"
to = "server"
app = "reqresp"
request = "300B"
response = "8MB"
requests = 1
"""


def test_to_paths_writes_the_cross_traffic_over_time(tmp_path, capsys):
    """A simulated capture of a path whose cross traffic steps (the profile is the truth):
    `trace analyze --cross-traffic` then `trace to-paths --cross-traffic` write abw_steps
    whose every step from a bin with a standing queue, inside one truth interval, is that
    interval's ABW within the bin's own error bound (plus 3 % of capacity for rounding and
    the bin's edges), every step from a bin without one (the flow's delivery there, the
    least the ABW was) no more than the truth's ABW over that bin (plus the 3 %), and the
    file is a model both engines take. (A step is the capacity written less the bin's cross
    traffic, which is the connection's delivery rate while the queue stood: the capacity
    estimate, here from one burst, cancels out.)"""
    from pathtwin import _native
    from pathtwin.config import parse_quantity
    from pathtwin.sim import simulate

    simulate(SIM_PROFILE, out=tmp_path / "sim")
    pcap = tmp_path / "sim" / "pcap" / "server.pcap"
    conns, ct = tmp_path / "conns.parquet", tmp_path / "ct.parquet"
    assert main(["trace", "analyze", str(pcap), "-o", str(conns), "--cross-traffic", str(ct)]) == 0
    assert "bins of cross traffic over time" in capsys.readouterr().out
    out = tmp_path / "paths.toml"
    assert main(["trace", "to-paths", str(conns), "--cross-traffic", str(ct), "-o", str(out)]) == 0
    import tomllib

    model = tomllib.loads(out.read_text())
    steps = model["path"][0]["abw_steps"]["a_to_b"]
    assert "b_to_a" not in model["path"][0]["abw_steps"], "nothing but requests went upstream"
    est = json.loads((tmp_path / "paths.estimates.json").read_text())["paths"][0]["s2c"]["abw_steps"]
    assert est["kind"] == "profile" and est["steps"] == len(steps)

    def truth(t: float) -> float:
        return [abw for start, abw in PROFILE_STEPS if start <= t][-1]

    bins = trace.read_table(ct)
    bins = bins[bins["direction"].eq("s2c")].sort_values("start_s")
    t0 = float(trace.read_table(conns)["start_s"].min())
    bins["t"] = bins["start_s"] - t0
    checked = set()
    raised = 0
    for k, (t_text, rate_text) in enumerate(steps):
        t, rate = parse_quantity("time", t_text, "step"), parse_quantity("rate", rate_text, "step")
        # The first point holds from the start (slow start before it says nothing); every
        # later step starts at its bin's start.
        if k == 0:
            assert t == 0.0
            b = bins[bins["point"]].iloc[0]
        else:
            at = bins[(bins["t"] - t).abs() < 1e-3]
            assert len(at) == 1, (t, steps)
            b = at.iloc[0]
        t, end = b["t"], b["t"] + b["duration_s"]
        if not b["point"]:
            # No standing queue: what the flow got, which the path's ABW was at least.
            assert rate <= max(truth(t), truth(end - 1e-6)) + 0.03 * 20e6, (t, rate)
            raised += 1
            continue
        if truth(t) != truth(end - 1e-6):
            continue  # the bin straddles a step of the truth
        assert abs(rate - truth(t)) <= b["cross_error_bps"] + 0.03 * 20e6, (t, rate, truth(t), b["cross_error_bps"])
        checked.add(truth(t))
    assert est["raised"] == raised
    # Every level of the truth was met by a step within one interval.
    assert checked == {abw for _, abw in PROFILE_STEPS}, steps
    # Both engines' schema takes it (to-paths validated it; the steps are in order).
    _native.validate_config(out.read_text(), "toml", str(out))


def test_to_paths_rejects_foreign_tables(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,2\n")
    assert main(["trace", "to-paths", str(p), "-o", str(tmp_path / "p.toml")]) == 2


def test_to_paths_refuses_a_profile_that_is_not_one(tmp_path, capsys):
    """A cross-traffic table must be one: here the connection table stands in for it."""
    from pathtwin.sim import simulate

    simulate(SIM_PATHS, out=tmp_path / "sim")
    conns = tmp_path / "conns.parquet"
    assert main(["trace", "analyze", str(tmp_path / "sim" / "pcap" / "server.pcap"), "-o", str(conns)]) == 0
    capsys.readouterr()
    assert main(["trace", "to-paths", str(conns), "--cross-traffic", str(conns), "-o", str(tmp_path / "p.toml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a cross-traffic table" in err and "\n" not in err, err
    assert not (tmp_path / "p.toml").exists()


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
    x_one, x_three = trace.workload(p, threads=1)[1], trace.workload(p, threads=3)[1]
    assert x_one.equals(x_three) and x_one["conn_id"].tolist() == list(range(40))
    with pytest.raises(PathtwinError, match="threads"):
        trace.analyze(p, threads=0)
    with pytest.raises(PathtwinError, match="threads"):
        trace.workload(p, threads=0)


def persistent_connection(t0: float, client: str = "198.51.100.7", cport: int = 40001) -> tuple[list, dict]:
    """One connection, two GET exchanges, and the values it was built with.

    Exchange 0: the request at 60 ms; a 200-byte header at 80 ms (server delay 20 ms), then
    1460 + 1000 bytes of results from 80.1 ms (the short header ends Monkey's walk: query
    delay 0.1 ms); the 1460-byte segment is sent again at 300 ms and must count once.
    Exchange 1: the client thinks until 500 ms; 1460 + 1460 + 300 bytes from 530 ms, all
    full segments but the last, so no header/results split.
    """
    c, s = client, "192.0.2.80"
    up = lambda t, seq, ack, fl, pl=b"", mss=None: (t0 + t, ipv4(c, s, 6, tcp(cport, 80, seq, ack, fl, pl, mss)))
    down = lambda t, seq, ack, fl, pl=b"", mss=None: (t0 + t, ipv4(s, c, 6, tcp(80, cport, seq, ack, fl, pl, mss)))
    req0 = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
    req1 = b"GET /bb HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"
    header = b"HTTP/1.1 200 OK\r\n" + b"h" * 183
    c1, c2, c3 = 101 + len(req0), 101 + len(req0) + len(req1), 102 + len(req0) + len(req1)
    pkts = [
        up(0.0, 100, 0, SYN, mss=1460),
        down(0.0001, 900, 101, SYN | ACK, mss=1460),
        up(0.0501, 101, 901, ACK),
        up(0.060, 101, 901, ACK | PSH, req0),
        down(0.080, 901, c1, ACK, header),
        down(0.0801, 1101, c1, ACK, b"r" * 1460),
        down(0.0802, 2561, c1, ACK | PSH, b"s" * 1000),
        up(0.1302, c1, 1101, ACK),
        down(0.300, 1101, c1, ACK, b"r" * 1460),
        up(0.350, c1, 3561, ACK),
        up(0.500, c1, 3561, ACK | PSH, req1),
        down(0.530, 3561, c2, ACK, b"t" * 1460),
        down(0.5301, 5021, c2, ACK, b"u" * 1460),
        down(0.5302, 6481, c2, ACK | PSH, b"v" * 300),
        up(0.5802, c2, 6781, ACK),
        down(0.600, 6781, c2, ACK | FIN),
        up(0.650, c2, 6782, ACK | FIN),
        down(0.6501, 6782, c3, ACK),
    ]
    expected = {
        "request_bytes": [len(req0), len(req1)],
        "response_bytes": [200 + 1460 + 1000, 1460 + 1460 + 300],
        "header_bytes": [200.0, None],
        "server_delay_ms": [20.0, 30.0],
        "query_delay_ms": [0.1, None],
        "response_time_ms": [20.2, 30.2],
        "think_ms": [None, 500 - 80.2],
        "request_start_s": [t0 + 0.060, t0 + 0.500],
        "response_end_s": [t0 + 0.0802, t0 + 0.5302],
    }
    return pkts, expected


EXCHANGE_COLUMNS = [
    "conn_id", "exchange", "request_start_s", "request_end_s", "request_bytes", "response_start_s", "response_end_s",
    "response_bytes", "header_bytes", "server_delay_ms", "query_delay_ms", "response_time_ms", "think_ms",
    "response_acked_s",
]


def _check_exchanges(x, expected):
    assert list(x.columns) == EXCHANGE_COLUMNS
    assert x[["conn_id", "exchange"]].values.tolist() == [[1, 0], [1, 1]]
    for col, values in expected.items():
        got = x[col].tolist()
        for g, v in zip(got, values):
            if v is None:
                assert g != g, (col, got)  # NaN
            else:
                assert g == pytest.approx(v, abs=1e-6), (col, got)


def test_workload_gives_one_row_per_exchange(tmp_path):
    pkts, expected = persistent_connection(T0 + 1)
    # A single-exchange connection first: the persistent one is conn_id 1.
    p = tmp_path / "persistent.pcap"
    p.write_bytes(pcap(http_exchange(T0, "198.51.100.9", 40009) + pkts))
    conns, x, stats = trace.workload(p)
    assert len(conns) == 2 and stats["frames"] == 11 + 18
    _check_exchanges(x[x["conn_id"] == 1], expected)
    assert x["conn_id"].tolist() == [0, 1, 1] and x["exchange"].tolist() == [0, 0, 1]
    # The retransmitted segment counts once in the exchange and in the connection.
    r = conns.iloc[1]
    assert (r.retrans_packets_s2c, r.unique_bytes_s2c, r.bytes_s2c) == (1, 2660 + 3220, 2660 + 3220 + 1460)
    assert x.loc[x["conn_id"] == 1, "response_bytes"].sum() == r.unique_bytes_s2c
    assert x.loc[x["conn_id"] == 1, "request_bytes"].sum() == r.unique_bytes_c2s
    # The connection row still describes the first exchange; `analyze` is `workload` less
    # the exchanges.
    assert (r.requests, round(r.query_delay_ms, 3), round(r.server_delay_ms, 3)) == (2, 0.1, 20.0)
    conns2, stats2 = trace.analyze(p)
    assert conns2.equals(conns) and stats2 == stats


def test_cli_writes_the_exchange_table(tmp_path, capsys):
    pkts, expected = persistent_connection(T0)
    p = tmp_path / "persistent.pcap"
    p.write_bytes(pcap(http_exchange(T0 - 5, "198.51.100.9", 40009) + pkts))
    conns_out, x_out = tmp_path / "conns.parquet", tmp_path / "exchanges.parquet"
    assert main(["trace", "analyze", str(p), "-o", str(conns_out), "--exchanges", str(x_out)]) == 0
    assert "3 exchanges" in capsys.readouterr().out
    x = trace.read_table(x_out)
    _check_exchanges(x[x["conn_id"] == 1], expected)
    assert x.equals(trace.workload(p)[1])
    assert len(trace.read_table(conns_out)) == 2
    csv = tmp_path / "exchanges.csv"
    assert main(["trace", "analyze", str(p), "--exchanges", str(csv), "--csv"]) == 0
    assert csv.read_text().startswith(",".join(EXCHANGE_COLUMNS) + "\n")
    _check_exchanges(trace.read_table(csv).iloc[1:], expected)


def test_diagnose_over_several_runs_gives_one_table_5(tmp_path, capsys):
    """One capture per Monarch run, one verdict table for all their flows."""
    runs = {"clean": remote_flow(100, set(), set()), "reply-loss": remote_flow(100, set(), {20, 60, 61}),
            "probe-loss": remote_flow(100, {10, 11, 50}, set())}
    paths = []
    for name, pkts in runs.items():
        p = tmp_path / f"{name}.pcap"
        p.write_bytes(pcap(pkts))
        paths.append(p)
    assert main(["trace", "diagnose", *map(str, paths), "-o", str(tmp_path / "flows.csv"), "--csv"]) == 0
    import pandas as pd

    flows = pd.read_csv(tmp_path / "flows.csv")
    assert sorted(flows["capture"].str.rsplit("/", n=1).str[-1]) == sorted(f"{n}.pcap" for n in runs)
    assert sorted(flows["verdict"]) == ["Confirmed", "Confirmed", "Inaccurate"]
    out = capsys.readouterr().out
    assert "Traces total" in out and "66.7 %" in out


def test_diagnose_follows_a_capture_live(tmp_path, capsys):
    """--follow re-reads a capture as it grows and stops once it has not grown for a while;
    here a capture written in two halves, the second while it is being followed."""
    import threading
    import time

    pkts = remote_flow(100, set(), {20, 60, 61})
    p = tmp_path / "growing.pcap"
    whole = pcap(pkts)
    p.write_bytes(whole[: 24 + (len(whole) - 24) // 2])
    threading.Timer(0.3, lambda: p.write_bytes(whole)).start()
    t0 = time.monotonic()
    assert main(["trace", "diagnose", str(p), "--follow", "0.2"]) == 0
    assert time.monotonic() - t0 < 10
    lines = [l for l in capsys.readouterr().out.splitlines() if "probes," in l]
    assert len(lines) >= 2 and "lost 0 down / 3 up, Inaccurate" in lines[-1], lines
    assert main(["trace", "diagnose", str(p), str(p), "--follow", "1"]) == 2
