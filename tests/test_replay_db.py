"""The replay database from captures written byte by byte: what Monkey See hands Monkey Do,
from a capture at the server (the paper's) and from one at the client (most public ones),
checked against the times the packets were built with; and the database read back from
disk, where every bad value is a one-line error naming its file, column and row (the classes
of bad input fuzz/replay_db.py found, one test each)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pathtwin import trace
from pathtwin.errors import PathtwinError
from pathtwin.replay import Workload, load_source, replay, synthetic
from pathtwin.replay.sim import sim_config
from pathtwin.replay.workload import _fastest_exchange_bps, vantage
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


def client_side(t0: float, rtt: float, segments: int, spacing: float, fin: bool, server_delay: float = 0.020,
                synack_late: float = 0.0) -> list:
    """One connection seen at the client: the SYN-ACK a full RTT (and `synack_late`) after
    the SYN, the response arriving an RTT plus `server_delay` after the request, one MSS
    every `spacing` seconds (the bottleneck's pace)."""
    c, s, cport = "10.1.1.2", "192.0.2.80", 50000
    up = lambda t, seq, ack, fl, pl=b"", mss=None: (t, ipv4(c, s, 6, tcp(cport, 80, seq, ack, fl, pl, mss)))  # noqa: E731
    down = lambda t, seq, ack, fl, pl=b"", mss=None: (t, ipv4(s, c, 6, tcp(80, cport, seq, ack, fl, pl, mss)))  # noqa: E731
    req = b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
    t0 -= synack_late
    pkts = [up(t0, 100, 0, SYN, mss=1460), down(t0 + synack_late + rtt, 900, 101, SYN | ACK, mss=1460),
            up(t0 + synack_late + rtt + 0.0001, 101, 901, ACK), up(t0 + synack_late + rtt + 0.0002, 101, 901, ACK | PSH, req)]
    t = t0 + synack_late + 2 * rtt + 0.0002 + server_delay
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


def test_a_slow_syn_ack_does_not_lengthen_a_client_side_rtt(tmp_path):
    """At the client a request's answer comes an RTT plus the server's delay after it, never
    sooner: a SYN-ACK slower than that (a busy server, a load balancer) is not the path's RTT
    (a public browser capture: requests answered 30 ms after they left, the SYN-ACK in 37)."""
    p = tmp_path / "client.pcap"
    p.write_bytes(pcap(client_side(T0, rtt=0.040, segments=6, spacing=0.001, fin=False, server_delay=0.0,
                                   synack_late=0.010)))
    conns, exchanges, _ = trace.workload(p)
    assert conns["syn_rtt_ms"].iloc[0] == pytest.approx(50.0, abs=0.01)
    db = Workload.from_analysis(conns, exchanges, keep_open=True)
    assert db.conns["rtt_ms"].iloc[0] == pytest.approx(40.0, abs=0.01)
    assert db.exchanges["server_delay_s"].iloc[0] == pytest.approx(0.0, abs=1e-4)


def test_a_server_pause_is_not_counted_as_transfer_time():
    """The rate of a response sent in two parts (a header, then the rest after a pause) is
    the rest's: 10 MSS after its first in 10 ms, not 13 MSS over the 110 ms with the pause."""
    xs = pd.DataFrame([{"response_start_s": 1.0, "response_end_s": 1.110, "response_bytes": 15 * 1460,
                        "header_bytes": 4 * 1460, "query_delay_ms": 100.0}])
    assert _fastest_exchange_bps(xs, 1460) == pytest.approx(10 * 1460 * 8 / 0.010, rel=1e-6)
    whole = xs.assign(header_bytes=math.nan, query_delay_ms=math.nan)
    assert _fastest_exchange_bps(whole, 1460) == pytest.approx(14 * 1460 * 8 / 0.110, rel=1e-6)
    # A "header" that was a first flight and a "pause" that was a round trip: the whole
    # response's rate is the higher lower bound.
    flight = xs.assign(header_bytes=10 * 1460, query_delay_ms=40.0, response_end_s=1.100)
    assert _fastest_exchange_bps(flight, 1460) == pytest.approx(14 * 1460 * 8 / 0.100, rel=1e-6)


@pytest.mark.parametrize("spacing, iw", [(0.001, 16), (0.004, None)])
def test_a_client_side_capture_shows_the_servers_first_flight(tmp_path, spacing, iw):
    """15 segments within one RTT of the first (15 ms of 40): the server sent them before any
    ACK could release more, so its initial window was at least 15 segments; spread over 60
    ms, they could be two rounds, and nothing is inferred. Its 15 × 1460 bytes take 16 of the
    replay server's timestamped 1448-byte segments: the window is counted in those."""
    p = tmp_path / "client.pcap"
    p.write_bytes(pcap(client_side(T0, rtt=0.040, segments=15, spacing=spacing, fin=False)))
    conns, exchanges, _ = trace.workload(p)
    db = Workload.from_analysis(conns, exchanges, keep_open=True)
    assert db.server_initial_window == iw
    assert Workload.load(db.save(tmp_path / "db")).server_initial_window == iw


def test_a_client_side_replay_starts_from_the_traced_servers_first_flight(tmp_path):
    """The replay's server takes the initial window the capture showed when it is above the
    default 10, unless the what-if names one."""
    p = tmp_path / "client.pcap"
    p.write_bytes(pcap(client_side(T0, rtt=0.040, segments=15, spacing=0.001, fin=False)))
    r = replay(p, tmp_path / "auto", engine="sim", keep_open=True)
    # The simulator's server runs the replay's profile (REPLAY_TCP) with the window on top.
    assert r.summary["tcp_from_capture"] == {"initial_window": 16} and r.summary["tcp"]["initial_window"] == 16
    # The traced response came whole in one flight: so does the replayed one.
    assert abs(r.summary["median_bias"]) <= 0.05, r.table
    r = replay(p, tmp_path / "set", engine="sim", keep_open=True, tcp={"initial_window": 4})
    assert r.summary["tcp_from_capture"] == {} and r.summary["tcp"]["initial_window"] == 4


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


# -- reading a database back: bad input is a one-line error naming where ---------------------


def saved_db(tmp_path) -> Path:
    w, _ = synthetic(n=5)
    return w.save(tmp_path / "db")


def set_cell(d: Path, name: str, column: str, value, row: int = 2) -> None:
    """Sets one cell of table ``name``, widening the column's dtype as the value needs."""
    df = pd.read_parquet(d / name)
    if isinstance(value, float) and not pd.api.types.is_float_dtype(df[column]):
        df[column] = df[column].astype(float)
    elif not isinstance(value, (int, float)):
        df[column] = df[column].astype(object)
    df.loc[row, column] = value
    df.to_parquet(d / name, index=False)


def assert_refused(d: Path, *fragments: str) -> None:
    with pytest.raises(PathtwinError) as e:
        load_source(d)
    message = str(e.value)
    assert "\n" not in message and all(f in message for f in fragments), message


def test_a_saved_database_loads_back_as_it_was(tmp_path):
    w, _ = synthetic(n=5)
    d = w.save(tmp_path / "db")
    # Columns beyond the schema are ignored, not refused.
    df = pd.read_parquet(d / "conns.parquet").assign(note="x")
    df.to_parquet(d / "conns.parquet", index=False)
    back, source = load_source(d)
    pd.testing.assert_frame_equal(back.conns, w.conns, check_dtype=False)
    pd.testing.assert_frame_equal(back.exchanges, w.exchanges, check_dtype=False)
    assert (back.port, back.vantage, back.skipped) == (w.port, w.vantage, w.skipped) and len(source) == 0
    assert sim_config(back) == sim_config(w)
    # Nullable columns may be null throughout (parquet's null type): no MSS, no window seen.
    c = pd.read_parquet(d / "conns.parquet").assign(mss=None, rwin_bytes=None, source_conn_id=None)
    c.to_parquet(d / "conns.parquet", index=False)
    flows = sim_config(load_source(d)[0])["flow"]
    assert [f["tcp"] for f in flows] == [{"delayed_ack": False}] * 5


@pytest.mark.parametrize("text, fragment", [
    ("[1, 2]", "a JSON object was expected, not list"),      # was AttributeError
    ('{"port": "http"}', "port 'http' is not a TCP port"),   # was ValueError
    ('{"port": Infinity}', "port inf is not a TCP port"),    # was OverflowError
    ('{"port": 70000}', "port 70000 is not a TCP port"),     # was accepted
    ('{"vantage": "moon"}', "vantage 'moon' is neither"),   # was replayed as "server"
    ('{"skipped": {"x": "many"}}', "skipped['x'] is 'many'"),
    ('{"server_initial_window": 0}', "server_initial_window 0 is not a number of segments"),
    ("[" * 100_000, "not a replay database's workload.json"),  # was RecursionError
])
def test_workload_json_values_are_checked(tmp_path, text, fragment):
    d = saved_db(tmp_path)
    (d / "workload.json").write_text(text)
    assert_refused(d, "workload.json: ", fragment)


@pytest.mark.parametrize("name, column, value, fragment", [
    # Non-finite: inf as an MSS was an OverflowError; NaN an RTT of "nanms" in the config.
    ("conns.parquet", "mss", math.inf, "inf is not finite"),
    ("conns.parquet", "rtt_ms", math.nan, "null or NaN"),
    ("exchanges.parquet", "think_s", math.inf, "inf is not finite"),
    # Out of range: each passed load and failed (or misbehaved) in the replay.
    ("conns.parquet", "start_s", -5.0, "-5 is not in [0, 1000000]"),
    ("conns.parquet", "down_loss", 1.5, "1.5 is not in [0, 0.999]"),
    ("conns.parquet", "down_bps", 0.0, "0 is not in (0, 1000000000000]"),
    ("exchanges.parquet", "request_bytes", 1e300, "1e+300 is not in [1, 1073741824]"),
    ("exchanges.parquet", "header_bytes", -7, "-7 is not in [-1, 1073741824]"),
    ("exchanges.parquet", "response_bytes", 2.5, "2.5 is not a whole number"),
])
def test_bad_numbers_are_refused_with_file_column_and_row(tmp_path, name, column, value, fragment):
    d = saved_db(tmp_path)
    set_cell(d, name, column, value)
    assert_refused(d, f"{name}: column {column}, row 2: {fragment}")


@pytest.mark.parametrize("name, column, value, fragment", [
    ("conns.parquet", "rtt_ms", "50", "column rtt_ms holds"),          # was ValueError in pipes()
    ("conns.parquet", "quickack", "no", "row 0: 'no', not true or false"),  # was read as True
    ("conns.parquet", "source_client", 7, "row 0: 7, not text"),       # was AttributeError in source_slots()
    ("exchanges.parquet", "exchange", True, "column exchange holds bool"),
])
def test_wrong_column_types_are_refused(tmp_path, name, column, value, fragment):
    d = saved_db(tmp_path)
    df = pd.read_parquet(d / name)
    df[column] = [value] * len(df)
    df.to_parquet(d / name, index=False)
    assert_refused(d, f"{name}: ", fragment)


def test_missing_and_repeated_columns_are_named_with_their_file(tmp_path):
    d = saved_db(tmp_path)
    pd.read_parquet(d / "conns.parquet").drop(columns=["rtt_ms"]).to_parquet(d / "conns.parquet", index=False)
    assert_refused(d, "conns.parquet: lacks column rtt_ms")
    d = saved_db(tmp_path / "b")
    t = pq.read_table(d / "exchanges.parquet")
    pq.write_table(t.append_column("conn", pa.array([0] * t.num_rows)), d / "exchanges.parquet")
    assert_refused(d, "exchanges.parquet: column conn appears more than once")


@pytest.mark.parametrize("change, fragment", [
    # An exchange of a connection that does not exist was dropped without a word.
    (lambda c, x: (c, x.assign(conn=x["conn"].where(x.index != 1, 99))), "exchanges.parquet: column conn, row 1: 99 names no connection"),
    # A repeated exchange was replayed twice.
    (lambda c, x: (c, pd.concat([x, x.iloc[[0]]], ignore_index=True)), "repeats exchange 0 of connection 0"),
    # Connection i is pipe i: reordered connections took each other's addresses in the emulator.
    (lambda c, x: (c.iloc[::-1].reset_index(drop=True), x), "conns.parquet: column conn, row 0: 4, but connection i must be row i"),
    (lambda c, x: (c, x[x["conn"] != 3]), "connection 3 has no exchange in exchanges.parquet"),
    (lambda c, x: (c.iloc[:0], x.iloc[:0]), "conns.parquet: no connections"),
])
def test_the_tables_must_agree(tmp_path, change, fragment):
    d = saved_db(tmp_path)
    c, x = change(pd.read_parquet(d / "conns.parquet"), pd.read_parquet(d / "exchanges.parquet"))
    c.to_parquet(d / "conns.parquet", index=False)
    x.to_parquet(d / "exchanges.parquet", index=False)
    assert_refused(d, fragment)


@pytest.mark.parametrize("meta", [b'{"columns": 1}', b"[]"])
def test_a_files_pandas_metadata_is_not_trusted(tmp_path, meta):
    d = saved_db(tmp_path)
    t = pq.read_table(d / "conns.parquet")
    pq.write_table(t.replace_schema_metadata({b"pandas": meta}), d / "conns.parquet")
    # Was a KeyError (TypeError) in pandas' reading of that metadata; the database has no
    # index to restore, and its columns are all checked anyway.
    w, _ = load_source(d)
    assert len(w) == 5


def test_the_source_exchange_table_is_checked_too(tmp_path):
    d = saved_db(tmp_path)
    # Was an ArrowInvalid traceback: load_source read it unguarded.
    (d / "source_exchanges.parquet").write_bytes(b"PAR1 not really PAR1")
    assert_refused(d, "source_exchanges.parquet: not a readable parquet table")
    # Was a TypeError in the comparison, after the whole replay had run.
    pd.DataFrame({"conn_id": [0], "request_start_s": ["soon"], "response_end_s": [1.0]}).to_parquet(
        d / "source_exchanges.parquet", index=False)
    assert_refused(d, "source_exchanges.parquet: column request_start_s holds")


def test_a_corrupt_database_is_a_one_line_error_at_the_command_line(tmp_path, cli):
    d = saved_db(tmp_path)
    set_cell(d, "conns.parquet", "mss", math.inf)
    done = cli("replay", d, "-o", tmp_path / "out", "--engine", "sim")
    err = done.stderr.strip()
    # Was an OverflowError's traceback, exit status 1.
    assert done.returncode == 2, (done.stdout, err)
    assert "conns.parquet: column mss, row 2: inf is not finite" in err and "\n" not in err and "Traceback" not in err, err
