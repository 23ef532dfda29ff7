"""The sweep directory: ``sweep.json`` (the spec, its axes, every point's status and error
line) and one Parquet dataset per result table, hive-partitioned by the axes; starting one,
resuming one (and refusing to resume another spec's), and reading one back.

Layout of ``RUN/``::

    sweep.json
    flows/path[0].rtt=20ms/tcp.cc=cubic/p00000.parquet   one file per point and table,
    flow_series/...                                       as the engine wrote it (the
    points/p00000.json                                    schema is Rust's), and the
                                                          point's run.json
    .staging/p00000/                                      a point being run

A point's files are moved into the datasets only when its run has ended, and a point counts
as done only once ``sweep.json`` says so: a reader takes the files of done points alone, so
a file left by a killed run is never read, and is overwritten when the point runs again.

Not here: what a spec is (``spec``), running a point (``point``), Dask (``runner``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ..errors import PathtwinError
from ..results import LazyFrames, Result, read_versioned_json
from .spec import Axis, Point, SweepSpec

#: sweep.json's layout.
FORMAT_VERSION = 1
SWEEP_JSON = "sweep.json"
#: Per-point run.json files.
POINTS_DIR = "points"
#: Where a running point's engine writes before its files move into the datasets.
STAGING_DIR = ".staging"
#: sweep.json is rewritten at most this often while points finish (and always at the end):
#: a point finished but not yet recorded when the sweep is killed simply runs again.
FLUSH_INTERVAL_S = 0.5

#: Tables both engines write for every run.
COMMON_TABLES = ("flows", "flow_series", "queues", "queue_series", "markers")

_ARROW_TYPES = {"bool": "bool_", "int": "int64", "float": "float64", "string": "string"}


def partitioning(axes: list[dict[str, Any]] | list[Axis]):
    """The datasets' hive partitioning: one directory level per axis, in the spec's order."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    fields = [(a.name, getattr(pa, _ARROW_TYPES[a.kind])()) if isinstance(a, Axis)
              else (a["name"], getattr(pa, _ARROW_TYPES[a["kind"]])()) for a in axes]
    return ds.partitioning(pa.schema(fields), flavor="hive")


def partition_dir(spec: SweepSpec, point: Point) -> str:
    """``point``'s directory below a table's, as pyarrow encodes it (``a=1/b=x%2Fy``)."""
    import pyarrow.dataset as ds

    if not spec.axes:
        return ""
    expr = None
    for name, label in spec.labels(point).items():
        term = ds.field(name) == label
        expr = term if expr is None else expr & term
    return partitioning(spec.axes).format(expr)[0]


