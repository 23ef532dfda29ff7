"""Monkey's replay figures (Cheng et al., USENIX ATC 2004, §5): Figures 6-8, the CDF of the
signed relative error of response time per category of original response time, bottleneck
bandwidth and minimum RTT, and Figure 9, the workload's two halves in time.

The numbers are checked against independent computations — a hand-made comparison table
for the shares, numpy for the bins and the KS distances — and the drawings against the
numbers: each CDF line's data read back from the matplotlib figure must be its category's
errors in the comparison table, and its legend count the count in ``summary.json``. The
replays run in the simulator (no root, no real time).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from pathtwin import trace
from pathtwin.errors import PathtwinError
from pathtwin.replay import CATEGORIES, Workload, breakdown, categories, halves, replay, run_simulated, synthetic
from pathtwin.replay.figures import category_figure, halves_figure


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """A synthetic ground truth (clients on every access class) simulated and captured,
    its capture analysed into a database, and that database replayed in the simulator."""
    workload, _ = synthetic(120, seed=7, duration_s=15, lossy_share=0)
    run = run_simulated(workload, tmp_path_factory.mktemp("truth"))
    conns, exchanges = trace.workload(run.capture)[:2]
    db = Workload.from_analysis(conns, exchanges)
    out = tmp_path_factory.mktemp("replay")
    result = replay(db, out, engine="sim", source_exchanges=exchanges)
    return result


def _in_bin(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (values >= lo) & (values < hi)


def test_every_replayed_connection_is_in_exactly_one_bin_of_each_category(replayed):
    s = json.loads((replayed.out / "summary.json").read_text())
    cats = s["categories"]
    assert cats["total"]["connections"] == s["replayed"] > 0
    both = replayed.table.dropna(subset=["original_ms", "replay_ms"])
    for cat in CATEGORIES:
        bins = cats[cat.name]["bins"]
        assert [b["label"] for b in bins] == list(cat.labels)
        assert sum(b["connections"] for b in bins) + cats[cat.name]["unbinned"] == s["replayed"]
        # Every replayed connection has an original response time, a rate and an RTT.
        assert cats[cat.name]["unbinned"] == 0
        # The counts, recomputed from the comparison table with the edges in the JSON.
        values = both[cat.column].to_numpy(float)
        edges = [math.inf if e is None else e for e in cats[cat.name]["edges"]]
        assert [b["connections"] for b in bins] == [int(_in_bin(values, lo, hi).sum()) for lo, hi in zip(edges, edges[1:])]
    # The workload spans the paper's categories: more than one bin of each is populated.
    assert all(sum(b["connections"] > 0 for b in cats[c.name]["bins"]) >= 2 for c in CATEGORIES)


def test_each_drawn_cdf_is_its_categorys_errors_with_its_count_in_the_legend(replayed):
    s = json.loads((replayed.out / "summary.json").read_text())
    table = pd.read_parquet(replayed.out / "connections.parquet")
    both = table.dropna(subset=["original_ms", "replay_ms"])
    err = both["rel_error"].to_numpy(float)
    for cat in CATEGORIES:
        fig = category_figure(table, cat)
        ax = fig.axes[0]
        lines = ax.get_lines()
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert [ln.get_label() for ln in lines] == legend
        expected = [("total", s["categories"]["total"]["connections"], err)]
        values = both[cat.column].to_numpy(float)
        edges = [math.inf if e is None else e for e in s["categories"][cat.name]["edges"]]
        for b, lo, hi in zip(s["categories"][cat.name]["bins"], edges, edges[1:]):
            if b["connections"]:
                expected.append((b["label"], b["connections"], err[_in_bin(values, lo, hi)]))
        assert len(lines) == len(expected)
        for line, (label, n, e) in zip(lines, expected):
            assert line.get_label() == f"{label} ({n})"
            x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
            assert len(x) == n == len(e)
            np.testing.assert_array_equal(x, np.sort(e))
            np.testing.assert_allclose(y, np.arange(1, n + 1) / n)
        # The shares in the JSON are read off the drawn lines too.
        for line, b in zip(lines[1:], [b for b in s["categories"][cat.name]["bins"] if b["connections"]]):
            x = np.asarray(line.get_xdata(), float)
            assert b["within_20pct"] == pytest.approx(float(np.mean(np.abs(x) <= 0.2)))
            assert b["under"] == pytest.approx(float(np.mean(x < 0)))
            assert b["over"] == pytest.approx(float(np.mean(x > 0)))


@pytest.fixture
def made_up():
    """Seven connections, one not replayed. Errors: -0.1, +0.3, 0, -1/6, +0.1, -0.5 (the
    first two at 100 ms, one at exactly 200 ms: in the 200-500 ms bin)."""
    t = pd.DataFrame({
        "start_s": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        "original_ms": [100.0, 100.0, 200.0, 300.0, 800.0, 2000.0, 400.0],
        "replay_ms": [90.0, 130.0, 200.0, 250.0, 880.0, 1000.0, math.nan],
        "down_bps": [40e3, 40e3, 1e6, math.nan, 8e6, 8e6, 8e6],
        "rtt_ms": [300.0, 300.0, 20.0, 20.0, 60.0, 120.0, 10.0],
    })
    t["rel_error"] = (t["replay_ms"] - t["original_ms"]) / t["original_ms"]
    return t


def test_the_signed_shares_are_the_hand_computed_ones(made_up):
    c = categories(made_up)
    # Of six replayed: within ±20 % -0.1, 0, -1/6, +0.1; under -0.1, -1/6, -0.5; over +0.3,
    # +0.1; the exact 0 is neither.
    assert c["total"] == {"connections": 6, "within_20pct": pytest.approx(4 / 6), "under": pytest.approx(3 / 6),
                          "over": pytest.approx(2 / 6), "median_error": pytest.approx((-0.1 + 0.0) / 2)}
    rt = {b["label"]: b for b in c["response_time"]["bins"]}
    assert [rt[k]["connections"] for k in ("< 200 ms", "200-500 ms", "500-1000 ms", "1000-1500 ms", "> 1500 ms")] == [2, 2, 1, 0, 1]
    assert (rt["< 200 ms"]["within_20pct"], rt["< 200 ms"]["under"], rt["< 200 ms"]["over"]) == (0.5, 0.5, 0.5)
    assert (rt["200-500 ms"]["within_20pct"], rt["200-500 ms"]["under"], rt["200-500 ms"]["over"]) == (1.0, 0.5, 0.0)
    assert (rt["500-1000 ms"]["under"], rt["500-1000 ms"]["over"]) == (0.0, 1.0)
    assert (rt["> 1500 ms"]["within_20pct"], rt["> 1500 ms"]["under"]) == (0.0, 1.0)
    # An empty bin has no shares (None in JSON, not NaN).
    assert rt["1000-1500 ms"]["within_20pct"] is None and rt["1000-1500 ms"]["under"] is None
    # The connection without a rate estimate is in no bandwidth bin, and counted as such.
    bw = {b["label"]: b["connections"] for b in c["bandwidth"]["bins"]}
    assert bw == {"< 56 kbit/s": 2, "56 kbit/s-1.5 Mbit/s": 1, "1.5-6 Mbit/s": 0, "> 6 Mbit/s": 2}
    assert c["bandwidth"]["unbinned"] == 1
    rtt = {b["label"]: b["connections"] for b in c["min_rtt"]["bins"]}
    assert rtt == {"< 50 ms": 2, "50-100 ms": 1, "100-200 ms": 1, "> 200 ms": 2}
    json.dumps(c, allow_nan=False)


def test_breakdown_refuses_what_it_cannot_cut(made_up):
    with pytest.raises(PathtwinError, match="one edge more than labels"):
        breakdown(made_up, "rtt_ms", [0, 100], ["a", "b"])
    with pytest.raises(PathtwinError, match="breakdown by 'rtt_ms': .*increas"):
        breakdown(made_up, "rtt_ms", [0, 100, 50], ["a", "b"])
    with pytest.raises(PathtwinError, match="no such column"):
        breakdown(made_up, "jitter_ms", [0, 100], ["a"])
    with pytest.raises(PathtwinError, match="no 'start_s' column"):
        halves(made_up.drop(columns="start_s"))


def _ks(a, b) -> float:
    """KS distance by its definition, brute force: the largest gap between the two empirical
    CDFs over every observed value."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return max(abs(float(np.mean(a <= x)) - float(np.mean(b <= x))) for x in np.concatenate([a, b]))


