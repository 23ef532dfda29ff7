"""Sweeps: one scenario run over axes of config keys (a grid, a list of cases, or both), in
either engine, on Dask; results in one hive-partitioned Parquet dataset per result table and
``sweep.json``. ``pathtwin.sweep(spec, out)`` runs one (resuming ``out`` if it holds this
spec's unfinished sweep) and returns its tables combined; ``pathtwin.read_sweep(out)`` reads
one back. The format of a spec is in ``docs/sweeps.md``.

(The package is ``sweeps`` so that importing it never hides the function ``pathtwin.sweep``:
a submodule ``pathtwin.sweep`` would replace that attribute of the package once imported.)

Modules: ``spec`` (reading and expanding a spec, validating every point), ``store`` (the
directory, ``sweep.json``, the datasets and reading them), ``point`` (one point in a
worker), ``runner`` (Dask). The command line is ``pathtwin.cli.sweep``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .runner import EMU_PER_MACHINE, Outcome, Progress, run
from .spec import SweepSpec, read_spec
from .store import SweepResult, read_sweep

__all__ = ["sweep", "read_sweep", "read_spec", "run", "SweepResult", "SweepSpec", "Outcome", "Progress"]


def sweep(spec: str | os.PathLike | Mapping, out: str | os.PathLike, workers: int | None = None,
          scheduler: str | None = None, force: bool = False, emu_per_machine: int = EMU_PER_MACHINE,
          progress: Progress | None = None) -> SweepResult:
    """Runs the sweep ``spec`` (a spec file, TOML text or a dict) into ``out`` and returns
    its tables, each one DataFrame over every done point with a column per axis
    (``result.flows``), and ``sweep.json`` as ``result.run`` (``result.points``: each point's
    status and error line; ``result.failed``: how many failed). A point that failed does not
    stop the others; Ctrl-C stops the sweep and raises ``KeyboardInterrupt`` after recording
    what finished (the same call resumes it)."""
    outcome = run(read_spec(spec), out, workers=workers, scheduler=scheduler, force=force,
                  emu_per_machine=emu_per_machine, progress=progress)
    if outcome.interrupted:
        raise KeyboardInterrupt
    return read_sweep(out)

