"""Result directories: ``run.json`` plus Parquet tables, written and read back.

Every run (simulated or emulated) writes a self-describing directory; plots and reports read
only these files, so any run can be re-plotted or compared later.

``run.json`` holds: ``format_version``, ``pathtwin_version``, ``git_revision``, ``engine``,
``seed``, ``config`` (fully resolved), ``wall_time_s``, ``complete`` (false when interrupted),
``warnings`` and engine-specific fields, built for both engines by ``run_record``; each table
is ``<name>.parquet``, its schema declared once in Rust for both engines (``columns``).
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import PathtwinError

#: The result directory's layout. 2: the emulator's tables have the schemas both engines
#: share (`queue_series` with `time_s` and `queue`, `queues` with the simulator's columns),
#: and its per-5-tuple counts are `packet_flows`, no longer `flows`.
FORMAT_VERSION = 2


def columns(table: str, engine: str = "sim") -> list[str]:
    """The columns of result table ``table`` as ``engine`` ("sim" or "emu") writes it, from
    the one declaration in Rust (``pathtwin_core::results``)."""
    from . import _native

    try:
        return _native.table_columns(engine, table)
    except ValueError as e:
        raise PathtwinError(str(e)) from None


#: How long a run waits, after its engine finished, for git to name the source revision.
GIT_TIMEOUT_S = 5.0


class GitRevision:
    """The source tree's git revision (``<12 hex digits>[-dirty]``, "unknown" outside a
    checkout), asked of git when constructed and read by ``result()``: a run starts it before
    its engine and reads it after, so the ~4 ms git takes overlap the run instead of adding to
    it. Spawned without the ``subprocess`` module, whose import costs as much again."""

    def __init__(self) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        # `describe` with every tag excluded is the abbreviated hash, and `--dirty` marks
        # changes to tracked files (untracked ones do not make a tree dirty).
        argv = ["git", "-C", here, "describe", "--always", "--dirty", "--abbrev=12", "--exclude=*"]
        self._value: str | None = None
        self._pid = 0
        self._out = -1
        try:
            read, write = os.pipe()
        except OSError:
            self._value = "unknown"
            return
        try:
            self._pid = os.posix_spawnp("git", argv, os.environ, file_actions=[
                (os.POSIX_SPAWN_DUP2, write, 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            ])
            self._out = read
        except OSError:
            os.close(read)
            self._value = "unknown"
        finally:
            os.close(write)

    def result(self) -> str:
        if self._value is None:
            self._value = self._collect()
        return self._value

    def _collect(self) -> str:
        chunks, deadline = [], time.monotonic() + GIT_TIMEOUT_S
        try:
            while (left := deadline - time.monotonic()) > 0 and select.select([self._out], [], [], left)[0]:
                chunk = os.read(self._out, 4096)
                if not chunk:
                    break
                chunks.append(chunk)
            else:  # git took too long: leave it, and say so in run.json
                os.kill(self._pid, 9)
            status = os.waitpid(self._pid, 0)[1]
        finally:
            os.close(self._out)
        text = b"".join(chunks).decode(errors="replace").strip()
        return text if os.waitstatus_to_exitcode(status) == 0 and text else "unknown"


def git_revision() -> str:
    """The source tree's git revision, or "unknown" outside a checkout."""
    return GitRevision().result()


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


class Result:
    """A run's tables as pandas DataFrames, and its ``run.json`` as a dict."""

    def __init__(self, run: dict, tables: Mapping | None = None, path: Path | None = None) -> None:
        self.run = run
        self.tables = tables if isinstance(tables, LazyFrames) else LazyFrames(tables or {})
        self.path = path

    def __repr__(self) -> str:
        return f"Result(path={self.path!r}, tables={sorted(self.tables)})"

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


def run_record(*, engine: str, config: Mapping[str, Any], resolved_paths: Any, elements: Any, wall_time_s: float,
               complete: bool, warnings: Sequence[str], source: str | None, revision: str | None = None,
               **engine_fields: Any) -> dict[str, Any]:
    """A run's ``run.json`` content (``write_run_json`` adds ``format_version`` and
    ``tables``), built the same way for both engines: ``pathtwin_version``, ``git_revision``
    (``revision``, else git is asked now), ``engine``, ``seed`` (``[run] seed`` of
    ``config``), ``config`` (fully resolved), ``resolved_paths``, ``elements``,
    ``wall_time_s``, ``complete``, then ``engine_fields`` in the order given (the
    simulator's ``simulated_s``, ``events``, ``tcp_defaults`` (a full data segment's payload
    and IP bytes, and the largest window, of the ``[tcp]`` defaults), ``interrupted``,
    ``captures``; the emulator's
    ``run_id``, ``hosts``, ``started_at``, ``emulated_s``, ``timing``, ``host_counters``,
    ``tcp_sampling``), then ``warnings`` and ``source`` (the config's file, or None)."""
    from . import __version__

    return {
        "pathtwin_version": __version__,
        "git_revision": revision if revision is not None else git_revision(),
        "engine": engine,
        "seed": config.get("run", {}).get("seed"),
        "config": config,
        "resolved_paths": resolved_paths,
        "elements": elements,
        "wall_time_s": wall_time_s,
        "complete": complete,
        **engine_fields,
        "warnings": list(warnings),
        "source": source,
    }


def write_run_json(out: Path, run: dict, tables) -> None:
    """Writes ``run.json``, listing ``tables`` (names) as the directory's Parquet files."""
    meta = {"format_version": FORMAT_VERSION, **run, "tables": sorted(tables)}
    f = Path(out) / "run.json"
    try:
        f.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    except OSError as e:
        raise PathtwinError(f"{f}: cannot write ({e.strerror or e})") from None


def write_result_dir(out: Path, run: dict, tables: Mapping, written: Sequence[str] = ()) -> Path:
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


def read_versioned_json(directory: Path, name: str, kind: str, version: int) -> dict:
    """``directory/name``, a JSON record with a ``format_version``; a one-line error if there is
    none (``directory`` is then not ``kind``), it is not JSON, or it is of another version."""
    f = Path(directory) / name
    if not f.is_file():
        raise PathtwinError(f"{directory}: not {kind} (no {name})")
    try:
        record = json.loads(f.read_text())
    except json.JSONDecodeError as e:
        raise PathtwinError(f"{f}: invalid JSON at line {e.lineno}") from None
    if record.get("format_version") != version:
        raise PathtwinError(f"{f}: format_version {record.get('format_version')!r} is not {version}")
    return record


def read_run_json(path: Path) -> dict:
    """A result directory's ``run.json`` (``read_versioned_json``)."""
    return read_versioned_json(path, "run.json", "a result directory", FORMAT_VERSION)


def read_result_dir(path) -> Result:
    """Reads a result directory written by any engine."""
    import pandas as pd

    path = Path(path)
    run = read_run_json(path)
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