def test_figure_9s_halves_are_an_independent_computations(replayed):
    s = json.loads((replayed.out / "summary.json").read_text())
    h = s["halves"]
    both = replayed.table.dropna(subset=["original_ms", "replay_ms"])
    t = both["start_s"].to_numpy(float)
    split = (t.min() + t.max()) / 2
    assert h["split_s"] == pytest.approx(split)
    first, second = both[t < split], both[t >= split]
    assert (h["first"], h["second"]) == (len(first), len(second)) and len(first) + len(second) == s["replayed"]
    assert min(len(first), len(second)) > 0
    for col, key in (("original_ms", "original"), ("replay_ms", "replay")):
        assert h[key]["ks_distance"] == pytest.approx(_ks(first[col], second[col]))
        assert h[key]["first_median_ms"] == pytest.approx(float(np.median(first[col])))
        assert h[key]["second_median_ms"] == pytest.approx(float(np.median(second[col])))
    # The figure draws the same halves.
    fig = halves_figure(replayed.table)
    for ax, col in zip(fig.axes, ("original_ms", "replay_ms")):
        a, b = ax.get_lines()
        np.testing.assert_array_equal(a.get_xdata(), np.sort(first[col].to_numpy(float)))
        np.testing.assert_array_equal(b.get_xdata(), np.sort(second[col].to_numpy(float)))
    json.dumps(h, allow_nan=False)


def test_pathtwin_replay_prints_the_categories_and_draws_them(replayed, tmp_path, cli):
    source = replayed.out / "db"
    out = tmp_path / "out"
    done = cli("replay", source, "--engine", "sim", "-o", out)
    assert done.returncode == 0, done.stderr
    s = json.loads((out / "summary.json").read_text())
    for name in ("response_times", "error_by_response_time", "error_by_bandwidth", "error_by_min_rtt", "halves"):
        assert (out / f"{name}.png").stat().st_size > 0, name
    # The printed table is the JSON's: one row per bin, its count and shares in %.
    printed = {" ".join(line.split()[:-4]): line.split()[-4:] for line in done.stdout.splitlines()
               if re.search(r"\s\d+\s+(\S+\s+){2}\S+$", line)}
    names = {"response_time": "response time", "bandwidth": "bandwidth", "min_rtt": "min RTT"}
    total = s["categories"]["total"]
    assert printed["total"] == [str(total["connections"])] + [f"{100 * total[k]:.1f}" for k in ("within_20pct", "under", "over")]
    for cat in CATEGORIES:
        for b in s["categories"][cat.name]["bins"]:
            row = printed[f"{names[cat.name]} {b['label']}"]
            assert int(row[0]) == b["connections"]
            if b["connections"]:
                assert row[1:] == [f"{100 * b[k]:.1f}" for k in ("within_20pct", "under", "over")]
    assert "two halves in time (Fig. 9" in done.stdout
