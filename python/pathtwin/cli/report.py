"""`pathtwin report RUN... -o report.html`: one self-contained HTML page for result
directories and sweep directories. The work is ``pathtwin.report``'s; a directory that is
neither is one line naming it, exit status 2."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def report(
    runs: List[Path] = typer.Argument(..., help="Result directories (run.json + Parquet) or sweep directories (sweep.json)."),
    out: Path = typer.Option(Path("report.html"), "-o", "--out", help="The HTML file to write."),
    title: Optional[str] = typer.Option(None, help="The page's title (default: the directories' names)."),
) -> None:
    """Write one self-contained HTML page (no network requests) for runs and sweeps:
    configuration, per-flow table, plots."""
    from ..report import write_report

    print(write_report(runs, out, title=title))


def register(app: typer.Typer) -> None:
    """Adds `pathtwin report`."""
    app.command()(report)
