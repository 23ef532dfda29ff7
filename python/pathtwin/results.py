"""Result directories: ``run.json`` plus Parquet tables, written and read back.

Every run (simulated or emulated) writes a self-describing directory; plots and reports read
only these files, so any run can be re-plotted or compared later.

``run.json`` holds: ``format_version``, ``pathtwin_version``, ``git_revision``, ``engine``,
``seed``, ``config`` (fully resolved), ``wall_time_s``, ``complete`` (false when interrupted),
``warnings`` and engine-specific fields; each table is ``<name>.parquet``.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import PathtwinError

FORMAT_VERSION = 1
TABLES = ("flows", "flow_series", "queues", "queue_series", "markers")
# Columns of the ``markers`` table, the same from both engines: per ``[[marker]]``, IN (green)
# and OUT (yellow + red) packets and bytes, each colour, and the packets the TCP-friendly
# marker protected. A two-colour policy has no yellow.
MARKER_COLUMNS = ("marker", "kind", "in_packets", "in_bytes", "out_packets", "out_bytes", "green_packets",
                  "green_bytes", "yellow_packets", "yellow_bytes", "red_packets", "red_bytes", "protected_packets")


def git_revision() -> str:
    """The source tree's git revision, or "unknown" outside a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, timeout=5)
    return out.stdout.strip() + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


class LazyFrames(dict):
    """Tables kept as columns (or as a function that returns them) until first read, then as
    pandas DataFrames: pandas is imported only when someone looks, and a quiet command-line
    run, whose tables the engine wrote as Parquet itself, never does."""

    def __getitem__(self, name):
        value = self.columns(name)
        if isinstance(value, Mapping):
            value = columns_to_frame(value)
            super().__setitem__(name, value)
        return value

    def get(self, name, default=None):
        return self[name] if name in self else default

    def columns(self, name) -> Mapping:
        """Table ``name`` as ``{column: list}``, or its DataFrame once one was made (both
        index by column name)."""
        value = super().__getitem__(name)
        if callable(value):
            value = value()
            super().__setitem__(name, value)
        return value

    def items(self):
        return [(k, self[k]) for k in self.keys()]

    def values(self):
        return [self[k] for k in self.keys()]


@dataclass
class Result:
    """A run's tables as pandas DataFrames, and its ``run.json`` as a dict."""

    run: dict
    tables: dict = field(default_factory=dict)
    path: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tables, LazyFrames):
            self.tables = LazyFrames(self.tables)

    def __getattr__(self, name: str):
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(name)

    def table_columns(self, name: str):
        """Table ``name`` as ``{column: list}`` without pandas while it has not been read as a
        DataFrame (``None`` if the run has no such table)."""
        if name not in self.tables:
            return None
        return self.tables.columns(name)

    @property
    def flows(self):
        return self.tables["flows"]

    @property
    def flow_series(self):
        return self.tables["flow_series"]

    @property
    def queues(self):
        return self.tables["queues"]

    @property
    def queue_series(self):
        return self.tables["queue_series"]

    @property
    def markers(self):
        return self.tables["markers"]


def columns_to_frame(columns: Mapping[str, list]):
    import pandas as pd

    return pd.DataFrame({k: v for k, v in columns.items()})


def make_result_dir(out: Path) -> None:
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PathtwinError(f"{out}: cannot create result directory ({e.strerror})") from None


def write_run_json(out: Path, run: dict, tables) -> None:
    """Writes ``run.json``, listing ``tables`` (names) as the directory's Parquet files."""
    meta = {"format_version": FORMAT_VERSION, **run, "tables": sorted(tables)}
    (Path(out) / "run.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")


def write_result_dir(out: Path, run: dict, tables: Mapping[str, Any], written: Sequence[str] = ()) -> Path:
    """Writes ``run.json`` and one Parquet file per table (DataFrame or column dict);
    ``written`` names tables already written into ``out`` (listed in ``run.json`` too)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out)
    make_result_dir(out)
    for name, table in tables.items():
        if isinstance(table, Mapping):
            arrow = pa.table(dict(table))
        else:
            arrow = pa.Table.from_pandas(table, preserve_index=False)
        try:
            pq.write_table(arrow, out / f"{name}.parquet")
        except OSError as e:
            raise PathtwinError(f"{out / f'{name}.parquet'}: cannot write ({e.strerror or e})") from None
    write_run_json(out, run, [*tables, *written])
    return out


def read_result_dir(path) -> Result:
    """Reads a result directory written by any engine."""
    import pandas as pd

    path = Path(path)
    run_file = path / "run.json"
    if not run_file.is_file():
        raise PathtwinError(f"{path}: not a result directory (no run.json)")
    try:
        run = json.loads(run_file.read_text())
    except json.JSONDecodeError as e:
        raise PathtwinError(f"{run_file}: invalid JSON at line {e.lineno}") from None
    if run.get("format_version") != FORMAT_VERSION:
        raise PathtwinError(f"{run_file}: format_version {run.get('format_version')!r} is not {FORMAT_VERSION}")
    tables = {}
    for name in run.get("tables", []):
        f = path / f"{name}.parquet"
        if f.is_file():
            tables[name] = pd.read_parquet(f)
    return Result(run=run, tables=tables, path=path)


class Stopwatch:
    """Wall-clock time of a run, for ``run.json``."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
