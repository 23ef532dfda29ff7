"""A sweep's section of a report: the spec (collapsed), one row per point with its axis
values, status and headline numbers (its flows' mean goodput and mean RTT), the headline
metric against each axis, and the CDF of every flow's goodput. Which plots a sweep gets is
``plots_for``; seeds are averaged, never a line of their own. The drawing is
``pathtwin.plot``'s; single runs are ``run``'s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from .page import Cell, details, esc, figure, num, pre, table

if TYPE_CHECKING:  # annotations only: importing the store at import time would import all of pathtwin.sweeps (Dask)
    from ..sweeps.store import SweepResult

#: Axes that are repetitions, averaged over rather than drawn as lines or given a plot.
SEED_AXES = ("seed", "run.seed")


def axes(sweep: SweepResult) -> list[str]:
    return [a["name"] for a in sweep.run.get("axes", [])]


def plotted_axes(sweep: SweepResult) -> list[str]:
    """The axes with a plot of their own: every axis with two values or more but seeds."""
    return [a["name"] for a in sweep.run.get("axes", []) if a["name"] not in SEED_AXES and len(a["values"]) > 1]


def plots_for(sweep: SweepResult) -> list[str]:
    """The plots a sweep calls for, when any point has flows: ``goodput_vs:AXIS`` for each of
    ``plotted_axes``, then ``goodput_cdf``."""
    if not len(sweep.flows):
        return []
    return [f"goodput_vs:{a}" for a in plotted_axes(sweep)] + ["goodput_cdf"]


def per_point(sweep: SweepResult):
    """One row per point (``SweepResult.points``) with ``flows``, ``goodput_bps`` (the mean
    over its flows) and ``rtt_mean_ms`` (the mean of its flows' mean RTTs); NaN for a point
    without flows."""
    import pandas as pd

    points = sweep.points
    names = axes(sweep)
    flows = sweep.flows
    metrics = {"flows": ("goodput_bps", "size"), "goodput_bps": ("goodput_bps", "mean"),
               "rtt_mean_ms": ("rtt_mean_ms", "mean")}
    if not names:
        agg = pd.DataFrame([{k: getattr(flows[c], f)() for k, (c, f) in metrics.items()}]) if len(flows) else None
        return points.join(agg) if agg is not None else points.assign(flows=0)
    agg = flows.groupby(names, dropna=False, observed=True).agg(**metrics).reset_index()
    # The partition columns may come back as categories; compare values as the points hold them.
    for n in names:
        agg[n] = agg[n].astype(object)
        points[n] = points[n].astype(object)
    merged = points.merge(agg, on=names, how="left")
    merged["flows"] = merged["flows"].fillna(0).astype(int)
    return merged


def points_table(frame, names: list[str]) -> str:
    rows, classes = [], []
    for _, p in frame.iterrows():
        rows.append([Cell(str(p["id"])), *(Cell(str(p[n])) for n in names), Cell(str(p["status"])),
                     num(p["flows"], "{:.0f}"), num(p.get("goodput_bps"), "{:.3f}", 1e-6),
                     num(p.get("rtt_mean_ms"), "{:.1f}"), Cell(p["error"] if isinstance(p["error"], str) else "")])
        classes.append("failed" if p["status"] == "failed" else "")
    return table(["point", *names, "status", "flows", "mean goodput (Mbit/s)", "mean RTT (ms)", "error"], rows,
                 css="points", row_classes=classes)


def figures(sweep: SweepResult, frame) -> str:
    from .. import plot

    parts = []
    done = frame[frame["flows"] > 0].assign(goodput_mbps=lambda f: f["goodput_bps"] / 1e6)
    for name in plots_for(sweep):
        if name.startswith("goodput_vs:"):
            axis = name.split(":", 1)[1]
            lines = [a for a in plotted_axes(sweep) if a != axis]
            fig = plot.metric_against_axis_figure(done, axis, "goodput_mbps", "mean goodput per flow (Mbit/s)", lines)
            parts.append(figure(fig, name, f"Mean goodput per flow against {axis}"
                                + (f", one line per {', '.join(lines)}" if lines else "")
                                + (" (seeds averaged)" if set(axes(sweep)) & set(SEED_AXES) else "")))
        elif name == "goodput_cdf":
            flows = sweep.flows
            by = plotted_axes(sweep)[-1:]
            samples = ({str(v): g["goodput_bps"] / 1e6 for v, g in flows.groupby(by[0], sort=False, observed=True)}
                       if by else {"flows": flows["goodput_bps"] / 1e6})
            parts.append(figure(plot.cdf_figure(samples, "goodput (Mbit/s)", "CDF of per-flow goodput, every point"),
                                name, "CDF of every point's per-flow goodput" + (f", per {by[0]}" if by else "")))
    return "".join(parts)


def section(sweep: SweepResult, heading: str) -> str:
    """The sweep's whole section."""
    record = sweep.run
    counts = record.get("counts", {})
    frame = per_point(sweep)
    summary = (f"<p>{len(record.get('points', []))} points: {counts.get('done', 0)} done, {counts.get('failed', 0)} failed, "
               f"{counts.get('pending', 0)} pending{'' if record.get('complete') else ' (not complete)'}.</p>")
    return (f'<section class="sweep"><h2>{esc(heading)}</h2>{summary}'
            f'{details("Sweep spec", pre(json.dumps(record.get("spec"), indent=2, default=str)))}'
            f"<h3>Points</h3>{points_table(frame, axes(sweep))}<h3>Plots</h3>{figures(sweep, frame)}</section>")
