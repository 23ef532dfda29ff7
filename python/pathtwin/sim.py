"""Running the simulator from Python: ``simulate(config) -> Result``.

The run advances in chunks of simulated time with the GIL released, so a progress bar can
follow it and Ctrl-C stops it between chunks; an interrupted run still returns (and writes)
everything measured so far, marked ``complete: false``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .config import ConfigSource, config_text, native_call
from .errors import PathtwinError
from .results import GitRevision, Result, Stopwatch, make_result_dir, run_record, write_run_json

#: Aim for this much wall time per chunk, so that progress and Ctrl-C stay responsive.
CHUNK_WALL_S = 0.1


def _run_chunks(sim, on_progress=None) -> bool:
    """Advances to the end; returns False if interrupted by Ctrl-C."""
    step = max(sim.duration_s / 1000.0, 1e-3)
    try:
        while not sim.finished:
            t0 = time.perf_counter()
            sim.advance(min(sim.now_s + step, sim.duration_s))
            dt = time.perf_counter() - t0
            if dt > 0:
                step = min(max(step * CHUNK_WALL_S / dt, step / 4), step * 4)
            if on_progress:
                on_progress(sim.now_s, sim.duration_s)
        return True
    except KeyboardInterrupt:
        return False


def simulate(config: ConfigSource, out=None, progress: bool = False, on_warning=None, revision: str | None = None) -> Result:
    """Simulates ``config`` (a TOML path or text, or a dict); writes ``out`` if given.
    ``revision`` is the source's git revision for ``run.json`` when the caller knows it
    already (a sweep asks git once, not once per point); otherwise git is asked.

    Returns a ``Result`` whose ``flows``, ``flow_series``, ``queues``, ``queue_series`` and
    ``markers`` (and, with ``[[pipe]]``s, ``pipes``: pipe, client, server, address; with
    ``[[probe]]``s, ``probes``: a row per probe with its send, arrival and echo times) are
    pandas DataFrames and whose ``run`` is the ``run.json`` content.
    """
    from . import _native

    text, fmt, origin = config_text(config)
    sim = native_call(_native.Simulation, text, fmt, origin)
    for w in sim.warnings:
        if on_warning:
            on_warning(w)
    resolved = json.loads(sim.resolved_json())
    pcap_hosts = resolved["config"]["run"]["pcap"]
    captures = []
    if pcap_hosts:
        if out is None:
            if on_warning:
                on_warning("[run] pcap needs a result directory; no captures written")
        else:
            captures = native_call(sim.capture_to, Path(out) / "pcap")
    git = GitRevision() if revision is None else None  # asked now, read after the run
    watch = Stopwatch()
    if progress:
        completed = _run_with_progress(sim)
    else:
        completed = _run_chunks(sim)
    wall = watch.elapsed()
    if captures:
        native_call(sim.flush_captures)
    path = None
    if out is not None:
        path = Path(out)
        make_result_dir(path)
        written = native_call(sim.write_results, path)
        meta, names, failed = written["meta"], written["tables"], written["failed"]
        # The tables become Python objects only if someone reads them (a command-line run
        # that only writes files never does).
        tables = {name: (lambda name=name: sim.results([name])[name]) for name in names}
    else:
        raw = sim.results()
        meta = raw["meta"]
        tables = {name: raw[name] for name in ("flows", "flow_series", "queues", "queue_series", "markers")}
        if raw["pipes"]["pipe"]:
            # Per-connection pipes (replay): which client address each pipe's flows come from.
            tables["pipes"] = raw["pipes"]
        if raw["probes"]["probe"]:
            tables["probes"] = raw["probes"]
    run = run_record(
        engine="sim", config=resolved["config"], resolved_paths=resolved["paths"], elements=resolved["elements"],
        wall_time_s=wall, complete=bool(meta["complete"]) and completed, warnings=sim.warnings,
        source=origin or None, revision=git.result() if git is not None else revision,
        simulated_s=meta["simulated_s"], events=meta["events"], tcp_defaults=resolved["tcp_defaults"], interrupted=not completed,
        captures=[str(Path(c).relative_to(Path(out))) for c in captures] if captures else [],
    )
    if path is not None:
        if failed:
            # A full disk: what was written stays readable, run.json says what is missing.
            run["warnings"] += [f"not written: {why}" for why in failed]
            write_run_json(path, run, tables)
            raise PathtwinError(f"{failed[0]}; the {len(names)} tables that fit are kept, listed in "
                                f"{path / 'run.json'}")
        write_run_json(path, run, tables)
    return Result(run=run, tables=tables, path=path)


def _run_with_progress(sim) -> bool:
    """Runs with a rich progress bar, shown only when the run takes more than a second (rich
    is imported only then: its import is a third of a short run)."""
    start = time.perf_counter()
    bar = None
    task = None

    def on_progress(now_s: float, total_s: float) -> None:
        nonlocal bar, task
        if bar is None and time.perf_counter() - start > 1.0:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            bar = Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:.1f}/{task.total:.0f} s"),
                           TimeElapsedColumn(), transient=True)
            bar.start()
            task = bar.add_task("sim", total=total_s)
        if bar is not None and task is not None:
            bar.update(task, completed=now_s)

    try:
        return _run_chunks(sim, on_progress)
    finally:
        if bar is not None:
            bar.stop()
