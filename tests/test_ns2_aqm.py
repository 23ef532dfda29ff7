"""pathtwin's RED and RIO against ns-2's `Queue/RED` and `Queue/dsRED` (RIO-C) on the AQM
dumbbell of `bench/aqm/run.py` (eight Reno flows, 20 Mbit/s, 100-packet buffer; see
bench/aqm/README.md): 60 s, four start-time draws per scenario.

The expectations are ns-2's own numbers from the same runs: the aggregate goodput and the
bottleneck's throughput within 10 %, the average queue within 15 %, the drops within 15 %
(not for gentle RED, whose drops run some 20 % above ns-2's with the average queue and the
goodput within 3 %: open, see the README), and the same orderings: the scenarios by average
queue, the RTT classes by goodput. Every packet is unmarked (IN) until pathtwin's markers
exist.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import load_script

pytestmark = pytest.mark.skipif(shutil.which("ns") is None, reason="ns-2 (`ns`) not installed")

DURATION_S = 60.0
DRAWS = 4


bench = load_script("bench/aqm/run.py", "bench_aqm_run")


@pytest.fixture(scope="module")
def rows():
    ns = shutil.which("ns")
    return {name: {r.metric: r for r in bench.compare(ns, sc, DURATION_S, DRAWS)} for name, sc in bench.SCENARIOS.items()}


def table(rows) -> str:
    return bench.fmt([r for by_metric in rows.values() for r in by_metric.values()])


@pytest.mark.parametrize("scenario", list(bench.SCENARIOS))
def test_goodput_and_average_queue_agree_with_ns2(rows, scenario):
    r = rows[scenario]
    assert abs(r["goodput_mbps"].ratio - 1) <= 0.10, table(rows)
    assert abs(r["in_mbps"].ratio - 1) <= 0.10, table(rows)
    assert abs(r["avg_queue"].ratio - 1) <= 0.15, table(rows)
    assert r["out_mbps"].pathtwin == r["out_mbps"].ns2 == 0, "no packet is OUT"


@pytest.mark.parametrize("scenario", ["red 5/15", "rio-c 15/30 in"])
def test_drops_agree_with_ns2(rows, scenario):
    r = rows[scenario]
    for metric in [m for m in ("drops", "early_drops") if m in r]:
        assert abs(r[metric].ratio - 1) <= 0.15, table(rows)


def test_same_orderings_as_ns2(rows):
    by_avg = {side: sorted(rows, key=lambda s: getattr(rows[s]["avg_queue"], side)) for side in ("pathtwin", "ns2")}
    assert by_avg["pathtwin"] == by_avg["ns2"], table(rows)
    for scenario, r in rows.items():
        classes = sorted(k for k in r if k.startswith("rtt "))
        for side in ("pathtwin", "ns2"):
            goodputs = [getattr(r[k], side) for k in sorted(classes, key=lambda k: int(k.split()[1]))]
            assert goodputs == sorted(goodputs, reverse=True), (scenario, side, table(rows))
