"""`pathtwin measure --emulate GROUND_TRUTH.toml [HOST... | --hosts a,b,c] -o model.toml`:
measures every ordered pair of hosts (base RTT, ABW with 1..N flows, shared bottlenecks)
and writes a paths topology, with rich progress bars per pair and step, a resume file
beside the output, and every value's confidence in it; `pathtwin measure validate
MODEL.toml` repeats the measurement's throughput tests in an emulation of the model and
compares. The work is ``pathtwin.measure``'s; this module parses, draws and reports.

`measure` is a group whose default command is `paths`: ``pathtwin measure ARGS`` is
``pathtwin measure paths ARGS`` unless ARGS start with a subcommand's name.

Real hosts (``pathtwin measure HOST...`` without ``--emulate``) need an agent on each host,
which does not exist yet: the command says so in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer
from typer.core import TyperGroup

from ..errors import PathtwinError

#: The subcommand `pathtwin measure ARGS` runs when ARGS name no other.
DEFAULT = "paths"


class _DefaultGroup(TyperGroup):
    """A group that hands arguments naming none of its subcommands to ``DEFAULT``."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [DEFAULT, *args]
        return super().parse_args(ctx, args)


class _Bars:
    """rich progress bars: one per source for its probe series, one per ordered pair for its
    throughput tests (a step each), and one for the whole measurement."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[step]}"), TimeElapsedColumn())
        self.tasks: dict[str, Any] = {}
        self.total: Any = None
        self.started = False

    def plan(self, steps: list[tuple[str, str, float]]) -> None:
        self.bar.start()
        self.started = True
        self.total = self.bar.add_task("all", total=len(steps), step="")
        for pair, step, _s in steps:
            key = self._key(pair, step)
            if key not in self.tasks:
                label = f"probes from {pair}" if step == "probe" else f"{pair} throughput"
                self.tasks[key] = self.bar.add_task(label, total=0, step="")
            self.bar.update(self.tasks[key], total=self.bar.tasks[self.tasks[key]].total + 1)

    def start(self, pair: str, step: str) -> None:
        self.bar.update(self.tasks[self._key(pair, step)], step=step)

    def done(self, pair: str, step: str) -> None:
        self.bar.update(self.tasks[self._key(pair, step)], advance=1, step="")
        self.bar.update(self.total, advance=1)

    def close(self) -> None:
        if self.started:
            self.bar.stop()
            self.started = False

    @staticmethod
    def _key(pair: str, step: str) -> str:
        return f"probe {pair}" if step == "probe" else pair


def _time(text: str, what: str) -> float:
    from ..config import parse_quantity

    return parse_quantity("time", text, what)


def paths(
    hosts: Optional[List[str]] = typer.Argument(None, help="Hosts to measure (with --emulate: hosts of the ground truth)."),
    emulate: Optional[Path] = typer.Option(None, "--emulate", help="Measure between hosts of an emulation of this "
                                           "topology, its [[flow]] cross traffic running as real kernel TCP (root)."),
    hosts_opt: Optional[str] = typer.Option(None, "--hosts", help="Hosts to measure, comma-separated (default with "
                                            "--emulate: the hosts no [[flow]] uses)."),
    out: Path = typer.Option(..., "--out", "-o", help="The model to write (TOML: [[path]] and [[shared]]); the resume "
                             "file and the measurement's record go beside it (NAME.measure.json)."),
    flows: str = typer.Option("1,2,4,8", "--flows", help="Flow counts of each direction's reactivity table."),
    duration: str = typer.Option("10s", "--duration", help="Length of each throughput test."),
    probe_interval: str = typer.Option("99ms", "--probe-interval", help="Time between probe rounds."),
    probe_duration: str = typer.Option("15s", "--probe-duration", help="Length of the probe series."),
    port: int = typer.Option(47000, "--port", help="UDP port of the probes; the TCP tests use the next one."),
) -> None:
    """(default) Measure paths between hosts (base RTT, ABW and reactivity with 1..N TCP
    flows, shared bottlenecks) and write a paths topology for `pathtwin sim` and `pathtwin
    emu`. An interrupted run keeps what it measured; the same command resumes it."""
    from ..measure import Settings, parse_flows

    if emulate is None:
        raise PathtwinError("measuring real hosts needs `pathtwin measure agent` on each, which is not available yet; "
                            "measure hosts of an emulated ground truth with --emulate TOPOLOGY.toml")
    if not emulate.is_file():
        raise PathtwinError(f"--emulate {emulate}: " + ("is a directory, expected a TOML file" if emulate.is_dir() else "no such file"))
    if hosts and hosts_opt is not None:
        raise PathtwinError("name the hosts either as arguments or with --hosts, not both")
    names = list(hosts) if hosts else (hosts_opt.split(",") if hosts_opt is not None else None)
    settings = Settings(flows=parse_flows(flows), duration_s=_time(duration, "--duration"),
                        probe_interval_s=_time(probe_interval, "--probe-interval"),
                        probe_duration_s=_time(probe_duration, "--probe-duration"), port=port)
    settings.check()
    if out.is_dir():
        raise PathtwinError(f"-o {out}: is a directory; give the model's file name (e.g. {out / 'model.toml'})")
    if not out.parent.is_dir():
        raise PathtwinError(f"-o {out}: directory {out.parent} does not exist")
    _run(emulate, names, settings, out)


def _run(emulate: Path, names: Optional[list[str]], settings, out: Path) -> None:
    from ..measure import measure_emulated
    from ..measure.state import state_path

    state = state_path(out)
    if state.exists():
        print(f"resuming from {state}")
    bars = _Bars()
    try:
        m = measure_emulated(emulate, hosts=names, settings=settings, out=out, progress=bars)
    except KeyboardInterrupt:
        bars.close()
        print(f"interrupted: what was measured is kept in {state}; run the same command again to resume")
        raise typer.Exit(130) from None
    finally:
        bars.close()
    _report(m)


def _report(m) -> None:
    """The findings in short: per ordered pair base RTT and ABW by flow count, per source
    the shared classes and where the tests could not decide."""
    from ._light import text_table

    f = m.findings
    counts = sorted({int(n) for t in f["throughput"].values() for n in t})
    rows = []
    for pair, r in f["rtt"].items():
        t = f["throughput"][pair]
        rows.append((pair, f"{r['rtt_min_ms']:.3f}" if r.get("rtt_min_ms") is not None else "-",
                     *(f"{t[str(n)]['abw_bps'] / 1e6:.2f}" for n in counts)))
    print(text_table(("path", "base RTT ms", *(f"ABW {n} flow{'s' if n > 1 else ''} Mbit/s" for n in counts)), rows))
    for s, c in f["shared"].items():
        if "error" in c:
            print(f"from {s}: not tested ({c['error']})")
            continue
        classes = "; ".join("{" + ", ".join(x) + "}" + _shared_abw(c["shared_abw_bps"][i])
                            for i, x in enumerate(c["classes"])) or "no shared bottleneck"
        line = f"from {s}: {classes}"
        if c["disagreements"]:
            line += "; Rubenstein's test disagrees on " + ", ".join("/".join(p) for p in c["disagreements"])
        print(line)
    print(f"model: {m.out}")
    print(f"record (every value's samples and spread, both tests' verdicts): {m.state}")


def _shared_abw(by_flows: dict) -> str:
    """NSDI'09 §2.3's ABW of a shared queue with n flows on each of its paths."""
    if not by_flows:
        return ""
    return " (shared ABW, n flows per path: " + ", ".join(f"{n}: {v / 1e6:.2f}" for n, v in by_flows.items()) + " Mbit/s)"


def validate(
    files: List[Path] = typer.Argument(..., help="MODEL.toml (a model `pathtwin measure` wrote), or GROUND_TRUTH.toml "
                                       "MODEL.toml to grade the model against the ground truth it was measured from."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="MODEL alone: write the comparison as JSON. With a "
                                       "ground truth: the directory for validation.json and the error CDFs."),
    flows: str = typer.Option("1,2,4,8", "--flows", help="With a ground truth: flow counts of the per-path experiments."),
    duration: str = typer.Option("10s", "--duration", help="With a ground truth: length of each experiment."),
    together: bool = typer.Option(True, "--together/--no-together", help="With a ground truth: also run every pair at "
                                  "once, one flow each (NSDI'09 Figure 9)."),
) -> None:
    """Check a model: repeat the measurement's throughput tests in its twin and compare with
    what was measured (MODEL), or run the same foreground experiments in the ground truth,
    in the model and in a link-emulator baseline and grade both against the truth
    (GROUND_TRUTH MODEL -o DIR: validation.json, NSDI'09 §4.5 Figures 8 and 9). Root."""
    if len(files) == 2:
        _grade(files[0], files[1], out, flows, duration, together)
        return
    if len(files) != 1:
        raise PathtwinError(f"validate takes MODEL.toml or GROUND_TRUTH.toml MODEL.toml, not {len(files)} files")
    from ..measure.validate import WITHIN
    from ..measure.validate import validate as run_validation
    from ._light import text_table

    bars = _Bars()
    try:
        v = run_validation(files[0], out=out, progress=bars)
    finally:
        bars.close()
    rows = [(r["pair"], str(r["flows"]), f"{r['measured_bps'] / 1e6:.2f}", f"{r['twin_bps'] / 1e6:.2f}", f"{r['error'] * 100:+.1f}%")
            for r in v.rows]
    print(text_table(("path", "flows", "measured Mbit/s", "twin Mbit/s", "error"), rows))
    print(f"{v.within * 100:.0f} % of the tests within {WITHIN * 100:.0f} % (NSDI'09 Figure 8: 80 % of its paths)")


def _grade(truth: Path, model: Path, out: Optional[Path], flows: str, duration: str, together: bool) -> None:
    from ..measure import parse_flows
    from ..measure.grade import grade
    from ._light import text_table

    for f in (truth, model):
        if not f.is_file():
            raise PathtwinError(f"{f}: " + ("is a directory, expected a TOML file" if f.is_dir() else "no such file"))
    if out is None:
        raise PathtwinError("-o DIR: grading against a ground truth writes validation.json and plots into a directory")
    if out.exists() and not out.is_dir():
        raise PathtwinError(f"-o {out}: exists and is not a directory")
    counts, secs = parse_flows(flows), _time(duration, "--duration")
    if secs < 1.0:
        raise PathtwinError(f"--duration: {secs:g} s is too short for TCP to leave slow start; give at least 1 s")
    bars = _Bars()
    try:
        g = grade(truth, model, out, counts, secs, together=together, progress=bars)
    finally:
        bars.close()
    rec = g.record
    mbps = lambda v: f"{v / 1e6:.2f}"  # noqa: E731
    err = lambda v: "-" if v is None else f"{v * 100:+.1f}%"  # noqa: E731
    rows = [(f"{c['src']}->{c['dst']}", c["experiment"], str(c["flows"]), mbps(c["truth_bps"]), mbps(c["model_bps"]),
             err(c["model_error"]), mbps(c["link_bps"]), err(c["link_error"])) for c in rec["cases"]]
    print(text_table(("path", "experiment", "flows", "truth Mbit/s", "model Mbit/s", "error", "link Mbit/s", "error"), rows))
    sm = rec["summary"]
    for experiment in ("alone", "together"):
        parts = [f"{env} {sm[f'{experiment}_{env}_within_{b}pct'] * 100:.0f} % within {b} %"
                 for env in ("model", "link") for b in (10, 20) if sm.get(f"{experiment}_{env}_within_{b}pct") is not None]
        if parts:
            print(f"{experiment}: " + ", ".join(parts))
    for b in rec["shared_bottlenecks"]:
        print(f"all pairs at once, through the bottleneck from {b['source']} to {{{', '.join(b['destinations'])}}}: truth "
              f"{mbps(b['truth_bps'])}, model {mbps(b['model_bps'])} ({err(b['model_error'])}), link {mbps(b['link_bps'])} "
              f"({err(b['link_error'])}) Mbit/s")
    sh = rec["shared"]
    print(f"shared bottlenecks: precision {sh['precision']:.2f}, recall {sh['recall']:.2f}")
    print(f"wrote {out / 'validation.json'} and the error CDFs beside it")


def register(app: typer.Typer) -> None:
    """Adds `pathtwin measure` (default: `paths`) and `pathtwin measure validate`."""
    group = typer.Typer(cls=_DefaultGroup, no_args_is_help=True, rich_markup_mode=None,
                        help="Measure paths between hosts into a path model (`pathtwin measure [paths] ...`), "
                             "and check the model's twin against the measurement (`pathtwin measure validate`).")
    group.command(DEFAULT)(paths)
    group.command()(validate)
    app.add_typer(group, name="measure")
