"""`pathtwin reproduce NAME`: a paper's experiment, printed in the paper's layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..errors import PathtwinError


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def reproduce(
    name: str = typer.Argument(..., help="nsdi09-table2, nsdi09-figure5, acc-4a, acc-4b, acc-3c, monarch-fig12 or "
                                         "thesis-tcp-friendly"),
    engine: str = typer.Option("sim", help="sim or emu"),
    seeds: Optional[int] = typer.Option(None, help="Seeds to average over (default 5 for nsdi09-table2, 3 for thesis-tcp-friendly)."),
    only: Optional[str] = typer.Option(None, help="thesis-tcp-friendly: configurations to run, e.g. AC (default ABCD)."),
    duration: Optional[str] = typer.Option(None, help="Override the run duration, e.g. 10s."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Keep each run's result directory here."),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable results."),
):
    """Reproduce a paper's experiment and print it in the paper's layout."""
    from ..reproduce import nsdi09 as rp

    if engine not in ("sim", "emu"):
        raise PathtwinError(f"--engine: expected sim or emu, got {engine!r}")
    if seeds is not None and seeds < 1:
        raise PathtwinError("--seeds: must be at least 1")
    if name == "nsdi09-table2":
        err = _console(stderr=True)
        seeds = seeds or 5
        rows = rp.table2(engine=engine, seeds=seeds, duration=duration, out=out,
                         progress=None if as_json else (lambda m, s: err.print(f"  {m} mode, seed {s} done")))
        if as_json:
            modes = ("link", "path")
            print(json.dumps([{"row": r.index, "abw": r.abw, "rtt_ms": r.rtt_ms, "queue": r.queue,
                               "achieved": r.achieved, "error": {m: [r.error(m, 0), r.error(m, 1)] for m in modes},
                               **({"ip_achieved": r.ip_achieved,
                                   "ip_error": {m: [r.error(m, 0, True), r.error(m, 1, True)] for m in modes}}
                                  if r.ip_achieved else {})} for r in rows], indent=2))
        else:
            rp.print_table2(rows, title=f"NSDI'09 Table 2 ({'simulation' if engine == 'sim' else 'emulation'}, {seeds} seed{'s' if seeds > 1 else ''})")
    elif name == "nsdi09-figure5":
        if engine == "emu":
            from ..config import parse_quantity
            from ..reproduce.nsdi09 import reproduce_figure5_emu

            f5 = reproduce_figure5_emu(out=out, **({"duration": parse_quantity("time", duration, "--duration")} if duration else {}))
        else:
            f5 = rp.figure5(out=out, duration=duration)
        if as_json:
            print(json.dumps(f5.__dict__, indent=2))
        else:
            print(f"NSDI'09 Figure 5 ({engine}): base RTT {f5.base_rtt_ms:g} ms")
            for m in ("path", "link"):
                print(f"  {m:4} mode: mean RTT {f5.mean_rtt_ms[m]:8.1f} ms, goodput {f5.goodput_bps[m]/1e3:7.1f} kbit/s")
            print(f"  link/path RTT ratio: {f5.mean_rtt_ms['link']/f5.mean_rtt_ms['path']:.1f}x (paper: 629 ms vs 53.2 ms)")
    elif name == "monarch-fig12":
        from ..reproduce import monarch

        transfers = monarch.figure12(out=out, emulate=engine == "emu")
        if as_json:
            print(json.dumps([{k: v for k, v in t.__dict__.items() if k != "series"} for t in transfers], indent=2))
        else:
            monarch.print_figure12(transfers)
            if out is not None:
                print(f"figure: {Path(out) / 'figure12.png'}")
    elif name == "thesis-tcp-friendly":
        if engine != "sim":
            raise PathtwinError("--engine: thesis-tcp-friendly runs in the simulator (SACK and Reno are the simulator's TCP)")
        _reproduce_thesis(duration, out, as_json, only, seeds or 3)
    elif name in ACC_REPRODUCTIONS:
        if engine != "sim":
            raise PathtwinError(f"--engine: {name} runs in the simulator (Monaco and Vegas are the simulator's controllers)")
        _reproduce_acc(name, duration, out, as_json)
    else:
        raise PathtwinError(f"unknown reproduction {name!r}: expected one of {', '.join(REPRODUCTIONS)}")
    if out is not None and not as_json:
        _plot_runs_under(out)


ACC_REPRODUCTIONS = ("acc-4a", "acc-4b", "acc-3c")
REPRODUCTIONS = ("nsdi09-table2", "nsdi09-figure5", *ACC_REPRODUCTIONS, "monarch-fig12", "thesis-tcp-friendly")


def _reproduce_thesis(duration: Optional[str], out: Optional[Path], as_json: bool, only: Optional[str], seeds: int) -> None:
    """The TCP-friendly marker thesis's Tables 4.1–4.4 (see ``pathtwin.reproduce.thesis``)."""
    import dataclasses

    from ..config import parse_quantity
    from ..reproduce import thesis

    configurations = tuple(only.upper()) if only else tuple(thesis.CONFIGURATIONS)
    bad = [c for c in configurations if c not in thesis.CONFIGURATIONS]
    if bad:
        raise PathtwinError(f"--only: no configuration {''.join(bad)!r} (the thesis has A, B, C, D)")
    dur = parse_quantity("time", duration, "--duration") if duration else thesis.DURATION_S
    err = _console(stderr=True)
    rows = []
    for c in configurations:
        rows += thesis.run((c,), seeds=tuple(range(1, seeds + 1)), duration_s=dur, out=Path(out) if out else None)
        if not as_json:
            err.print(f"  configuration {c} done")
    if as_json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    else:
        thesis.print_tables(rows)


def _reproduce_acc(name: str, duration: Optional[str], out: Optional[Path], as_json: bool) -> None:
    """The ACC paper's experiments, Monaco beside Vegas (see ``pathtwin.reproduce.acc``)."""
    import dataclasses

    from ..config import parse_quantity
    from ..reproduce import acc

    dur = parse_quantity("time", duration, "--duration") if duration else None
    missing = [c for c in acc.PAPER_CONTROLLERS if c not in acc.controllers()]
    if missing and not as_json:
        _console(stderr=True).print(f"note: the simulator has no {', '.join(missing)} yet; running {', '.join(acc.controllers())} only")
    sub = (lambda *parts: Path(out).joinpath(*parts)) if out else (lambda *parts: None)
    if name == "acc-4a":
        results = [acc.section4a(cc, buf, **({"duration_s": dur} if dur else {}), out=sub(f"{cc}-{buf}p"))
                   for cc in acc.controllers() for buf in (90, 55)]
        show = acc.print_4a
    elif name == "acc-4b":
        results = [acc.section4b(cc, n, **({"duration_s": dur} if dur else {}), out=sub(f"{cc}-N{n}"))
                   for cc in acc.controllers() for n in range(2, 10)]
        show = acc.print_4b
    else:
        results = acc.section3c(out=out)
        show = acc.print_3c
    if as_json:
        print(json.dumps([dataclasses.asdict(r) for r in results], indent=2))
    else:
        show(results)


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
