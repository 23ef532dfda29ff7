"""`pathtwin trace analyze` as a process, the way users (and bench/trace/run.py) run it: the
Parquet tables the engine writes itself must read back as the Python API's frames (the
independent expectation: ``pathtwin.trace.analyze`` / ``workload``, the tables users got
when pandas and pyarrow wrote them), mistakes must be one line and status 2, the help must
still list the command, and the command must not import the heavy libraries it was freed
from."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

from pathtwin import trace
from test_trace import SIM_PROFILE, T0, http_exchange, pcap, persistent_connection

from conftest import REPO, run_cli


def read_back(path) -> pd.DataFrame:
    return pq.read_table(path).to_pandas()


def captures(tmp_path) -> dict:
    """Captures whose tables cover the cases a writer can get wrong: text columns with and
    without any value (every connection kept, so no prune reason; no HTTP at all), missing
    numbers, several exchanges per connection, undecodable frames, and a connection cut off
    by the end of the capture."""
    pkts, _ = persistent_connection(T0 + 1)
    rng = random.Random(7)
    junk = [(T0 + 0.5, bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))) for _ in range(20)]
    cut = http_exchange(T0 + 3, "198.51.100.10", 40010)[:6]
    # The same exchange with a request and response no HTTP parser recognizes (same lengths).
    no_http = [(t, p.replace(b"GET / HTTP/1.1", b"HELO xx QWE/11").replace(b"HTTP/1.1 200", b"OKAY/1.1 200"))
               for t, p in http_exchange(T0, "198.51.100.11", 40011)]
    made = {
        "two": http_exchange(T0, "198.51.100.7", 40001) + http_exchange(T0 + 1, "198.51.100.8", 40002, rtt=0.1),
        "persistent": http_exchange(T0, "198.51.100.9", 40009) + pkts,
        "junk-and-cut": sorted(http_exchange(T0, "198.51.100.7", 40001) + junk + cut, key=lambda x: x[0]),
        "no-http": no_http,
    }
    out = {}
    for name, packets in made.items():
        p = tmp_path / f"{name}.pcap"
        p.write_bytes(pcap(packets))
        out[name] = p
    return out


@pytest.mark.parametrize("name", ["two", "persistent", "junk-and-cut", "no-http"])
def test_parquet_tables_read_back_as_the_api_frames(tmp_path, name):
    capture = captures(tmp_path)[name]
    if name == "no-http":
        assert trace.analyze(capture)[0]["http_method"].isna().all()
    conns_out, x_out = tmp_path / "conns.parquet", tmp_path / "exchanges.parquet"
    r = run_cli("trace", "analyze", capture, "-o", conns_out, "--exchanges", x_out)
    assert r.returncode == 0, r.stderr
    conns, exchanges, stats = trace.workload(capture)
    assert len(conns) > 0
    pd.testing.assert_frame_equal(read_back(conns_out), conns, check_exact=True)
    pd.testing.assert_frame_equal(read_back(x_out), exchanges, check_exact=True)
    # Without --exchanges, the connection table alone, as trace.analyze gives it.
    only = tmp_path / "only.parquet"
    assert run_cli("trace", "analyze", capture, "-o", only).returncode == 0
    pd.testing.assert_frame_equal(read_back(only), trace.analyze(capture)[0], check_exact=True)
    assert f"{stats['frames']:,} frames" in r.stdout and f"{len(conns):,} connections" in r.stdout
    assert f"wrote {x_out}: {len(exchanges):,} exchanges" in r.stdout


def test_the_bench_traffic_split_over_threads_reads_back_as_the_api_frames(tmp_path):
    """The benchmark's own kind of capture (bench/trace/gen_capture.py: hundreds of
    concurrent connections, retransmissions, headers only) through the command as the
    benchmark runs it, its flows split over two threads, with every table it can write:
    each must read back as the API's frame of the same capture analysed in one thread."""
    capture = tmp_path / "bench.pcap"
    subprocess.run([sys.executable, REPO / "bench/trace/gen_capture.py", capture, "--packets", "40000",
                    "--concurrent", "60", "--seed", "3"], check=True)
    outs = {name: tmp_path / f"{name}.parquet" for name in ("conns", "exchanges", "cross")}
    r = run_cli("trace", "analyze", capture, "-o", outs["conns"], "--exchanges", outs["exchanges"],
                "--cross-traffic", outs["cross"], "--threads", "2")
    assert r.returncode == 0, r.stderr
    conns, exchanges, stats = trace.workload(capture, threads=1)
    _, bins, _ = trace.cross_traffic(capture, threads=1)
    assert len(conns) > 100 and len(exchanges) >= len(conns)
    assert (conns["retrans_packets_s2c"] > 0).any()
    pd.testing.assert_frame_equal(read_back(outs["conns"]), conns, check_exact=True)
    pd.testing.assert_frame_equal(read_back(outs["exchanges"]), exchanges, check_exact=True)
    pd.testing.assert_frame_equal(read_back(outs["cross"]), bins, check_exact=True)
    assert f"{stats['frames']:,} frames" in r.stdout and f"{len(conns):,} connections" in r.stdout


