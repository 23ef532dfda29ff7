"""Emulations from Python, in the style of Mininet: ``Emulation`` and its ``Host``s; and
``emulate``, which runs a config's ``[[flow]]`` workload as ``simulate`` does, over the
hosts' kernel TCP.

    with pathtwin.Emulation("topo.toml", out="results/") as net:
        server = net["b"].serve(["iperf3", "-s", "-1"], port=5201)   # returns once it listens
        print(net["a"].run(["iperf3", "-c", "b", "-t", "10"]).stdout)
        print(net.stats()["queues"])

    res = pathtwin.emulate("scenario.toml", out="emu-run/")   # the same file pathtwin.simulate runs
    print(res.flows[["label", "goodput_bps", "completion_s"]])

The packet loop runs on a native thread of ``pathtwin._native.EmuRun`` (never under the
GIL); this module owns what is Python's: starting and stopping the hosts' processes,
captures (tcpdump in each namespace), the run's ``state.json`` that ``pathtwin emu exec``
and ``stats`` read, and the result directory (``run.json`` + Parquet, same layout as the
simulator's). Cleanup is layered: ``stop()`` on leaving the ``with`` block (also on an
exception), an ``atexit`` hook, SIGTERM turned into ``SystemExit`` so that the same path
runs, and — for a run killed with SIGKILL — the next start removes what it left. It also
moves bytes between hosts with the kernel's TCP (``bulk_transfer``). The ``[[flow]]``
workload's programs are native (``pathtwin_emu::workload``, a thread beside the packet
loop); Python only starts them (``workload=True``) and waits (``wait_workload``).

Not here: the result tables and ``run.json`` (``emu_results``) and the daemon behind
``pathtwin emu up`` (``emu_daemon``).
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from .config import ConfigSource, config_text
from .errors import PathtwinError

if TYPE_CHECKING:
    from ._native import EmuRun
    from .results import Result

#: Name of the emulator's device inside each host (pathtwin-emu's ``lab::DEVICE``).
DEVICE = "pt0"
#: MTU of every host's device (set by pathtwin-emu's lab; TUN has no offloads, so no
#: datagram is larger).
MTU = 1500
#: Where runs record themselves (pathtwin-emu's ``netns::STATE_ROOT``).
STATE_ROOT = Path("/run/pathtwin")
#: The state column's value for a listening socket in ``/proc/net/tcp`` (the kernel's
#: ``TCP_LISTEN`` = 10, printed in hex).
_TCP_LISTEN = "0A"


def new_run_id() -> str:
    """Six random hex digits (the same form as pathtwin-emu's run ids)."""
    return secrets.token_hex(3)


def require_root() -> None:
    if os.geteuid() != 0:
        raise PathtwinError("the emulator needs root (network namespaces and TUN devices); run it with sudo")


class Host:
    """One emulated host: a network namespace whose only way out is the emulated network."""

    def __init__(self, net: "Emulation", info: Mapping[str, Any]):
        self._net = net
        self.name: str = info["name"]
        self.netns: str = info["netns"]
        self.ipv4: str = info["ipv4"]
        self.ipv6: str = info["ipv6"]
        #: As the client of ``[[pipe]]`` entries: its pipes' addresses, as the emulator gave them.
        self._pipe_addresses: list[str] = list(info.get("pipe_addresses") or [])
        self.pipes: int = len(self._pipe_addresses)

    def pipe_address(self, slot: int) -> str:
        """The address of this host's pipe ``slot`` (its order among the host's pipes):
        connections from it cross that pipe."""
        if not 0 <= slot < self.pipes:
            raise PathtwinError(f"host {self.name} has {self.pipes} pipes; no pipe {slot}")
        return self._pipe_addresses[slot]

    @property
    def ip(self) -> str:
        return self.ipv4

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` prefixed so that they run inside this host."""
        if isinstance(args, (str, bytes)):
            raise PathtwinError(f"host {self.name}: give the command as a list of arguments, not a string")
        return ["ip", "netns", "exec", self.netns, *map(str, args)]

    def popen(self, args: Sequence[str], **kwargs) -> subprocess.Popen:
        """Starts ``args`` in this host; the process is stopped when the emulation stops."""
        kwargs.setdefault("env", self._net.env_for(self))
        try:
            p = subprocess.Popen(self.command(args), **kwargs)
        except FileNotFoundError as e:
            raise PathtwinError(f"host {self.name}: cannot run {args[0]!r} ({e.strerror})") from None
        self._net._processes.append(p)
        return p

    def serve(self, args: Sequence[str], port: int, timeout: float = 10.0, **kwargs) -> subprocess.Popen:
        """Starts the server ``args`` in this host (as ``popen``; its output is discarded
        unless ``kwargs`` say otherwise) and returns once it listens on TCP ``port``, so that
        a client started next finds it: a fixed sleep is either too short on a busy machine
        or wasted on a quiet one."""
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        kwargs.setdefault("stderr", subprocess.DEVNULL)
        server = self.popen(args, **kwargs)
        self.wait_listening(port, timeout, server)
        return server

    def wait_listening(self, port: int, timeout: float = 10.0, server: Optional[subprocess.Popen] = None) -> None:
        """Waits until a socket in this host listens on TCP ``port`` (IPv4 or IPv6); raises
        ``PathtwinError`` after ``timeout`` seconds, or at once if ``server`` exits first."""
        deadline = time.monotonic() + timeout
        while port not in self.listening_ports():
            if server is not None and server.poll() is not None:
                args = server.args  # this host's prefix, then the server's own arguments
                command = " ".join(map(str, args[len(self.command([])):])) if isinstance(args, list) else str(args)
                raise PathtwinError(f"host {self.name}: {command} exited with {server.returncode} "
                                    f"before it listened on port {port}")
            if time.monotonic() > deadline:
                raise PathtwinError(f"host {self.name}: nothing listens on TCP port {port} after {timeout:g} s")
            time.sleep(0.01)

    def listening_ports(self) -> set[int]:
        """The TCP ports that sockets in this host listen on now (from the namespace's
        ``/proc/net/tcp`` and ``tcp6``)."""
        tables = subprocess.run(self.command(["cat", "/proc/net/tcp", "/proc/net/tcp6"]), capture_output=True,
                                text=True).stdout
        return {int(fields[1].rsplit(":", 1)[1], 16) for fields in map(str.split, tables.splitlines())
                if len(fields) > 3 and fields[3] == _TCP_LISTEN}

    def run(self, args: Sequence[str], check: bool = False, timeout: Optional[float] = None, **kwargs) -> subprocess.CompletedProcess:
        """Runs ``args`` in this host to completion; output is captured as text by default."""
        kwargs.setdefault("capture_output", "stdout" not in kwargs and "stderr" not in kwargs)
        kwargs.setdefault("text", True)
        kwargs.setdefault("env", self._net.env_for(self))
        try:
            done = subprocess.run(self.command(args), timeout=timeout, **kwargs)
        except FileNotFoundError as e:
            raise PathtwinError(f"host {self.name}: cannot run {args[0]!r} ({e.strerror})") from None
        if check and done.returncode != 0:
            err = (done.stderr or "").strip().splitlines()
            raise PathtwinError(f"host {self.name}: {' '.join(map(str, args))} exited with {done.returncode}"
                                + (f": {err[-1]}" if err else ""))
        return done

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.ipv4}, {self.ipv6})"


class Emulation:
    """Real hosts in network namespaces joined by the emulated network of a topology.

    ``topology`` is a TOML file path, TOML text or a dict in the config schema. ``out``
    names a result directory written on stop; ``pcap`` a directory for one capture per host (or per host of ``pcap_hosts``);
    ``cc`` sets every host's kernel congestion control (default: ``[tcp] cc`` or the
    kernel's); ``spin_us`` makes the loop wake that long before each release and poll through
    to it; ``high_priority`` runs the loop's thread at nice -20, and as SCHED_FIFO while it is
    mostly idle and idle CPUs poll (on by default: a woken host process then does not preempt
    it; see the ``pathtwin_emu::priority`` docs for the numbers);
    ``cpu_latency_qos`` holds a zero-latency PM QoS request (``/dev/cpu_dma_latency``) while
    running, so idle CPUs poll instead of halting and wake-ups cost microseconds, not tens of
    them (on by default; machine-wide while the emulation runs); ``tcp_info`` samples every
    host's TCP sockets (the kernel's ``tcp_info``) every ``[run] sample_interval`` into the
    ``flow_series`` table, on a thread of its own beside the loop (on by default);
    ``monarch_pcap`` is where a ``[monarch]`` proxy records its probes and their answers;
    ``offload`` lets the hosts' TCP hand the emulator 64-KB super-packets and take merged ones
    back (TUN segmentation offload, one system call for ~44 segments), while the model still
    queues, delays and drops every MTU-sized segment (on by default; off when ``pcap`` is
    given, so that captures on a host's device show each packet as the wire carries it);
    ``workload`` runs the config's ``[[flow]]`` entries from the start, as real TCP
    connections between the hosts, until ``[run] duration`` (or, with ``[run] until_done``,
    until every connection has closed) and writes them as the ``flows`` table (a flow's own
    ``cc`` overrides the hosts' default, ``cc`` here included; see ``wait_workload``).
    """

    def __init__(self, topology: ConfigSource, out=None, pcap=None, cc: Optional[str] = None,
                 spin_us: float = 0.0, run_id: Optional[str] = None, high_priority: bool = True,
                 cpu_latency_qos: bool = True, tcp_info: bool = True, pcap_hosts: Optional[Sequence[str]] = None,
                 monarch_pcap=None, offload: bool = True, workload: bool = False):
        self._text, self._fmt, self._origin = config_text(topology)
        self.out = Path(out) if out is not None else None
        self.pcap = Path(pcap) if pcap is not None else None
        self.pcap_hosts = list(pcap_hosts) if pcap_hosts is not None else None
        self.monarch_pcap = Path(monarch_pcap) if monarch_pcap is not None else None
        self.cc = cc
        self.spin_us = spin_us
        self.high_priority = high_priority
        self.cpu_latency_qos = cpu_latency_qos
        self.tcp_info = tcp_info
        self.offload = offload and self.pcap is None
        self.workload = workload
        self.run_id = run_id or new_run_id()
        self._native: Optional[EmuRun] = None
        self._hosts: dict[str, Host] = {}
        self._processes: list[subprocess.Popen] = []
        self._captures: list[subprocess.Popen] = []
        self._started_at = 0.0
        self._t0 = 0.0
        self.result_path: Optional[Path] = None
        self.results: Optional[dict[str, Any]] = None
        #: ``run.json``'s content, once stopped.
        self.run: Optional[dict[str, Any]] = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> "Emulation":
        require_root()
        from . import _native

        _install_sigterm()
        self._started_at = time.time()
        self._t0 = time.perf_counter()
        self._native = _native.EmuRun(self._text, self._origin, self._fmt == "json",
                                      self.run_id, self.cc, float(self.spin_us), bool(self.high_priority),
                                      bool(self.cpu_latency_qos), bool(self.tcp_info),
                                      str(self.monarch_pcap) if self.monarch_pcap is not None else None,
                                      bool(self.offload), bool(self.workload), hold=self.pcap is not None)
        self._hosts = {h["name"]: Host(self, h) for h in self._native.hosts}
        _live.add(self)
        try:
            self._write_state()
            if self.pcap is not None:
                # The captures start before any packet flows (the run was held): they see
                # every packet of the workload from its first SYN.
                self._start_captures()
                self._native.go()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> Optional[Path]:
        """Stops every process and capture, removes the hosts, writes the results."""
        if self._native is None:
            return self.result_path
        native, self._native = self._native, None
        _live.discard(self)
        _terminate(self._processes)
        _terminate(self._captures, grace=2.0)
        wall = time.perf_counter() - self._t0
        # With a result directory the native side writes every table there, the long ones a
        # row group at a time from the files the run spilled them to, and hands back only
        # what it could not write (as Python objects a long run's tables cost gigabytes). If
        # the directory cannot be made, the tables stay in `results` and `write_emu_results`
        # reports the error.
        from .emu_results import emu_run_record, write_emu_results
        from .results import make_result_dir

        out_dir = None
        if self.out is not None:
            try:
                make_result_dir(Path(self.out))
                out_dir = str(self.out)
            except PathtwinError:
                pass
        raw = native.stop(out_dir)
        self.results = dict(raw)
        self.run = emu_run_record(raw, wall_time_s=wall, started_at=self._started_at,
                                  warnings=[*raw["run"]["warnings"], *raw["warnings"]],
                                  source=self._origin or None)
        if self.out is not None:
            self.result_path = write_emu_results(self.out, raw, self.run)
        return self.result_path

    def workload_done(self) -> bool:
        """Whether the ``[[flow]]`` workload (``workload=True``) has ended by itself."""
        return self._native is not None and self._native.workload_done()

    def wait_workload(self, timeout: Optional[float] = None, on_progress=None) -> bool:
        """Waits until the ``[[flow]]`` workload has ended by itself (``[run] duration``, or
        every connection closed with ``until_done``), at most ``timeout`` seconds; returns
        whether it has. ``on_progress(emulated_s, duration_s)`` is called four times a second.
        The workload runs on a native thread: waiting here holds no lock it needs."""
        if not self.workload:
            raise PathtwinError("the emulation was started without workload=True: it runs no [[flow]] workload")
        if self._native is None:
            raise PathtwinError("the emulation is not running")
        deadline = None if timeout is None else time.monotonic() + timeout
        duration = _run_duration_s(self)
        while not self._native.workload_done():
            if not self._native.is_running():
                raise PathtwinError("the emulator's loop stopped during the workload (see the warnings at stop)")
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if on_progress is not None:
                on_progress(self.stats()["t_s"], duration)
            time.sleep(0.05 if on_progress is None else 0.25)
        return True

    def table(self, name: str):
        """Result table ``name`` of a stopped emulation as a DataFrame (``queues``,
        ``queue_series``, ``markers``, ``flow_series``, ``packet_flows``, ``routes``,
        ``timing``, ``pipes``, and with the workload ``flows``): from the result directory
        where the native side wrote it, else from ``results``."""
        import pandas as pd

        if self.results is None:
            raise PathtwinError(f"the emulation has not stopped yet: {name} is built at stop()")
        if name in self.results["written"]:
            assert self.out is not None  # the native side writes only into a result directory
            return pd.read_parquet(Path(self.out) / f"{name}.parquet")
        if name not in self.results["tables"]:
            raise PathtwinError(f"no table {name!r}; the emulation has {', '.join(self.results['tables'])}")
        return pd.DataFrame(self.results["tables"][name])

    def flow_series(self):
        """The ``flow_series`` table of a stopped emulation (every sending TCP socket's
        ``tcp_info`` over time) as a DataFrame."""
        return self.table("flow_series")

    def __enter__(self) -> "Emulation":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------
    def __getitem__(self, name: str) -> Host:
        try:
            return self._hosts[name]
        except KeyError:
            raise PathtwinError(f"no host {name!r}; hosts are {', '.join(self._hosts)}") from None

    @property
    def hosts(self) -> list[Host]:
        return list(self._hosts.values())

    @property
    def warnings(self) -> list[str]:
        return list(self._native.warnings) if self._native is not None else []

    def is_running(self) -> bool:
        """Whether the packet loop runs (it stops on its own only after an error)."""
        return self._native is not None and self._native.is_running()

    @property
    def state_dir(self) -> Path:
        return STATE_ROOT / self.run_id

    def stats(self) -> dict:
        """Live counters: per route, per queue, per host, and release lateness."""
        if self._native is None:
            raise PathtwinError("the emulation is not running")
        return json.loads(self._native.snapshot())

    def lateness_window(self) -> dict:
        """Release and timer-wake lateness since the previous call (or the start):
        ``{"release": {count, mean_ns, p50_ns, p99_ns, p999_ns, max_ns}, "timer_wake": {...}}``,
        as fresh as the live counters (250 ms). For watching a long run interval by interval."""
        if self._native is None:
            raise PathtwinError("the emulation is not running")
        return json.loads(self._native.lateness_window())

    def env_for(self, host: Host) -> dict:
        """Environment of processes in ``host``: the caller's plus the run's names."""
        env = dict(os.environ)
        env["PATHTWIN_RUN"] = self.run_id
        env["PATHTWIN_HOST"] = host.name
        for h in self._hosts.values():
            key = "PATHTWIN_ADDR_" + "".join(c if c.isalnum() else "_" for c in h.name).upper()
            env[key] = h.ipv4
        return env

    # -- internals -------------------------------------------------------------------
    def _write_state(self) -> None:
        state = {
            "run_id": self.run_id,
            "pid": os.getpid(),
            "started_at": self._started_at,
            "source": self._origin or None,
            "out": str(self.out.resolve()) if self.out else None,
            "pcap": str(self.pcap.resolve()) if self.pcap else None,
            "hosts": [vars_of(h) for h in self._hosts.values()],
        }
        tmp = self.state_dir / ".state.json.tmp"
        tmp.write_text(json.dumps(state, indent=2))
        tmp.rename(self.state_dir / "state.json")

    def _start_captures(self) -> None:
        pcap = self.pcap
        assert pcap is not None  # started only with a capture directory
        try:
            pcap.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PathtwinError(f"{pcap}: cannot create capture directory ({e.strerror})") from None
        if self.pcap_hosts is not None:
            unknown = [n for n in self.pcap_hosts if n not in self._hosts]
            if unknown:
                raise PathtwinError(f"pcap_hosts: no host {unknown[0]!r}; hosts are {', '.join(self._hosts)}")
        captured = [h for h in self._hosts.values() if self.pcap_hosts is None or h.name in self.pcap_hosts]
        for h in captured:
            f = pcap / f"{h.name}.pcap"
            f.unlink(missing_ok=True)
            # --immediate-mode: libpcap otherwise hands packets over a ring block at a time
            # (or after its 1 s timeout), and a stopped tcpdump drops what is still in the
            # ring, i.e. the last second of the run; -U then writes each one at once. The
            # immediate ring has one frame per snaplen on a TUN device, so "-s 0" (256 KB)
            # would leave 8 frames and lose packets of every burst; MTU keeps whole packets.
            try:
                p = subprocess.Popen(h.command(["tcpdump", "-i", DEVICE, "-n", "--immediate-mode", "-U", "-s", str(MTU),
                                                "-w", str(f)]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            except FileNotFoundError:
                raise PathtwinError("--pcap needs tcpdump (apt-get install tcpdump)") from None
            self._captures.append(p)
        # tcpdump creates its file once the device is open: wait for all, so that no packet
        # sent after start() is missed.
        deadline = time.monotonic() + 5.0
        for p, h in zip(self._captures, captured):
            f = pcap / f"{h.name}.pcap"
            while not f.exists():
                if p.poll() is not None:
                    assert p.stderr is not None  # a pipe
                    err = (p.stderr.read() or b"").decode(errors="replace").strip().splitlines()
                    raise PathtwinError(f"tcpdump in {h.name} failed: {err[-1] if err else 'no message'}")
                if time.monotonic() > deadline:
                    raise PathtwinError(f"tcpdump in {h.name} did not start within 5 s")
                time.sleep(0.02)


# A bulk transfer's two programs. The receiver reads to EOF and then closes; the sender
# writes the bytes, half-closes and waits for that close, so its socket (and its tcp_info
# series) lives until every byte is acknowledged — an application that closed at once would
# leave an orphaned socket that no longer reports.
_SINK = r"""
import json, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1])))
s.listen(4)
print('ready', flush=True)
c, _ = s.accept()
n = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    n += len(b)
c.close()
print(json.dumps({'bytes': n}), flush=True)
"""
_SEND = r"""
import json, socket, sys, time
addr, port, nbytes, cc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
if cc:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
t0 = time.time()
s.connect((addr, port))
t1 = time.time()
s.sendall(b'm' * nbytes)
s.shutdown(socket.SHUT_WR)
while s.recv(65536):
    pass
t2 = time.time()
print(json.dumps({'start': t0, 'connected': t1, 'end': t2, 'port': s.getsockname()[1]}), flush=True)
s.close()
"""


def bulk_transfer(net: "Emulation", src: str, dst: str, nbytes: int, port: int, cc: Optional[str] = None,
                  timeout: float = 600) -> dict:
    """Sends ``nbytes`` from host ``src`` to host ``dst`` (its IPv4 address, TCP ``port``)
    with the kernel congestion control ``cc`` (default: the host's). Returns the sender's
    times (``start``, ``connected``, ``end``: Unix seconds, the end once every byte is
    acknowledged and the receiver closed), its ``port`` (to find its ``flow_series`` rows)
    and the bytes the receiver got (``received``)."""
    sink = net[dst].popen([sys.executable, "-c", _SINK, str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert sink.stdout is not None and sink.stderr is not None  # pipes
    if "ready" not in sink.stdout.readline():
        raise PathtwinError(f"the receiver in {dst} did not start: {sink.stderr.read()[-300:]}")
    done = net[src].run([sys.executable, "-c", _SEND, net[dst].ipv4, str(port), str(nbytes), cc or ""], timeout=timeout)
    if done.returncode != 0:
        raise PathtwinError(f"the transfer from {src} to {dst} failed: {(done.stderr or '').strip().splitlines()[-1:]}")
    sent = json.loads(done.stdout.strip().splitlines()[-1])
    got = json.loads(sink.communicate(timeout=30)[0].strip().splitlines()[-1])
    return {**sent, "received": got["bytes"]}


def since_flow_start(series, sample_interval_s: float):
    """One flow's ``flow_series`` rows with ``time_s`` from the flow's start instead of the
    emulation's: the sampler sees a socket within one interval of its connect, so the flow
    began at most one ``sample_interval_s`` before its first row (the start is that exact
    only to an interval: the emulation's clock has no Unix origin to match the sender's)."""
    out = series.copy()
    if len(out):
        out["time_s"] -= float(out.time_s.min()) - sample_interval_s
    return out


def _run_duration_s(net: "Emulation") -> float:
    """The run's ``[run] duration`` in seconds, as the emulator resolved it."""
    from . import _native
    from .config import native_call, parse_quantity

    cfg = json.loads(native_call(_native.validate_config, net._text, net._fmt, net._origin))
    return parse_quantity("time", cfg["run"]["duration"], "[run] duration")


def emulate(config: ConfigSource, out=None, progress: bool = False, on_warning=None, cc: Optional[str] = None,
            **options) -> "Result":
    """Emulates ``config``'s ``[[flow]]`` workload over the hosts' kernel TCP, as
    ``simulate`` simulates it: the same connections, applications and ``flows`` table, for
    ``[run] duration`` (or until every connection has closed, with ``[run] until_done``).
    Writes ``out`` if given. ``cc`` is the hosts' default congestion control (a flow's own
    ``cc`` wins); ``options`` are ``Emulation``'s (``spin_us``, ``tcp_info``, ...).

    Returns a ``Result`` whose ``flows``, ``flow_series``, ``queues``, ``queue_series``,
    ``markers`` (and the emulator's own tables) are DataFrames and whose ``run`` is
    ``run.json``'s content; Ctrl-C ends the run early and keeps what was measured
    (``run["complete"]`` false)."""
    from .results import Result

    net = Emulation(config, out=out, cc=cc, workload=True, **options)
    bar = _Progress() if progress else None
    with net:
        early = net.warnings
        for w in early:
            if on_warning is not None:
                on_warning(w)
        try:
            net.wait_workload(on_progress=bar.update if bar is not None else None)
        except KeyboardInterrupt:
            pass
        finally:
            if bar is not None:
                bar.close()
    assert net.results is not None and net.run is not None  # stopped by the with block
    for w in net.run["warnings"][len(early):] if on_warning is not None else []:
        on_warning(w)
    raw = net.results
    tables: dict[str, Any] = {}
    for name in raw["written"]:
        tables[name] = (lambda name=name: _read_parquet(Path(out) / f"{name}.parquet"))
    for name, cols in raw["tables"].items():
        tables.setdefault(name, cols)
    return Result(run=net.run, tables=tables, path=net.result_path)


def _read_parquet(path: Path):
    import pandas as pd

    return pd.read_parquet(path)


class _Progress:
    """A progress bar of emulated time, shown once a run has taken a second (rich is
    imported only then)."""

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def update(self, now_s: float, total_s: float) -> None:
        if self._bar is None and time.monotonic() - self._start > 1.0:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("emulating"), BarColumn(), TextColumn("{task.completed:.1f}/{task.total:.0f} s"),
                                 TimeElapsedColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("emu", total=total_s)
        if self._bar is not None:
            self._bar.update(self._task, completed=min(now_s, total_s))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def vars_of(h: Host) -> dict:
    return {"name": h.name, "netns": h.netns, "ipv4": h.ipv4, "ipv6": h.ipv6}


def _terminate(procs: list, grace: float = 1.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, for every process still running."""
    for p in procs:
        if p.poll() is None:
            try:
                p.terminate()
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    procs.clear()


# Emulations still running, stopped at interpreter exit whatever else happened.
_live: set = set()


@atexit.register
def _stop_all() -> None:
    for net in list(_live):
        try:
            net.stop()
        except Exception:  # noqa: BLE001 - exiting anyway; the next start cleans up the rest
            pass


def _sigterm_to_exit(signum, frame):
    raise SystemExit(128 + signum)


def _install_sigterm() -> None:
    """SIGTERM normally kills Python without unwinding; make it unwind so that ``with``
    blocks and atexit run. Only from the main thread, and only if nobody installed one."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _sigterm_to_exit)
