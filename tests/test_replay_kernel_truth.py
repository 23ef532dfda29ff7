"""Replay (Monkey See, Monkey Do) against a ground truth pathtwin did not make: kernel TCP
between real client and server processes over `relay_lab`'s path (a TUN delay line with
seeded random loss of downstream data packets, counted, and a `tbf` bottleneck — neither
pathtwin's model nor its TCP), 1 % loss, responses of 56-139 segments, captured at the
server with tcpdump. `pathtwin replay` sees only that capture, as a user's would, and
replays it in the emulator and in the simulator.

Expectations, each independent of pathtwin:
- Monkey See's path: min RTT and bottleneck from the relay's configuration, and the
  downstream loss rate from the packets the delay line counted as dropped;
- Monkey Do's accuracy: the paper's, 86 % of connections with a replayed response time
  within ±20 % of the original (Cheng et al., "Monkey See, Monkey Do", USENIX ATC 2004,
  §5.1, Fig. 6; shared/papers/ beside the project). The paper gives no separate figure for lossy paths
  (it models loss as i.i.d. and says that may not fit long flows, §6); its Fig. 6 is over
  all of Google's connections, short (3-20 packets, §3) and mostly lossless. Here it holds
  for the connections the truth carried without loss; over all connections it does not
  (see LOSSY_WITHIN_20PCT), and what is checked there is that the replayed response times
  have the truth's distribution.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pathtwin.replay import Workload

from conftest import needs_capture, needs_root, run_cli, serial
from http_lab import inferred_loss, realised_delays, server_args
from relay_lab import PORT, SERVER_IP, run_relay_lab

pytestmark = [
    needs_root,
    serial,
    needs_capture,
]

ONE_WAY_S = 0.020
RATE_BPS = 8_000_000
LOSS = 0.01
SEED = 29
# 56-139 segments of 1448 bytes (MSS less the timestamp option) each, taken in turn: long
# enough that loss, not slow start's first rounds alone, shapes a response time.
BODIES = (80_000, 100_000, 130_000, 160_000, 200_000)
CONNECTIONS = 30
# The server's congestion control, named so that the replay runs the same (Monkey's database
# has no CC: the server's TCP is the what-if), and Linux's default, which halves its window at
# each random loss: that is what makes loss matter to a response time. The machine's default
# may be another (BBR here, which hardly reacts to random loss).
SERVER_CC = "cubic"
# Monkey See prunes a connection without usable ACK pairs (§3.2); with several losses in a
# window, a connection of this workload can have none (seen at 2 % loss: 1 of 20).
MAY_PRUNE = 2
#: The paper's accuracy (Fig. 6): share of connections within ±20 %.
PAPER_WITHIN_20PCT = 0.86
# With loss, a connection's response time depends on which of its packets are lost (a loss
# in the first window, or of the last segments, costs a timeout; cubic halves its window at
# each), and a replay draws its own i.i.d. losses at the inferred rate (§3.2, §6): per
# connection that is a lottery the paper's figure, taken over Google's short flows of 3-20
# packets, mostly lossless, does not face. Measured over four runs (the truth is the same
# each time: the relay's seeded draws fall on the same packets, 34 drops of 2860): within
# ±20 % 67-73 % of all connections (emulator; the simulator 70-73 %), 100 % of the 10 the
# truth carried without loss, 50-60 % of the 20 with; replayed/original at the 10th and
# 90th percentiles 0.79 and 1.57; KS distance 0.17-0.20, median bias +3-6 %. The misses
# are lossy connections whose truth and replay lost different packets (one replay draws a
# timeout the truth did not have: 347 ms became 1190 ms; a truth whose three losses fell in
# three rounds, each cutting cubic's window, took 653 ms where the replay took 268 ms). A
# floor below that, to catch a replay that breaks.
LOSSY_WITHIN_20PCT = 0.5
# Each of the two groups (the truth lost nothing / something) needs a few connections for
# its check to mean something.
MIN_EACH = 5


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    """The ground truth, recorded once: the capture and the delay line's drop count."""
    run = run_relay_lab(tmp_path_factory.mktemp("kernel_truth"), one_way_s=ONE_WAY_S, rate_bps=RATE_BPS, loss=LOSS,
                        seed=SEED, server_argv=server_args(PORT, BODIES, CONNECTIONS), connections=CONNECTIONS,
                        server_cc=SERVER_CC)
    realised_delays(run.server_stdout, CONNECTIONS)  # every connection was served
    return run


@pytest.fixture(scope="module")
def replayed(truth, tmp_path_factory):
    """`pathtwin replay` of the truth's capture in the emulator: its output directory."""
    return _replay(truth, tmp_path_factory.mktemp("replay") / "emu", "--set", f"tcp.cc={SERVER_CC}")


def _replay(truth, out, *args) -> Path:
    done = run_cli("replay", truth.capture, "--server", f"{SERVER_IP}:{PORT}", "-o", out, *args)
    assert done.returncode == 0, done.stderr
    assert "within ±20 %" in done.stdout
    return out


