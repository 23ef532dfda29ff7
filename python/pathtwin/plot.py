"""Plots of result directories (PNG): throughput per flow, cwnd and RTT per flow, queue
occupancy, and a Pantheon-style throughput-against-delay scatter per congestion controller.
They read only the directories' files, so any run can be re-plotted later, and since the
simulator and the emulator write the same ``flow_series`` columns (time in s, cwnd in bytes,
smoothed RTT in ms, delivered bytes), one function draws either, or both in one figure.

This is also the drawing behind HTML reports (``pathtwin.report``): each plot is built by a
``*_figure`` function that returns the matplotlib figure (CDFs and a sweep's metric against
an axis too), which ``plot_*`` save as PNG and a report embeds. Nothing here writes HTML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .errors import PathtwinError
from .results import Result, read_result_dir


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _as_result(r) -> Result:
    return r if isinstance(r, Result) else read_result_dir(r)


def run_name(result: Result) -> str:
    """How a run is named in overlaid plots: engine and directory, e.g. ``emu:reno``."""
    engine = result.run.get("engine", "?")
    return f"{engine}:{result.path.name}" if result.path is not None else engine


def plot_result(result: Result | str | Path, out_dir=None) -> list[Path]:
    """Writes the standard plots for a run; returns the files written."""
    result = _as_result(result)
    out = Path(out_dir) if out_dir is not None else result.path
    if out is None:
        raise PathtwinError("plot: the result has no directory; pass out_dir")
    out.mkdir(parents=True, exist_ok=True)
    plt = _pyplot()
    written = []
    title = result.run.get("source") or result.run.get("engine", "")
    fig = throughput_figure(result, title)
    if fig is not None:
        written.append(_save(fig, out / "throughput.png", plt))
        written.append(plot_cwnd_rtt([result], out / "cwnd_rtt.png", title=f"Congestion window and RTT — {title}"))
        written.append(plot_throughput_delay([result], out / "throughput_delay.png"))
    fig = queue_figure(result, title)
    if fig is not None:
        written.append(_save(fig, out / "queues.png", plt))
    return written


def throughput_figure(result: Result, title: str = ""):
    """Goodput of every flow over time (a matplotlib figure), or None without a
    ``flow_series``."""
    fs = _series(result)
    if fs is None:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for label, g in fs.groupby("label", sort=False):
        ax.plot(g["time_s"], g["goodput_bps"] / 1e6, label=label, lw=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_title(f"Throughput per flow — {title}" if title else "Throughput per flow")
    _legend(ax, fs)
    return fig


def queue_figure(result: Result, title: str = ""):
    """Occupancy of the busiest bandwidth queues over time (their placeholder cross traffic
    dotted), or None without a ``queue_series``."""
    qs = result.tables.get("queue_series")
    if qs is None or not len(qs):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    busy = qs.groupby("queue")["packets"].max()
    names = [q for q in qs["queue"].unique() if busy.get(q, 0) > 0] or list(qs["queue"].unique())[:8]
    for name in names[:12]:
        g = qs[qs["queue"] == name]
        ax.plot(g["time_s"], g["bytes"] / 1000, label=f"{name}", lw=1)
        if g["placeholder_bytes"].max() > 0:
            ax.plot(g["time_s"], g["placeholder_bytes"] / 1000, ls=":", lw=1, label=f"{name} (placeholder)")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("queue occupancy (KB)")
    ax.set_title(f"Queue occupancy — {title}" if title else "Queue occupancy")
    ax.legend(fontsize="small", loc="upper right")
    return fig


def cdf_figure(samples, xlabel: str, title: str):
    """Empirical CDFs, one step line per entry of ``samples`` (name -> values; NaNs left
    out)."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in samples.items():
        v = np.sort(np.asarray(values, dtype=float))
        v = v[np.isfinite(v)]
        if len(v):
            ax.step(np.concatenate([[v[0]], v]), np.arange(len(v) + 1) / len(v), where="post", label=str(name), lw=1.2)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if 1 < len(samples) <= 12:
        ax.legend(fontsize="small", loc="lower right")
    return fig


def metric_against_axis_figure(frame, axis: str, metric: str, ylabel: str, lines: Sequence[str] = ()):
    """``metric`` (a column of ``frame``, one row per point) against ``axis``, whose values
    are placed in the order they first appear (an axis may be text, e.g. "20ms"), one line
    per combination of the ``lines`` columns; several rows at one position (seeds) are
    averaged."""
    plt = _pyplot()
    order = list(dict.fromkeys(frame[axis].tolist()))
    pos = {v: i for i, v in enumerate(order)}
    fig, ax = plt.subplots(figsize=(7, 4))
    groups = frame.groupby(list(lines), sort=False) if lines else [((), frame)]
    for key, g in groups:
        mean = g.groupby(axis, sort=False)[metric].mean()
        xs = sorted(mean.index, key=lambda v: pos[v])
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{c}={v}" for c, v in zip(lines, key)) or metric
        ax.plot([pos[x] for x in xs], [mean[x] for x in xs], marker="o", lw=1.2, label=name)
    ax.set_xticks(range(len(order)), [str(v) for v in order])
    ax.set_xlabel(axis)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{ylabel} against {axis}")
    ax.grid(alpha=0.3)
    if lines:
        ax.legend(fontsize="small", loc="best")
    return fig


