"""Replay (Monkey Do) as a user runs it: a ground-truth workload recorded in the emulator,
`pathtwin replay` on its capture, and a what-if on the server's initial window.

The ground truth is ours: clients on modem, DSL, cable and fast paths (each its own pipe),
a server with response and query delays, captured at the server. The replay sees only that
capture. Expectations: the paper's accuracy (86 % of connections within ±20 %, Cheng et al.
2004, Fig. 6), and slow start's round count for the what-if.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pathtwin.errors import PathtwinError
from pathtwin.replay import Workload
from pathtwin.cli.replay import parse_settings

from conftest import needs_root, require_emulator



def test_settings_are_the_servers_tcp_only():
    assert parse_settings(["tcp.initial_window=10", "tcp.cc=bbr", "tcp.sack=false"]) == {"initial_window": 10, "cc": "bbr", "sack": False}
    with pytest.raises(PathtwinError, match="only the server's TCP"):
        parse_settings(["pipe.rtt=10ms"])
    with pytest.raises(PathtwinError, match="SECTION.KEY=VALUE"):
        parse_settings(["initial_window"])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A 150-connection ground truth without random loss (loss is a per-draw lottery a
    test this size cannot average), recorded at the server. 150 connections put the paper's
    86 % three standard deviations below the ~93 % the 2000-connection benchmark measures;
    with 60 a run missed it one time in a few."""
    from pathtwin.replay import run_emulated, synthetic

    require_emulator()  # module-scoped: set up before the tests' own `emulator` check
    workload, classes = synthetic(150, seed=11, duration_s=15.0, lossy_share=0.0)
    run = run_emulated(workload, tmp_path_factory.mktemp("truth"))
    return workload, classes, run


@needs_root
def test_replaying_a_capture_reproduces_its_response_times(recorded, tmp_path, cli):
    workload, _, run = recorded
    out = tmp_path / "replay"
    done = cli("replay", run.capture, "-o", out)
    assert done.returncode == 0, done.stderr
    assert "within ±20 %" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    table = pd.read_parquet(out / "connections.parquet")
    assert summary["replayed"] >= 0.9 * len(workload), summary
    assert summary["within_20pct"] >= 0.86, (summary, table.sort_values("rel_error").to_string())
    assert (out / "response_times.png").stat().st_size > 0
    # The database recovered each client's path: min RTT within 10 % of the truth for most.
    db = Workload.load(out / "db")
    truth_rtt = workload.conns["rtt_ms"].to_numpy()
    ratio = db.conns["rtt_ms"].to_numpy() / truth_rtt[db.source_slots(run.addresses).to_numpy()]
    assert ((ratio > 0.9) & (ratio < 1.25)).mean() >= 0.9, ratio


@needs_root
def test_a_smaller_initial_window_slows_the_longer_responses(recorded, tmp_path, cli):
    """What-if: the same workload against a server with initcwnd 1 instead of Linux's 10.
    A response of n ≥ 12 segments needs ceil(log2(n/10 + 1)) rounds from 10 but
    ceil(log2(n + 1)) from 1 — at least two more RTTs — so those connections slow down."""
    _, _, run = recorded
    out = tmp_path / "iw1"
    done = cli("replay", run.capture, "-o", out, "--set", "tcp.initial_window=1")
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(out / "connections.parquet")
    xs = pd.read_parquet(out / "db" / "exchanges.parquet")
    big = xs[xs["exchange"] == 0].set_index("conn")["response_bytes"] >= 12 * 1460
    long = table[table["conn"].map(big).fillna(False) & (table["exchanges"] == 1) & (table["rtt_ms"] >= 20)]
    assert len(long) >= 10, table.to_string()
    slower = (long["replay_ms"] - long["original_ms"]) / long["rtt_ms"]
    assert slower.median() >= 1.5, long.to_string()


@needs_root
def test_ctrl_c_during_a_replay_keeps_the_connections_that_finished(recorded, tmp_path, no_namespace_left_behind):
    """Ctrl-C a third of the way into an emulated replay: exit 130 with a line saying what was
    kept, every result file written, the connections that had finished compared (at the paper's
    accuracy, as a whole replay is: a connection cut mid-response would read far too fast),
    the rest counted as not replayed, and nothing of the emulation left behind."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import default_sigint

    workload, _, run = recorded
    out = tmp_path / "cut"
    p = subprocess.Popen([sys.executable, "-m", "pathtwin.cli", "replay", str(run.capture), "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    log = out / "replay" / "client_log.jsonl"
    deadline = time.monotonic() + 120
    while not log.exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()[1][-1000:]
    # The workload's connections start over 15 s: cut after about a third of them.
    time.sleep(5.0)
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 130, stderr[-1000:]
    assert "Traceback" not in stderr and "interrupted: compared the" in stdout, (stdout, stderr)
    summary = json.loads((out / "summary.json").read_text())
    table = pd.read_parquet(out / "connections.parquet")
    assert summary["interrupted"] is True and summary["connections"] == len(table)
    assert 10 <= summary["replayed"] <= 0.8 * summary["connections"], summary
    assert summary["within_20pct"] >= 0.86, (summary, table.sort_values("rel_error").to_string())
    assert (out / "replay_conns.parquet").exists() and (out / "response_times.png").stat().st_size > 0
