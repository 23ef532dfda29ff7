"""Running one point of a sweep inside a Dask worker, and moving its tables into the
sweep's datasets.

A simulation point runs in the worker's own process (``pathtwin.simulate``, the native
simulator: no interpreter per point). An emulation point first takes a lease of the
machine's emulation semaphore, so that at most ``emu_per_machine`` emulations share a
machine (real-time and timing-sensitive: two at once on two cores disturb each other's
timers; ``docs/sweeps.md``). Whatever goes wrong becomes the point's one-line error, never
the sweep's: ``run_point`` always returns an outcome.

Not here: what a point's config is (``spec``), the directory's layout and ``sweep.json``
(``store``), scheduling (``runner``).
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PathtwinError
from .store import POINTS_DIR, STAGING_DIR, point_file


@dataclass(frozen=True)
class PointTask:
    """What a worker needs to run a point: the sweep directory (``out``, the same path on
    every worker), the point's ``id`` and ``partition`` directory, its ``engine`` and full
    ``config``, the git ``revision`` for its run.json, and the emulation limit."""

    out: str
    id: str
    partition: str
    engine: str
    config: dict[str, Any]
    revision: str
    emu_per_machine: int = 1


def run_points(tasks: list[PointTask]) -> list[dict[str, Any]]:
    """Runs ``tasks`` one after the other (a batch: one Dask task for several short
    simulation points) and returns their outcomes."""
    return [run_point(t) for t in tasks]


def run_point(task: PointTask) -> dict[str, Any]:
    """Runs ``task`` and returns its outcome: ``id``, ``status`` ("done" or "failed"),
    ``error`` (one line), ``wall_s``, ``tables`` (written into the datasets), ``warnings``."""
    start = time.perf_counter()
    out = Path(task.out)
    staging = out / STAGING_DIR / task.id
    warnings: list[str] = []
    try:
        _remove_earlier_attempt(out, task, staging)
        if task.engine == "emu":
            with _emulation_lease(task.emu_per_machine):
                result = _run(task, staging, warnings)
        else:
            result = _run(task, staging, warnings)
        if not result.run.get("complete", False):
            raise PathtwinError("the run ended before its duration (interrupted)")
        tables = _move_tables(out, task, staging, list(result.tables))
    except PathtwinError as e:
        return _failed(task, str(e), start, warnings)
    except Exception as e:  # any other failure is this point's, not the sweep's
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return _failed(task, f"{type(e).__name__}: {first}" if first else type(e).__name__, start, warnings)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {"id": task.id, "status": "done", "error": None, "wall_s": time.perf_counter() - start,
            "tables": tables, "warnings": warnings}


def _run(task: PointTask, staging: Path, warnings: list[str]):
    if task.engine == "emu":
        from ..emulation import emulate

        return emulate(task.config, out=staging, on_warning=warnings.append)
    from ..sim import simulate

    return simulate(task.config, out=staging, on_warning=warnings.append, revision=task.revision)


def _remove_earlier_attempt(out: Path, task: PointTask, staging: Path) -> None:
    """Deletes what an earlier, unfinished attempt at this point left in the datasets, so
    that a point that now fails leaves no rows behind."""
    shutil.rmtree(staging, ignore_errors=True)
    for table_dir in out.iterdir():
        if table_dir.is_dir() and table_dir.name not in (POINTS_DIR, STAGING_DIR):
            point_file(out, table_dir.name, task.partition, task.id).unlink(missing_ok=True)


def _move_tables(out: Path, task: PointTask, staging: Path, tables: list[str]) -> list[str]:
    """Moves the engine's Parquet files into the datasets, and run.json beside the others."""
    moved = []
    for name in tables:
        src = staging / f"{name}.parquet"
        if not src.is_file():
            continue
        dest = point_file(out, name, task.partition, task.id)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
        moved.append(name)
    run_json = staging / "run.json"
    if run_json.is_file():
        os.replace(run_json, out / POINTS_DIR / f"{task.id}.json")
    return moved


def _failed(task: PointTask, error: str, start: float, warnings: list[str]) -> dict[str, Any]:
    return {"id": task.id, "status": "failed", "error": error.replace("\n", " "), "wall_s": time.perf_counter() - start,
            "tables": [], "warnings": warnings}


class _emulation_lease:
    """At most ``limit`` emulations at once on this machine, across every worker of the
    cluster: a Dask semaphore named after the host. Outside a Dask worker (a plain call),
    no lease is needed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.semaphore: Any = None

    def __enter__(self) -> "_emulation_lease":
        from distributed import Semaphore
        from distributed.worker import get_worker

        try:
            get_worker()
        except ValueError:
            return self
        # The limit is in the name: a scheduler keeps one semaphore per name with the limit it
        # was made with, and a later sweep asking another limit must get its own.
        self.semaphore = Semaphore(max_leases=self.limit, name=f"pathtwin-emu-{socket.gethostname()}-{self.limit}")
        self.semaphore.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.semaphore is not None:
            self.semaphore.release()