#: Flows that delivered less than this share of their run's largest flow are left out of
#: the cwnd/RTT and throughput-delay plots: an application's control connection (iperf3
#: opens one beside its data connection) carries a few hundred bytes and would only crowd
#: the figure. Pass ``min_share=0`` to draw every flow.
MIN_SHARE = 0.01


def _kept_labels(fs, min_share: float) -> set:
    delivered = fs.groupby("label")["delivered_bytes"].max()
    return set(delivered[delivered >= min_share * delivered.max()].index)


def plot_runs(runs: Sequence[Result | str | Path], out_dir, prefix: str = "compare_") -> list[Path]:
    """Overlays several runs (simulated and emulated alike): cwnd and RTT of every flow over
    time, and the throughput-delay scatter; returns the files written into ``out_dir``."""
    results = [_as_result(r) for r in runs]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not any(_series(r) is not None for r in results):
        raise PathtwinError("plot: none of the runs has a flow_series table")
    return [plot_cwnd_rtt(results, out / f"{prefix}cwnd_rtt.png"),
            plot_throughput_delay(results, out / f"{prefix}throughput_delay.png")]


def _series(result: Result):
    fs = result.tables.get("flow_series")
    return fs if fs is not None and len(fs) else None


def plot_cwnd_rtt(runs: Sequence[Result | str | Path], path, title: str | None = None,
                  min_share: float = MIN_SHARE) -> Path:
    """Writes ``cwnd_rtt_figure`` to ``path``."""
    return _save(cwnd_rtt_figure(runs, title, min_share), Path(path), _pyplot())


def cwnd_rtt_figure(runs: Sequence[Result | str | Path], title: str | None = None, min_share: float = MIN_SHARE):
    """Congestion window (KB) and smoothed RTT (ms) of every flow over time; with several
    runs, each flow is named ``run / flow`` and each run has its own line style (flows below
    ``min_share`` of their run's largest are left out, see ``MIN_SHARE``)."""
    results = [_as_result(r) for r in runs]
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    styles = ["-", "--", ":", "-."]
    lines = 0
    for k, r in enumerate(results):
        fs = _series(r)
        if fs is None:
            continue
        kept = _kept_labels(fs, min_share)
        for label, g in fs.groupby("label", sort=False):
            if label not in kept:
                continue
            name = label if len(results) == 1 else f"{run_name(r)} / {label}"
            ls = styles[k % len(styles)]
            a1.plot(g["time_s"], g["cwnd_bytes"] / 1000, ls=ls, lw=1, label=name)
            a2.plot(g["time_s"], g["srtt_ms"], ls=ls, lw=1, label=name)
            lines += 1
    a1.set_ylabel("cwnd (KB)")
    a2.set_ylabel("smoothed RTT (ms)")
    a2.set_xlabel("time (s)")
    a1.set_title(title or "Congestion window and RTT per flow")
    if 0 < lines <= 12:
        a1.legend(fontsize="small", loc="upper right")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
    return fig


def flow_summary(result: Result | str | Path):
    """One row per flow of a run's ``flow_series``: ``label``, ``cc``, ``throughput_bps``,
    ``mean_rtt_ms``, ``min_rtt_ms``, ``queueing_delay_ms``, ``active_s`` and
    ``delivered_bytes``.

    A flow is active from one sample interval before its first row (its first row counts
    from there, in either engine) to the first row at which its delivered bytes reach their
    final value (later rows are a connection that has nothing left to send). Throughput is
    the bytes delivered over that time; mean RTT the mean smoothed RTT of its active rows;
    queueing delay the mean RTT less the flow's minimum RTT (the kernel's ``min_rtt_ms``
    where present, else the least smoothed RTT). ``cc`` comes from the series' own column
    (emulator) or from the ``flows`` table (simulator)."""
    import numpy as np
    import pandas as pd

    result = _as_result(result)
    fs = _series(result)
    cols = ["label", "cc", "throughput_bps", "mean_rtt_ms", "min_rtt_ms", "queueing_delay_ms", "active_s",
            "delivered_bytes"]
    if fs is None:
        return pd.DataFrame(columns=cols)
    cc_of = {}
    flows = result.tables.get("flows")
    if flows is not None and "cc" in flows and "flow" in flows:
        cc_of = dict(zip(flows["flow"], flows["cc"]))
    rows = []
    for (flow, label), g in fs.sort_values("time_s").groupby(["flow", "label"], sort=False):
        t = g["time_s"].to_numpy(float)
        d = g["delivered_bytes"].to_numpy(float)
        step = float(np.median(np.diff(t))) if len(t) > 1 else float("nan")
        end = int(np.argmax(d >= d.max()))
        active = t[end] - (t[0] - step) if np.isfinite(step) else float("nan")
        rtt = g["srtt_ms"].to_numpy(float)[: end + 1]
        mean_rtt = float(np.nanmean(rtt)) if np.isfinite(rtt).any() else float("nan")
        if "min_rtt_ms" in g and g["min_rtt_ms"].notna().any():
            base = float(g["min_rtt_ms"].min())
        else:
            base = float(np.nanmin(rtt)) if np.isfinite(rtt).any() else float("nan")
        if "cc" in g and g["cc"].notna().any():
            cc = str(g["cc"].dropna().iloc[-1])
        else:
            cc = str(cc_of.get(flow, "?"))
        thr = d.max() * 8 / active if active > 0 else float("nan")
        rows.append([label, cc, thr, mean_rtt, base, mean_rtt - base, active, int(d.max())])
    return pd.DataFrame(rows, columns=cols)


