"""pathtwin's Vegas, CUBIC and BIC against ns-2 (`Agent/TCP/Vegas`; `Agent/TCP/Linux` with
`select_ca cubic|bic`) on the dumbbells of `bench/tcp/cc.py` (see bench/tcp/README.md,
"Vegas, CUBIC and BIC"), 60 s each, measured from 20 s on.

The expectations are ns-2's numbers from the same runs, with the issue's bars (goodput per
flow within 10 %, same order, mean packets in the bottleneck within 20 %) in the form the
runs can resolve:

- one flow, every controller, one draw: goodput within 10 % and the queue within 20 %.
- two and ten CUBIC or BIC flows, over PHASE_DRAWS draws of start times and RTT phases
  (bench/tcp/README.md, "Phase effects": which flow a full DropTail queue favours is decided
  by each flow's RTT modulo one packet's service time, so one fixed set of RTTs compares one
  arbitrary phase; moving the 80-ms flow of two by 0.1 ms moves it from 2 to 14 Mbit/s in
  ns-2): the same flow fastest in both simulators in nearly every draw, the queue within
  20 %, and no flow more than 10 % from ns-2's mean goodput by more than the draws explain
  (paired |t| ≥ 3, each draw having dealt both simulators the same starts and phases).
- two and ten Vegas flows (Vegas never fills its buffer, so no phase draws): with
  SPREAD_DRAWS start-time draws, pathtwin's flows sit no further from ns-2's, by the root
  mean square of the log ratios, than SPREAD_MARGIN times ns-2's two halves of the draws sit
  from each other (bench/tcp/README.md, "Against the draws' spread"), and the queue within
  20 %. Two Vegas flows keep ns-2's order in a single draw too.

Vegas runs with ns-2's rules (`[tcp.vegas] rules = "ns2"`): which of the equilibria inside
its hold band (α..β segments queued per flow) a run settles in is decided by how ns-2
rounds diff, counts rounds and spreads growth; with Linux's rules the two- and ten-flow
queues were 1.24 and 0.78 of ns-2's.
"""

from __future__ import annotations

import importlib.util
import math
import shutil
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("ns") is None, reason="ns-2 (`ns`) not installed")

DURATION_S = 60.0
WARMUP_S = 20.0
DRAWS = 1
GOODPUT_TOLERANCE = 0.10
QUEUE_TOLERANCE = 0.20
#: ns-2's Vegas defaults (v_alpha_, v_beta_), pathtwin's preset "ns2".
VEGAS_ALPHA, VEGAS_BETA = 1, 3
#: Start-time draws of the Vegas comparison against the draws' spread (even: two halves).
SPREAD_DRAWS = 8
#: Draws of start times and RTT phases for CUBIC and BIC; the share of them in which the
#: fastest flow must be the same flow in both simulators.
PHASE_DRAWS = 24
SAME_WINNER_SHARE = 0.8
#: How much further than ns-2's two halves from each other pathtwin may sit from ns-2 (RMS
#: of log ratios over the flows).
SPREAD_MARGIN = 1.5


def _bench():
    path = Path(__file__).resolve().parents[1] / "bench" / "tcp" / "cc.py"
    spec = importlib.util.spec_from_file_location("bench_tcp_cc", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


bench = _bench()


def compare(cc: str, flows: int):
    return bench.compare(shutil.which("ns"), cc, flows, DURATION_S, DRAWS, warmup=WARMUP_S)


def order(values):
    return sorted(range(len(values)), key=lambda i: -values[i])


@pytest.mark.parametrize("cc", bench.CCS)
def test_one_flow_goodput_and_queue(cc):
    r = compare(cc, 1)
    assert r.ratios()[0] == pytest.approx(1.0, abs=GOODPUT_TOLERANCE), (r.pathtwin_mbps, r.ns2_mbps)
    assert r.queue_ratio == pytest.approx(1.0, abs=QUEUE_TOLERANCE), (r.pathtwin_queue, r.ns2_queue)


def test_two_vegas_flows_keep_order_and_vegas_band():
    r = compare("vegas", 2)
    assert order(r.pathtwin_mbps) == order(r.ns2_mbps), (r.pathtwin_mbps, r.ns2_mbps)
    # One draw lands in one equilibrium of the hold band (the queue within 20 % is asserted
    # over the draws below); here Vegas's own rule, in both simulators: each flow keeps
    # between α and β segments waiting, plus the one on the link.
    for q in (r.pathtwin_queue, r.ns2_queue):
        assert 2 * VEGAS_ALPHA <= q <= 2 * VEGAS_BETA + 1, (r.pathtwin_queue, r.ns2_queue)


@pytest.mark.parametrize("cc, flows", [("cubic", 2), ("bic", 2), ("cubic", 10), ("bic", 10)])
def test_loss_based_flows_over_phase_draws(cc, flows):
    r = bench.compare(shutil.which("ns"), cc, flows, DURATION_S, PHASE_DRAWS, warmup=WARMUP_S)
    assert r.same_winner() >= SAME_WINNER_SHARE * PHASE_DRAWS, (r.same_winner(), r.pathtwin_mbps, r.ns2_mbps)
    assert r.queue_ratio == pytest.approx(1.0, abs=QUEUE_TOLERANCE), (r.pathtwin_queue, r.ns2_queue)
    for i, (ratio, t) in enumerate(zip(r.ratios(), r.paired_t())):
        assert abs(ratio - 1) <= GOODPUT_TOLERANCE or abs(t) < bench.SIGNIFICANT_T, (
            f"{r.rtts[i]}-ms flow: {ratio:.3f} of ns-2's goodput, paired t {t:.2f}; "
            f"pathtwin {r.pathtwin_mbps}, ns-2 {r.ns2_mbps}")


def rms_log(ratios):
    """Root mean square of the logarithms of `ratios`."""
    return (sum(math.log(x) ** 2 for x in ratios) / len(ratios)) ** 0.5


def spread_case(cc: str, flows: int):
    r = bench.compare(shutil.which("ns"), cc, flows, DURATION_S, SPREAD_DRAWS, warmup=WARMUP_S)
    # pathtwin's means use all the draws, each ns-2 half only half of them: the halves'
    # distance is scaled by 1/sqrt(2) to the noise of a full-draw mean against another.
    ns_self = rms_log([sp["ns2_halves"] for sp in r.spread()]) / math.sqrt(2)
    return r, rms_log(r.ratios()), ns_self


@pytest.mark.parametrize("flows", [2, 10])
def test_vegas_flows_sit_no_further_from_ns2_than_its_own_draws(flows):
    r, ours, ns_self = spread_case("vegas", flows)
    assert ours <= SPREAD_MARGIN * max(ns_self, 0.02), (
        f"RMS log ratio to ns-2 {ours:.3f} against ns-2's own {ns_self:.3f}; "
        f"pathtwin {r.pathtwin_mbps}, ns-2 {r.ns2_mbps}")
    assert r.queue_ratio == pytest.approx(1.0, abs=QUEUE_TOLERANCE), (r.pathtwin_queue, r.ns2_queue)
