"""`pathtwin measure --emulate GROUND_TRUTH.toml [HOST... | --hosts a,b,c] -o model.toml` (or
`--simulate`: the same measurement in a simulation of the ground truth, in seconds), and
`pathtwin measure [NAME=]HOST[:PORT]... --token-file FILE -o model.toml` between real hosts
running `pathtwin measure agent`: measures every ordered pair of hosts (base RTT, ABW with 1..N flows, shared bottlenecks)
and writes a paths topology, with rich progress bars per pair and step, a resume file
beside the output, and every value's confidence in it; `pathtwin measure validate
MODEL.toml` repeats the measurement's throughput tests in an emulation of the model and
compares; `pathtwin measure agent` is the daemon a real host runs (``measure.agent``). The
work is ``pathtwin.measure``'s; this module parses, draws and reports.

`measure` is a group whose default command is `paths`: ``pathtwin measure ARGS`` is
``pathtwin measure paths ARGS`` unless ARGS start with a subcommand's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, NoReturn, Optional

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


def _resuming(state: Path) -> Path:
    """Says so if a resume file ``state`` is there to resume from; returns it."""
    if state.exists():
        print(f"resuming from {state}")
    return state


def _interrupted(bars: "_Bars", state: Path) -> NoReturn:
    """Ctrl-C during a resumable run: the bars put away, where what it measured is kept, and
    the shell's exit status for an interrupt."""
    bars.close()
    print(f"interrupted: what was measured is kept in {state}; run the same command again to resume")
    raise typer.Exit(130) from None


def _time(text: str, what: str) -> float:
    from ..config import parse_quantity

    return parse_quantity("time", text, what)


def paths(
    hosts: Optional[List[str]] = typer.Argument(None, help="Hosts to measure: real hosts' agents as [NAME=]HOST[:PORT] "
                                                "(port 17100 by default), or with --emulate/--simulate hosts of the "
                                                "ground truth."),
    emulate: Optional[Path] = typer.Option(None, "--emulate", help="Measure between hosts of an emulation of this "
                                           "topology, its [[flow]] cross traffic running as real kernel TCP (root)."),
    simulate: Optional[Path] = typer.Option(None, "--simulate", help="Measure between hosts of a simulation of this "
                                            "topology, with its [[flow]] cross traffic: the same probes and tests on "
                                            "the simulator's clock, in seconds."),
    hosts_opt: Optional[str] = typer.Option(None, "--hosts", help="Hosts to measure, comma-separated (default with "
                                            "--emulate: the hosts no [[flow]] uses)."),
    out: Path = typer.Option(..., "--out", "-o", help="The model to write (TOML: [[path]] and [[shared]]); the resume "
                             "file and the measurement's record go beside it (NAME.measure.json)."),
    flows: str = typer.Option("1,2,4,8", "--flows", help="Flow counts of each direction's reactivity table."),
    duration: str = typer.Option("10s", "--duration", help="Length of each throughput test."),
    probe_interval: str = typer.Option("99ms", "--probe-interval", help="Time between probe rounds."),
    probe_duration: str = typer.Option("15s", "--probe-duration", help="Length of the probe series."),
    port: int = typer.Option(17000, "--port", help="UDP port of the probes; the TCP tests use the next one."),
    together: bool = typer.Option(True, "--together/--no-together", help="Also load paths together: each host's paths "
                                  "out and in (access links) and the classes of paths of several sources whose delays "
                                  "correlate, written as [[shared]] classes of paths."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", help="Real hosts: the file (mode 0600) holding "
                                              "the token their agents were started with."),
    cc: Optional[str] = typer.Option(None, "--cc", help="Congestion control of the throughput tests' flows (e.g. "
                                     "cubic; default: each source's, which differs between machines). Every test "
                                     "records the one it ran."),
) -> None:
    """(default) Measure paths between hosts (base RTT, ABW and reactivity with 1..N TCP
    flows, shared bottlenecks) and write a paths topology for `pathtwin sim` and `pathtwin
    emu`. An interrupted run keeps what it measured; the same command resumes it."""
    from ..measure import Settings, parse_flows

    if emulate is not None and simulate is not None:
        raise PathtwinError("--emulate and --simulate: give one ground truth, emulated or simulated")
    if simulate is not None:
        if token_file is not None:
            raise PathtwinError("--token-file is for real hosts' agents; --simulate measures simulated hosts")
        if not simulate.is_file():
            raise PathtwinError(f"--simulate {simulate}: " + ("is a directory, expected a TOML file" if simulate.is_dir() else "no such file"))
    if emulate is None and simulate is None and token_file is None:
        raise PathtwinError("measuring real hosts needs `pathtwin measure agent` running on each and --token-file FILE "
                            "with their token; or measure hosts of an emulated ground truth with --emulate TOPOLOGY.toml")
    if emulate is not None and token_file is not None:
        raise PathtwinError("--token-file is for real hosts' agents; --emulate measures emulated hosts")
    if emulate is not None and not emulate.is_file():
        raise PathtwinError(f"--emulate {emulate}: " + ("is a directory, expected a TOML file" if emulate.is_dir() else "no such file"))
    if hosts and hosts_opt is not None:
        raise PathtwinError("name the hosts either as arguments or with --hosts, not both")
    names = list(hosts) if hosts else (hosts_opt.split(",") if hosts_opt is not None else None)
    settings = Settings(flows=parse_flows(flows), duration_s=_time(duration, "--duration"),
                        probe_interval_s=_time(probe_interval, "--probe-interval"),
                        probe_duration_s=_time(probe_duration, "--probe-duration"), port=port, together=together,
                        cc=cc)
    settings.check()
    if out.is_dir():
        raise PathtwinError(f"-o {out}: is a directory; give the model's file name (e.g. {out / 'model.toml'})")
    if not out.parent.is_dir():
        raise PathtwinError(f"-o {out}: directory {out.parent} does not exist")
    if simulate is not None:
        _run_simulated(simulate, names, settings, out)
        return
    if emulate is None:
        if not names:
            raise PathtwinError("name the real hosts' agents: pathtwin measure HOST[:PORT] HOST[:PORT]... --token-file FILE")
        if len(names) < 2:
            raise PathtwinError(f"a measurement needs at least two hosts, got {len(names)}")
        assert token_file is not None
        from ..measure.protocol import read_token
        from ..measure.remote import parse_agent

        for n in names:
            parse_agent(n)
        read_token(token_file)  # its refusal before anything connects
    _run(emulate, names, settings, out, token_file)


