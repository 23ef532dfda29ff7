"""Running a sweep's points on Dask: a ``LocalCluster`` of one single-threaded worker process
per core by default (simulation is CPU-bound and holds a core), or an existing scheduler
(``scheduler="tcp://host:8786"``, e.g. a dask-jobqueue cluster on SLURM/PBS). Simulation
points go out in batches sized by their wall time, emulation points one per task and only
as many at once as the machines' leases allow; outcomes are recorded in ``sweep.json`` as
they arrive, and a ``Progress`` is told of each.

Ctrl-C stops the sweep: the points finished so far stay recorded, the others stay pending
for the next run with the same directory.

Not here: the spec (``spec``), the directory (``store``), what a task does (``point``),
drawing the progress bar (the command line's).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import PathtwinError
from .point import PointTask, run_points
from .spec import SweepSpec
from .store import SweepDir, partition_dir

#: Emulations at once per machine by default: one (see ``docs/sweeps.md``).
EMU_PER_MACHINE = 1
#: Tasks the local scheduler hands a worker per thread: 2, so that the next point is already
#: there when one ends (Dask's default of 1.1 leaves a worker idle for a round trip to the
#: scheduler between points, a few milliseconds each).
WORKER_SATURATION = 2.0
#: Batches of simulation points (see ``_run_tasks``): about this much wall time each,
BATCH_S = 0.2
#: at most this many points,
MAX_BATCH = 16
#: and at least this many batches left per worker thread.
BATCHES_PER_THREAD = 4
#: Batches out at once per worker thread.
IN_FLIGHT_PER_THREAD = 2


class Progress(Protocol):
    """Told of a sweep's progress (the command line draws a rich bar from it)."""

    def start(self, total: int, done: int, failed: int) -> None: ...
    def point(self, outcome: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


@dataclass
class Outcome:
    """How a run of a sweep ended: ``counts`` of done, failed and pending points, and
    whether Ctrl-C stopped it."""

    counts: dict[str, int]
    interrupted: bool = False


def run(spec: SweepSpec, out: str | os.PathLike, workers: int | None = None, scheduler: str | None = None,
        force: bool = False, emu_per_machine: int = EMU_PER_MACHINE, progress: Progress | None = None) -> Outcome:
    """Runs the points of ``spec`` not yet done in ``out``."""
    from ..results import GitRevision

    if workers is not None and workers < 1:
        raise PathtwinError(f"--workers: {workers} is not a positive number of workers")
    if emu_per_machine < 1:
        raise PathtwinError(f"--emu-per-machine: {emu_per_machine} is not a positive number of emulations")
    sweep = SweepDir.open(out, spec, force=force, revision=GitRevision().result())
    todo = sweep.todo()
    counts = sweep.counts()
    if progress is not None:
        progress.start(len(spec.points), counts["done"], counts["failed"])
    interrupted = False
    try:
        if todo:
            revision = sweep.record["git_revision"]
            tasks = [PointTask(out=str(sweep.path.resolve()), id=p.id, partition=partition_dir(spec, p), engine=p.engine,
                               config=p.config or {}, revision=revision, emu_per_machine=emu_per_machine) for p in todo]
            with _client(workers, scheduler) as client:
                _run_tasks(client, tasks, sweep, progress)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sweep.flush(force=True)
        if progress is not None:
            progress.close()
    return Outcome(counts=sweep.counts(), interrupted=interrupted)


def _run_tasks(client: Any, tasks: list[PointTask], sweep: SweepDir, progress: Progress | None) -> None:
    """Submits the points and records their outcomes as they arrive.

    Emulation points are one task each. Simulation points go out in batches sized as they
    run: the first alone, then as many as take about ``BATCH_S`` by the points finished so
    far, never so many that fewer than ``BATCHES_PER_THREAD`` batches would be left per
    worker thread (the last batches must still spread over every worker). Dask's own cost,
    a few milliseconds of the scheduler's and the client's CPU per task, is then paid per
    batch; on a machine whose every core runs a worker, that CPU is taken from the points.
    ``IN_FLIGHT_PER_THREAD`` batches per thread are out at any time."""
    from distributed import as_completed

    prefix = f"pathtwin-point-{sweep.spec.fingerprint}"
    workers = client.scheduler_info()["workers"].values()
    threads = max(1, sum(w.get("nthreads", 1) for w in workers))
    # Emulation points out at once: as many as the machines' leases allow, so that a worker
    # does not sit waiting for a lease while simulation points could use it.
    emu_slots = max(1, len({w.get("host") for w in workers})) * tasks[0].emu_per_machine if tasks else 1
    queue = [t for t in tasks if t.engine != "emu"]
    emu_queue = [t for t in tasks if t.engine == "emu"]
    futures: dict[Any, list[PointTask]] = {}
    emu_out = 0

    def submit(batch: list[PointTask]) -> Any:
        future = client.submit(run_points, batch, key=f"{prefix}-{batch[0].id}-{len(batch)}", pure=False)
        futures[future] = batch
        return future

    while emu_queue and emu_out < emu_slots:
        submit([emu_queue.pop(0)])
        emu_out += 1
    for _ in range(IN_FLIGHT_PER_THREAD * threads):
        if queue:
            submit([queue.pop(0)])
    walls: list[float] = []
    # Results gathered as they come (with_results): asking each future for its result
    # would cost a round trip to the client's event loop per task (~7 ms here).
    pending = as_completed(list(futures), with_results=True, raise_errors=False)
    try:
        for future, result in pending:
            batch = futures[future]
            if isinstance(result, list):
                outcomes = result
            else:  # the worker died under it (Dask gave up after its retries) or it was cancelled
                error = f"{type(result).__name__}: {result}".splitlines()[0] if isinstance(result, BaseException) else f"task {future.status}"
                outcomes = [{"id": t.id, "status": "failed", "error": error} for t in batch]
            for outcome in outcomes:
                sweep.record_outcome(outcome)
                if progress is not None:
                    progress.point(outcome)
                if outcome.get("wall_s") is not None and outcome["status"] == "done" and batch[0].engine != "emu":
                    walls.append(outcome["wall_s"])
            if batch[0].engine == "emu":
                emu_out -= 1
                if emu_queue:
                    pending.add(submit([emu_queue.pop(0)]))
                    emu_out += 1
            elif queue:
                size = _batch_size(walls, len(queue), threads)
                pending.add(submit(queue[:size]))
                del queue[:size]
    finally:
        client.cancel(list(futures))


def _batch_size(walls: list[float], left: int, threads: int) -> int:
    """Points in the next batch: ``BATCH_S`` worth by the recent points' mean wall time,
    at most ``MAX_BATCH``, and at most a ``BATCHES_PER_THREAD``-th share per thread of
    what is left."""
    recent = walls[-20:]
    if not recent:
        return 1
    mean = max(sum(recent) / len(recent), 1e-4)
    return max(1, min(int(BATCH_S / mean), MAX_BATCH, left // (threads * BATCHES_PER_THREAD)))


class _client:
    """A Dask client: to ``scheduler`` if given, else to a new ``LocalCluster`` of
    ``workers`` (default: one per core) single-threaded worker processes, closed on exit."""

    def __init__(self, workers: int | None, scheduler: str | None) -> None:
        self.workers = workers
        self.scheduler = scheduler
        self.cluster: Any = None
        self.client: Any = None

    def __enter__(self) -> Any:
        from distributed import Client, LocalCluster

        if self.scheduler is not None:
            try:
                self.client = Client(self.scheduler, timeout="10s")
            except (OSError, TimeoutError) as e:
                raise PathtwinError(f"--scheduler {self.scheduler}: cannot connect ({e})".splitlines()[0]) from None
            return self.client
        import dask

        n = self.workers or os.cpu_count() or 1
        # One thread per worker: a point holds a core (the simulator runs with the GIL
        # released); processes, so that workers never share an interpreter. The scheduler's
        # HTTP server (its dashboard and health routes) always starts, on 8787 when asked for
        # nothing: a port the system picks (":0") never collides with another sweep or a
        # user's own cluster, and gives no "port 8787 in use" warning.
        with dask.config.set({"distributed.scheduler.worker-saturation": WORKER_SATURATION}), _workers_ignore_ctrl_c():
            self.cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                                        silence_logs=logging.ERROR)
        self.client = Client(self.cluster)
        return self.client

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


class _workers_ignore_ctrl_c:
    """SIGINT ignored while the local workers are spawned: they inherit it, so Ctrl-C in a
    terminal (sent to every process of the foreground group) reaches only this process,
    which stops the sweep and closes the cluster, instead of each worker dying with a
    traceback of its own. Only in the main thread, where Python allows it."""

    def __enter__(self) -> None:
        import signal
        import threading

        self.previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
