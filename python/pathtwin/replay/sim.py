"""Running a :class:`~pathtwin.replay.workload.Workload` in the simulator: the same replay
database as :mod:`~pathtwin.replay.emu`, simulated TCP on both sides, for fast what-if
sweeps ("Monkey See, Monkey Do", Cheng et al., USENIX ATC 2004, §4, with the simulator in
place of the emulator).

The config is the emulator's — hosts ``server`` and ``clients``, one ``[[pipe]]`` per
connection (pipe i carries connection i) — plus one ``[[flow]]`` per connection with
``app = "replay"`` over its pipe: the simulator's replay application re-enacts the
connection's exchanges as :mod:`pathtwin.replay.agent` does. What the agent sets on the
client's socket is the flow's ``tcp`` table here: the traced MSS, the traced window as
``rcv_window`` when below :data:`~pathtwin.replay.agent.PINNED_WINDOW_BELOW` (above it the
simulator's large default window stands for Linux's autotuning), and ``delayed_ack = false``
for a "quick" client. Unlike the agent, the simulator can impose a "delayed" client policy,
so such clients keep the default delayed ACKs.

The simulated TCP is the run's ``[tcp]`` over :data:`REPLAY_TCP`: the profile ``"linux"``,
so that the simulator stands in for the hosts' kernels as the emulated replay runs them
(Linux's segment size, ACK policy, RACK-TLP and PRR, receive-window autotuning and CUBIC:
docs/tcp-defaults.md). Replayed in both engines, one database gives the same shares within
±20 % in each, lossy long responses included (bench/replay/accuracy.py
``--replay-engines``; tests/test_replay_sim_emu.py), where the ``"ns2"`` profile, the
replay's default until then, falls 8 points short on those. ``tcp = {"profile": "ns2"}``
replays as before.

Two differences from an emulated run, both of the simulator's model: a flow's ``tcp`` table
applies to both ends of its connection (the what-if ``tcp`` is the run's ``[tcp]``, under
the per-connection client settings, which are what matter at the client end: MSS, window and
ACK policy), and the server listens on port 80 whatever the workload's port. The capture is
the simulator's pcap at the server (:mod:`pathtwin-sim`'s ``pcap``), in which connection i
comes from pipe i's address, ``10.128.0.1 + i`` (the ``pipes`` table of the run).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import PathtwinError
from .agent import PINNED_WINDOW_BELOW
from .workload import LOSS_MODELS, Workload, _int_or_none

#: Beyond the last connection's start, the most simulated time a replay may take; the run
#: ends earlier, as soon as every connection has closed (``[run] until_done``).
TAIL_S = 180.0
#: The simulated TCP under a replay's what-if ``tcp``: Linux's, as the emulated hosts run.
REPLAY_TCP = {"profile": "linux"}
#: The time series are not what a replay reads; one sample a second keeps them small.
SAMPLE_INTERVAL = "1s"


@dataclass
class SimulatedRun:
    """What one simulated run of a workload leaves: the server-side capture and the
    simulation's result directory."""

    capture: Path
    result_dir: Path
    #: Pipe address of each connection, in connection order.
    addresses: list[str]
    wall_s: float
    #: Simulated seconds until the last connection closed (or the cap).
    simulated_s: float
    #: Ctrl-C ended the simulation: the capture holds the connections until then.
    interrupted: bool = False


def sim_config(workload: Workload, tcp: Optional[dict] = None, seed: int = 1, loss: str = LOSS_MODELS[0]) -> dict:
    """The simulator config that replays ``workload`` with the server's ``tcp`` settings,
    losing packets as ``loss`` says (:meth:`Workload.pipes`)."""
    if len(workload) == 0:
        raise PathtwinError("the replay database has no connections")
    by_conn = {k: g.sort_values("exchange") for k, g in workload.exchanges.groupby("conn")}
    flows = []
    # Pipe i is the i-th connection's, as in the emulator and in compare().
    for i, c in enumerate(workload.conns.itertuples(index=False)):
        xs = by_conn.get(c.conn)
        if xs is None:
            continue
        client_tcp: dict = {}
        mss = _int_or_none(c.mss)
        if mss:
            client_tcp["mss"] = mss
        rwin = _int_or_none(c.rwin_bytes)
        if rwin and rwin < PINNED_WINDOW_BELOW:
            client_tcp["rcv_window"] = f"{rwin}B"
        if bool(c.quickack):
            client_tcp["delayed_ack"] = False
        flows.append({
            "from": "clients", "to": "server", "pipe": i, "app": "replay", "label": f"conn{int(c.conn)}",
            "start": f"{max(float(c.start_s), 0.0):.9f}s", "tcp": client_tcp,
            "exchanges": [[int(x.request_bytes), int(x.response_bytes), int(x.header_bytes), float(x.server_delay_s),
                           float(x.query_delay_s), float(x.think_s)] for x in xs.itertuples(index=False)],
        })
    last_start = float(workload.conns["start_s"].max())
    return {
        "hosts": ["server", "clients"],
        "run": {"seed": seed, "duration": f"{last_start + TAIL_S:.9f}s", "until_done": True, "pcap": ["server"],
                "sample_interval": SAMPLE_INTERVAL},
        "tcp": {**REPLAY_TCP, **(tcp or {})},
        "pipe": workload.pipes(loss=loss),
        "flow": flows,
    }


def run_simulated(workload: Workload, out, tcp: Optional[dict] = None, seed: int = 1, capture_at: str = "server",
                  loss: str = LOSS_MODELS[0]) -> SimulatedRun:
    """Replays ``workload`` in the simulator with the server's ``tcp`` settings; writes the
    simulation's result directory under ``out/simulation`` (capture of ``capture_at``,
    "server" or "clients", in its ``pcap/``)."""
    if capture_at not in ("server", "clients"):
        raise PathtwinError(f"capture_at {capture_at!r}: the replay captures at 'server' or 'clients'")
    from ..sim import simulate

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = sim_config(workload, tcp=tcp, seed=seed, loss=loss)
    config["run"]["pcap"] = [capture_at]
    t0 = time.monotonic()
    result = simulate(config, out=out / "simulation")
    wall = time.monotonic() - t0
    interrupted = bool(result.run.get("interrupted", False))
    if not result.run.get("complete", False) and not interrupted:
        raise PathtwinError("the simulated replay ended before its connections finished")
    return SimulatedRun(capture=out / "simulation" / "pcap" / f"{capture_at}.pcap", result_dir=out / "simulation",
                        addresses=[str(a) for a in result.tables["pipes"]["address"]], wall_s=wall,
                        simulated_s=float(result.run["simulated_s"]), interrupted=interrupted)