def _run(emulate: Optional[Path], names: Optional[list[str]], settings, out: Path, token_file: Optional[Path]) -> None:
    from ..measure import measure_emulated
    from ..measure.remote import measure_agents
    from ..measure.state import state_path

    state = _resuming(state_path(out))
    bars = _Bars()
    try:
        if emulate is not None:
            m = measure_emulated(emulate, hosts=names, settings=settings, out=out, progress=bars)
        else:
            assert names is not None and token_file is not None
            m = measure_agents(names, token_file, settings=settings, out=out, progress=bars)
    except KeyboardInterrupt:
        _interrupted(bars, state)
    finally:
        bars.close()
    _report(m)


def _run_simulated(truth: Path, names: Optional[list[str]], settings, out: Path) -> None:
    import sys

    from ..measure.simulated import measure_simulated
    from ..measure.state import state_path

    _resuming(state_path(out))
    try:
        m = measure_simulated(truth, hosts=names, settings=settings, out=out, progress=sys.stderr.isatty())
    except KeyboardInterrupt:
        print("interrupted: a simulated measurement records nothing until its simulation ends; run it again")
        raise typer.Exit(130) from None
    _report(m)


def _report(m) -> None:
    """The findings in short: per ordered pair base RTT and ABW by flow count, per source
    the shared classes and where the tests could not decide."""
    from ..measure.session import cc_note, queue_note
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
    for g in f.get("together", []):
        what = "paths of several sources" if g["label"].startswith("paths") else g["label"]
        print(f"together, {what} ({len(g['members'])} paths): {g['abw_bps'] / 1e6:.2f} Mbit/s, alone "
              f"{g['alone_sum_bps'] / 1e6:.2f} in sum" + queue_note(g) + (" -> a shared class" if g["class"] else ""))
    print(cc_note(f["cc"]))
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
                                  "once (NSDI'09 Figure 9)."),
    together_flows: Optional[int] = typer.Option(None, "--together-flows", help="With a ground truth: flows per pair when "
                                                 "all run at once (default: the largest of --flows)."),
    engine: str = typer.Option("emu", "--engine", help="With a ground truth: run the experiments in emulations (emu, "
                               "root) or in simulations (sim, seconds)."),
    runs: int = typer.Option(1, "--runs", help="With a ground truth: run each path's experiment this many times where "
                             "there is cross traffic (the truth), grade against their mean, and report how far one run "
                             "of the truth lies from its others."),
    cc: Optional[str] = typer.Option(None, "--cc", help="With a ground truth: congestion control of the foreground "
                                     "flows in all three environments (default: each host's; give the one the model "
                                     "was measured with). MODEL alone repeats each test with the one it recorded."),
) -> None:
    """Check a model: repeat the measurement's throughput tests in its twin and compare with
    what was measured (MODEL), or run the same foreground experiments in the ground truth,
    in the model and in a link-emulator baseline and grade both against the truth
    (GROUND_TRUTH MODEL -o DIR: validation.json, NSDI'09 §4.5 Figures 8 and 9). Root, except
    with --engine sim. An interrupted emulated grading keeps what it measured
    (DIR/validation.state.json); the same command resumes it."""
    if engine not in ("emu", "sim"):
        raise PathtwinError(f"--engine {engine}: expected sim or emu")
    if len(files) == 2:
        _grade(files[0], files[1], out, flows, duration, together, together_flows, engine, runs, cc)
        return
    if cc is not None:
        raise PathtwinError("--cc: a model alone is checked with the congestion control each of its tests recorded; "
                            "--cc grades GROUND_TRUTH MODEL")
    if runs != 1:
        raise PathtwinError("--runs: a model alone is checked against its measurement once; --runs grades GROUND_TRUTH MODEL")
    if engine != "emu":
        raise PathtwinError("--engine: a model alone is checked against its measurement in an emulation; --engine sim "
                            "grades GROUND_TRUTH MODEL")
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


