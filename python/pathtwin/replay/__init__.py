"""Replay ("Monkey Do"): re-run a captured workload over per-connection emulated (or simulated) paths.

    result = pathtwin.replay.replay("server.pcap", out="run/", tcp={"initial_window": 10})
    print(result.summary["within_20pct"])
    result.table            # one row per connection: original and replayed response time

The parts, usable one by one from a notebook:
- :class:`Workload` (``workload.py``): the replay database, from a capture's analysis
  (``Workload.from_analysis(*pathtwin.trace.workload(capture)[:2])``) or drawn as a ground
  truth (:func:`synthetic`);
- :func:`run_emulated` (``emu.py``): the workload in the emulator, real kernel TCP on both
  sides, each connection on its own pipe, captured at the server;
- :func:`run_simulated` (``sim.py``): the same in the simulator, simulated TCP, for fast
  what-if sweeps; its capture goes through the same analysis and comparison;
- :func:`compare` / :func:`summary` (``compare.py``): per-connection response times of the
  source and of the replay, and the paper's accuracy figures; :func:`categories` (Figs. 6-8:
  the signed error per category of response time, bandwidth and RTT) and :func:`halves`
  (Fig. 9: the workload's two halves in time);
- ``figures.py``: those drawn (matplotlib), :func:`~pathtwin.replay.figures.write_figures`.

The server's ``tcp`` settings are the what-if: the clients and the paths stay as traced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

import pandas as pd

from ..errors import PathtwinError
from .compare import (CATEGORIES, breakdown, carried_whole, categories, compare, halves, ks_distance, ks_reading, response_times,
                      response_times_by_slot, summary)
from .dbcheck import check_source_exchanges
from .emu import EmulatedRun, run_emulated
from .sim import REPLAY_TCP, SimulatedRun, run_simulated
from .workload import LOSS_MODELS, Workload, check_loss_model, synthetic

#: The replay server's initial window (segments) unless set: the kernel's (TCP_INIT_CWND)
#: and both simulated profiles' (docs/tcp-defaults.md).
DEFAULT_INITIAL_WINDOW = 10

#: Engines a replay runs in.
ENGINES = ("emu", "sim")

__all__ = ["Workload", "synthetic", "run_emulated", "run_simulated", "SimulatedRun", "compare", "summary", "breakdown", "categories", "CATEGORIES", "halves",
           "ks_distance", "ks_reading",
           "response_times", "response_times_by_slot", "replay", "ReplayResult", "load_source", "LOSS_MODELS"]


@dataclass
class ReplayResult:
    workload: Workload
    #: One row per connection: path, original and replayed response time, relative error.
    table: pd.DataFrame
    summary: dict
    run: Union[EmulatedRun, SimulatedRun]
    out: Path


def load_source(source, server: Optional[str] = None, keep_open: bool = False,
                exchanges_table=None) -> tuple[Workload, pd.DataFrame]:
    """The replay database and the source's exchange table (for the original response
    times) of a capture file, a database directory written by :meth:`Workload.save`
    (whose ``source_exchanges.parquet``, if present, holds the original times), or a
    connection table of ``pathtwin trace analyze -o conns.parquet`` with its exchange table
    (``--exchanges``) as ``exchanges_table``."""
    from .. import trace

    p = Path(source)
    if p.is_dir():
        w = Workload.load(p)
        ex = check_source_exchanges(p / "source_exchanges.parquet")
        return w, (ex if ex is not None else pd.DataFrame(columns=["conn_id", "request_start_s", "response_end_s"]))
    if p.suffix in (".parquet", ".csv"):
        if exchanges_table is None:
            raise PathtwinError(f"{p}: a connection table replays with its exchange table "
                                f"(pathtwin trace analyze CAPTURE -o {p.name} --exchanges exchanges.parquet; then --exchanges)")
        conns, exchanges = (trace.read_table(t) for t in (p, exchanges_table))
        missing = [c for c in ("conn_id", "kept", "bottleneck_bps") if c not in conns.columns]
        if missing or "exchange" not in exchanges.columns:
            raise PathtwinError(f"{p}: not a pathtwin trace connection table with its exchange table")
    else:
        try:
            conns, exchanges, _ = trace.workload(p, server=server)
        except PathtwinError as e:
            raise PathtwinError(str(e) if str(p) in str(e) else f"{p}: {e}") from None
    if len(conns) == 0:
        raise PathtwinError(f"{p}: no TCP connection" + (f" with server {server}" if server else "") + " in the capture")
    try:
        return Workload.from_analysis(conns, exchanges, keep_open=keep_open), exchanges
    except PathtwinError as e:
        hint = " (--keep-open replays connections still open when the capture ended)" if "incomplete termination" in str(e) and not keep_open else ""
        raise PathtwinError(f"{p}: {e}{hint}") from None


def replay(source: Union[str, Path, Workload], out, server: Optional[str] = None, tcp: Optional[dict] = None,
           engine: str = "emu", source_exchanges: Optional[pd.DataFrame] = None,
           progress: Optional[Callable[[float], None]] = None, seed: int = 1, keep_open: bool = False,
           loss: str = LOSS_MODELS[0]) -> ReplayResult:
    """Builds the replay database of ``source`` (a capture, a database directory or a
    :class:`Workload`), replays it with the server's ``tcp`` settings and compares
    per-connection response times with the source's, in the emulator (``engine="emu"``,
    real kernel TCP) or the simulator (``"sim"``, simulated TCP; ``progress`` is the
    emulator's). Writes under ``out``: ``db/`` (the database), ``replay/`` (the emulation
    or simulation, the server capture, the emulator agents' logs), ``replay_conns.parquet``
    and ``replay_exchanges.parquet`` (that capture analysed), ``connections.parquet`` (the
    comparison) and ``summary.json`` (with Figs. 6-8's ``categories`` and Fig. 9's ``halves``;
    ``figures.write_figures`` draws them). ``loss``: ``"trace"`` (the default) loses the
    data the capture shows lost, ``"random"`` loses at each path's rate (Monkey's; the
    :mod:`~pathtwin.replay.workload` doc says why trace is the default). Ctrl-C during the replay ends it there and still writes
    all of these, comparing the connections that had carried all their bytes
    (``summary["interrupted"]``)."""
    from .. import trace

    if engine not in ENGINES:
        raise PathtwinError(f"engine {engine!r}: a replay runs in {' or '.join(repr(e) for e in ENGINES)}")
    check_loss_model(loss)
    out = Path(out)
    if isinstance(source, Workload):
        workload = source
        if source_exchanges is None:
            raise PathtwinError("a Workload source needs source_exchanges for the original response times")
    else:
        workload, source_exchanges = load_source(source, server, keep_open=keep_open)
    tcp = dict(tcp or {})
    # A client-side capture shows the traced server's first flights: where one was larger
    # than the replay server's default initial window (Linux's and both simulated profiles':
    # 10 segments), the replay starts from it, unless the what-if names one (a browser
    # capture whose CDN sent 22 segments at once replayed 40 % slow from 10).
    from_capture = {}
    iw = workload.server_initial_window
    if workload.vantage == "client" and "initial_window" not in tcp and iw is not None and iw > DEFAULT_INITIAL_WINDOW:
        tcp["initial_window"] = from_capture["initial_window"] = int(iw)
    workload.save(out / "db")
    source_exchanges.to_parquet(out / "db" / "source_exchanges.parquet", index=False)
    # Captured where the source was, so that response times compare like for like.
    capture_at = "clients" if workload.vantage == "client" else "server"
    run: SimulatedRun | EmulatedRun
    if engine == "sim":
        run = run_simulated(workload, out / "replay", tcp=tcp, seed=seed, capture_at=capture_at, loss=loss)
    else:
        run = run_emulated(workload, out / "replay", tcp=tcp, progress=progress, seed=seed, capture_at=capture_at, loss=loss)
    rconns, rex, _ = trace.workload(run.capture, server=None)
    # The replay's own capture, analysed as the source was: to compare any column, not only
    # response times.
    rconns.to_parquet(out / "replay_conns.parquet", index=False)
    rex.to_parquet(out / "replay_exchanges.parquet", index=False)
    if run.interrupted:
        # Ctrl-C: a connection cut mid-response would compare a truncated response time; only
        # those that carried all their bytes are compared, the rest count as not replayed.
        rconns = carried_whole(workload, rconns, run.addresses)
    table = compare(workload, source_exchanges, rconns, rex, run.addresses)
    table.to_parquet(out / "connections.parquet", index=False)
    s = summary(table)
    s["categories"] = categories(table)
    s["halves"] = halves(table)
    # The server's TCP as run: in the simulator, over the replay's profile (REPLAY_TCP).
    s.update({"engine": engine, "tcp": {**REPLAY_TCP, **tcp} if engine == "sim" else tcp, "tcp_from_capture": from_capture,
              "loss": loss, "trace_loss_share": workload.trace_loss_share(),
              "skipped": workload.skipped, "vantage": workload.vantage, "wall_s": run.wall_s,
              "interrupted": run.interrupted})
    (out / "summary.json").write_text(json.dumps(s, indent=2))
    return ReplayResult(workload, table, s, run, out)
