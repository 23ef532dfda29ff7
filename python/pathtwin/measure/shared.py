"""Shared-congestion detection from one source's one-way-delay series (ALGORITHMS.md §7):
Kim et al.'s wavelet-denoised delay correlation (DCW, SIGCOMM 2004), the detector NSDI'09
§3.3 used, and beside it Rubenstein, Kurose and Towsley's cross- against auto-correlation
test (2002). Pure functions over numpy arrays; the probing is ``probes``'.

DCW, as ALGORITHMS.md §7 gives it: lost samples interpolated; fewer than 25 samples is an
error; the series denoised with a Daubechies-6 wavelet (PyWavelets, symmetric extension as
MATLAB's ``wden``), level min(4, ⌊log2 N − log2 ln N⌋), the minimaxi threshold (0 if N ≤ 32
else 0.3936 + 0.1829·log2 N) scaled per level by median(|d|)/0.6745, soft thresholding of
the details, reconstruction; two paths share if the Pearson correlation of their denoised
series at lag 0 is ≥ 0.5 (the original code: 0.512). Correlated pairs are merged into
classes (transitively).

"Very low delay variance → not shared": the measure and threshold are not given there. Here
(a proposal) a path whose denoised series' interdecile range (90th minus 10th percentile) is
below ``min_spread_s`` (0.5 ms by default) sees no congestion, and is shared with no other:
without queueing there is nothing to correlate, and jitter common to back-to-back probes
(a sender or emulator stalled for a moment) would correlate alone. The interdecile range,
not the standard deviation, because one such stall is a single spike of milliseconds that
inflates the deviation of a quiet path (seen: 0.3 ms from one 5-ms spike, where the range
stayed at 0.13 ms), while a queue that congestion keeps moving spreads the whole series
(seen: 3.4-4 ms behind a 20 Mbit/s bottleneck with 40 % bursty load).

Rubenstein's test: probes to the two destinations are interleaved (one round sends to each,
back to back), so the cross pair (x_r, y_r) is closer in time than the auto pairs (x_r,
x_r+1), (y_r, y_r+1). Shared if the cross-measure M_x exceeds the auto-measure M_a. Its
decision here carries a confidence: with Fisher's z, shared when z(M_x) − z(M_a) exceeds
twice its standard error, not shared when it is below minus twice, undecided between (and
undecided when a path is uncongested: both measures are then noise).

Paths of different sources (``session.cross_source_classes``) are grouped by a stricter
rule (``cluster(..., strict=True)``): a pair is shared only when both tests say so, DCW and
Rubenstein's (a pair Rubenstein's test cannot decide is not merged: the evidence is then
DCW's alone, which across sources is what went wrong), and a class holds only paths every
two of which are shared: complete linkage (Sørensen 1948; Jain and Dubes, "Algorithms for
Clustering Data", 1988, §3.2), grown from the most correlated pair, where DCW's transitive
merge is single linkage. Why: across sources the series come from programs on different
hosts, whose rounds leave up to a quarter interval apart, and a delay common to the
measuring machine (the emulator's one forwarding loop, or every host, stalled on a busy
2-core machine) reaches paths that share no queue. Campus in the emulator, machine load
7-10: the quiet paths' denoised spreads reached 0.5-1.0 ms (0.05-0.2 ms on a quieter
machine) from stalls of 2-11 ms in the same rounds of every path, and d1->s and s->d3
correlated at 0.54 with Rubenstein undecided (a false class); an earlier run found a
five-path class of d1's and d2's paths out with Rubenstein against three of its pairs; and
a chain of two correlated pairs merges two paths that share nothing. The true class there
(s's and d3's paths to d1 and d2) had Rubenstein's "shared" on every pair in every run
whose rounds were in step, and the simulated ground truths lose no pair. What it costs: a
class whose queue moves slower than a round (both measures near 1) may go unmerged across
sources; one source's classes keep DCW's rule (the paper's) and its together tests.

Clock offsets (real hosts: receiver time minus sender time) shift a series by a constant,
which neither Pearson's correlation nor the denoising sees. Clock *skew* does not go unseen:
two clocks running at rates that differ by 50 ppm (common for crystal oscillators) add a
0.75-ms ramp to a 15-s series, above ``MIN_SPREAD_S``, and two destinations whose receivers
drift the same way then correlate with no congestion at all. Between hosts of different
machines the ramp is removed first (``remove_skew``: Moon, Skelly and Towsley, "Estimation
and removal of clock skew from network delay measurements", INFOCOM 1999).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..errors import PathtwinError

#: DCW's minimum number of samples (ALGORITHMS.md §7).
MIN_SAMPLES = 25
#: DCW's decision threshold on the denoised correlation (§7: 0.5; the original code 0.512).
RHO_SHARED = 0.5
#: Below this interdecile range (s) a denoised delay series shows no congestion (a proposal).
MIN_SPREAD_S = 0.5e-3
WAVELET = "db6"


def interpolate_lost(rounds: np.ndarray, values: np.ndarray, total: int) -> np.ndarray:
    """A series of ``total`` rounds from the rounds that have a value; the missing ones
    linearly interpolated (ends held). Fewer than ``MIN_SAMPLES`` received is an error."""
    rounds = np.asarray(rounds, dtype=float)
    values = np.asarray(values, dtype=float)
    if len(rounds) < MIN_SAMPLES:
        raise PathtwinError(f"only {len(rounds)} delay samples; shared-bottleneck detection needs at least {MIN_SAMPLES}")
    order = np.argsort(rounds)
    return np.interp(np.arange(total, dtype=float), rounds[order], values[order])


def dcw_level(n: int) -> int:
    """The decomposition level for a series of ``n`` samples: min(4, ⌊log2 n − log2 ln n⌋).
    For short series (150 samples: 15 s at 99 ms) this is deeper than PyWavelets' advice for
    a 12-tap filter (3), as MATLAB's ``wden`` in DCW's code went; the symmetric extension
    covers the boundary."""
    return max(1, min(4, math.floor(math.log2(n) - math.log2(math.log(n)))))


def minimaxi(n: int) -> float:
    """Donoho and Johnstone's minimax threshold for ``n`` samples, as MATLAB's ``thselect``."""
    return 0.0 if n <= 32 else 0.3936 + 0.1829 * math.log2(n)


def denoise(x: np.ndarray) -> np.ndarray:
    """DCW's wavelet denoising of one delay series (module doc)."""
    import pywt

    x = np.asarray(x, dtype=float)
    n = len(x)
    if n < MIN_SAMPLES:
        raise PathtwinError(f"only {n} delay samples; shared-bottleneck detection needs at least {MIN_SAMPLES}")
    with warnings.catch_warnings():
        # PyWavelets warns of boundary effects past its advised level; DCW's level is §7's.
        warnings.filterwarnings("ignore", message="Level value of .* is too high")
        coeffs = pywt.wavedec(x, WAVELET, mode="symmetric", level=dcw_level(n))
    lam = minimaxi(n)
    out = [coeffs[0]]
    for d in coeffs[1:]:
        sigma = float(np.median(np.abs(d))) / 0.6745  # this level's noise (wden's "mln")
        out.append(pywt.threshold(d, lam * sigma, mode="soft"))
    return pywt.waverec(out, WAVELET, mode="symmetric")[:n]


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's correlation; 0 when either series is constant."""
    a = np.asarray(a, dtype=float) - np.mean(a)
    b = np.asarray(b, dtype=float) - np.mean(b)
    den = math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b)))
    return float(np.dot(a, b)) / den if den > 0 else 0.0


