"""The emulator's result directory: its ``run.json``, from what
``pathtwin._native.EmuRun.stop()`` returns (``write_emu_results``).

The tables themselves are built and written in Rust, by the simulator's Parquet writer and
with the schemas both engines share (``pathtwin_core::results``; their columns:
``pathtwin.results.columns(name, engine="emu")``): ``queues``, ``queue_series``,
``markers`` and ``pipes`` as the simulator's (the emulator's ``pipes`` adds per-direction
packet and drop counts), ``flow_series`` from every sending TCP socket's ``tcp_info`` (the
simulator's columns, then the kernel's own), and the emulator's own ``packet_flows`` (every
transport flow direction that crossed it), ``routes`` and ``timing``; with the ``[[flow]]``
workload run, ``flows`` as well, with the simulator's schema. ``run.json`` is built by
``results.run_record``, as the simulator's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import PathtwinError
from .results import make_result_dir, run_record, write_run_json


def emu_run_record(raw: Mapping[str, Any], wall_time_s: float, started_at: float, warnings: list, source) -> dict[str, Any]:
    """An emulation's ``run.json`` content, from what ``EmuRun.stop()`` returned (``raw``).
    ``complete`` is false when the ``[[flow]]`` workload was stopped before its end."""
    facts = raw["run"]
    return run_record(
        engine="emu", config=facts["config"], resolved_paths=facts["resolved_paths"], elements=facts["elements"],
        wall_time_s=wall_time_s, complete=not facts["interrupted"], warnings=warnings, source=source,
        run_id=facts["run_id"],
        hosts=facts["hosts"],
        started_at=started_at,
        emulated_s=facts["emulated_s"],
        timing=facts["timing"],
        host_counters=facts["host_counters"],
        # Cost of the tcp_info sampling thread (sweeps of every host, µs each).
        tcp_sampling=facts["tcp_sampling"],
        # Whether the config's [[flow]] workload ran (the `flows` table), and was cut short.
        workload=facts["workload"],
        interrupted=facts["interrupted"],
    )


def write_emu_results(out, raw: Mapping[str, Any], run: dict[str, Any]) -> Path:
    """Writes an emulation's ``run.json`` (``run``, see ``emu_run_record``) into ``out``,
    beside the tables the native side wrote there (``raw["written"]``). A table it could not
    write is a one-line error, after ``run.json``; the tables stay in ``raw["tables"]``
    (nothing measured is lost)."""
    out = Path(out)
    make_result_dir(out)
    write_run_json(out, run, raw["written"])
    missing = [name for name in raw["tables"] if name not in raw["written"]]
    if missing:
        why = raw["warnings"][0] if raw["warnings"] else f"{out}: not written"
        raise PathtwinError(f"{why}; {', '.join(missing)} kept in memory (Emulation.results)")
    return out