def test_monkey_see_recovers_the_relays_path(truth, replayed):
    """The replay database holds the relay's path for every connection it kept (min RTT
    within 5 % of 2 x the one-way delay, bottleneck within 15 % of the tbf rate: the trace
    ground truth's tolerances), keeps all but those Monkey prunes, and its loss — the
    server's retransmissions less spurious ones, over its data packets (§3.2) — is the
    delay line's count: each drop of a data packet costs exactly one retransmission."""
    from pathtwin import trace

    db = Workload.load(replayed / "db")
    conns, _ = trace.analyze(truth.capture)
    assert len(conns) == CONNECTIONS
    assert len(db) >= CONNECTIONS - MAY_PRUNE, (db.skipped, conns[["prune_reason"]].value_counts())
    assert set(db.skipped) <= {"no usable ACK pairs"}, db.skipped
    assert (db.conns["rtt_ms"] - 2000 * ONE_WAY_S).abs().max() <= 0.05 * 2000 * ONE_WAY_S, db.conns["rtt_ms"]
    off = (db.conns["down_bps"] / RATE_BPS - 1).abs()
    assert (off <= 0.15).mean() >= 0.9, db.conns["down_bps"]

    counted = truth.dropped / conns["data_packets_s2c"].sum()
    assert truth.dropped >= 15, "too few drops for the loss to be tested"
    assert abs(inferred_loss(conns) - counted) <= 0.002, (inferred_loss(conns), counted, truth.dropped)
    # What the database's pipes will drop: the kept connections' random loss, their loss
    # less what the pipe's own queue would reproduce (measured: none; the relay's 200-KB tbf
    # queue drops nothing, so every retransmission is the delay line's).
    kept = conns.set_index("conn_id").loc[db.conns["source_conn_id"]]
    db_loss = float((db.conns["down_loss"].to_numpy() * kept["data_packets_s2c"].to_numpy()).sum()
                    / kept["data_packets_s2c"].sum())
    assert abs(db_loss - counted) <= 0.005, (db_loss, counted)


def _check_accuracy(truth, out: Path, engine: str) -> None:
    from pathtwin import trace

    summary = json.loads((out / "summary.json").read_text())
    table = pd.read_parquet(out / "connections.parquet")
    conns, _ = trace.analyze(truth.capture)
    retrans = table["source_conn_id"].map(conns.set_index("conn_id")["retrans_packets_s2c"])
    within = table["rel_error"].abs() <= 0.2
    detail = (f"{engine}: {summary}; within ±20 %: {within[retrans == 0].mean():.2f} of {int((retrans == 0).sum())} "
              f"connections without loss, {within[retrans > 0].mean():.2f} of {int((retrans > 0).sum())} with\n"
              f"{table.assign(truth_retrans=retrans).sort_values('rel_error').to_string()}")
    assert summary["replayed"] == summary["connections"] >= CONNECTIONS - MAY_PRUNE, detail
    # Where the truth lost nothing, nothing but the path and the hosts decides the response
    # time: the paper's accuracy.
    assert (retrans == 0).sum() >= MIN_EACH and (retrans > 0).sum() >= MIN_EACH, detail
    assert within[retrans == 0].mean() >= PAPER_WITHIN_20PCT, detail
    # All connections: the paper's accuracy does not hold (see LOSSY_WITHIN_20PCT); what
    # holds is the distribution — a two-sample Kolmogorov-Smirnov test at 5 % does not tell
    # the replayed response times from the truth's (the paper's predictive replay is judged
    # on distributions too, Fig. 10).
    n = summary["replayed"]
    assert summary["ks_distance"] <= 1.36 * (2 / n) ** 0.5, detail
    # A replay consistently slower or faster than the truth is a model's error, not the
    # loss lottery's, which goes both ways (measured: +3-6 %).
    assert abs(summary["median_bias"]) <= 0.15, detail
    assert summary["within_20pct"] >= LOSSY_WITHIN_20PCT, detail


def test_emulated_replay_reproduces_kernel_response_times(truth, replayed):
    """Monkey Do in the emulator (kernel TCP over per-connection pipes with the database's
    RTT, rate and random loss) against the kernel truth: the paper's 86 % within ±20 % where
    the truth lost nothing, the truth's distribution of response times over all."""
    _check_accuracy(truth, replayed, "emu")


def test_simulated_replay_reproduces_kernel_response_times(truth, tmp_path):
    """The same replay with simulated TCP (`--engine sim`), whose "linux" profile stands in
    for the kernel, with the server's congestion control; the same expectations."""
    out = _replay(truth, tmp_path / "sim", "--engine", "sim", "--set", "tcp.profile=linux",
                  "--set", f"tcp.cc={SERVER_CC}")
    _check_accuracy(truth, out, "sim")

