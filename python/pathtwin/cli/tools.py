"""`pathtwin plot` (PNG plots from result directories) and `pathtwin bounds` (NSDI'09's
queue bounds for one path)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import PathtwinError


def plot(
    result_dirs: List[Path] = typer.Argument(..., help="One or more result directories (with run.json), simulated or emulated."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Directory for the PNGs (default: the run's directory; "
                                       "with several runs, the first run's, as compare_*.png)."),
):
    """Draw plots (PNG) from result directories: for one run, throughput, cwnd/RTT,
    throughput against delay and queues; for several, cwnd/RTT and throughput against
    delay of every run overlaid in one figure each."""
    from ..plot import plot_result, plot_runs

    for d in result_dirs:
        if not (d / "run.json").is_file():
            raise PathtwinError(f"{d}: not a result directory (no run.json)")
    if len(result_dirs) == 1:
        written = plot_result(result_dirs[0], out)
    else:
        written = plot_runs(result_dirs, out if out is not None else result_dirs[0])
    for p in written:
        print(p)


def bounds(
    abw: str = typer.Option(..., help="Available bandwidth, or forward/reverse (e.g. 10mbit or 4.3mbit/409kbit)."),
    rtt: str = typer.Option(..., help="Base RTT, e.g. 20ms."),
    wmax: str = typer.Option("65535B", help="Maximum TCP window w_max, e.g. 65KB."),
    flows: int = typer.Option(1, help="Foreground flows per direction (Eq. 2 sums over them)."),
    capacity: str = typer.Option("100mbit", help="Bottleneck capacity C."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write NSDI'09 Figure 1 (bounds against capacity) to this PNG."),
):
    """Print the NSDI'09 queue bounds (lower and upper, Equations 2 and 4) and the feasible range."""
    from .. import _native
    from ..config import parse_per_direction, parse_quantity

    if flows < 1:
        raise PathtwinError(f"--flows: must be at least 1, got {flows}")
    a_f, a_r = parse_per_direction("rate", abw, "--abw")
    if min(a_f, a_r) <= 0:
        raise PathtwinError("--abw: must be positive")
    rtt_s = parse_quantity("time", rtt, "--rtt")
    w = parse_quantity("size", wmax, "--wmax")
    c = parse_quantity("rate", capacity, "--capacity")
    if c < max(a_f, a_r):
        raise PathtwinError(f"--capacity: {capacity} is below the ABW")
    b = _native.queue_bounds(int(a_f), int(a_r), rtt_s, int(w), int(c), flows)
    fwd = b["forward"]
    lines = [
        f"path: ABW {a_f/1e6:g}/{a_r/1e6:g} Mbit/s, base RTT {rtt_s*1e3:g} ms, w_max {w:.0f} B, C {c/1e6:g} Mbit/s, {flows} flow(s) per direction",
        f"Eq. 2 lower bound: {b['lower'][0]:,} B (a→b), {b['lower'][1]:,} B (b→a)",
        f"Eq. 4 upper bound: q_a→b + q_b→a ≤ {max(b['upper_total'], 0):,.0f} B"
        f" (forward = {'a→b' if fwd == 0 else 'b→a'}, tolerable RTT w_max/ABW_f = {w*8/max(a_f, a_r)*1e3:.1f} ms)",
    ]
    if b["upper_total"] >= b["lower"][0] + b["lower"][1]:
        lines.append(f"feasible: per direction {b['lower'][0]:,}–{b['upper_total'] - b['lower'][1]:,.0f} B (a→b) and "
                     f"{b['lower'][1]:,}–{b['upper_total'] - b['lower'][0]:,.0f} B (b→a), summing to at most {b['upper_total']:,.0f} B")
        lines.append(f"chosen (equal split{', capped at 1 MB' if b['capped'] else ''}): {b['queue'][0]:,} B / {b['queue'][1]:,} B")
    else:
        need = (b["lower"][0] + b["lower"][1]) * 8 / (w * 8 / max(a_f, a_r) - rtt_s) if w * 8 / max(a_f, a_r) > rtt_s else float("inf")
        why = ("even an empty queue makes the RTT exceed w_max/ABW" if b["upper_total"] <= 0 else
               f"the upper bound is below the sum of the lower bounds ({b['lower'][0] + b['lower'][1]:,} B)")
        lines.append(f"no feasible queue size: {why}; capacity must be at least {need/1e6:.2f} Mbit/s" if need != float("inf")
                     else f"no feasible queue size: {why}; raise w_max or lower the RTT")
        lines.append(f"best compromise: {b['queue'][0]:,} B / {b['queue'][1]:,} B")
    print("\n".join(lines))
    if plot is not None:
        from ..plot import plot_bounds_figure1

        print(plot_bounds_figure1(max(a_f, a_r), rtt_s, int(w), flows, plot))


def register(app: typer.Typer) -> None:
    """Adds `pathtwin plot` and `pathtwin bounds`."""
    app.command()(plot)
    app.command()(bounds)
