"""The replay's figures as the paper draws them (Cheng et al., USENIX ATC 2004, §5).

- :func:`category_figure`: Figures 6-8, the CDF of the signed relative error of response
  time, (replay − original) / original, over all replayed connections ("total") and per
  category of one of :data:`~pathtwin.replay.compare.CATEGORIES`, the number of connections
  of each in its legend label, the ±20 % band shaded;
- :func:`halves_figure`: Figure 9, the response-time CDFs of the workload's two halves in
  time, for the original and for the replay;
- :func:`response_times_figure`: the source's and the replay's response-time CDFs side by
  side with the error's (the overview ``pathtwin replay`` has always drawn);
- :func:`write_figures`: all of them as PNGs in a replay's output directory.

Each ``*_figure`` returns the matplotlib figure, whose lines hold exactly the data drawn (a
CDF is a step line through the sorted values at heights 1/n, 2/n, ..., 1), so that a test or
a notebook can read them back. The numbers are :mod:`~pathtwin.replay.compare`'s; nothing
here computes a statistic of its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .compare import CATEGORIES, TOTAL, Category, category_of, halves, replayed

#: The error axis: Monkey's figures span -1 to 1 (a replay cannot be more than 100 % faster).
ERROR_RANGE = (-1.0, 1.0)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def cdf_points(values) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF's steps: the sorted values and 1/n, 2/n, ..., 1."""
    v = np.sort(np.asarray(values, float))
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)


def _step(ax, values, **kw):
    x, y = cdf_points(values)
    return ax.step(x, y, where="post", **kw)[0]


def category_figure(table: pd.DataFrame, cat: Category):
    """One of Figures 6-8: the CDF of the relative error for every replayed connection and
    for each non-empty bin of ``cat``, labelled ``"label (n)"`` as the paper's legends are.
    Line i+1's data are the sorted errors of the i-th non-empty bin; line 0's all of them."""
    plt = _pyplot()
    both = replayed(table)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.axvspan(-0.2, 0.2, color="0.92", zorder=0)
    _step(ax, both["rel_error"], color="black", lw=2, label=f"{TOTAL} ({len(both)})")
    bins = category_of(both, cat)
    for label in cat.labels:
        e = both["rel_error"][bins == label]
        if len(e):
            _step(ax, e, label=f"{label} ({len(e)})")
    ax.set_xlim(*ERROR_RANGE)
    ax.set_ylim(0, 1)
    ax.set_xlabel("relative error of response time, (replay − original) / original")
    ax.set_ylabel("CDF of connections")
    ax.set_title(cat.title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def halves_figure(table: pd.DataFrame):
    """Figure 9: response-time CDFs of the first and second halves in time (split as
    :func:`~pathtwin.replay.compare.halves` splits), original on the left, replay on the
    right, each panel's title with the halves' KS distance."""
    plt = _pyplot()
    h = halves(table)
    both = replayed(table)
    # None: nothing was replayed, and both panels stay empty.
    first = both["start_s"].astype(float) < (h["split_s"] if h["split_s"] is not None else np.inf)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (col, key) in zip(axes, (("original_ms", "original"), ("replay_ms", "replay"))):
        _step(ax, both.loc[first, col], label=f"first half ({h['first']})")
        _step(ax, both.loc[~first, col], label=f"second half ({h['second']})")
        ax.set_xscale("log")
        ax.set_xlabel("response time (ms)")
        ks = h[key]["ks_distance"]
        ax.set_title(f"{key}: KS distance {'-' if ks is None else format(ks, '.3f')}", fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CDF of connections")
    split = "-" if h["split_s"] is None else f"{h['split_s']:.1f}"
    fig.suptitle(f"Figure 9: two halves of the workload, split at {split} s", fontsize=10)
    fig.tight_layout()
    return fig


def response_times_figure(table: pd.DataFrame):
    """Response-time CDFs of source and replay, and the CDF of the relative error."""
    plt = _pyplot()
    both = replayed(table)
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for col, label in (("original_ms", "source"), ("replay_ms", "replay")):
        _step(a, both[col], label=label)
    a.set_xscale("log")
    a.set_xlabel("response time (ms)")
    a.set_ylabel("CDF of connections")
    a.legend()
    _step(b, both["rel_error"])
    b.axvspan(-0.2, 0.2, color="0.9")
    b.set_xlim(*ERROR_RANGE)
    b.set_xlabel("relative error of the replayed response time")
    fig.tight_layout()
    return fig


def write_figures(table: pd.DataFrame, out) -> list[Path]:
    """Every figure of a comparison table as a PNG in ``out``: ``response_times.png``,
    ``error_by_<category>.png`` (Figures 6-8) and ``halves.png`` (Figure 9)."""
    plt = _pyplot()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    figures = [("response_times.png", response_times_figure(table))]
    figures += [(f"error_by_{cat.name}.png", category_figure(table, cat)) for cat in CATEGORIES]
    figures.append(("halves.png", halves_figure(table)))
    paths = []
    for name, fig in figures:
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        paths.append(out / name)
    return paths
