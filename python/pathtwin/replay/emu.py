"""Running a :class:`~pathtwin.replay.workload.Workload` in the emulator (Monkey Do, §4).

Two hosts: ``server`` runs the server emulator, ``clients`` the client emulator, and every
connection crosses its own ``[[pipe]]`` (its path from the database), coming from the
pipe's own address. The server's kernel TCP takes the run's ``[tcp]`` settings — the
what-if (``initial_window``, ``cc``, ...). The capture is taken at the server's device, as
Monkey See's was at the server's LAN — or at the clients', to match a source captured
there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..errors import PathtwinError
from .workload import LOSS_MODELS, Workload

#: Beyond the last connection's start, how long a replay may take before it is cut short.
TAIL_S = 180.0


@dataclass
class EmulatedRun:
    """What one emulated run of a workload leaves: the server-side capture, both agents'
    logs and the emulation's result directory."""

    capture: Path
    client_log: Path
    server_log: Path
    result_dir: Path
    #: Pipe address of each connection, in connection order.
    addresses: list[str]
    wall_s: float
    #: Ctrl-C ended the run: the capture holds the connections until then.
    interrupted: bool = False


def run_emulated(workload: Workload, out, tcp: Optional[dict] = None, progress: Optional[Callable[[float], None]] = None,
                 seed: int = 1, capture_at: str = "server", loss: str = LOSS_MODELS[0]) -> EmulatedRun:
    """Runs ``workload`` with real kernel TCP on both sides; writes under ``out``. The
    capture is taken at ``capture_at`` ("server" or "clients"); the pipes lose packets as
    ``loss`` says (:meth:`Workload.pipes`)."""
    if capture_at not in ("server", "clients"):
        raise PathtwinError(f"capture_at {capture_at!r}: the replay captures at 'server' or 'clients'")
    from ..emulation import Emulation

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = {"hosts": ["server", "clients"], "run": {"seed": seed}, "tcp": dict(tcp or {}), "pipe": workload.pipes(loss=loss)}
    last_start = float(workload.conns["start_s"].max()) if len(workload) else 0.0
    t0 = time.monotonic()
    # No per-socket tcp_info sampling: thousands of short connections, and nothing reads it.
    with Emulation(config, out=out / "emulation", pcap=out / "pcap", pcap_hosts=[capture_at], tcp_info=False) as net:
        server, clients = net["server"], net["clients"]
        addresses = [clients.pipe_address(i) for i in range(clients.pipes)]
        server_spec, client_spec = workload.agent_specs(server.ip, addresses)
        (out / "server_spec.json").write_text(json.dumps(server_spec))
        (out / "client_spec.json").write_text(json.dumps(client_spec))
        agent = [sys.executable, "-m", "pathtwin.replay.agent"]
        srv = server.popen(agent + ["server", str(out / "server_spec.json"), str(out / "server_log.jsonl")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert srv.stdout is not None and srv.stderr is not None  # pipes
        line = srv.stdout.readline()
        if "ready" not in line:
            raise PathtwinError(f"the server emulator did not start: {(srv.stderr.read() or line).strip()[-300:]}")
        cli = clients.popen(agent + ["client", str(out / "client_spec.json"), str(out / "client_log.jsonl")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + last_start + TAIL_S
        interrupted = False
        try:
            while cli.poll() is None and time.monotonic() <= deadline:
                if progress is not None:
                    progress(min(1.0, (time.monotonic() - t0) / max(last_start + 5.0, 1.0)))
                time.sleep(0.5)
        except KeyboardInterrupt:
            # Keep what was replayed: the agents stop, the capture is closed with the
            # emulation, and the caller compares the connections that finished.
            interrupted = True
        if cli.poll() is None:  # past the deadline, or Ctrl-C
            cli.terminate()
            cli.wait(5)
        if not interrupted:
            if cli.returncode not in (0, -15):
                assert cli.stderr is not None  # a pipe
                raise PathtwinError(f"the client emulator failed: {(cli.stderr.read() or '').strip()[-300:]}")
            # Let the last FINs cross their pipes before the capture stops.
            time.sleep(1.0)
    return EmulatedRun(capture=out / "pcap" / f"{capture_at}.pcap", client_log=out / "client_log.jsonl",
                       server_log=out / "server_log.jsonl", result_dir=out / "emulation", addresses=addresses,
                       wall_s=time.monotonic() - t0, interrupted=interrupted)
