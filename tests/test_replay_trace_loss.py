"""Trace-driven loss in the simulated replay (issue #26): a replay loses the data its
capture shows lost, so a lossy connection is re-enacted with its own losses.

The ground truth is a synthetic workload with long responses over lossy paths, recorded in
the simulator with random loss and captured at the server. Its capture is analysed into a
replay database (each connection's lost offsets, ``lost_offsets_s2c``) and replayed in the
simulator with ``loss="trace"``. The expectations come from the truth's own capture,
analysed the same way:

- per connection, the replay loses as many transmissions as the truth did: its
  retransmissions less spurious ones equal the truth's;
- response times within ±20 % of the truth's for at least 90 % of the long lossy
  connections (issue #26's goal), which random loss at the same rates cannot promise: two
  random draws agree on only 81 % of such connections (bench/replay/README.md).
"""

from __future__ import annotations

import pandas as pd
import pytest

from pathtwin import trace
from pathtwin.replay import Workload, replay, run_simulated, synthetic
from pathtwin.replay.workload import LONG_SEGMENTS

SEED = 5
# 40 connections over 6 s, 60 % of them long (>= 50 segments) on paths with 0.5-2 % loss:
# a few simulated seconds each way.
CONNECTIONS = 40
DURATION_S = 6.0
LONG_LOSSY_SHARE = 0.6
# Issue #26's goal for long lossy connections.
WITHIN_20PCT = 0.90
# Share of all connections whose replay retransmits exactly as often as the truth. The
# misses are slow clients whose traced queue overflowed: the replay's queue sees the
# survivors of the listed drops only while its sender keeps the traced one's pace, which
# the database does not wholly hold (the client's window is left to autotuning where the
# analysis saw it grow). Measured: 35 of 40, every miss with queue losses in its truth, and
# 15 of 40 with random loss in place of the trace's (which also puts 54 % of the long lossy
# connections within ±20 %, failing the test below).
SAME_LOSSES = 0.85


def _retransmissions(conns: pd.DataFrame) -> pd.Series:
    """Per client address: the server's retransmitted packets."""
    return conns["retrans_packets_s2c"].set_axis(conns["client_ip"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    drawn, _ = synthetic(CONNECTIONS, seed=SEED, duration_s=DURATION_S, lossy_share=0.3,
                         long_lossy_share=LONG_LOSSY_SHARE)
    tmp = tmp_path_factory.mktemp("trace_loss")
    original = run_simulated(drawn, tmp / "truth", seed=SEED)
    tconns, exchanges, _ = trace.workload(original.capture)
    db = Workload.from_analysis(tconns, exchanges)
    out = {m: replay(db, tmp / m, engine="sim", source_exchanges=exchanges, seed=SEED + 1, loss=m) for m in ("trace",)}
    return drawn, original, tconns, db, out


def test_the_database_lists_the_truths_losses(runs):
    """Every connection of a server-side capture carries its lost offsets, and one that
    retransmitted nothing lists none; the lossy paths list some."""
    _, _, tconns, db, _ = runs
    assert db.trace_loss_share() == 1.0
    listed = db.conns["down_lost_offsets"].str.split().str.len().set_axis(db.conns["source_client"].str.split(":").str[0])
    retrans = _retransmissions(tconns).reindex(listed.index)
    assert (listed[retrans == 0] == 0).all()
    assert (listed <= retrans * 4).all() and (listed > 0).sum() >= 0.4 * len(db), \
        pd.DataFrame({"listed": listed, "retransmitted": retrans}).to_string()


def test_the_replay_loses_what_the_truth_lost(runs):
    """Per connection the replay retransmits as often as the truth did: the same losses,
    recovered the same way."""
    _, original, tconns, db, out = runs
    r = out["trace"]
    rconns = pd.read_parquet(r.out / "replay_conns.parquet")
    # Replayed connection i comes from pipe i's address; its source from the truth's.
    source = db.conns["source_client"].str.split(":").str[0]
    both = pd.DataFrame({"truth": source.map(_retransmissions(tconns)).to_numpy(),
                         "replay": pd.Series(r.run.addresses).map(_retransmissions(rconns)).to_numpy()}).dropna()
    both["queue_losses"] = source.map(tconns["queue_losses"].set_axis(tconns["client_ip"])).to_numpy()
    assert len(both) == len(db)
    assert both["truth"].sum() > 0
    same = both["truth"] == both["replay"]
    # Where the truth's bottleneck queue dropped nothing, the losses are exactly the listed
    # ones: every connection retransmits as its truth did.
    assert same[both["queue_losses"] == 0].all(), both.to_string()
    assert same.mean() >= SAME_LOSSES, both.to_string()


def test_long_lossy_connections_replay_within_20pct(runs):
    drawn, original, _, db, out = runs
    t = out["trace"].table
    slots = db.source_slots(original.addresses)
    longest = db.exchanges.groupby("conn")["response_bytes"].max()
    long_lossy = (t["conn"].map(longest).fillna(0) >= LONG_SEGMENTS * 1448).to_numpy() & \
        (slots.map(drawn.conns["down_loss"]) >= 0.005).to_numpy()
    err = t["rel_error"].abs()[long_lossy]
    assert long_lossy.sum() >= 0.3 * len(t)
    assert (err <= 0.2).mean() >= WITHIN_20PCT, t[long_lossy].to_string()


def test_pipes_carry_the_offsets_or_the_random_rate_and_old_databases_load(runs, tmp_path):
    """``loss="trace"`` gives a lossy connection's pipe its ``drop`` list and no random
    downstream loss, ``"random"`` the reverse; a database saved without the column (written
    before it existed) loads with no offsets, and a bad offset is one line naming it."""
    from pathtwin.errors import PathtwinError

    _, _, _, db, _ = runs
    i = int(db.conns["down_lost_offsets"].str.split().str.len().idxmax())
    listed = [int(o) for o in db.conns["down_lost_offsets"][i].split()]
    trace_pipe, random_pipe = db.pipes(loss="trace")[i], db.pipes(loss="random")[i]
    assert trace_pipe["drop"] == [listed, []] and trace_pipe.get("loss", [0.0])[0] == 0.0
    assert "drop" not in random_pipe and random_pipe["loss"][0] == db.conns["down_loss"][i] > 0
    old = tmp_path / "old"
    db.save(old)
    pd.read_parquet(old / "conns.parquet").drop(columns="down_lost_offsets").to_parquet(old / "conns.parquet")
    loaded = Workload.load(old)
    assert loaded.trace_loss_share() == 0.0
    assert loaded.pipes(loss="trace") == db.pipes(loss="random")
    bad = db.conns.assign(down_lost_offsets=["12 x"] * len(db))
    Workload(bad, db.exchanges).save(tmp_path / "bad")
    with pytest.raises(PathtwinError, match=r"conns.parquet: column down_lost_offsets, row 0: 'x' is not a byte offset"):
        Workload.load(tmp_path / "bad")


def test_the_command_replays_with_either_model_and_refuses_another(runs, tmp_path, cli):
    """``pathtwin replay --loss random`` says so in its summary; an unknown model is one
    line naming ``--loss``, before anything runs."""
    import json

    _, _, _, db, _ = runs
    db.save(tmp_path / "db")
    done = cli("replay", tmp_path / "db", "--engine", "sim", "--loss", "random", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["loss"] == "random"
    bad = cli("replay", tmp_path / "db", "--engine", "sim", "--loss", "bernoulli", "-o", tmp_path / "bad")
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0 and "--loss: loss model 'bernoulli'" in bad.stderr
    assert not (tmp_path / "bad").exists()
