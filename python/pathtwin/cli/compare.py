"""`pathtwin compare RUN_A RUN_B [-o DIR]`: two runs' flows side by side (the simulator
against the emulator on one file, or a run before and after a change), printed per flow and
metric with the relative difference, and drawn as PNG with ``-o``. The work is
``pathtwin.compare``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def _fmt(v: float) -> str:
    if v != v:
        return "-"
    if v == int(v) and abs(v) < 1e9:
        return f"{int(v)}"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"


def _rel(v: float) -> str:
    if v != v:
        return "-"
    pct = round(v * 100, 1)
    return "0.0%" if pct == 0 else f"{pct:+.1f}%"


def format_comparison(c) -> str:
    """A ``pathtwin.compare.Comparison`` as text: both runs named, then one line per flow and
    metric with A, B, B − A and (B − A)/A."""
    from ._light import text_table

    lines = [f"A: {c.a.name}  ({c.a.path}, {len(c.a.flows)} flows)", f"B: {c.b.name}  ({c.b.path}, {len(c.b.flows)} flows)"]
    table = []
    last = None
    for r in c.rows:
        metric = f"{r['metric']} ({r['unit']})" if r["unit"] else r["metric"]
        table.append((r["flow"] if r["flow"] != last else "", metric, _fmt(r["a"]), _fmt(r["b"]), _fmt(r["diff"]), _rel(r["rel"])))
        last = r["flow"]
    lines.append(text_table(("flow", "metric", "A", "B", "B − A", "(B − A)/A"), table, left=2))
    for side, keys in (("A", c.only_a), ("B", c.only_b)):
        if keys:
            lines.append(f"only in {side}: {', '.join(keys[:10])}" + (f" and {len(keys) - 10} more" if len(keys) > 10 else ""))
    lines.extend(f"note: {n}" for n in c.notes)
    return "\n".join(lines)


def compare(
    run_a: Path = typer.Argument(..., help="A result directory (with run.json and flows.parquet): the reference."),
    run_b: Path = typer.Argument(..., help="Another result directory, compared with the first."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Directory for the plot (compare_flows.png)."),
) -> None:
    """Compare two runs' flows (simulated or emulated), matched by label: goodput,
    completion time, retransmissions, min and mean RTT, with (B − A)/A."""
    from ..compare import compare_runs, plot_comparison

    c = compare_runs(run_a, run_b)
    print(format_comparison(c))
    if out is not None:
        for p in plot_comparison(c, out):
            print(p)


def register(app: typer.Typer) -> None:
    """Adds `pathtwin compare`."""
    app.command()(compare)