def _grade(truth: Path, model: Path, out: Optional[Path], flows: str, duration: str, together: bool,
           together_flows: Optional[int], engine: str, runs: int, cc: Optional[str]) -> None:
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
    from ..measure.grade import STATE_FILE

    state = _resuming(out / STATE_FILE) if engine == "emu" else None
    bars = _Bars()
    try:
        g = grade(truth, model, out, counts, secs, together=together, progress=bars, together_flows=together_flows,
                  engine=engine, runs=runs, cc=cc)
    except KeyboardInterrupt:
        if state is None:
            raise
        _interrupted(bars, state)
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
        floor = [f"{sm[f'{experiment}_truth_run_within_{b}pct'] * 100:.0f} % within {b} %" for b in (10, 20)
                 if sm.get(f"{experiment}_truth_run_within_{b}pct") is not None]
        if floor:
            print(f"{experiment}: one run of the truth against the mean of its others: " + ", ".join(floor))
    for b in rec["shared_bottlenecks"]:
        where = (f"from {b['source']} to {{{', '.join(b['destinations'])}}}" if "source" in b
                 else f"of {{{', '.join(b['paths'])}}}")
        print(f"all pairs at once, through the bottleneck {where}: truth "
              f"{mbps(b['truth_bps'])}, model {mbps(b['model_bps'])} ({err(b['model_error'])}), link {mbps(b['link_bps'])} "
              f"({err(b['link_error'])}) Mbit/s")
    if sm.get("together_model_worst"):
        print("all pairs at once, the model's largest errors: " + "; ".join(sm["together_model_worst"]))
    sh, sp = rec["shared"], rec["shared_paths"]
    print(f"shared bottlenecks: precision {sh['precision']:.2f}, recall {sh['recall']:.2f} (per source); "
          f"{sp['precision']:.2f}, {sp['recall']:.2f} (paths of any sources)")
    print("foreground congestion control: " + (f"{rec['cc']} (--cc)" if rec["cc"] else "each host's default (--cc chooses one)"))
    print(f"wrote {out / 'validation.json'} and the error CDFs beside it")


