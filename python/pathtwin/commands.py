"""The typer application behind `pathtwin`: every command but the hot path of ``sim``.

Sub-commands of other engines live beside them (``trace_cli``, ``emu_cli``, ``replay_cli``,
``monarch_cli``, ``sim_cli``); this module wires them together and owns ``plot``, ``bounds``
and ``reproduce``. ``cli.main`` is the entry point.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from . import emu_cli, monarch_cli, replay_cli, sim_cli, trace_cli
from .errors import PathtwinError

app = typer.Typer(
    name="pathtwin",
    help="A laboratory for Internet paths: simulate, emulate, analyze and replay.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Help texts quote config syntax ("[[flow]]", "[run] seed"): read them as plain text, not
    # as rich markup, which would swallow the brackets.
    rich_markup_mode=None,
)
app.add_typer(trace_cli.app, name="trace")
app.add_typer(emu_cli.app, name="emu")
emu_cli.register_top_level(app)
replay_cli.register(app)
monarch_cli.register(app)


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, add_help_option=False,
             help=sim_cli.HELP + " (pathtwin sim --help: its options)")
def sim(ctx: typer.Context):
    raise typer.Exit(sim_cli.main(list(ctx.args)))


@app.command()
def plot(
    result_dirs: List[Path] = typer.Argument(..., help="One or more result directories (with run.json), simulated or emulated."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Directory for the PNGs (default: the run's directory; "
                                       "with several runs, the first run's, as compare_*.png)."),
):
    """Draw plots (PNG) from result directories: for one run, throughput, cwnd/RTT,
    throughput against delay and queues; for several, cwnd/RTT and throughput against
    delay of every run overlaid in one figure each."""
    from .plot import plot_result, plot_runs

    for d in result_dirs:
        if not (d / "run.json").is_file():
            raise PathtwinError(f"{d}: not a result directory (no run.json)")
    if len(result_dirs) == 1:
        written = plot_result(result_dirs[0], out)
    else:
        written = plot_runs(result_dirs, out if out is not None else result_dirs[0])
    for p in written:
        print(p)


def _split_pair(text: str, kind: str, what: str) -> tuple[float, float]:
    from .config import parse_quantity

    parts = text.split("/")
    if len(parts) > 2:
        raise PathtwinError(f"{what}: expected one value or 'forward/reverse', got {text!r}")
    vals = [parse_quantity(kind, p, what) for p in parts]
    return (vals[0], vals[-1])


@app.command()
def bounds(
    abw: str = typer.Option(..., help="Available bandwidth, or forward/reverse (e.g. 10mbit or 4.3mbit/409kbit)."),
    rtt: str = typer.Option(..., help="Base RTT, e.g. 20ms."),
    wmax: str = typer.Option("65535B", help="Maximum TCP window w_max, e.g. 65KB."),
    flows: int = typer.Option(1, help="Foreground flows per direction (Eq. 2 sums over them)."),
    capacity: str = typer.Option("100mbit", help="Bottleneck capacity C."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write NSDI'09 Figure 1 (bounds against capacity) to this PNG."),
):
    """Print the NSDI'09 queue bounds (lower and upper, Equations 2 and 4) and the feasible range."""
    from . import _native
    from .config import parse_quantity

    if flows < 1:
        raise PathtwinError(f"--flows: must be at least 1, got {flows}")
    a_f, a_r = _split_pair(abw, "rate", "--abw")
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
        from .plot import plot_bounds_figure1

        print(plot_bounds_figure1(max(a_f, a_r), rtt_s, int(w), flows, plot))


@app.command()
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
    from .reproduce import nsdi09 as rp

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
            from .config import parse_quantity
            from .reproduce.nsdi09 import reproduce_figure5_emu

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
        from .reproduce import monarch

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

    from .config import parse_quantity
    from .reproduce import thesis

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

    from .config import parse_quantity
    from .reproduce import acc

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
    from .plot import plot_result

    runs = sorted(p.parent for p in Path(out).glob("**/run.json"))
    for run in runs:
        plot_result(run)
    if runs:
        print(f"{len(runs)} run directories (run.json, Parquet tables, PNG plots) under {out}/")
