"""Replay in the simulator against replay in the emulator, on long lossy responses (issue
#26): a ground truth recorded in the emulator (kernel TCP), analysed once, and the SAME
database replayed in both engines with the same seed, each losing the transmissions the
truth's capture shows lost (``loss="trace"``, the default).

Both engines build a path from the same elements with the same seeded random-loss draws
(pipe i's loss stream is a function of the run's seed and i, counted per packet): when the
simulated TCP sends what the kernel sends, the same packets are lost, and the two replays of
a connection differ only by their TCP. The truth's own losses are another draw, so against
the truth both engines play the same lottery (the note above the fixture); against each other they
need not. What is checked:

- the share within ±20 % of the truth of the simulator's replay within SHARE_POINTS of the
  emulator's (issue #26: 3 points over hundreds of connections; here ~45);
- per connection, the simulated replay's time within ±20 % of the emulated replay's for
  AGREE of the connections, and their median ratio within MEDIAN_BIAS of 1.
"""

from __future__ import annotations

import pandas as pd
import pytest

from pathtwin import trace
from pathtwin.replay import Workload, replay, run_emulated, synthetic
from pathtwin.replay.workload import LONG_SEGMENTS

from conftest import needs_root, serial

pytestmark = [needs_root, serial]

SEED = 7
# The server's congestion control, named for the recording and both replays (the emulated
# hosts otherwise run the machine's default, which may be BBR; the simulated replay's
# profile "linux" runs CUBIC, Linux's default).
SERVER_CC = "cubic"
# 60 drawn, the modem clients left out (a 300-KB response at 28 kbit/s takes a minute and a
# half of real time); ~50 remain, two thirds long (>= 50 segments) on paths with 0.5-2 %
# loss, starting over 8 s: the recording and the emulated replay take ~25 s each.
CONNECTIONS = 60
DURATION_S = 8.0
LONG_LOSSY_SHARE = 0.6
# Measured on 300 connections over 60 s (bench/replay/accuracy.py --long-lossy-share 0.3
# --cc cubic --replay-engines emu,sim-ns2,sim-linux, docs in bench/replay/README.md): the
# simulated replay (profile "linux") within ±20 % of the emulated one for 98 % of all
# connections and of the long lossy ones (the "ns2" profile: 90 %), median ratio 0.99;
# shares within ±20 % of the truth 90.3 % and 88.6 %. Each connection here is ~2 points of a
# share; a share that differs by 5 connections is a TCP that no longer stands in for the
# kernel, and so is one connection in eight off by more than 20 %.
# This test's own workload (52 connections, 36 long and lossy; ~33 s): emulated 81-83 %
# within ±20 % of the truth, simulated 79 % (-2 points), 100 % of connections within ±20 %
# of each other, median ratio -1 %. It fails with the simulator's "ns2" profile (85 % of
# connections agree; 8 points apart) and with a simulated server starting at 4 segments
# instead of 10 (19 points apart, 64 % agree, median +11 %). The window's restart after idle
# (tcp_slow_start_after_idle, 2026-11-27) moved 6 of 53 simulated replays of one database,
# each towards the emulated replay (the largest from -4.3 % to -0.1 %): median ratio -0.8 %
# before, -0.7 % after, 100 % agreeing either way.
SHARE_POINTS = 10.0
AGREE = 0.875
# A simulated TCP consistently faster or slower than the kernel (measured: -0.9 %).
MEDIAN_BIAS = 0.05
# Trace loss against the kernel truth (bench/replay/README.md, 297 connections): the emulated
# replay's server retransmits exactly as the truth's did for 94 % of the connections (71 %
# with random loss), and 92.6 % of the long lossy connections come within ±20 % of the truth
# (83.0 % with random loss); issue #26 asks for 90 %. This test's 36 long lossy connections
# (~3 points each) measured 86 % within ±20 % on a loaded machine.
SAME_LOSSES = 0.85
LONG_LOSSY_WITHIN = 0.80
# With random loss in place of the trace's (loss="random"), what the truth's own losses allow: two emulated replays of the
# 300-connection database with different seeds agree within ±20 % for 81 % of the long
# lossy connections, 98 % of the lossless; their shares within ±20 % of the truth were
# 88.6 % and 87.3 % (long lossy 85 % and 82 %).


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """The truth recorded in the emulator, its database replayed in both engines."""
    drawn, classes = synthetic(CONNECTIONS, seed=SEED, duration_s=DURATION_S, lossy_share=0.3,
                               long_lossy_share=LONG_LOSSY_SHARE)
    keep = (classes != "modem").to_numpy()
    # Numbered 0..n-1 again: connection i crosses pipe i.
    new = {int(c): i for i, c in enumerate(drawn.conns["conn"][keep])}
    conns = drawn.conns[keep].reset_index(drop=True).assign(conn=lambda d: d["conn"].map(new), source_conn_id=lambda d: d["conn"])
    xs = drawn.exchanges[drawn.exchanges["conn"].isin(new)].assign(conn=lambda d: d["conn"].map(new)).reset_index(drop=True)
    truth = Workload(conns, xs, port=80)
    tmp = tmp_path_factory.mktemp("sim_emu")
    original = run_emulated(truth, tmp / "truth", tcp={"cc": SERVER_CC}, seed=SEED)
    cs, exchanges, _ = trace.workload(original.capture)
    db = Workload.from_analysis(cs, exchanges)
    slots = db.source_slots(original.addresses)
    out = {}
    for engine in ("emu", "sim"):
        r = replay(db, tmp / engine, tcp={"cc": SERVER_CC}, engine=engine, source_exchanges=exchanges, seed=SEED)
        t = r.table.copy()
        t["true_loss"] = slots.map(truth.conns["down_loss"]).to_numpy()
        longest = db.exchanges.groupby("conn")["response_bytes"].max()
        t["long"] = (t["conn"].map(longest).fillna(0) >= LONG_SEGMENTS * 1448).to_numpy()
        rconns = pd.read_parquet(r.out / "replay_conns.parquet")
        t["retransmitted"] = pd.Series(r.run.addresses).map(rconns["retrans_packets_s2c"].set_axis(rconns["client_ip"])).to_numpy()
        out[engine] = (r.summary, t)
    source = db.conns["source_client"].str.split(":").str[0]
    truth_retrans = source.map(cs["retrans_packets_s2c"].set_axis(cs["client_ip"])).to_numpy()
    return truth, db, out, truth_retrans


