"""Emulations from Python, in the style of Mininet: ``Emulation`` and its ``Host``s.

    with pathtwin.Emulation("topo.toml", out="results/") as net:
        server = net["b"].popen(["iperf3", "-s", "-1"])
        print(net["a"].run(["iperf3", "-c", "b", "-t", "10"]).stdout)
        print(net.stats()["queues"])

The packet loop runs on a native thread of ``pathtwin._native.EmuRun`` (never under the
GIL); this module owns what is Python's: starting and stopping the hosts' processes,
captures (tcpdump in each namespace), the run's ``state.json`` that ``pathtwin emu exec``
and ``stats`` read, and the result directory (``run.json`` + Parquet, same layout as the
simulator's). Cleanup is layered: ``stop()`` on leaving the ``with`` block (also on an
exception), an ``atexit`` hook, SIGTERM turned into ``SystemExit`` so that the same path
runs, and — for a run killed with SIGKILL — the next start removes what it left.

The module is also the daemon behind ``pathtwin emu up``: ``python -m pathtwin.emulation``.
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
from typing import Any, Mapping, Optional, Sequence

from .config import ConfigSource, config_text, parse_quantity
from .errors import PathtwinError

#: Name of the emulator's device inside each host (pathtwin-emu's ``lab::DEVICE``).
DEVICE = "pt0"
#: MTU of every host's device (set by pathtwin-emu's lab; TUN has no offloads, so no
#: datagram is larger).
MTU = 1500
#: Where runs record themselves (pathtwin-emu's ``netns::STATE_ROOT``).
STATE_ROOT = Path("/run/pathtwin")


def new_run_id() -> str:
    """Six random hex digits (the same form as pathtwin-emu's run ids)."""
    return secrets.token_hex(3)


def require_root() -> None:
    if os.geteuid() != 0:
        raise PathtwinError("the emulator needs root (network namespaces and TUN devices); run it with sudo")


class Host:
    """One emulated host: a network namespace whose only way out is the emulated network."""

    def __init__(self, net: "Emulation", info: Mapping[str, str]):
        self._net = net
        self.name: str = info["name"]
        self.netns: str = info["netns"]
        self.ipv4: str = info["ipv4"]
        self.ipv6: str = info["ipv6"]
        #: As the client of ``[[pipe]]`` entries: how many pipes, and pipe 0's address.
        self.pipes: int = int(info.get("pipes") or 0)
        self._first_pipe: Optional[str] = info.get("first_pipe")

    def pipe_address(self, slot: int) -> str:
        """The address of this host's pipe ``slot`` (its order among the host's pipes):
        connections from it cross that pipe."""
        if not 0 <= slot < self.pipes:
            raise PathtwinError(f"host {self.name} has {self.pipes} pipes; no pipe {slot}")
        import ipaddress

        return str(ipaddress.IPv4Address(self._first_pipe) + slot)

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
    given, so that captures on a host's device show each packet as the wire carries it).
    """

    def __init__(self, topology: ConfigSource, out=None, pcap=None, cc: Optional[str] = None,
                 spin_us: float = 0.0, run_id: Optional[str] = None, high_priority: bool = True,
                 cpu_latency_qos: bool = True, tcp_info: bool = True, pcap_hosts: Optional[Sequence[str]] = None,
                 monarch_pcap=None, offload: bool = True):
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
        self.run_id = run_id or new_run_id()
        self._native = None
        self._hosts: dict[str, Host] = {}
        self._processes: list[subprocess.Popen] = []
        self._captures: list[subprocess.Popen] = []
        self._started_at = 0.0
        self._t0 = 0.0
        self.result_path: Optional[Path] = None
        self.results: Optional[dict] = None

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
                                      bool(self.offload))
        self._hosts = {h["name"]: Host(self, h) for h in self._native.hosts}
        _live.add(self)
        try:
            self._write_state()
            if self.pcap is not None:
                self._start_captures()
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
        # With a result directory the native side writes `flow_series` there itself (a long
        # run's largest table; as Python objects it cost gigabytes). If the directory cannot
        # be made, every table comes back here and `write_emu_results` reports the error.
        from .results import make_result_dir

        out_dir = None
        if self.out is not None:
            try:
                make_result_dir(Path(self.out))
                out_dir = str(self.out)
            except PathtwinError:
                pass
        raw = json.loads(native.stop(out_dir))
        self.results = raw
        if raw.get("flow_series_warning"):
            raw.setdefault("warnings", list(native.warnings)).append(raw["flow_series_warning"])
        if self.out is not None:
            self.result_path = write_emu_results(self.out, raw, wall_time_s=wall, started_at=self._started_at,
                                                 warnings=list(raw.get("warnings", native.warnings)),
                                                 source=self._origin or None)
        return self.result_path

    def flow_series(self):
        """The `flow_series` table of a stopped emulation as a DataFrame: from the result
        directory when the native side wrote it there, else from `results`."""
        import pandas as pd

        if self.results is None:
            raise PathtwinError("the emulation has not stopped yet: flow_series is built at stop()")
        if self.results.get("flow_series_written"):
            return pd.read_parquet(Path(self.out) / "flow_series.parquet")
        return pd.DataFrame(self.results.get("flow_series", []), columns=list(FLOW_SERIES_COLUMNS))

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
        try:
            self.pcap.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PathtwinError(f"{self.pcap}: cannot create capture directory ({e.strerror})") from None
        if self.pcap_hosts is not None:
            unknown = [n for n in self.pcap_hosts if n not in self._hosts]
            if unknown:
                raise PathtwinError(f"pcap_hosts: no host {unknown[0]!r}; hosts are {', '.join(self._hosts)}")
        captured = [h for h in self._hosts.values() if self.pcap_hosts is None or h.name in self.pcap_hosts]
        for h in captured:
            f = self.pcap / f"{h.name}.pcap"
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
            f = self.pcap / f"{h.name}.pcap"
            while not f.exists():
                if p.poll() is not None:
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
    if "ready" not in sink.stdout.readline():
        raise PathtwinError(f"the receiver in {dst} did not start: {sink.stderr.read()[-300:]}")
    done = net[src].run([sys.executable, "-c", _SEND, net[dst].ipv4, str(port), str(nbytes), cc or ""], timeout=timeout)
    if done.returncode != 0:
        raise PathtwinError(f"the transfer from {src} to {dst} failed: {(done.stderr or '').strip().splitlines()[-1:]}")
    sent = json.loads(done.stdout.strip().splitlines()[-1])
    got = json.loads(sink.communicate(timeout=30)[0].strip().splitlines()[-1])
    return {**sent, "received": got["bytes"]}


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


# -- results ---------------------------------------------------------------------------

def _summary_rows(snapshot: dict) -> dict:
    rows: dict[str, list] = {k: [] for k in ("kind", "count", "mean_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns")}
    for kind, key in (("release", "lateness"), ("timer_wake", "wake_lateness")):
        s = snapshot[key]
        rows["kind"].append(kind)
        for k in ("count", "mean_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns"):
            rows[k].append(s[k])
    return rows


def _columns(rows: list[dict], keys: Sequence[str]) -> dict:
    return {k: [r.get(k) for r in rows] for k in keys}


#: Columns of the emulator's ``flow_series`` (pathtwin-emu's ``sampler::FlowSeriesRow``).
FLOW_SERIES_COLUMNS = ("time_s", "flow", "label", "src", "dst", "src_port", "dst_port", "cwnd_bytes", "ssthresh_bytes",
                       "srtt_ms", "goodput_bps", "delivered_bytes", "retransmits", "cc", "state", "ca_state",
                       "rto_retransmits", "rttvar_ms", "min_rtt_ms", "rto_ms", "mss", "cwnd_segments",
                       "unacked_segments", "lost_segments", "delivery_rate_bps", "pacing_rate_bps", "bytes_sent",
                       "bytes_retrans", "bytes_received")


def aqm_columns(queues: list[dict]) -> dict:
    """The `queues` table's active-queue-management columns from the emulator's queue
    snapshots, as the simulator writes them: drops split into early and forced, ECN marks,
    and per drop precedence (RIO/FRIO; unmarked traffic is IN) arrivals and drops. A queue
    without an active queue manager has `aqm` null: all its drops are forced (tail) drops."""
    aqm = [q.get("aqm") or {} for q in queues]
    cols = {k: [a.get(k, q["drops"] if k == "forced_drops" else 0) for a, q in zip(aqm, queues)]
            for k in ("early_drops", "forced_drops", "ecn_marks")}
    for cls in ("in", "out"):
        per_class = [a.get(cls, {}) for a in aqm]
        cols[f"{cls}_arrivals"] = [c.get("arrivals", 0) for c in per_class]
        cols[f"{cls}_drops"] = [c.get("early_drops", 0) + c.get("forced_drops", 0) for c in per_class]
    return cols


def _pipe_columns(pipes: list[dict]) -> dict:
    """The ``pipes`` table: one row per ``[[pipe]]``, each two-way count as ``_down`` and
    ``_up`` columns."""
    cols = _columns(pipes, ("pipe", "server", "client", "address"))
    for key in ("packets_in", "packets_out", "queue_drops", "loss_drops"):
        for d, side in enumerate(("down", "up")):
            cols[f"{key}_{side}"] = [p[key][d] for p in pipes]
    return cols


def write_emu_results(out, raw: dict, wall_time_s: float, started_at: float, warnings: list, source) -> Path:
    """Writes an emulation's ``run.json`` and Parquet tables (layout of ``results.py``).

    Tables: ``queues`` (per queue totals, incl. placeholder share), ``queue_series``
    (occupancy, placeholder bytes, ABW, drops and active flows over time), ``flows`` (bytes
    per flow and direction, in and out of the network), ``routes`` (per host pair),
    ``timing`` (release and timer lateness quantiles), ``pipes`` (per ``[[pipe]]``: address,
    packets and drops each way; only when the config has pipes), ``markers`` (per ``[[marker]]``, the
    simulator's columns, ``results.MARKER_COLUMNS``) and ``flow_series`` (every sending TCP
    socket of every host every ``[run] sample_interval``, from the kernel's ``tcp_info``:
    the simulator's columns ``time_s``, ``flow``, ``label``, ``cwnd_bytes`` and
    ``ssthresh_bytes`` (the kernel's segments × ``snd_mss``), ``srtt_ms``, ``goodput_bps``,
    ``delivered_bytes`` (bytes acked), ``retransmits`` (segments, cumulative), plus the
    kernel's own: ``cc``, ``src``/``dst`` hosts and ports, ``state``, ``ca_state``,
    ``rto_retransmits``, ``rttvar_ms``, ``min_rtt_ms``, ``rto_ms``, ``mss``,
    ``cwnd_segments``, ``unacked_segments``, ``lost_segments``, ``delivery_rate_bps``,
    ``pacing_rate_bps``, ``bytes_sent``, ``bytes_retrans``, ``bytes_received``; see
    ``pathtwin_emu::sampler``).
    """
    from . import __version__
    from .results import MARKER_COLUMNS, git_revision, write_result_dir

    snap = raw["snapshot"]
    names = {q["element"]: q["name"] for q in snap["queues"]}
    samples = raw["queue_samples"]
    series = _columns(samples, ("t_ns", "element", "packets", "bytes", "placeholder_packets", "placeholder_bytes",
                                "abw_bps", "drops", "placeholder_drops", "active_flows", "avg_queue"))
    series["t_s"] = [t * 1e-9 for t in series.pop("t_ns")]
    series["queue"] = [names.get(e, str(e)) for e in series["element"]]
    queue_keys = ("element", "name", "capacity_bps", "abw_bps", "limit", "arrivals", "departures", "departure_bytes",
                  "drops", "drop_bytes", "placeholder_arrivals", "placeholder_departures", "placeholder_departure_bytes",
                  "placeholder_drops", "placeholder_deferrals", "placeholder_share", "rate_changes")
    flows = raw["flows"]
    flow_keys = ("src", "dst", "proto", "src_port", "dst_port", "route_src", "route_dst", "first_ns", "last_ns",
                 "packets_in", "bytes_in", "payload_bytes_in", "packets_out", "bytes_out", "payload_bytes_out")
    route_keys = ("src", "dst", "packets_in", "bytes_in", "packets_out", "bytes_out", "write_drops")
    queues = _columns(snap["queues"], queue_keys)
    queues.update(aqm_columns(snap["queues"]))
    tables = {
        "queues": queues,
        "queue_series": series,
        "flows": _columns(flows, flow_keys),
        "routes": _columns(snap["routes"], route_keys),
        "timing": _summary_rows(snap),
        "markers": _columns([{**m, "marker": m["name"]} for m in snap.get("markers", [])], MARKER_COLUMNS),
    }
    if not raw.get("flow_series_written"):
        tables["flow_series"] = _columns(raw.get("flow_series", []), FLOW_SERIES_COLUMNS)
    if raw.get("pipes"):
        tables["pipes"] = _pipe_columns(raw["pipes"])
    cfg = raw["config"]
    run = {
        "pathtwin_version": __version__,
        "git_revision": git_revision(),
        "engine": "emu",
        "run_id": snap["run_id"],
        "seed": cfg.get("run", {}).get("seed"),
        "config": cfg,
        "resolved_paths": raw["resolved"],
        "elements": raw["elements"],
        "hosts": raw["hosts"],
        "started_at": started_at,
        "wall_time_s": wall_time_s,
        "emulated_s": snap["t_s"],
        "complete": True,
        "timing": {"release_lateness": snap["lateness"], "timer_wake_lateness": snap["wake_lateness"],
                   "reordered_pushes": snap["reordered_pushes"], "high_priority": snap["high_priority"],
                   "priority_switches": snap["priority_switches"]},
        "host_counters": snap["hosts"],
        # Cost of the tcp_info sampling thread (sweeps of every host, µs each).
        "tcp_sampling": raw.get("tcp_sampling"),
        "warnings": warnings,
        "source": source,
    }
    written = ["flow_series"] if raw.get("flow_series_written") else []
    return write_result_dir(Path(out), run, tables, written=written)


# -- daemon for `pathtwin emu up` ------------------------------------------------------

def serve(argv: Sequence[str]) -> int:
    """Runs one emulation until SIGTERM/SIGINT. Prints one JSON line when the hosts are up
    (or ``{"error": ...}``), then detaches from its stdout."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m pathtwin.emulation")
    ap.add_argument("topology")
    ap.add_argument("--run-id")
    ap.add_argument("--out")
    ap.add_argument("--pcap")
    ap.add_argument("--cc")
    ap.add_argument("--spin-us", type=float, default=0.0)
    ap.add_argument("--no-high-priority", action="store_true")
    ap.add_argument("--no-cpu-latency-qos", action="store_true")
    ap.add_argument("--no-offload", action="store_true")
    a = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        net = Emulation(a.topology, out=a.out, pcap=a.pcap, cc=a.cc, spin_us=a.spin_us, run_id=a.run_id,
                        high_priority=not a.no_high_priority,
                        cpu_latency_qos=not a.no_cpu_latency_qos, offload=not a.no_offload).start()
    except PathtwinError as e:
        print(json.dumps({"error": str(e)}), flush=True)
        return 2
    try:
        print(json.dumps({"run_id": net.run_id, "hosts": [vars_of(h) for h in net.hosts], "warnings": net.warnings}),
              flush=True)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        while not stop.wait(0.5):
            if not net._native.is_running():
                break
    finally:
        net.stop()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))


