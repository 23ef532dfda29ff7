"""`pathtwin emu up|exec|stats|down|list|cleanup|run` and `pathtwin shell`.

``run`` starts an emulation, runs either a script against it or, without ``--script``, the
topology's ``[[flow]]`` workload (``pathtwin.emulate``: the simulator's workload over the
hosts' kernel TCP, written as the same ``flows`` table), and stops it.

``up`` starts a detached emulator (``python -m pathtwin.emu_daemon``) and returns once its
hosts exist; the others find running emulations through ``/run/pathtwin/RUN/state.json``
(hosts) and ``stats.json`` (live counters, refreshed every 250 ms by the emulator). With one
emulation running, ``--run`` can be left out. Every user mistake is a ``PathtwinError``:
one line, exit status 2. ``pathtwin.emulation`` (26 ms of imports) is imported when a
command runs, not when `pathtwin` starts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import PathtwinError

group = typer.Typer(help="Run real applications across emulated paths.", no_args_is_help=True,
                    rich_markup_mode=None)

RunOpt = typer.Option(None, "--run", help="Run id (default: the only running emulation).")


def _require_root() -> None:
    """The emulator's check for root, imported when a command runs."""
    from ..emulation import require_root

    require_root()


def _live_runs() -> list[str]:
    from .. import _native
    from ..emulation import STATE_ROOT

    return [r for r in _native.emu_live_runs() if (STATE_ROOT / r / "state.json").is_file()]


def _pick_run(run: Optional[str]) -> str:
    live = _live_runs()
    if run is not None:
        if run not in live:
            raise PathtwinError(f"no running emulation with run id {run!r}" + (f"; running: {', '.join(live)}" if live else ""))
        return run
    if not live:
        raise PathtwinError("no emulation is running (start one with `pathtwin emu up TOPOLOGY.toml`)")
    if len(live) > 1:
        raise PathtwinError(f"{len(live)} emulations are running ({', '.join(live)}); choose one with --run")
    return live[0]