def test_the_workload_is_long_and_lossy(replays):
    """At least 30 % of the connections have a response of >= 50 segments on a path with
    0.5-2 % loss (issue #26), and every one is replayed in both engines."""
    truth, db, out, _ = replays
    s, t = out["emu"]
    long_lossy = t["long"] & (t["true_loss"] >= 0.005)
    assert long_lossy.mean() >= 0.3, t.to_string()
    assert len(db) >= 0.9 * len(truth), db.skipped
    for engine, (s, _) in out.items():
        assert s["replayed"] == s["connections"] == len(db), (engine, s)


def test_the_simulated_replay_matches_the_emulated_one(replays):
    _, _, out, _ = replays
    (se, te), (ss, ts) = out["emu"], out["sim"]
    both = pd.DataFrame({"emu": te["replay_ms"], "sim": ts["replay_ms"], "original": te["original_ms"],
                         "long": te["long"], "true_loss": te["true_loss"]}).dropna()
    ratio = both["sim"] / both["emu"] - 1
    detail = (f"emu {se}\nsim {ss}\n"
              f"{both.assign(ratio=ratio, emu_err=both['emu'] / both['original'] - 1, sim_err=both['sim'] / both['original'] - 1).sort_values('ratio').round(3).to_string()}")
    assert abs(100 * (ss["within_20pct"] - se["within_20pct"])) <= SHARE_POINTS, detail
    assert (ratio.abs() <= 0.2).mean() >= AGREE, detail
    assert abs(ratio.median()) <= MEDIAN_BIAS, detail
    # Against the truth, neither engine is consistently slower or faster (the loss lottery
    # goes both ways; the kernel-truth test's bound).
    assert abs(se["median_bias"]) <= 0.15 and abs(ss["median_bias"]) <= 0.15, detail


def test_the_emulated_replay_loses_what_the_kernel_truth_lost(replays):
    """Trace loss against the kernel: per connection, the emulated replay's server
    retransmits as often as the truth's did for SAME_LOSSES of the connections, and the
    long lossy ones come within ±20 % of the truth for LONG_LOSSY_WITHIN of them."""
    _, _, out, truth_retrans = replays
    s, t = out["emu"]
    same = (t["retransmitted"].to_numpy() == truth_retrans)
    detail = pd.DataFrame({"truth": truth_retrans, "replay": t["retransmitted"], "err": t["rel_error"], "long": t["long"],
                           "true_loss": t["true_loss"]}).round(3).to_string()
    assert truth_retrans.sum() > 0
    assert same.mean() >= SAME_LOSSES, detail
    long_lossy = t["long"] & (t["true_loss"] >= 0.005)
    assert (t["rel_error"].abs()[long_lossy] <= 0.2).mean() >= LONG_LOSSY_WITHIN, detail