# -- reproductions with real TCP (the simulator's are in reproduce.py) ------------------

def _iperf_pair(net: Emulation, a: str, b: str, seconds: float, window: Optional[str], port: int = 5201):
    """Starts iperf3 flows a->b and b->a at once; returns the clients' Popen objects."""
    for h in (a, b):
        net[h].popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    extra = ["-w", window] if window else []
    return [net[src].popen(["iperf3", "-c", dst, "-p", str(port), "-t", f"{seconds:g}", "-J", *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for src, dst in ((a, b), (b, a))]


def _iperf_result(p: subprocess.Popen, what: str) -> dict:
    out, err = p.communicate()
    try:
        d = json.loads(out)
    except json.JSONDecodeError:
        raise PathtwinError(f"iperf3 {what} failed: {(err or out).strip().splitlines()[-1:] or 'no output'}") from None
    if "error" in d:
        raise PathtwinError(f"iperf3 {what}: {d['error']}")
    return d


def _iperf_ip_rate(flows: list, src: str, dst: str, port: int = 5201) -> float:
    """IP-level rate (bit/s) of all foreground traffic the emulated path delivered from host
    ``src`` to ``dst`` during the iperf3 test from ``src``: its data and control packets and
    the ACKs of the test running the other way, which share the direction's ABW; headers and
    retransmissions included. Timed over the data connection (the TCP flow to ``port`` with
    the most bytes), first packet to last."""
    route = [f for f in flows if f["route_src"] == src and f["route_dst"] == dst]
    data = [f for f in route if f["proto"] == 6 and f["dst_port"] == port]
    if not data:
        raise PathtwinError(f"no iperf3 traffic from {src} to {dst} crossed the emulator")
    d = max(data, key=lambda f: f["bytes_out"])
    span = (d["last_ns"] - d["first_ns"]) * 1e-9
    return sum(f["bytes_out"] for f in route) * 8 / span if span > 0 else 0.0


def reproduce_table2_emu(seeds: int = 1, duration=None, out=None, progress=None, rows: Optional[Sequence[int]] = None,
                         modes: Sequence[str] = ("link", "path"), cc: str = "cubic", offload: bool = True):
    """NSDI'09 Table 2 with the kernel's TCP: for each row, iperf3 flows in both directions at
    once, all rows side by side in one emulation, once per mode (and seed, for symmetry with
    the simulator; the kernel's TCP is the randomness here). ``rows`` picks rows (1-based).

    The paper's hosts had w_max = 64 KB; iperf3's ``-w`` sets the socket buffers so that the
    kernel's window is capped the same way (``[tcp] max_window`` of the example). The hosts
    run the kernel's ``cc`` (CUBIC, the usual Linux default, unless asked otherwise), not the
    example's NewReno, which is the simulator's choice. ``offload`` as in ``Emulation``.
    """
    from .reproduce import Table2Row, load_example, with_mode

    require_root()
    if shutil_which("iperf3") is None:
        raise PathtwinError("the emulated Table 2 needs iperf3 (apt-get install iperf3)")
    base = load_example("nsdi09-table2")
    if duration:
        seconds = parse_quantity("time", str(duration), "--duration")
    else:
        seconds = parse_quantity("time", base["run"]["duration"], "run.duration")  # the paper's 60 s
    if seconds <= 1.0:
        raise PathtwinError(f"duration {duration}: must be longer than 1 s")
    wmax = base.get("tcp", {}).get("max_window")
    window = str(int(parse_quantity("size", wmax, "tcp.max_window"))) if wmax else None
    kinds = ["measured"] * 4 + ["synthetic"] * 3
    picked = list(rows) if rows else list(range(1, len(base["path"]) + 1))
    for r in picked:
        if not 1 <= r <= len(base["path"]):
            raise PathtwinError(f"row {r}: Table 2 has rows 1-{len(base['path'])}")
    cfg0 = dict(base)
    cfg0["path"] = [base["path"][r - 1] for r in picked]
    cfg0["hosts"] = [h for p in cfg0["path"] for h in p["between"]]
    cfg0.pop("flow", None)
    sums: dict = {}
    ip_sums: dict = {}
    queues: dict = {}
    for mode in modes:
        for seed in range(1, seeds + 1):
            cfg = with_mode(cfg0, mode)
            cfg.setdefault("run", {})["seed"] = seed
            target = Path(out) / f"emu-{mode}-seed{seed}" if out else None
            with Emulation(cfg, out=target, cc=cc, offload=offload) as net:
                clients = []
                for k, p in enumerate(cfg["path"]):
                    clients.append(_iperf_pair(net, *p["between"], seconds, window, port=5201))
                got = [[_iperf_result(c, f"row {picked[k]}")["end"]["sum_received"]["bits_per_second"] for c in pair]
                       for k, pair in enumerate(clients)]
            resolved = net.results["resolved"]
            for k, p in enumerate(cfg["path"]):
                a, b = p["between"]
                s = sums.setdefault((k, mode), [0.0, 0.0])
                s[0] += got[k][0]
                s[1] += got[k][1]
                ip = ip_sums.setdefault((k, mode), [0.0, 0.0])
                ip[0] += _iperf_ip_rate(net.results["flows"], a, b)
                ip[1] += _iperf_ip_rate(net.results["flows"], b, a)
                queues[(k, mode)] = "/".join(r["queue"] for r in resolved if r["path"] == k)
            if progress:
                progress(mode, seed)
    out_rows = []
    for k, r in enumerate(picked):
        p = cfg0["path"][k]
        abw = p["abw"]
        f, rv = (abw.split("/") + [abw])[:2] if isinstance(abw, str) else abw
        achieved = {m: (sums[(k, m)][0] / seeds, sums[(k, m)][1] / seeds) for m in modes}
        ip_achieved = {m: (ip_sums[(k, m)][0] / seeds, ip_sums[(k, m)][1] / seeds) for m in modes}
        out_rows.append(Table2Row(r, kinds[r - 1] if r - 1 < len(kinds) else "", (parse_quantity("rate", f, "path.abw"), parse_quantity("rate", rv, "path.abw")),
                                  parse_quantity("time", p["rtt"], "path.rtt") * 1e3, {m: queues[(k, m)] for m in modes}, achieved,
                                  ip_achieved))
    return out_rows


def reproduce_figure5_emu(duration: float = 30.0, out=None):
    """NSDI'09 Figure 5 with the kernel's TCP: one forward iperf3 flow on the Harvard–WUSTL
    path for ``duration`` seconds in each mode; returns a ``reproduce.Figure5`` with the mean
    RTT per mode from the sender's TCP_INFO (as iperf3 reports it) and the goodputs."""
    from .reproduce import Figure5, load_example, with_mode

    require_root()
    base = load_example("nsdi09-figure5")
    base.pop("flow", None)
    a, b = base["path"][0]["between"]
    wmax = base.get("tcp", {}).get("max_window")
    extra = ["-w", str(int(parse_quantity("size", wmax, "tcp.max_window")))] if wmax else []
    rtt, goodput = {}, {}
    for mode in ("path", "link"):
        cfg = with_mode(base, mode)
        with Emulation(cfg, out=Path(out) / f"emu-{mode}" if out else None) as net:
            net[b].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            c = net[a].popen(["iperf3", "-c", b, "-t", f"{duration:g}", "-J", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            d = _iperf_result(c, f"{mode} mode")
        rtt[mode] = d["end"]["streams"][0]["sender"]["mean_rtt"] / 1e3
        goodput[mode] = d["end"]["sum_received"]["bits_per_second"]
    return Figure5(rtt, goodput, parse_quantity("time", base["path"][0]["rtt"], "path[0].rtt") * 1e3)


def shutil_which(name: str):
    import shutil

    return shutil.which(name)