def _state(run: str) -> dict:
    from ..emulation import STATE_ROOT

    try:
        return json.loads((STATE_ROOT / run / "state.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PathtwinError(f"run {run}: cannot read its state ({e})") from None


def _strip_separator(cmd: Optional[List[str]]) -> list[str]:
    """The command after ``--`` (click keeps the separator when interspersed args are off)."""
    cmd = list(cmd or [])
    return cmd[1:] if cmd[:1] == ["--"] else cmd


def _print_hosts(run_id: str, hosts: list[dict], warnings: list[str]) -> None:
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    typer.echo(f"run {run_id}")
    width = max(len(h["name"]) for h in hosts)
    for h in hosts:
        typer.echo(f"  {h['name']:<{width}}  {h['ipv4']:<15}  {h['ipv6']:<24}  netns {h['netns']}")


@group.command()
def up(
    topology: Path = typer.Argument(..., help="Topology TOML (paths or links view)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Result directory written at `emu down` (default ./pathtwin-emu-RUN)."),
    pcap: Optional[Path] = typer.Option(None, "--pcap", help="Directory for one capture per host."),
    cc: Optional[str] = typer.Option(None, "--cc", help="Kernel congestion control for every host (e.g. cubic, reno, bbr)."),
    spin_us: float = typer.Option(0.0, "--spin-us", help="Wake this long before each release and poll through to it."),
    high_priority: bool = typer.Option(True, "--high-priority/--no-high-priority", help="Run the emulator loop at nice -20, SCHED_FIFO while mostly idle (default on)."),
    cpu_latency_qos: bool = typer.Option(True, "--cpu-latency-qos/--no-cpu-latency-qos",
                                         help="Keep idle CPUs polling while running (/dev/cpu_dma_latency = 0; default on)."),
    offload: bool = typer.Option(True, "--offload/--no-offload",
                                 help="Let hosts hand over 64-KB TCP super-packets, modelled segment by segment (default on; off with --pcap)."),
) -> None:
    """Start an emulation in the background and print its hosts and addresses."""
    _require_root()
    if not topology.is_file():
        raise PathtwinError(f"{topology}: no such file")
    from ..emulation import new_run_id

    run_id = new_run_id()
    out = out or Path(f"pathtwin-emu-{run_id}")
    log = Path(f"/tmp/pathtwin-emu-{run_id}.log")
    args = [sys.executable, "-m", "pathtwin.emu_daemon", str(topology.resolve()), "--run-id", run_id,
            "--out", str(out.resolve()), "--spin-us", str(spin_us)]
    if pcap is not None:
        args += ["--pcap", str(pcap.resolve())]
    if cc is not None:
        args += ["--cc", cc]
    if not high_priority:
        args.append("--no-high-priority")
    if not cpu_latency_qos:
        args.append("--no-cpu-latency-qos")
    if not offload:
        args.append("--no-offload")
    with open(log, "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None  # a pipe
    line = proc.stdout.readline().decode(errors="replace").strip()
    proc.stdout.close()
    if not line:
        proc.wait()
        tail = log.read_text(errors="replace").strip().splitlines()
        raise PathtwinError(f"the emulator exited during start-up: {tail[-1] if tail else 'no message'} (log: {log})")
    msg = json.loads(line)
    if "error" in msg:
        proc.wait()
        raise PathtwinError(msg["error"])
    _print_hosts(msg["run_id"], msg["hosts"], msg["warnings"])
    typer.echo(f"results at `pathtwin emu down`: {out}")


@group.command("exec", context_settings={"allow_interspersed_args": False})
def exec_(
    host: str = typer.Argument(..., help="Host name."),
    cmd: List[str] = typer.Argument(..., help="Command and arguments (after --)."),
    run: Optional[str] = RunOpt,
) -> None:
    """Run a command inside a host (its exit status is returned)."""
    _require_root()
    cmd = _strip_separator(cmd)
    if not cmd:
        raise PathtwinError("no command given (usage: pathtwin emu exec HOST -- CMD ...)")
    st = _state(_pick_run(run))
    match = [h for h in st["hosts"] if h["name"] == host]
    if not match:
        raise PathtwinError(f"no host {host!r}; hosts are {', '.join(h['name'] for h in st['hosts'])}")
    env = dict(os.environ, PATHTWIN_RUN=st["run_id"], PATHTWIN_HOST=host)
    try:
        os.execvpe("ip", ["ip", "netns", "exec", match[0]["netns"], *cmd], env)
    except FileNotFoundError:
        raise PathtwinError("`ip` (iproute2) is not installed") from None


def _stats_tables(snap: dict, prev: Optional[dict], dt: float):
    from rich.table import Table

    lat = snap["lateness"]
    timing = (f"release lateness: p50 {lat['p50_ns'] / 1e3:.1f} µs  p99 {lat['p99_ns'] / 1e3:.1f} µs  "
              f"max {lat['max_ns'] / 1e3:.1f} µs  ({lat['count']} packets)")

    def rate(key, cur, old):
        if old is None or dt <= 0:
            return ""
        return f"{(cur[key] - old[key]) * 8 / dt / 1e6:.2f}"

    routes = Table(title=f"run {snap['run_id']}  t={snap['t_s']:.1f}s  routes")
    for c in ("route", "pkts in", "pkts out", "bytes out", "Mbit/s out", "write drops"):
        routes.add_column(c, justify="right")
    old_routes = {(r["src"], r["dst"]): r for r in (prev or {}).get("routes", [])}
    for r in snap["routes"]:
        routes.add_row(f"{r['src']}->{r['dst']}", str(r["packets_in"]), str(r["packets_out"]), str(r["bytes_out"]),
                       rate("bytes_out", r, old_routes.get((r["src"], r["dst"]))), str(r["write_drops"]))
    queues = Table(title="queues")
    for c in ("queue", "limit", "ABW Mbit/s", "queued B", "placeholder B", "drops", "ph drops", "ph share", "flows"):
        queues.add_column(c, justify="right")
    for q in snap["queues"]:
        queues.add_row(q["name"], q["limit"], f"{q['abw_bps'] / 1e6:.3f}", str(q["bytes"]), str(q["placeholder_bytes"]),
                       str(q["drops"]), str(q["placeholder_drops"]), f"{q['placeholder_share']:.2f}",
                       ",".join(map(str, q["active_flows"])))
    if snap.get("markers"):
        # Markers are shown inside the queues panel's group so the callers stay unchanged.
        from rich.console import Group

        marks = Table(title="markers")
        for c in ("marker", "kind", "IN pkts", "OUT pkts", "IN Mbit/s", "green", "yellow", "red", "protected"):
            marks.add_column(c, justify="right")
        old_marks = {m["element"]: m for m in (prev or {}).get("markers", [])}
        for m in snap["markers"]:
            marks.add_row(m["name"], m["kind"], str(m["in_packets"]), str(m["out_packets"]),
                          rate("in_bytes", m, old_marks.get(m["element"])), str(m["green_packets"]),
                          str(m["yellow_packets"]), str(m["red_packets"]), str(m["protected_packets"]))
        return routes, Group(queues, marks), timing
    return routes, queues, timing


@group.command()
def stats(
    run: Optional[str] = RunOpt,
    once: bool = typer.Option(False, "--once", help="Print one snapshot and exit."),
    as_json: bool = typer.Option(False, "--json", help="Print the raw snapshot as JSON (implies --once)."),
    interval: float = typer.Option(1.0, "--interval", min=0.25, help="Refresh interval in seconds."),
) -> None:
    """Show per-route and per-queue counters live (Ctrl-C to quit)."""
    from rich.console import Console, Group
    from rich.live import Live

    from ..emulation import STATE_ROOT

    run = _pick_run(run)
    path = STATE_ROOT / run / "stats.json"

    def read() -> dict:
        deadline = time.monotonic() + 2.0
        while True:
            try:
                return json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                if time.monotonic() > deadline:
                    raise PathtwinError(f"run {run} publishes no statistics (has it stopped?)") from None
                time.sleep(0.1)

    if as_json:
        typer.echo(json.dumps(read(), indent=2))
        return
    console = Console()
    snap = read()
    if once:
        routes, queues, timing = _stats_tables(snap, None, 0.0)
        console.print(routes, queues, timing)
        return
    prev, t_prev = None, 0.0
    try:
        with Live(console=console, auto_refresh=False) as live:
            while True:
                snap = read()
                routes, queues, timing = _stats_tables(snap, prev, snap["t_s"] - t_prev)
                live.update(Group(routes, queues, timing), refresh=True)
                prev, t_prev = snap, snap["t_s"]
                time.sleep(interval)
                if not path.exists():
                    break
    except KeyboardInterrupt:
        pass


@group.command()
def down(
    run: Optional[str] = RunOpt,
    all_: bool = typer.Option(False, "--all", help="Stop every running emulation."),
) -> None:
    """Stop an emulation, write its results, and remove everything it created."""
    _require_root()
    from .. import _native

    runs = _live_runs() if all_ else [_pick_run(run)]
    for r in runs:
        pid = _state(r)["pid"]
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30.0
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, 9)
        typer.echo(f"run {r} stopped")
    removed = _native.emu_cleanup_stale()
    if removed:
        typer.echo(f"removed {len(removed)} stale namespaces")


@group.command("list")
def list_() -> None:
    """List running emulations."""
    for r in _live_runs():
        st = _state(r)
        typer.echo(f"{r}  pid {st['pid']}  {st.get('source') or '-'}  hosts {', '.join(h['name'] for h in st['hosts'])}")


@group.command()
def cleanup() -> None:
    """Remove namespaces and state left by emulations that were killed."""
    _require_root()
    from .. import _native

    removed = _native.emu_cleanup_stale()
    typer.echo(f"removed {len(removed)} stale namespaces" + (f": {', '.join(removed)}" if removed else ""))


def run_script(topology: Path, script: Path, out: Optional[Path], pcap: Optional[Path], cc: Optional[str]) -> None:
    """Runs ``script`` with ``net`` (a started ``Emulation``) in its globals; if it defines
    ``main(net)``, that is called too."""
    import runpy

    from ..emulation import Emulation

    if not script.is_file():
        raise PathtwinError(f"{script}: no such file")
    failure = None
    with Emulation(topology, out=out, pcap=pcap, cc=cc) as net:
        try:
            g = runpy.run_path(str(script), init_globals={"net": net}, run_name="__pathtwin_emu__")
            if callable(g.get("main")):
                g["main"](net)
        except Exception as e:  # the script's own error: reported in one line after cleanup
            failure = e
    kept = f" (results kept in {net.result_path})" if net.result_path is not None else ""
    if failure is not None:
        frames = [f for f in traceback.extract_tb(failure.__traceback__) if Path(f.filename).resolve() == script.resolve()]
        where = f"{script}:{frames[-1].lineno}" if frames else str(script)
        raise PathtwinError(f"{where}: {type(failure).__name__}: {failure}{kept}") from None
    if net.result_path is not None:
        typer.echo(f"results: {net.result_path}")


def run_workload(topology: Path, out: Optional[Path], pcap: Optional[Path], cc: Optional[str], quiet: bool) -> int:
    """Runs ``topology``'s ``[[flow]]`` workload (``pathtwin.emulate``) and prints its flows
    as `pathtwin sim` does."""
    from .. import _native
    from ..config import config_text, native_call
    from ..emulation import emulate
    from .sim import print_flows

    if not topology.is_file():
        raise PathtwinError(f"{topology}: no such file")
    text, fmt, origin = config_text(topology)
    if not json.loads(native_call(_native.validate_config, text, fmt, origin)).get("flow"):
        raise PathtwinError(f"{topology}: no [[flow]] entries to run; add some, or give --script")

    def warn(w: str) -> None:
        typer.echo(f"pathtwin: warning: {w}", err=True)

    res = emulate(topology, out=out, pcap=pcap, cc=cc, progress=not quiet, on_warning=warn)
    if not quiet:
        print_flows(res)
    if not res.run["complete"]:
        typer.echo(f"interrupted at {res.run['emulated_s']:.2f} s; kept what was measured"
                   + (f" in {out}" if out is not None else ""), err=True)
        return 130
    return 0


@group.command("run")
def run_cmd(
    topology: Path = typer.Argument(..., help="Topology TOML."),
    script: Optional[Path] = typer.Option(None, "--script",
                                          help="Python script; `net` is the running Emulation. Without it, the "
                                               "topology's [[flow]] workload runs as kernel TCP between the hosts."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Result directory."),
    pcap: Optional[Path] = typer.Option(None, "--pcap", help="Directory for one capture per host."),
    cc: Optional[str] = typer.Option(None, "--cc", help="Kernel congestion control for every host (a flow's own cc wins)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Without --script: print nothing but errors."),
) -> None:
    """Start an emulation, run an experiment script against it (or, without --script, the
    topology's [[flow]] workload, as `pathtwin sim` runs it, writing the same flows table),
    stop it."""
    if script is None:
        raise typer.Exit(run_workload(topology, out, pcap, cc, quiet))
    run_script(topology, script, out, pcap, cc)

def shell(
    cmd: Optional[List[str]] = typer.Argument(None, help="Command to run (after --); default: an interactive shell."),
    rtt: str = typer.Option(..., "--rtt", help="Base RTT, e.g. 50ms."),
    abw: str = typer.Option(..., "--abw", help="ABW, one value or UP/DOWN (shell->peer / peer->shell)."),
    capacity: Optional[str] = typer.Option(None, "--capacity", help="Capacity, one value or UP/DOWN (path mode)."),
    mode: str = typer.Option("path", "--mode", help="path (NSDI'09) or link (C = ABW, 73 KB queue)."),
    loss: Optional[str] = typer.Option(None, "--loss", help="Random loss, e.g. 1% or 0.5%/0."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Queue size, e.g. 64KB or 100pkt (default: derived)."),
    cc: Optional[str] = typer.Option(None, "--cc", help="Kernel congestion control in both hosts."),
    pcap: Optional[Path] = typer.Option(None, "--pcap", help="Directory for shell.pcap and peer.pcap."),
    out: Optional[Path] = typer.Option(None, "--out", help="Result directory."),
) -> None:
    """A command or a shell behind one emulated path to a host named `peer`.

    Inside, `peer` resolves to the other end ($PATHTWIN_ADDR_PEER holds its IPv4 address);
    run a server there with `pathtwin emu exec peer -- CMD`.
    """
    cmd = _strip_separator(cmd)
    if mode not in ("path", "link"):
        raise PathtwinError(f"--mode {mode!r}: expected path or link")
    path: dict = {"between": ["shell", "peer"], "rtt": rtt, "abw": abw, "mode": mode}
    if capacity is not None:
        path["capacity"] = capacity
    if loss is not None:
        path["loss"] = loss
    if queue is not None:
        path["queue"] = queue
    topo = {"name": "pathtwin shell", "hosts": ["shell", "peer"], "path": [path]}
    from ..emulation import Emulation

    with Emulation(topo, out=out, pcap=pcap, cc=cc) as net:
        here, peer = net["shell"], net["peer"]
        env = net.env_for(here)
        argv = list(cmd) if cmd else [os.environ.get("SHELL") or shutil.which("bash") or "/bin/sh"]
        if not cmd:
            env["PS1"] = f"[pathtwin {rtt} {abw} {mode}] \\w\\$ "
            typer.echo(f"pathtwin shell: peer is {peer.ipv4} / {peer.ipv6} (name 'peer'); exit to stop", err=True)
        try:
            code = subprocess.call(here.command(argv), env=env)
        except KeyboardInterrupt:
            code = 130
    sys.exit(code)


def register(app: typer.Typer) -> None:
    """Adds the `pathtwin emu` group and `pathtwin shell`."""
    app.add_typer(group, name="emu")
    app.command(context_settings={"allow_interspersed_args": False})(shell)
