"""Replay (Monkey Do) in the simulator, as a user runs it: no emulator, no root.

The ground truth is a synthetic workload (clients on modem, DSL, cable and fast paths,
each its own pipe; a server with response and query delays) replayed in the simulator and
captured at the server. Its capture is analysed into a replay database exactly as a real
capture would be, and that database is replayed in the simulator again. Expectations: the
paper's accuracy (86 % of connections within ±20 %, Cheng et al., USENIX ATC 2004, Fig. 6),
identical results for identical seeds, and slow start's round count for a what-if.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pathtwin import trace
from pathtwin.errors import PathtwinError
from pathtwin.replay import Workload, replay, run_simulated, synthetic


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    """80 connections without random loss (a per-draw lottery 80 connections cannot
    average), simulated and captured at the server, and the database analysed from it."""
    workload, _ = synthetic(80, seed=3, duration_s=10, lossy_share=0)
    run = run_simulated(workload, tmp_path_factory.mktemp("truth"))
    conns, exchanges = trace.workload(run.capture)[:2]
    return workload, run, Workload.from_analysis(conns, exchanges), exchanges


def test_the_truth_run_finishes_every_connection_from_its_own_address(truth):
    workload, run, db, _ = truth
    assert run.addresses == [f"10.128.0.{i + 1}" for i in range(len(workload))]
    flows = pd.read_parquet(run.result_dir / "flows.parquet")
    per_conn = workload.exchanges.groupby("conn").size()
    assert flows["responses"].tolist() == per_conn.reindex(range(len(workload))).tolist()
    assert flows["completion_s"].notna().all()
    # until_done: the run stops with the last connection, not at its 180 s tail.
    assert run.simulated_s < workload.conns["start_s"].max() + 60
    pipes = pd.read_parquet(run.result_dir / "pipes.parquet")
    assert pipes["address"].tolist() == run.addresses
    # The analysis sees each connection at its pipe's address; Monkey See's pruning (no
    # usable ACK pairs for the bottleneck on a one-segment response) drops a few.
    clients = db.conns["source_client"].str.split(":").str[0]
    assert clients.isin(run.addresses).all() and clients.is_unique
    assert len(db) >= 0.95 * len(workload), db.skipped


def test_replaying_the_analysed_database_reproduces_the_response_times(truth, tmp_path):
    workload, _, db, exchanges = truth
    result = replay(db, tmp_path / "replay", engine="sim", source_exchanges=exchanges)
    s = result.summary
    assert s["engine"] == "sim"
    assert s["replayed"] >= 0.95 * len(workload), s
    assert s["within_20pct"] >= 0.86, (s, result.table.sort_values("rel_error").to_string())
    assert (tmp_path / "replay" / "connections.parquet").exists()
    # The replay's own capture, analysed: one connection per replayed one, each with its
    # database connection's MSS.
    rc = pd.read_parquet(tmp_path / "replay" / "replay_conns.parquet")
    assert len(rc) == s["replayed"]
    assert sorted(rc["mss_client"].astype(int)) == sorted(db.conns["mss"].dropna().astype(int))


def test_a_simulated_replay_is_deterministic(truth, tmp_path):
    _, _, db, exchanges = truth
    a = replay(db, tmp_path / "a", engine="sim", source_exchanges=exchanges, seed=5).summary
    b = replay(db, tmp_path / "b", engine="sim", source_exchanges=exchanges, seed=5).summary
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_a_smaller_initial_window_slows_the_longer_responses(truth, tmp_path):
    """What-if: the server's initcwnd 1 instead of 10. A response of n ≥ 12 segments needs
    ceil(log2(n/10 + 1)) rounds from 10 but ceil(log2(n + 1)) from 1 — at least two more
    RTTs — so those connections slow down by about that."""
    _, _, db, exchanges = truth
    table = replay(db, tmp_path / "iw1", engine="sim", source_exchanges=exchanges, tcp={"initial_window": 1}).table
    big = db.exchanges[db.exchanges["exchange"] == 0].set_index("conn")["response_bytes"] >= 12 * 1460
    long = table[table["conn"].map(big).fillna(False).astype(bool) & (table["exchanges"] == 1) & (table["rtt_ms"] >= 20)]
    assert len(long) >= 5, table.to_string()
    slower = (long["replay_ms"] - long["original_ms"]) / long["rtt_ms"]
    assert slower.median() >= 1.5, long.to_string()


def test_pathtwin_replay_runs_a_database_in_the_simulator(truth, tmp_path, cli):
    _, _, db, exchanges = truth
    source = tmp_path / "db"
    db.save(source)
    exchanges.to_parquet(source / "source_exchanges.parquet", index=False)
    out = tmp_path / "out"
    done = cli("replay", source, "--engine", "sim", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "within ±20 %" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["engine"] == "sim" and summary["within_20pct"] >= 0.86, summary
    assert (out / "replay" / "simulation" / "pcap" / "server.pcap").stat().st_size > 0
    bad = cli("replay", source, "--engine", "ns3", "-o", tmp_path / "bad")
    assert bad.returncode != 0 and "--engine 'ns3'" in bad.stderr + bad.stdout


def test_an_unknown_engine_is_refused(truth, tmp_path):
    _, _, db, exchanges = truth
    with pytest.raises(PathtwinError, match="engine 'ns3'"):
        replay(db, tmp_path / "x", engine="ns3", source_exchanges=exchanges)


def test_the_summary_says_what_a_high_ks_distance_beside_small_errors_means():
    """Response times clustered at 100 ms, replayed 5 % slower: every connection within ±20 %,
    yet the two CDFs never overlap (KS 1.0, by its definition). The summary gives the signed
    bias and both medians, and says that the KS distance reads a shift here."""
    from pathtwin.replay import ks_reading, summary

    orig = [100.0 + 0.1 * i for i in range(20)]
    table = pd.DataFrame({"original_ms": orig, "replay_ms": [1.05 * x for x in orig]})
    table["rel_error"] = (table["replay_ms"] - table["original_ms"]) / table["original_ms"]
    s = summary(table)
    assert s["within_20pct"] == 1.0 and s["ks_distance"] == 1.0
    assert abs(s["median_bias"] - 0.05) < 1e-12
    text = ks_reading(s)
    assert "median bias +5.0 %" in text and "consistent shift" in text, text
    # A different shape, many connections off: no such reassurance.
    table["replay_ms"] = [x * (1.5 if i % 2 else 0.6) for i, x in enumerate(orig)]
    table["rel_error"] = (table["replay_ms"] - table["original_ms"]) / table["original_ms"]
    assert "consistent shift" not in ks_reading(summary(table))
