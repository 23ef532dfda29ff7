"""`pathtwin reproduce NAME` and `pathtwin reproduce --list`: a paper's experiment, printed
in the paper's layout. It holds no paper's logic: each reproduction is found, run and
printed through its record in ``pathtwin.reproduce``'s registry."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import PathtwinError


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def reproduce(
    name: Optional[str] = typer.Argument(None, help="The reproduction to run (pathtwin reproduce --list names them)."),
    engine: str = typer.Option("sim", help="sim or emu"),
    seeds: Optional[int] = typer.Option(None, help="Seeds to average over (default 5 for nsdi09-table2, 3 for thesis-tcp-friendly)."),
    only: Optional[str] = typer.Option(None, help="thesis-tcp-friendly: configurations to run, e.g. AC (default ABCD)."),
    duration: Optional[str] = typer.Option(None, help="Override the run duration, e.g. 10s."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Keep each run's result directory here."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable results."),
    list_: bool = typer.Option(False, "--list", help="List the reproductions: name, engines, description."),
):
    """Reproduce a paper's experiment and print it in the paper's layout."""
    from .. import reproduce as rp

    if list_:
        _print_list(rp.reproductions())
        return
    if name is None:
        raise PathtwinError("Missing argument 'name'. (in `pathtwin reproduce`)")
    asked = rp.Request(engine=engine, seeds=seeds, duration=duration, only=only, out=out)
    record = rp.get(name)
    request = record.request(**vars(asked))
    results = record.run(request, progress=None if as_json else _console(stderr=True).print)
    if as_json:
        record.print_json(results)
    else:
        record.print_text(results, request)
        if out is not None:
            _plot_runs_under(out)


def _print_list(records) -> None:
    """One line per reproduction: name, engines, description."""
    from ._light import text_table

    table = text_table(("name", "engines", "description"), [(r.name, ", ".join(r.engines), r.description) for r in records],
                       left=3)
    print("\n".join(line.rstrip() for line in table.splitlines()))


def _plot_runs_under(out: Path) -> None:
    """Draws the plots of every run directory a reproduction kept, and says where they are."""
    from ..plot import plot_result

    runs = sorted(p.parent for p in Path(out).glob("**/run.json"))
    for run in runs:
        plot_result(run)
    if runs:
        print(f"{len(runs)} run directories (run.json, Parquet tables, PNG plots) under {out}/")


def register(app: typer.Typer) -> None:
    """Adds `pathtwin reproduce`."""
    app.command()(reproduce)