def test_the_cross_traffic_table_reads_back_as_the_api_frame(tmp_path):
    """A capture with a standing queue (a simulated transfer under stepping cross traffic,
    where the benchmark's capture has none), split over two threads: its profile bins as
    the command writes them equal the API's."""
    from pathtwin.sim import simulate

    simulate(SIM_PROFILE, out=tmp_path / "sim")
    capture = tmp_path / "sim" / "pcap" / "server.pcap"
    out = tmp_path / "ct.parquet"
    r = run_cli("trace", "analyze", capture, "--cross-traffic", out, "--threads", "2")
    assert r.returncode == 0, r.stderr
    bins = trace.cross_traffic(capture, threads=1)[1]
    assert len(bins) > 3 and bins["point"].any()
    pd.testing.assert_frame_equal(read_back(out), bins, check_exact=True)
    assert f"wrote {out}: {len(bins):,} bins of cross traffic over time" in r.stdout


def test_a_capture_cut_inside_a_record_is_analysed_up_to_the_cut(tmp_path):
    """A capture whose writer stopped mid-packet (a full disk, a killed tcpdump) is not an
    error: its complete records are analysed, with one warning line. The expectation is the
    API on the same capture written without the cut record."""
    packets = http_exchange(T0, "198.51.100.7", 40001) + http_exchange(T0 + 1, "198.51.100.8", 40002)
    whole, cut = tmp_path / "whole.pcap", tmp_path / "cut.pcap"
    whole.write_bytes(pcap(packets[:-1]))
    last = pcap(packets)[len(pcap(packets[:-1])):]
    for keep in (7, 16 + 20):  # inside the last record's header; inside its packet
        cut.write_bytes(whole.read_bytes() + last[:keep])
        out = tmp_path / "conns.parquet"
        r = run_cli("trace", "analyze", cut, "-o", out)
        assert r.returncode == 0, r.stderr
        assert "warning: the capture ends inside a record (last packet dropped)" in r.stdout
        pd.testing.assert_frame_equal(read_back(out), trace.analyze(whole)[0], check_exact=True)