def agent(
    token_file: Path = typer.Option(..., "--token-file", help="The shared token (at least 16 bytes) in a file only its "
                                    "owner may read (mode 0600)."),
    listen: str = typer.Option("0.0.0.0:17100", "--listen", help="ADDR:PORT to listen on for the controller."),
    max_rate: str = typer.Option("1gbit", "--max-rate", help="Most this host sends (probes, and each test's flows "
                                 "together, paced by the kernel)."),
    max_duration: str = typer.Option("60s", "--max-duration", help="Longest an operation may run."),
    max_flows: int = typer.Option(16, "--max-flows", help="Most TCP flows one test may open."),
    allow: str = typer.Option("", "--allow", help="CIDR,... this host may send probes and flows to (none: it only "
                              "receives)."),
    ports: str = typer.Option("1024-65535", "--ports", help="LOW-HIGH: ports its servers and flows may use."),
    address: Optional[str] = typer.Option(None, "--address", help="The IPv4 address other hosts reach this one at "
                                          "(default: the one the controller reached it at); its servers listen there."),
    name: Optional[str] = typer.Option(None, "--name", help="This host's name in the model (default: its host name)."),
) -> None:
    """Run the measurement agent of a real host: it answers an authenticated `pathtwin measure`
    with the measurement traffic it asks for (echo server, probe series, TCP sink, parallel
    TCP flows), within these limits, and refuses anything else."""
    from ..measure.agent import run

    run(*_agent_config(token_file, listen, max_rate, max_duration, max_flows, allow, ports, address, name))


def _agent_config(token_file: Path, listen: str, max_rate: str, max_duration: str, max_flows: int, allow: str,
                  ports: str, address: Optional[str], name: Optional[str]):
    """The agent's settings, each checked with a one-line error naming its option."""
    import ipaddress
    import re
    import socket

    from ..config import parse_quantity
    from ..measure.agent import AgentConfig
    from ..measure.operations import Limits
    from ..measure.protocol import read_token

    host, sep, port_text = listen.rpartition(":")
    try:
        lport = int(port_text)
        ipaddress.IPv4Address(host)
    except ValueError:
        raise PathtwinError(f"--listen {listen}: expected ADDR:PORT with an IPv4 address (e.g. 0.0.0.0:17100)") from None
    if not sep or not 0 <= lport <= 65535:
        raise PathtwinError(f"--listen {listen}: expected ADDR:PORT with a port in 0..65535")
    rate = parse_quantity("rate", max_rate, "--max-rate")
    if not rate > 0:
        raise PathtwinError(f"--max-rate {max_rate}: must be positive")
    duration = _time(max_duration, "--max-duration")
    if not duration > 0:
        raise PathtwinError(f"--max-duration {max_duration}: must be positive")
    if max_flows < 1:
        raise PathtwinError(f"--max-flows {max_flows}: must be at least 1")
    nets = []
    for item in filter(None, (x.strip() for x in allow.split(","))):
        try:
            nets.append(ipaddress.IPv4Network(item, strict=False))
        except ValueError:
            raise PathtwinError(f"--allow: {item!r} is not an IPv4 CIDR (e.g. 10.0.0.0/24 or 192.0.2.7)") from None
    m = re.fullmatch(r"(\d+)-(\d+)", ports.strip())
    if not m or not 1 <= int(m[1]) <= int(m[2]) <= 65535:
        raise PathtwinError(f"--ports {ports}: expected LOW-HIGH within 1..65535 (e.g. 17000-17099)")
    if address is not None:
        try:
            address = str(ipaddress.IPv4Address(address))
        except ValueError:
            raise PathtwinError(f"--address {address}: not an IPv4 address") from None
    if name is None:
        name = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname().split(".")[0]) or "agent"
    elif not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise PathtwinError(f"--name {name!r}: may hold only letters, digits, '-' and '_'")
    token = read_token(token_file)
    limits = Limits(max_rate_bps=rate, max_duration_s=duration, max_flows=max_flows, allow=nets,
                    ports=(int(m[1]), int(m[2])))
    # Servers listen where the agent was reached for measurement: --address, else the
    # --listen address if it is one (two agents on one machine then do not collide).
    bind = address or (host if host != "0.0.0.0" else None)
    return AgentConfig(token=token, limits=limits, name=name, address=address, bind=bind), (host, lport)


def register(app: typer.Typer) -> None:
    """Adds `pathtwin measure` (default: `paths`), `pathtwin measure validate` and `pathtwin
    measure agent`."""
    group = typer.Typer(cls=_DefaultGroup, no_args_is_help=True, rich_markup_mode=None,
                        help="Measure paths between hosts into a path model (`pathtwin measure [paths] ...`), "
                             "and check the model's twin against the measurement (`pathtwin measure validate`).")
    group.command(DEFAULT)(paths)
    group.command()(validate)
    group.command()(agent)
    app.add_typer(group, name="measure")