class SweepDir:
    """A sweep directory opened for running ``spec``: the points' statuses (resumed from
    ``sweep.json`` when it is this spec's), updated with ``record`` and written by
    ``flush``."""

    def __init__(self, path: Path, spec: SweepSpec, record: dict[str, Any]) -> None:
        self.path = path
        self.spec = spec
        self.record = record
        self._by_id = {p["id"]: p for p in record["points"]}
        self._flushed = 0.0

    @classmethod
    def open(cls, path: str | os.PathLike, spec: SweepSpec, force: bool = False, revision: str = "unknown") -> "SweepDir":
        """Opens ``path`` for ``spec``: a new directory, or one of the same spec to resume
        (its done points stay done; its failed points run again). Another spec's directory is
        refused unless ``force``, which discards what that sweep wrote (and nothing else)."""
        from .. import __version__

        path = Path(path)
        old = read_record(path) if (path / SWEEP_JSON).is_file() else None
        if old is None and path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise PathtwinError(f"{path}: exists and is not a sweep directory (no {SWEEP_JSON}); give a new or empty -o")
        if old is not None and old.get("fingerprint") != spec.fingerprint:
            if not force:
                raise PathtwinError(f"{path}: holds a sweep of another spec (or a changed scenario); "
                                    "give a new -o, or --force to discard its results")
            discard(path, old)
            old = None
        try:
            (path / POINTS_DIR).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PathtwinError(f"{path}: cannot create the sweep directory ({e.strerror})") from None
        previous = {p["id"]: p for p in (old or {}).get("points", [])}
        points = []
        for p in spec.points:
            before = previous.get(p.id, {})
            entry: dict[str, Any] = {"id": p.id, "values": p.values, "engine": p.engine, "status": "pending", "error": None}
            if p.error is not None:
                entry.update(status="failed", error=p.error, phase="validation")
            elif before.get("status") == "done":
                entry.update({k: before[k] for k in ("status", "wall_s", "tables", "warnings") if k in before})
            points.append(entry)
        record = {
            "format_version": FORMAT_VERSION,
            "pathtwin_version": __version__,
            "git_revision": revision,
            "spec_file": spec.origin if spec.origin != "sweep spec" else None,
            "fingerprint": spec.fingerprint,
            "spec": spec.described,
            "engine": spec.engine,
            "axes": [{"name": a.name, "kind": a.kind, "values": list(a.values)} for a in spec.axes],
            "tables": sorted({t for p in points for t in p.get("tables", [])}),
            "started_at": (old or {}).get("started_at", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            "complete": False,
            "counts": {},
            "points": points,
        }
        sweep = cls(path, spec, record)
        sweep.flush(force=True)
        return sweep

    def todo(self) -> list[Point]:
        """The points still to run (pending), in the spec's order."""
        return [p for p in self.spec.points if self._by_id[p.id]["status"] == "pending"]

    def record_outcome(self, outcome: dict[str, Any]) -> None:
        """Records what ``point.run_point`` returned for a point."""
        entry = self._by_id[outcome["id"]]
        entry.update(status=outcome["status"], error=outcome.get("error"), wall_s=outcome.get("wall_s"),
                     tables=outcome.get("tables", []), warnings=outcome.get("warnings", []))
        if outcome["status"] == "failed":
            entry["phase"] = "run"
        else:
            entry.pop("phase", None)
        self.record["tables"] = sorted(set(self.record["tables"]) | set(outcome.get("tables", [])))
        self.flush()

    def counts(self) -> dict[str, int]:
        counts = {"done": 0, "failed": 0, "pending": 0}
        for p in self.record["points"]:
            counts[p["status"]] += 1
        return counts

    def flush(self, force: bool = False) -> None:
        """Writes ``sweep.json`` (atomically) if ``force`` or it was last written more than
        ``FLUSH_INTERVAL_S`` ago."""
        now = time.monotonic()
        if not force and now - self._flushed < FLUSH_INTERVAL_S:
            return
        self._flushed = now
        counts = self.counts()
        self.record["counts"] = counts
        self.record["complete"] = counts["pending"] == 0
        self.record["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        tmp = self.path / f".{SWEEP_JSON}.tmp"
        tmp.write_text(json.dumps(self.record, indent=1, default=str) + "\n")
        os.replace(tmp, self.path / SWEEP_JSON)


def read_record(path: Path) -> dict[str, Any]:
    """A sweep directory's ``sweep.json``; a one-line error if it is missing, not JSON, or of
    another format version."""
    return read_versioned_json(path, SWEEP_JSON, "a sweep directory", FORMAT_VERSION)


def discard(path: Path, record: dict[str, Any]) -> None:
    """Removes what a sweep wrote into ``path``: its datasets, point records, staging area
    and ``sweep.json`` (files of anyone else stay)."""
    for name in [*record.get("tables", []), POINTS_DIR, STAGING_DIR]:
        target = path / name
        if target.is_dir() and target.resolve().parent == path.resolve():
            shutil.rmtree(target)
    (path / SWEEP_JSON).unlink(missing_ok=True)


class SweepResult(Result):
    """A sweep's tables, each the combined DataFrame of its done points with a column per
    axis (read from the hive partitions), and ``sweep.json`` as ``run``; ``points`` is one
    row per point (its id, engine, status, error line and axis values)."""

    @property
    def points(self):
        import pandas as pd

        return pd.DataFrame([{"id": p["id"], "engine": p["engine"], "status": p["status"], "error": p.get("error"),
                              **{f"{k}": v for k, v in p["values"].items() if k != "engine"}}
                             for p in self.run["points"]])

    @property
    def failed(self) -> int:
        return sum(p["status"] == "failed" for p in self.run["points"])


def read_sweep(path: str | os.PathLike) -> SweepResult:
    """Reads a sweep directory (finished or not): every table of its done points."""
    path = Path(path)
    record = read_record(path)
    # The tables every run has, even when no point is done yet (then empty, with Rust's columns).
    names = sorted({*record.get("tables", []), *COMMON_TABLES})
    tables = LazyFrames({name: (lambda name=name: read_table(path, record, name)) for name in names})
    return SweepResult(run=record, tables=tables, path=path)


def point_file(path: Path, table: str, partition: str, point_id: str) -> Path:
    """Where ``table``'s rows of a point live."""
    base = path / table
    return (base / partition if partition else base) / f"{point_id}.parquet"


def read_table(path: Path, record: dict[str, Any], table: str):
    """``table`` of every done point as one DataFrame, through ``pyarrow.dataset`` with the
    axes' hive partitioning (typed as the spec's values), in the points' order. Points run
    by different engines may write different columns (the emulator's kernel fields): the
    schemas are unified, and a column a point lacks is null there."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    part = partitioning(record["axes"]) if record["axes"] else None
    files = []
    for p in record["points"]:
        if p["status"] != "done" or table not in p.get("tables", []):
            continue
        partition = ""
        if part is not None:
            expr = None
            for a in record["axes"]:
                term = ds.field(a["name"]) == _label(a, p["values"][a["name"]])
                expr = term if expr is None else expr & term
            partition = part.format(expr)[0]
        f = point_file(path, table, partition, p["id"])
        if f.is_file():
            files.append(str(f))
    if not files:
        import pandas as pd

        from ..results import columns

        return pd.DataFrame(columns=[*columns(table, record.get("engine", "sim")), *(a["name"] for a in record["axes"])])
    schemas = {str(s): s for s in (pq.read_schema(f) for f in files)}
    schema = pa.unify_schemas(list(schemas.values()))
    if part is not None:
        schema = pa.unify_schemas([schema, part.schema])
    dataset = ds.dataset(files, format="parquet", schema=schema, partitioning=part, partition_base_dir=str(path / table))
    return dataset.to_table().to_pandas()


def _label(axis: dict[str, Any], value: Any) -> Any:
    return Axis(name=axis["name"], values=tuple(axis["values"]), kind=axis["kind"]).label(value)