@dataclass
class PairVerdict:
    """Both tests' findings for two destinations of one source."""

    a: str
    b: str
    #: DCW: denoised correlation and its decision (None if a path is uncongested).
    rho: float
    dcw_shared: bool
    #: Rubenstein: cross- and auto-measure and the decision (None: could not decide).
    m_cross: float
    m_auto: float | None
    rubenstein_shared: bool | None
    #: Why a test did not decide, if it did not.
    note: str = ""

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "rho": round(self.rho, 4), "dcw_shared": self.dcw_shared,
                "m_cross": round(self.m_cross, 4), "m_auto": None if self.m_auto is None else round(self.m_auto, 4),
                "rubenstein_shared": self.rubenstein_shared, "note": self.note}


@dataclass
class Clustering:
    """One source's destinations grouped by shared congestion."""

    #: Classes of two or more destinations (DCW's, merged transitively), in input order.
    classes: list[list[str]]
    pairs: list[PairVerdict]
    #: Per destination: interdecile range of the denoised series (s) and samples used.
    spread_s: dict[str, float] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=dict)
    #: Pairs the two tests decided differently, and pairs Rubenstein's could not decide.
    disagreements: list[tuple[str, str]] = field(default_factory=list)
    undecided: list[tuple[str, str]] = field(default_factory=list)
    #: With ``strict``: pairs DCW found shared that are in no class together (Rubenstein's
    #: test did not say shared, or a member of the other's class is not shared with it).
    unjoined: list[tuple[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"classes": self.classes, "pairs": [p.as_dict() for p in self.pairs],
                "spread_ms": {k: round(v * 1e3, 4) for k, v in self.spread_s.items()}, "samples": self.samples,
                "disagreements": [list(p) for p in self.disagreements], "undecided": [list(p) for p in self.undecided],
                "unjoined": [list(p) for p in self.unjoined]}


def rubenstein(x: np.ndarray, y: np.ndarray) -> tuple[float, float, bool | None]:
    """Rubenstein's comparison for interleaved series (``x[r]`` sent just before ``y[r]``):
    (M_x, M_a, shared or None when the difference is within twice its standard error)."""
    n = len(x)
    m_cross = pearson(x, y)
    m_auto = 0.5 * (pearson(x[:-1], x[1:]) + pearson(y[:-1], y[1:]))
    z = lambda r: math.atanh(max(-0.999999, min(0.999999, r)))  # noqa: E731
    se = math.sqrt(1.0 / max(1, n - 3) + 1.0 / max(1, n - 4))
    diff = z(m_cross) - z(m_auto)
    if diff > 2 * se:
        return m_cross, m_auto, True
    if diff < -2 * se:
        return m_cross, m_auto, False
    return m_cross, m_auto, None


def skew(t: np.ndarray, d: np.ndarray) -> float:
    """The clock skew of a one-way-delay series ``d`` over send times ``t`` (s), after Moon,
    Skelly and Towsley (1999): the line below every sample that is closest to them on
    average (their linear program, minimize sum(d - a - b t) subject to d >= a + b t). Its
    optimum is the lower convex hull's supporting line at the mean time, so the skew is the
    slope of the hull's edge over mean(t). Queueing only adds to a delay, so the lower
    envelope is the propagation delay plus the clocks' ramp."""
    t = np.asarray(t, dtype=float)
    d = np.asarray(d, dtype=float)
    if len(t) < 2:
        return 0.0
    order = np.lexsort((d, t))
    hull: list[int] = []
    for i in order:  # Andrew's monotone chain, lower hull
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            if (t[a] - t[o]) * (d[i] - d[o]) - (d[a] - d[o]) * (t[i] - t[o]) <= 0:
                hull.pop()
            else:
                break
        hull.append(int(i))
    mean_t = float(t.mean())
    for a, b in zip(hull, hull[1:]):
        if t[a] <= mean_t <= t[b] and t[b] > t[a]:
            return float((d[b] - d[a]) / (t[b] - t[a]))
    return 0.0


def remove_skew(t: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, float]:
    """``d`` with its clock skew's ramp (``skew``) taken out, and the skew (s per s)."""
    t = np.asarray(t, dtype=float)
    b = skew(t, d)
    return np.asarray(d, dtype=float) - b * (t - (t[0] if len(t) else 0.0)), b


def spread(x: np.ndarray) -> float:
    """The interdecile range of a series (90th minus 10th percentile)."""
    p10, p90 = np.percentile(x, [10, 90])
    return float(p90 - p10)


def cluster(series: dict[str, np.ndarray], rho_shared: float = RHO_SHARED, min_spread_s: float = MIN_SPREAD_S,
            strict: bool = False) -> Clustering:
    """Groups one source's destinations by shared congestion from their one-way-delay series
    (seconds, one sample per probing round, aligned by round, in the order the probes of a
    round were sent). DCW decides the classes, merged transitively; Rubenstein's verdict is
    kept beside it. ``strict`` (paths of several sources; module doc): a pair needs both
    tests' "shared", and classes are complete-linkage (``complete_linkage``)."""
    names = list(series)
    lens = {len(v) for v in series.values()}
    if len(lens) > 1:
        raise PathtwinError("the delay series of one source must have one sample per round each")
    raw = {k: np.asarray(v, dtype=float) for k, v in series.items()}
    clean = {k: denoise(v) for k, v in raw.items()}
    spreads = {k: spread(v) for k, v in clean.items()}
    congested = {k: spreads[k] >= min_spread_s for k in names}
    parent = {k: k for k in names}

    def find(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    pairs, disagree, undecided = [], [], []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            rho = pearson(clean[a], clean[b])
            note = ""
            ma: float | None
            if congested[a] and congested[b]:
                dcw = rho >= rho_shared
                mx, ma, rub = rubenstein(raw[a], raw[b])
            else:
                dcw = False
                mx, ma, rub = pearson(raw[a], raw[b]), None, None
                quiet = [k for k in (a, b) if not congested[k]]
                note = f"no congestion seen towards {', '.join(quiet)} (denoised delays within {min_spread_s * 1e3:g} ms)"
            if dcw:
                parent[find(a)] = find(b)
            if rub is None:
                undecided.append((a, b))
            elif rub != dcw:
                disagree.append((a, b))
            pairs.append(PairVerdict(a, b, rho, dcw, mx, ma, rub, note))
    unjoined: list[tuple[str, str]] = []
    if strict:
        joined = [p for p in pairs if p.dcw_shared and p.rubenstein_shared is True]
        classes = complete_linkage(names, [(p.rho, p.a, p.b) for p in joined])
        together = {frozenset((a, b)) for c in classes for a in c for b in c if a != b}
        unjoined = [(p.a, p.b) for p in pairs if p.dcw_shared and frozenset((p.a, p.b)) not in together]
    else:
        groups: dict[str, list[str]] = {}
        for k in names:
            groups.setdefault(find(k), []).append(k)
        classes = [g for g in groups.values() if len(g) >= 2]
    return Clustering(classes=classes, pairs=pairs, spread_s=spreads, samples={k: len(v) for k, v in raw.items()},
                      disagreements=disagree, undecided=undecided, unjoined=unjoined)


def complete_linkage(names: list[str], shared_pairs: list[tuple[float, str, str]]) -> list[list[str]]:
    """Classes of ``names`` in which every two members are a pair of ``shared_pairs``
    ((correlation, a, b)): the pairs taken from the most correlated down, each joining its
    two members' groups when every pair across the two groups is shared (complete linkage
    at the decision threshold). Classes of two or more, members in ``names``' order."""
    linked = {frozenset((a, b)) for _r, a, b in shared_pairs}
    group = {k: [k] for k in names}
    for _r, a, b in sorted(shared_pairs, key=lambda p: -p[0]):
        ga, gb = group[a], group[b]
        if ga is gb or not all(frozenset((x, y)) in linked for x in ga for y in gb):
            continue
        ga.extend(gb)
        for k in gb:
            group[k] = ga
    order = {k: i for i, k in enumerate(names)}
    seen: list[list[str]] = []
    for g in group.values():
        if len(g) >= 2 and not any(g is s for s in seen):
            seen.append(g)
    return [sorted(g, key=order.__getitem__) for g in sorted(seen, key=lambda g: min(order[k] for k in g))]