def plot_throughput_delay(runs: Sequence[Result | str | Path], path, delay: str = "rtt",
                          min_share: float = MIN_SHARE) -> Path:
    """Writes ``throughput_delay_figure`` to ``path``."""
    return _save(throughput_delay_figure(runs, delay, min_share), Path(path), _pyplot())


def throughput_delay_figure(runs: Sequence[Result | str | Path], delay: str = "rtt", min_share: float = MIN_SHARE):
    """Pantheon-style scatter: one point per flow at (mean RTT, or mean queueing delay with
    ``delay="queueing"``; throughput), coloured by congestion controller, one marker per
    run; the delay axis is inverted as in Pantheon's plots, so better is up and right.
    Flows below ``min_share`` of their run's largest are left out (see ``MIN_SHARE``)."""
    if delay not in ("rtt", "queueing"):
        raise PathtwinError(f"plot: delay must be 'rtt' or 'queueing', not {delay!r}")
    results = [_as_result(r) for r in runs]
    plt = _pyplot()
    xcol = "mean_rtt_ms" if delay == "rtt" else "queueing_delay_ms"
    summaries = []
    for r in results:
        s = flow_summary(r)
        if len(s):
            s = s[s["delivered_bytes"] >= min_share * s["delivered_bytes"].max()]
        summaries.append((r, s))
    ccs = sorted({cc for _, s in summaries for cc in s["cc"]})
    colours = {cc: plt.get_cmap("tab10")(i % 10) for i, cc in enumerate(ccs)}
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    fig, ax = plt.subplots(figsize=(7, 5))
    for k, (r, s) in enumerate(summaries):
        for cc, g in s.groupby("cc"):
            name = cc if len(results) == 1 else f"{cc} ({run_name(r)})"
            ax.scatter(g[xcol], g["throughput_bps"] / 1e6, color=colours[cc], marker=markers[k % len(markers)],
                       s=50, label=name, edgecolors="black", linewidths=0.5)
            if len(s) <= 12:
                for _, row in g.iterrows():
                    ax.annotate(row["label"], (row[xcol], row["throughput_bps"] / 1e6), fontsize=7,
                                xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel("mean smoothed RTT (ms)" if delay == "rtt" else "mean queueing delay (ms)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_title("Throughput against delay per flow (better: up and right)")
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    if ccs:
        ax.legend(fontsize="small", loc="best")
    return fig


def _legend(ax, fs) -> None:
    if fs["label"].nunique() <= 12:
        ax.legend(fontsize="small", loc="upper right")


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bounds_figure1(abw_bps: float, rtt_s: float, wmax_bytes: int, flows: int, path: Path,
                        capacities_bps=None) -> Path:
    """NSDI'09 Figure 1: Eq. 2 lower and Eq. 4 upper bound (per direction) against capacity."""
    import numpy as np

    from . import _native

    plt = _pyplot()
    if capacities_bps is None:
        capacities_bps = np.linspace(abw_bps, abw_bps * 10, 200)
    lower, upper = [], []
    for c in capacities_bps:
        b = _native.queue_bounds(int(abw_bps), int(abw_bps), rtt_s, int(wmax_bytes), int(c), flows)
        lower.append(b["lower"][0] / 1000)
        upper.append(max(b["upper_total"], 0) / 2 / 1000)
    caps = np.asarray(capacities_bps) / 1e6
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(caps, lower, label="lower bound (Eq. 2)")
    ax.plot(caps, upper, label="upper bound per direction (Eq. 4 / 2)")
    ax.fill_between(caps, lower, upper, where=np.asarray(upper) >= np.asarray(lower), alpha=0.2, label="feasible queue sizes")
    ax.set_xlabel("capacity (Mbit/s)")
    ax.set_ylabel("queue size (KB)")
    ax.set_title(f"Queue bounds: ABW {abw_bps/1e6:g} Mbit/s, RTT {rtt_s*1e3:g} ms, w_max {wmax_bytes/1000:g} KB")
    ax.legend()
    return _save(fig, Path(path), plt)
