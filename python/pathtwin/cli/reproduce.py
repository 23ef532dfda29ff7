"""`pathtwin reproduce NAME` and `pathtwin reproduce --list`: a paper's experiment, printed
in the paper's layout; `pathtwin reproduce all -o DIR`: every one of them, and one HTML
report of the paper's numbers beside ours (``pathtwin.reproduce.report``). It holds no
paper's logic: each reproduction is found, run and printed through its record in
``pathtwin.reproduce``'s registry."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import PathtwinError


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def reproduce(
    name: Optional[str] = typer.Argument(None, help="The reproduction to run (pathtwin reproduce --list names them), "
                                                    "or all (with -o DIR: DIR/report.html)."),
    engine: str = typer.Option("sim", help="sim or emu"),
    seeds: Optional[int] = typer.Option(None, help="Seeds to average over (default 5 for nsdi09-table2, 3 for thesis-tcp-friendly)."),
    only: Optional[str] = typer.Option(None, help="thesis-tcp-friendly: configurations to run, e.g. AC (default ABCD); "
                                                  "with all: the reproductions to run, e.g. nsdi09-figure5,acc-3c."),
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
    if name == "all":
        return _all(out, only, engine, seeds, duration, as_json)
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
            for path in record.save_figures(results, out):
                print(f"figure: {path}")


def _all(out: Optional[Path], only: Optional[str], engine: str, seeds: Optional[int], duration: Optional[str],
         as_json: bool) -> int:
    """`reproduce all`: every reproduction with its defaults in the simulator, the report
    in ``out``; exit status 1 if one of them failed."""
    from ..reproduce.report import run_all

    if out is None:
        raise PathtwinError("reproduce all: give the output directory with -o DIR")
    if engine != "sim" or seeds is not None or duration is not None or as_json:
        raise PathtwinError("reproduce all: runs each reproduction in the simulator with its defaults "
                            "(--engine, --seeds, --duration and --json are for one reproduction)")
    outcomes = run_all(out, only=only, progress=_console(stderr=True).print)
    print(Path(out) / "report.html")
    failed = [o for o in outcomes if o.error]
    for o in failed:
        print(f"pathtwin: {o.name} failed: {o.error}")
    return 1 if failed else 0


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
