"""`pathtwin sim`: the simulator's command, parsed without typer.

It is the command users run a thousand times in a sweep, so it starts light: the standard
library's argparse instead of typer (whose import, with the pydantic it now pulls in, cost
more than a whole ns-2 run), the engine writing its Parquet tables itself (no pyarrow), the
flow table printed from the engine's columns (no pandas), and plots drawn when asked
(``--plots``, or ``pathtwin plot OUT`` at any later time). ``cli.main`` hands ``sim``
arguments to ``main`` before importing typer; ``register`` lists the command in
``pathtwin --help`` (and hands over to ``main`` when typer meets it).

(No ``from __future__ import annotations`` here: typer reads the annotations of the command
that ``register`` defines, with typer imported there, not in this module.)
"""

import argparse
import sys
from pathlib import Path

from ._light import Parser, text_table

HELP = "Simulate SCENARIO and write run.json and Parquet tables (and, with --plots, PNG plots) to OUT."


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="pathtwin sim", description=HELP)
    p.add_argument("scenario", type=Path, metavar="SCENARIO", help="Scenario TOML (topology + [[flow]] workload).")
    p.add_argument("-o", "--out", type=Path, required=True, metavar="OUT", help="Result directory to write.")
    p.add_argument("--seed", type=int, help="Override [run] seed.")
    p.add_argument("--duration", help="Override [run] duration, e.g. 600s.")
    p.add_argument("--plots", action=argparse.BooleanOptionalAction, default=False,
                   help="Also draw PNG plots into OUT (default: no; `pathtwin plot OUT` draws them later).")
    p.add_argument("-q", "--quiet", action="store_true", help="Print nothing but errors.")
    return p


def main(argv: list[str]) -> int:
    """Runs `pathtwin sim ARGV`; user errors raise ``PathtwinError`` (``cli.main`` prints them)."""
    args = parser().parse_args(argv)
    from .. import _native
    from ..config import ConfigSource, config_text, loads, native_call
    from ..sim import simulate

    text, fmt, origin = config_text(args.scenario)
    source: ConfigSource = args.scenario
    if args.seed is not None or args.duration is not None:
        native_call(_native.validate_config, text, fmt, origin)
        cfg = loads(text, fmt)
        run = cfg.setdefault("run", {})
        if args.seed is not None:
            run["seed"] = args.seed
        if args.duration is not None:
            run["duration"] = args.duration
        source = cfg

    def warn(w: str) -> None:
        print(f"pathtwin: warning: {w}", file=sys.stderr)

    res = simulate(source, out=args.out, progress=not args.quiet, on_warning=warn)
    if args.plots:
        from ..plot import plot_result

        plot_result(res)
    if not args.quiet:
        print_flows(res)
    if res.run.get("interrupted"):
        print(f"interrupted at {res.run['simulated_s']:.2f} s simulated; kept what was measured in {args.out}", file=sys.stderr)
        return 130
    return 0


def print_flows(res) -> None:
    """The per-flow summary (and markers, if any) of a simulated or emulated run, as plain
    aligned columns: rich's import alone took 40 % of a short run's wall time."""
    f = res.table_columns("flows")
    n = len(f["label"])
    emulated = res.run.get("engine") == "emu"
    span = res.run["emulated_s"] if emulated else res.run["simulated_s"]
    print(f"{n} flows, {span:.1f} s {'emulated' if emulated else 'simulated'} in {res.run['wall_time_s']:.2f} s")
    rows = [(f["label"][i], f"{f['src'][i]}→{f['dst'][i]}", f["cc"][i], f"{f['goodput_bps'][i] / 1e6:.3f}",
             str(f["retransmits"][i]), str(f["timeouts"][i]), f"{f['rtt_min_ms'][i]:.2f}", f"{f['rtt_mean_ms'][i]:.2f}")
            for i in range(min(n, 50))]
    print(text_table(("flow", "from→to", "cc", "goodput Mbit/s", "retx", "timeouts", "min RTT ms", "mean RTT ms"), rows))
    if n > 50:
        print(f"... {n - 50} more in flows.parquet")
    m = res.table_columns("markers")
    if m is not None and len(m["marker"]):
        secs = max(span, 1e-9)
        marker_rows = []
        for i in range(len(m["marker"])):
            total = m["in_bytes"][i] + m["out_bytes"][i]
            marker_rows.append((m["marker"][i], m["kind"][i], f"{m['in_bytes'][i] * 8 / secs / 1e6:.3f}",
                         f"{m['out_bytes'][i] * 8 / secs / 1e6:.3f}", f"{m['in_bytes'][i] / total:.2f}" if total else "-",
                         str(m["green_packets"][i]), str(m["yellow_packets"][i]), str(m["red_packets"][i]),
                         str(m["protected_packets"][i])))
        print("markers")
        print(text_table(("marker", "kind", "IN Mbit/s", "OUT Mbit/s", "IN share", "green", "yellow", "red", "protected"),
                         marker_rows))
    if res.path is not None:
        print(f"results in {res.path}")


def register(app) -> None:
    """Adds `pathtwin sim` to the typer application: listed in the help, run by ``main``."""
    import typer

    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, add_help_option=False,
                 help=HELP + " (pathtwin sim --help: its options)")
    def sim(ctx: typer.Context) -> None:
        raise typer.Exit(main(list(ctx.args)))