def test_an_empty_table_keeps_its_columns(tmp_path):
    """A server filter that matches nothing: no rows, the same columns and dtypes."""
    capture = captures(tmp_path)["two"]
    out = tmp_path / "conns.parquet"
    r = run_cli("trace", "analyze", capture, "--server", "192.0.2.99", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "0 connections" in r.stdout
    pd.testing.assert_frame_equal(read_back(out), trace.analyze(capture, server="192.0.2.99")[0])


def test_summary_lists_the_first_rows_and_why_connections_were_pruned(tmp_path):
    capture = captures(tmp_path)["junk-and-cut"]
    conns, stats = trace.analyze(capture)
    r = run_cli("trace", "analyze", capture, "--rows", "1")
    assert r.returncode == 0, r.stderr
    reasons = conns.loc[~conns["kept"], "prune_reason"].value_counts()
    assert "pruned: " + ", ".join(f"{n} {reason}" for reason, n in reasons.items()) in r.stdout
    first = conns.iloc[0]
    assert f"{first.client_ip}:{first.client_port}" in r.stdout
    assert f"{conns.iloc[1].client_ip}:{conns.iloc[1].client_port}" not in r.stdout
    assert f"... {len(conns) - 1:,} more in the output table" in r.stdout
    assert stats["bad_headers"] > 0 and f"warning: {stats['bad_headers']:,} undecodable frames skipped" in r.stdout


def test_csv_is_what_pandas_writes(tmp_path):
    capture = captures(tmp_path)["persistent"]
    out, x_out = tmp_path / "conns.csv", tmp_path / "exchanges.csv"
    r = run_cli("trace", "analyze", capture, "-o", out, "--exchanges", x_out, "--csv")
    assert r.returncode == 0, r.stderr
    conns, exchanges, _ = trace.workload(capture)
    assert out.read_text() == conns.to_csv(index=False)
    assert x_out.read_text() == exchanges.to_csv(index=False)


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "capture is empty"),
        (b"\xd4\xc3", "capture truncated inside its file header"),
        (b"not a capture at all", "not a pcap or pcapng capture"),
        (bytes.fromhex("d4c3b2a1020004000000000000000000ffff000093000000"), "unsupported link type 147"),
    ],
    ids=["empty", "short", "bad-magic", "unknown-linktype"],
)
def test_a_bad_capture_is_one_line_naming_the_file(tmp_path, content, message):
    p = tmp_path / "bad.pcap"
    p.write_bytes(content)
    r = run_cli("trace", "analyze", p, "-o", tmp_path / "conns.parquet")
    assert r.returncode == 2, r.stdout
    assert r.stderr.startswith(f"pathtwin: error: {p}: {message}"), r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "conns.parquet").exists()


def test_bad_paths_and_arguments_are_one_line_errors(tmp_path):
    capture = captures(tmp_path)["two"]
    for args, message in (
        ((tmp_path / "nope.pcap",), f"{tmp_path / 'nope.pcap'}: no such capture file"),
        ((tmp_path,), f"{tmp_path}: is a directory, not a capture file"),
        ((capture, "-o", tmp_path / "no" / "conns.parquet"), f"{tmp_path / 'no' / 'conns.parquet'}: directory {tmp_path / 'no'} does not exist"),
        ((capture, "--exchanges", tmp_path / "no" / "x.parquet"), f"{tmp_path / 'no' / 'x.parquet'}: directory"),
        ((capture, "-o", tmp_path), f"{tmp_path}: cannot write"),
        ((capture, "--server", "not-an-address"), "--server"),
        ((capture, "--threads", "0"), "threads must be a positive integer"),
        ((capture, "--rows", "many"), "--rows"),
        ((capture, "--bogus"), "unrecognized arguments: --bogus"),
        ((), "Missing argument CAPTURE"),
    ):
        r = run_cli("trace", "analyze", *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("pathtwin: error:") and message in r.stderr, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr


def test_help_lists_the_command_and_its_options():
    top = run_cli("--help")
    assert top.returncode == 0 and "trace" in top.stdout
    group = run_cli("trace", "--help")
    assert group.returncode == 0 and "analyze" in group.stdout and "Monkey See" in group.stdout, group.stdout
    own = run_cli("trace", "analyze", "--help")
    assert own.returncode == 0, own.stderr
    for option in ("CAPTURE", "--output", "--server", "--csv", "--rows", "--threads", "--exchanges"):
        assert option in own.stdout, (option, own.stdout)


def test_the_command_imports_no_heavy_library(tmp_path):
    """The point of the light path: no typer, pydantic, pandas, pyarrow, numpy or rich."""
    capture = captures(tmp_path)["persistent"]
    code = (
        "import sys; from pathtwin.cli import main; "
        f"rc = main(['trace', 'analyze', {str(capture)!r}, '-o', {str(tmp_path / 'c.parquet')!r}, "
        f"'--exchanges', {str(tmp_path / 'x.parquet')!r}]); "
        "print(__import__('json').dumps([rc, sorted({m.split('.')[0] for m in sys.modules})]))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rc, modules = json.loads(r.stdout.splitlines()[-1])
    assert rc == 0
    assert not {"typer", "click", "pydantic", "pandas", "pyarrow", "numpy", "rich"} & set(modules), modules
