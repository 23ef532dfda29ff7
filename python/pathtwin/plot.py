"""Plots of a result directory (PNG): throughput per flow, cwnd and RTT per flow, queue
occupancy. They read only the directory's files, so any run can be re-plotted later."""

from __future__ import annotations

from pathlib import Path

from .errors import PathtwinError
from .results import Result, read_result_dir


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_result(result: Result | str | Path, out_dir=None) -> list[Path]:
    """Writes the standard plots for a run; returns the files written."""
    if not isinstance(result, Result):
        result = read_result_dir(result)
    out = Path(out_dir) if out_dir is not None else result.path
    if out is None:
        raise PathtwinError("plot: the result has no directory; pass out_dir")
    out.mkdir(parents=True, exist_ok=True)
    plt = _pyplot()
    written = []
    fs = result.tables.get("flow_series")
    title = result.run.get("source") or result.run.get("engine", "")
    if fs is not None and len(fs):
        fig, ax = plt.subplots(figsize=(8, 4))
        for label, g in fs.groupby("label", sort=False):
            ax.plot(g["time_s"], g["goodput_bps"] / 1e6, label=label, lw=1)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("goodput (Mbit/s)")
        ax.set_title(f"Throughput per flow — {title}")
        _legend(ax, fs)
        written.append(_save(fig, out / "throughput.png", plt))

        fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for label, g in fs.groupby("label", sort=False):
            a1.plot(g["time_s"], g["cwnd_bytes"] / 1000, label=label, lw=1)
            a2.plot(g["time_s"], g["srtt_ms"], label=label, lw=1)
        a1.set_ylabel("cwnd (KB)")
        a2.set_ylabel("smoothed RTT (ms)")
        a2.set_xlabel("time (s)")
        a1.set_title(f"Congestion window and RTT — {title}")
        _legend(a1, fs)
        written.append(_save(fig, out / "cwnd_rtt.png", plt))
    qs = result.tables.get("queue_series")
    if qs is not None and len(qs):
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
        ax.set_title(f"Queue occupancy — {title}")
        ax.legend(fontsize="small", loc="upper right")
        written.append(_save(fig, out / "queues.png", plt))
    return written


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
