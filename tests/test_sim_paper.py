"""Scenario tests of the simulator against the NSDI'09 paper's numbers and TCP equations."""

from __future__ import annotations

import pandas as pd
import pytest

import pathtwin
from pathtwin.reproduce import nsdi09 as rp


def single_link(queue_bytes: int, seed: int = 1, duration: str = "60s") -> dict:
    """One NewReno flow over a 10 Mbit/s, 50 ms RTT link with a DropTail queue."""
    return {
        "hosts": ["a", "b"],
        "run": {"duration": duration, "seed": seed, "sample_interval": "1s"},
        "tcp": {"cc": "newreno", "max_window": "4MiB"},
        "path": [{"between": ["a", "b"], "rtt": "50ms", "abw": "10mbit", "mode": "link", "queue": f"{queue_bytes}B"}],
        "flow": [{"from": "a", "to": "b"}],
    }


def utilization_after_slow_start(res, queue="a->b", after_s=5.0) -> float:
    qs = res.queue_series[res.queue_series.queue == queue]
    qs = qs[qs.time_s >= after_s]
    sent = qs.departed_bytes.iloc[-1] - qs.departed_bytes.iloc[0]
    span = qs.time_s.iloc[-1] - qs.time_s.iloc[0]
    return sent * 8 / span / 10e6


BDP = int(10e6 / 8 * 0.050)  # 62 500 B


def test_newreno_fills_a_one_bdp_droptail_link():
    util = utilization_after_slow_start(pathtwin.simulate(single_link(BDP)))
    assert util >= 0.95, util
    # A tenth of a BDP cannot keep the link busy after each halving (Reno's sawtooth).
    small = utilization_after_slow_start(pathtwin.simulate(single_link(BDP // 10)))
    assert small < util - 0.05, (small, util)


def test_same_seed_same_tables_other_seed_with_loss_differs():
    cfg = single_link(BDP, duration="10s")
    cfg["path"][0]["loss"] = "0.5%"
    a, b = pathtwin.simulate(cfg), pathtwin.simulate(cfg)
    for name in ("flows", "flow_series", "queues", "queue_series"):
        pd.testing.assert_frame_equal(a.tables[name], b.tables[name])
    cfg["run"]["seed"] = 2
    c = pathtwin.simulate(cfg)
    assert not a.flow_series.equals(c.flow_series)
    assert a.flows.retransmits.iloc[0] != c.flows.retransmits.iloc[0] or a.flows.bytes_delivered.iloc[0] != c.flows.bytes_delivered.iloc[0]


@pytest.fixture(scope="module")
def table2():
    return rp.table2(engine="sim", seeds=5)


def test_table2_path_mode_within_10_percent_of_abw(table2):
    for row in table2:
        for d in (0, 1):
            assert row.error("path", d) <= 10.0, (row.index, d, row.achieved["path"], row.abw)


def test_table2_link_mode_shows_the_papers_pattern(table2):
    # The paper: link-mode forward error is much larger than path mode on the asymmetric and
    # high-BDP rows (rows 2, 3, 5, 6, 7 have errors of 21–66 % there).
    worse = [r.index for r in table2 if r.error("link", 0) > r.error("path", 0) + 5.0]
    assert {3, 7} <= set(worse), [(r.index, r.error("link", 0), r.error("path", 0)) for r in table2]
    assert len(worse) >= 4, worse


def test_figure5_rtt_path_mode_near_base_link_mode_far_above():
    f5 = rp.figure5()
    # Path mode: base RTT plus serialization of a full data packet at C = 100 Mbit/s.
    expected = f5.base_rtt_ms + 1500 * 8 / 100e6 * 1e3
    assert abs(f5.mean_rtt_ms["path"] - expected) / expected <= 0.10, f5
    assert f5.mean_rtt_ms["link"] >= 5 * f5.mean_rtt_ms["path"], f5
    # Both achieve the ABW (goodput excludes 40 B of headers per 1500 B packet).
    for mode in ("path", "link"):
        assert f5.goodput_bps[mode] >= 0.85 * 409e3, f5


def reactive(flows: int) -> dict:
    return {
        "hosts": ["a", "b"],
        "run": {"duration": "40s", "sample_interval": "1s"},
        "tcp": {"max_window": "4MiB"},
        "path": [{"between": ["a", "b"], "rtt": "40ms", "reactivity": {"1": "2mbit", "2": "3mbit", "4": "4mbit"}}],
        "flow": [{"from": "a", "to": "b", "count": flows}],
    }


@pytest.mark.parametrize("flows,abw", [(1, 2e6), (2, 3e6), (4, 4e6)])
def test_reactivity_table_sets_aggregate_throughput(flows, abw):
    res = pathtwin.simulate(reactive(flows))
    fs = res.flow_series[res.flow_series.time_s >= 10]
    agg = fs.groupby("time_s").goodput_bps.sum().mean()
    # Goodput carries 1460 of every 1500 wire bytes.
    assert abs(agg - abw * 1460 / 1500) / abw <= 0.10, (flows, agg)


def shared(shared_on: bool) -> dict:
    cfg = {
        "hosts": ["s", "d1", "d2"],
        "run": {"duration": "40s", "sample_interval": "1s"},
        "tcp": {"max_window": "4MiB"},
        "path": [
            {"between": ["s", "d1"], "rtt": "30ms", "abw": "6mbit"},
            {"between": ["s", "d2"], "rtt": "50ms", "abw": "4mbit"},
        ],
        "flow": [{"from": "s", "to": "d1"}, {"from": "s", "to": "d2"}],
    }
    if shared_on:
        cfg["shared"] = [{"source": "s", "destinations": ["d1", "d2"]}]
    return cfg


def test_shared_bottleneck_limits_the_class_to_its_abw():
    res = pathtwin.simulate(shared(True))
    fs = res.flow_series[res.flow_series.time_s >= 10]
    combined = fs.groupby("time_s").goodput_bps.sum().mean()
    class_abw = (6e6 + 4e6) / 2  # flow-weighted mean, one flow per path
    assert abs(combined - class_abw * 1460 / 1500) / class_abw <= 0.10, combined
    res = pathtwin.simulate(shared(False))
    fs = res.flow_series[res.flow_series.time_s >= 10]
    per_flow = fs.groupby("label").goodput_bps.mean()
    for label, abw in (("s->d1", 6e6), ("s->d2", 4e6)):
        assert abs(per_flow[label] - abw * 1460 / 1500) / abw <= 0.10, (label, per_flow[label])
