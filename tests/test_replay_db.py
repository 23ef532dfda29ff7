"""The replay database from captures written byte by byte: what Monkey See hands Monkey Do,
from a capture at the server (the paper's) and from one at the client (most public ones),
checked against the times the packets were built with."""

from __future__ import annotations

import pytest

from pathtwin import trace
from pathtwin.errors import PathtwinError
from pathtwin.replay import Workload
from pathtwin.replay.workload import vantage
from test_trace import ACK, FIN, PSH, SYN, T0, http_exchange, ipv4, pcap, tcp


def test_a_server_side_capture_gives_monkeys_parameters(tmp_path):
    p = tmp_path / "server.pcap"
    p.write_bytes(pcap(http_exchange(T0, "198.51.100.7", 40001) + http_exchange(T0 + 1, "198.51.100.8", 40002, rtt=0.1)))
    conns, exchanges, _ = trace.workload(p)
    db = Workload.from_analysis(conns, exchanges)
    assert db.vantage == "server" and len(db) == 2
    assert db.conns["rtt_ms"].round(3).tolist() == [50.0, 100.0]
    # Connect times shifted back by half the min RTT (§4.2): 1 s apart, less 25 ms of shift.
    assert db.conns["start_s"].round(4).tolist() == [0.0, round(1 - 0.025, 4)]
    x = db.exchanges
    assert x["server_delay_s"].round(4).tolist() == [0.02, 0.02]
    assert x["response_bytes"].tolist() == [1500, 1500]
    # A 1000-byte first segment, short of the MSS, ends the header (Monkey's walk).
    assert x["header_bytes"].tolist() == [1000, 1000]


def client_side(t0: float, rtt: float, segments: int, spacing: float, fin: bool) -> list:
    """One connection seen at the client: the SYN-ACK a full RTT after the SYN, the
    response arriving an RTT plus a 20 ms server delay after the request, one MSS every
    `spacing` seconds (the bottleneck's pace)."""
    c, s, cport = "10.1.1.2", "192.0.2.80", 50000
    up = lambda t, seq, ack, fl, pl=b"", mss=None: (t, ipv4(c, s, 6, tcp(cport, 80, seq, ack, fl, pl, mss)))  # noqa: E731
    down = lambda t, seq, ack, fl, pl=b"", mss=None: (t, ipv4(s, c, 6, tcp(80, cport, seq, ack, fl, pl, mss)))  # noqa: E731
    req = b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
    pkts = [up(t0, 100, 0, SYN, mss=1460), down(t0 + rtt, 900, 101, SYN | ACK, mss=1460),
            up(t0 + rtt + 0.0001, 101, 901, ACK), up(t0 + rtt + 0.0002, 101, 901, ACK | PSH, req)]
    t = t0 + 2 * rtt + 0.0002 + 0.020
    seq = 901
    for k in range(segments):
        body = (b"HTTP/1.1 200 OK\r\n" if k == 0 else b"") + b"x" * (1460 - (17 if k == 0 else 0))
        pkts.append(down(t + k * spacing, seq, 101 + len(req), ACK, body))
        seq += len(body)
        pkts.append(up(t + k * spacing + 0.00005, 101 + len(req), seq, ACK))
    if fin:
        pkts += [down(t + segments * spacing, seq, 101 + len(req), ACK | FIN),
                 up(t + segments * spacing + 0.0001, 101 + len(req), seq + 1, ACK | FIN),
                 down(t + segments * spacing + rtt, seq + 1, 102 + len(req), ACK)]
    return pkts


def test_a_client_side_capture_is_recognised_and_read_from_the_clients_side(tmp_path):
    p = tmp_path / "client.pcap"
    p.write_bytes(pcap(client_side(T0, rtt=0.040, segments=6, spacing=0.001, fin=False)))
    conns, exchanges, _ = trace.workload(p)
    assert vantage(conns) == "client"
    # Still open when the capture ended: pruned, as Monkey See does, unless asked.
    with pytest.raises(PathtwinError, match="incomplete termination"):
        Workload.from_analysis(conns, exchanges)
    db = Workload.from_analysis(conns, exchanges, keep_open=True)
    assert db.vantage == "client" and len(db) == 1
    c, x = db.conns.iloc[0], db.exchanges.iloc[0]
    # RTT: SYN to SYN-ACK; the server's delay: the request-to-response gap less that RTT.
    assert c["rtt_ms"] == pytest.approx(40.0, abs=0.01)
    assert x["server_delay_s"] == pytest.approx(0.020, abs=1e-4)
    # No ACK pairs at this side of the bottleneck: five MSS after the first in 5 ms.
    assert c["down_bps"] == pytest.approx(5 * 1460 * 8 / 0.005, rel=0.01)


def test_bad_sources_are_one_line_errors(tmp_path, cli):
    garbage = tmp_path / "garbage.pcap"
    garbage.write_bytes(b"not a capture at all")
    open_only = tmp_path / "open.pcap"
    open_only.write_bytes(pcap(client_side(T0, rtt=0.040, segments=6, spacing=0.001, fin=False)))
    server_side = tmp_path / "server.pcap"
    server_side.write_bytes(pcap(http_exchange(T0, "198.51.100.7", 40001)))
    for args, message in (
        ((garbage,), f"{garbage}: not a pcap or pcapng capture"),
        ((open_only,), "incomplete termination (--keep-open"),
        ((server_side, "--server", "203.0.113.9:80"), "no TCP connection with server 203.0.113.9:80"),
        ((tmp_path / "missing.pcap",), "no such capture or replay database"),
        ((server_side, "--set", "tcp.initial_window"), "SECTION.KEY=VALUE"),
    ):
        done = cli("replay", *args, "-o", tmp_path / "out")
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        err = done.stderr.strip()
        assert message in err and "\n" not in err and "Traceback" not in err, err


def test_an_analysed_connection_table_replays_with_its_exchange_table(tmp_path, cli):
    cap = tmp_path / "server.pcap"
    cap.write_bytes(pcap(http_exchange(T0, "198.51.100.7", 40001) + http_exchange(T0 + 1, "198.51.100.8", 40002, rtt=0.1)))
    done = cli("trace", "analyze", cap, "-o", tmp_path / "conns.parquet", "--exchanges", tmp_path / "exchanges.parquet")
    assert done.returncode == 0, done.stderr
    done = cli("replay", tmp_path / "conns.parquet", "-o", tmp_path / "out", "--engine", "sim")
    assert done.returncode == 2 and "with its exchange table" in done.stderr, done.stderr
    done = cli("replay", tmp_path / "conns.parquet", "--exchanges", tmp_path / "exchanges.parquet", "-o", tmp_path / "out",
               "--engine", "sim")
    assert done.returncode == 0, done.stderr
    import json

    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["replayed"] == 2, summary
