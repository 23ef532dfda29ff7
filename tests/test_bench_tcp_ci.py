"""The confidence interval that tests/test_ns2_cc.py puts on each flow's goodput ratio
(bench/tcp/cc.py: `ratio_ci`, Fieller's interval of a ratio of paired means, and
`t_quantile`), on synthetic numbers with known answers; needs no ns-2."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from conftest import load_script

cc = load_script("bench/tcp/cc.py", "bench_tcp_cc")

#: Student's t quantiles as printed in tables (e.g. Abramowitz & Stegun, table 26.10):
#: (p, df) -> t.
T_TABLE = {(0.975, 1): 12.706, (0.975, 2): 4.303, (0.975, 5): 2.571, (0.975, 10): 2.228,
           (0.975, 23): 2.069, (0.975, 47): 2.012, (0.995, 5): 4.032, (0.995, 23): 2.807,
           (0.95, 23): 1.714}


@pytest.mark.parametrize("p, df", sorted(T_TABLE))
def test_t_quantile_matches_the_table(p, df):
    assert cc.t_quantile(p, df) == pytest.approx(T_TABLE[p, df], abs=1e-3)


def test_constant_denominator_gives_the_one_sample_t_interval():
    # With ns-2's goodput the same in every draw (c), the ratio's interval is the textbook
    # one of a's mean, divided by c: ā/c ± t(0.975, n−1)·s/(√n·c).
    rng = random.Random(7)
    a = [rng.gauss(10.5, 2.0) for _ in range(24)]
    c = 10.0
    half = 2.069 * statistics.stdev(a) / math.sqrt(len(a)) / c  # t from the table
    lo, hi = cc.ratio_ci(a, [c] * len(a))
    assert lo == pytest.approx(statistics.fmean(a) / c - half, abs=2e-4)
    assert hi == pytest.approx(statistics.fmean(a) / c + half, abs=2e-4)


def test_bounds_are_where_the_paired_t_test_of_the_ratio_rejects():
    # Fieller's interval inverts the paired t test: at each bound R, the paired t of
    # a − R·b is exactly the critical value; inside it, smaller.
    rng = random.Random(3)
    b = [rng.uniform(1.0, 15.0) for _ in range(24)]  # a phase-like swing, shared by a
    a = [x * 1.05 + rng.gauss(0.0, 1.0) for x in b]
    lo, hi = cc.ratio_ci(a, b)
    q = cc.t_quantile(0.975, 23)
    assert lo < statistics.fmean(a) / statistics.fmean(b) < hi
    assert cc.paired_t(a, [lo * x for x in b]) == pytest.approx(q, rel=1e-9)
    assert cc.paired_t(a, [hi * x for x in b]) == pytest.approx(-q, rel=1e-9)


def test_covers_the_true_ratio_in_95_percent_of_samples():
    # Paired draws whose shared swing dwarfs the noise, true ratio of means 1.05.
    rng = random.Random(11)
    trials, covered = 2000, 0
    for _ in range(trials):
        b = [rng.choice((2.0, 14.0)) + rng.gauss(0.0, 0.5) for _ in range(24)]
        a = [1.05 * x + rng.gauss(0.0, 0.8) for x in b]
        lo, hi = cc.ratio_ci(a, b)
        covered += lo <= 1.05 <= hi
    assert 0.93 <= covered / trials <= 0.97, covered / trials


def test_unresolved_denominator_has_no_bounded_interval():
    assert cc.ratio_ci([1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]) == (-math.inf, math.inf)
    assert all(math.isnan(x) for x in cc.ratio_ci([1.0], [1.0]))
