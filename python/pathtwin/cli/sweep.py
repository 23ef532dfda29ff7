"""`pathtwin sweep SPEC.toml -o RUN`: runs a sweep (a scenario over axes of config keys, in
either engine) on Dask, with a rich progress bar of points done, failed and time left, and
ends with the count of failed points and their error lines (exit status 1 if any failed).
Run again with the same ``-o``, it continues an interrupted sweep. The work is
``pathtwin.sweeps``'; this module parses, draws and reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

#: Failed points listed at the end (the rest are in sweep.json).
LISTED_FAILURES = 10


class _Bar:
    """The sweep's rich progress bar: points done of all, failed, elapsed and left."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("failed {task.fields[failed]}"),
                            TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn())
        self.task: Any = None
        self.failed = 0

    def start(self, total: int, done: int, failed: int) -> None:
        self.failed = failed
        self.bar.start()
        self.task = self.bar.add_task("sweep", total=total, completed=done + failed, failed=failed)

    def point(self, outcome: dict[str, Any]) -> None:
        self.failed += outcome["status"] == "failed"
        self.bar.update(self.task, advance=1, failed=self.failed)

    def close(self) -> None:
        self.bar.stop()


def sweep(
    spec: Path = typer.Argument(..., help="Sweep spec (TOML): scenario, [set], [grid] and/or [[case]] (docs/sweeps.md)."),
    out: Path = typer.Option(..., "--out", "-o", help="Sweep directory: sweep.json and one Parquet dataset per table."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Local Dask workers (default: one per core)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Address of a running Dask scheduler (e.g. tcp://host:8786) instead of a local cluster."),
    emu_per_machine: int = typer.Option(1, "--emu-per-machine", help="Emulation points at once on one machine (default 1: emulation is real time)."),
    force: bool = typer.Option(False, "--force", help="Discard the results of another spec's sweep in OUT and start over."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> int:
    """Run SPEC's points (one scenario over axes of config keys) into OUT, resuming OUT if
    it holds this spec's unfinished sweep."""
    from ..errors import PathtwinError
    from ..sweeps import read_spec, run

    if workers is not None and scheduler is not None:
        raise PathtwinError("--workers and --scheduler: give one (a scheduler's cluster has its own workers)")
    parsed = read_spec(spec)
    outcome = run(parsed, out, workers=workers, scheduler=scheduler, force=force, emu_per_machine=emu_per_machine,
                  progress=None if quiet else _Bar())
    counts = outcome.counts
    total = sum(counts.values())
    if outcome.interrupted:
        print(f"interrupted: {counts['done']} of {total} points done, {counts['failed']} failed; "
              f"run the same command again to continue", flush=True)
        return 130
    print(f"{total} points: {counts['done']} done, {counts['failed']} failed; results in {out}")
    if counts["failed"]:
        _print_failures(out)
        return 1
    return 0


def _print_failures(out: Path) -> None:
    from ..sweeps.store import read_record

    failed = [p for p in read_record(out)["points"] if p["status"] == "failed"]
    for p in failed[:LISTED_FAILURES]:
        values = ", ".join(f"{k}={v!r}" for k, v in p["values"].items())
        print(f"  {p['id']} ({values}): {p['error']}")
    if len(failed) > LISTED_FAILURES:
        print(f"  ... and {len(failed) - LISTED_FAILURES} more in {out / 'sweep.json'}")


def register(app: typer.Typer) -> None:
    """Adds `pathtwin sweep`."""
    app.command()(sweep)
