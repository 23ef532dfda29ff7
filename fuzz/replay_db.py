"""Fuzzes the replay database reader: `pathtwin replay DIR`'s path from a database directory
to what it hands the simulator or the emulator, short of running either.

Each input is a recipe of mutations (read with atheris' FuzzedDataProvider, so libFuzzer's
coverage guidance steers them) applied to one of two valid databases: ``synthetic(n=20)`` and
one built from a two-connection capture (as tests/test_replay_db.py builds them), the latter
with the ``source_exchanges.parquet`` a replay leaves. Mutations: ``workload.json``'s keys set
to odd JSON values or its bytes replaced, truncated or flipped; a table's values set to NaN,
±inf, negatives, huge numbers, text, nulls; a column cast to another Arrow type, dropped,
renamed, duplicated or added; rows emptied, dropped, duplicated, reordered, their ``conn``
pointed at unknown connections; the pandas metadata in a file's schema replaced; a file's
parquet bytes flipped, truncated or replaced; a file deleted or replaced by a directory.

The property: :func:`pathtwin.replay.load_source` on the directory either refuses it with a
``PathtwinError`` or returns a database from which :func:`~pathtwin.replay.sim.sim_config`
(validated by the simulator's own config parser, not run), ``Workload.pipes``,
``Workload.agent_specs`` (as JSON, as the emulator writes it for its agents),
``Workload.source_slots`` and ``Workload.save`` all succeed — an error there, even a
PathtwinError, means the reader let through a value it should have named. Anything else
escaping is a bug: the input is saved by libFuzzer as a crash artifact.

    python fuzz/replay_db.py [CORPUS_DIR] -max_total_time=600     # libFuzzer's flags
    python fuzz/replay_db.py crash-...                            # replays one input

With ``REPLAY_DB_FINDINGS=DIR`` in the environment a failure is recorded instead (one file
per distinct exception type and place: the traceback and the input), and the run goes on:
one run then shows every class of bug, not only the first.

Needs atheris (``pip install atheris``) and an importable pathtwin with its native module.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import atheris

REPO = Path(__file__).resolve().parent.parent

with atheris.instrument_imports(include=["pathtwin.replay"]):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pathtwin import _native
    from pathtwin.config import native_call
    from pathtwin.errors import PathtwinError
    from pathtwin.replay import load_source
    from pathtwin.replay.sim import sim_config
    from pathtwin.replay.workload import Workload, synthetic

TABLES = ("conns.parquet", "exchanges.parquet", "source_exchanges.parquet")
#: Values a cell may be set to: the classes of bad number and of wrong type.
VALUES = (float("nan"), float("inf"), float("-inf"), -1, -1.5, 0, 0.0, 0.5, 1, 2, 3, 19, 20, 21, 1e300, -1e300,
          2**31, 2**53 + 1, 2**63 - 1, -(2**63), 1e-300, 65535, 65536, "x", "", "1.5", None, True, False)
#: Values of workload.json's keys.
JSON_VALUES = (None, True, 0, -1, 80, 65535, 65536, 10**30, 1.5, float("nan"), float("inf"), "80", "server", "client",
               "", [], [1], {}, {"a": 1}, {"a": -1}, {"a": "x"}, {"a": None}, {"": 1.5})
TYPES = (pa.string(), pa.large_string(), pa.binary(), pa.bool_(), pa.int8(), pa.int32(), pa.int64(), pa.uint64(),
         pa.float16(), pa.float32(), pa.float64(), pa.null(), pa.timestamp("ms"), pa.date32(), pa.duration("s"),
         pa.decimal128(20, 3), pa.dictionary(pa.int32(), pa.string()), pa.list_(pa.int64()),
         pa.struct([("a", pa.int64())]))


def _seeds(scratch: Path) -> list[dict]:
    """The two valid databases, as {file name: bytes or pyarrow table}."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_trace import T0, http_exchange, pcap  # the capture builders the tests use

    from pathtwin import trace

    w, _ = synthetic(n=20)
    w.save(scratch / "synthetic")
    cap = scratch / "server.pcap"
    cap.write_bytes(pcap(http_exchange(T0, "198.51.100.7", 40001) + http_exchange(T0 + 1, "198.51.100.8", 40002, rtt=0.1)))
    conns, exchanges, _ = trace.workload(cap)
    Workload.from_analysis(conns, exchanges).save(scratch / "capture")
    exchanges.to_parquet(scratch / "capture" / "source_exchanges.parquet", index=False)
    out = []
    for name in ("synthetic", "capture"):
        d = scratch / name
        out.append({f.name: (pq.read_table(f) if f.suffix == ".parquet" else f.read_bytes()) for f in d.iterdir()})
    return out


class Recipe:
    """Applies the mutations an input spells out to a copy of a seed database."""

    def __init__(self, fdp: atheris.FuzzedDataProvider, db: dict):
        self.fdp = fdp
        self.db = dict(db)
        #: Files whose bytes are mutated after they are written.
        self.raw: list[tuple[str, int]] = []

    def pick(self, seq):
        return seq[self.fdp.ConsumeIntInRange(0, len(seq) - 1)]

    def table(self) -> tuple[str, pa.Table] | None:
        names = [n for n in TABLES if isinstance(self.db.get(n), pa.Table)]
        if not names:
            return None
        name = self.pick(names)
        return name, self.db[name]

    def column(self, rows: bool = False) -> tuple[str, pa.Table, int] | None:
        """A table (one with rows, if ``rows``) and one of its columns' index, or None."""
        got = self.table()
        if got is None or (rows and got[1].num_rows == 0):
            return None
        name, t = got
        return name, t, self.fdp.ConsumeIntInRange(0, t.num_columns - 1)

    def apply(self) -> None:
        for _ in range(self.fdp.ConsumeIntInRange(1, 4)):
            kind = self.fdp.ConsumeIntInRange(0, 9)
            try:
                getattr(self, ("json_key", "json_bytes", "cell", "cast", "columns", "rows", "conn_ref", "metadata",
                               "raw_bytes", "file")[kind])()
            except Exception:  # noqa: BLE001
                # A mutation that cannot be expressed (a mixed column pyarrow refuses, a
                # workload.json too deep to parse and edit): skip it. Only the reader's
                # errors, below, are findings.
                pass

    def json_key(self) -> None:
        try:
            meta = json.loads(self.db.get("workload.json", b"{}"))
        except ValueError:
            meta = {}
        if not isinstance(meta, dict):
            meta = {}
        key = self.pick(("port", "skipped", "vantage", "other"))
        if self.fdp.ConsumeBool():
            meta.pop(key, None)
        else:
            meta[key] = self.pick(JSON_VALUES)
        self.db["workload.json"] = json.dumps(meta).encode()

    def json_bytes(self) -> None:
        data = bytearray(self.db.get("workload.json", b"{}") if isinstance(self.db.get("workload.json"), bytes) else b"{}")
        how = self.fdp.ConsumeIntInRange(0, 3)
        if how == 0:
            data = bytearray(self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, 64)))
        elif how == 1 and data:
            del data[self.fdp.ConsumeIntInRange(0, len(data) - 1):]
        elif how == 2 and data:
            data[self.fdp.ConsumeIntInRange(0, len(data) - 1)] = self.fdp.ConsumeInt(1) & 0xFF
        else:
            # Nesting deep enough to exhaust the JSON parser's recursion.
            data = bytearray(b"[" * self.fdp.ConsumeIntInRange(1, 100_000))
        self.db["workload.json"] = bytes(data)

    def _set_column(self, name: str, t: pa.Table, i: int, arr) -> None:
        self.db[name] = t.set_column(i, t.column_names[i], arr)

    def cell(self) -> None:
        got = self.column(rows=True)
        if got is None:
            return
        name, t, i = got
        values = t.column(i).to_pylist()
        row = self.fdp.ConsumeIntInRange(0, len(values) - 1)
        v = self.pick(VALUES) if self.fdp.ConsumeBool() else self.fdp.ConsumeRegularFloat()
        values[row] = v
        try:
            arr = pa.array(values, type=t.column(i).type, from_pandas=False)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            # The value changes the column's type (NaN into integers, text into numbers).
            arr = pa.array(values, from_pandas=False)
        self._set_column(name, t, i, arr)

    def cast(self) -> None:
        got = self.column()
        if got is None:
            return
        name, t, i = got
        target = self.pick(TYPES)
        col = t.column(i)
        try:
            arr = col.cast(target, safe=False)
        except (pa.ArrowException, ValueError, TypeError):
            arr = pa.array([None if v is None else str(v) for v in col.to_pylist()], type=pa.string()).cast(target)
        self._set_column(name, t, i, arr)

    def columns(self) -> None:
        got = self.column()
        if got is None:
            return
        name, t, i = got
        how = self.fdp.ConsumeIntInRange(0, 3)
        if how == 0:
            self.db[name] = t.remove_column(i)
        elif how == 1:
            self.db[name] = t.rename_columns([n if k != i else n + "_" for k, n in enumerate(t.column_names)])
        elif how == 2:
            # Parquet allows two columns of one name; pandas then returns a frame for it.
            self.db[name] = t.append_column(t.column_names[i], t.column(i))
        else:
            self.db[name] = t.append_column("extra", pa.array([self.pick(VALUES)] * t.num_rows, from_pandas=False))

    def rows(self) -> None:
        got = self.table()
        if got is None:
            return
        name, t = got
        how = self.fdp.ConsumeIntInRange(0, 3)
        n = t.num_rows
        if how == 0 or n == 0:
            self.db[name] = t.slice(0, 0)
        elif how == 1:
            k = self.fdp.ConsumeIntInRange(0, n - 1)
            self.db[name] = t.take([j for j in range(n) if j != k])
        elif how == 2:
            k = self.fdp.ConsumeIntInRange(0, n - 1)
            self.db[name] = t.take(list(range(n)) + [k])
        else:
            self.db[name] = t.take(list(range(n - 1, -1, -1)))

    def conn_ref(self) -> None:
        """An exchange's (or a connection's) id pointed elsewhere: unknown, duplicate."""
        name = self.pick(("conns.parquet", "exchanges.parquet"))
        t = self.db.get(name)
        if not isinstance(t, pa.Table) or "conn" not in t.column_names or t.num_rows == 0:
            return
        i = t.column_names.index("conn")
        values = t.column(i).to_pylist()
        values[self.fdp.ConsumeIntInRange(0, len(values) - 1)] = self.fdp.ConsumeIntInRange(-2, 40)
        self._set_column(name, t, i, pa.array(values, type=t.column(i).type))

    def metadata(self) -> None:
        got = self.table()
        if got is None:
            return
        name, t = got
        meta = dict(t.schema.metadata or {})
        if b"pandas" in meta and self.fdp.ConsumeBool():
            text = bytearray(meta[b"pandas"])
            if text:
                text[self.fdp.ConsumeIntInRange(0, len(text) - 1)] = self.fdp.ConsumeInt(1) & 0xFF
            meta[b"pandas"] = bytes(text)
        else:
            meta[b"pandas"] = self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, 200))
        self.db[name] = t.replace_schema_metadata(meta)

    def raw_bytes(self) -> None:
        self.raw.append((self.pick(TABLES), self.fdp.ConsumeIntInRange(0, 3)))

    def file(self) -> None:
        name = self.pick(TABLES + ("workload.json",))
        self.db[name] = None if self.fdp.ConsumeBool() else "dir"

    def write(self, d: Path) -> None:
        for name, content in self.db.items():
            if content is None:
                continue
            if content == "dir":
                (d / name).mkdir()
            elif isinstance(content, bytes):
                (d / name).write_bytes(content)
            else:
                buf = io.BytesIO()
                try:
                    pq.write_table(content, buf)
                except (pa.ArrowException, ValueError, TypeError, NotImplementedError):
                    # A type parquet cannot store: the file is left out instead.
                    continue
                (d / name).write_bytes(buf.getvalue())
        for name, how in self.raw:
            p = d / name
            if not p.is_file():
                continue
            data = bytearray(p.read_bytes())
            if how == 0 and data:
                for _ in range(self.fdp.ConsumeIntInRange(1, 8)):
                    data[self.fdp.ConsumeIntInRange(0, len(data) - 1)] = self.fdp.ConsumeInt(1) & 0xFF
            elif how == 1 and data:
                del data[self.fdp.ConsumeIntInRange(0, len(data) - 1):]
            elif how == 2:
                data = bytearray(self.fdp.ConsumeBytes(self.fdp.ConsumeIntInRange(0, 4096)))
            elif data:
                # Parquet's footer: the schema and the row groups' offsets and sizes.
                at = max(len(data) - self.fdp.ConsumeIntInRange(1, min(len(data), 600)), 0)
                data[at] = self.fdp.ConsumeInt(1) & 0xFF
            p.write_bytes(bytes(data))


def replay_preparation(d: Path, out: Path) -> None:
    """What `pathtwin replay DIR` does with the database before it runs anything. Raises
    PathtwinError when the database is refused; anything raised after it was accepted is an
    AssertionError naming the step."""
    w, source_exchanges = load_source(d)
    step = "sim_config"
    try:
        config = sim_config(w, tcp={}, seed=1)
        step = "the simulator's config parser"
        native_call(_native.Simulation, json.dumps(config, allow_nan=False), "json", "")
        step = "pipes"
        w.pipes()
        step = "agent_specs"
        addresses = [f"10.128.{i // 256}.{i % 256}" for i in range(len(w))]
        specs = w.agent_specs("10.0.0.1", addresses)
        json.dumps(specs, allow_nan=False)
        step = "source_slots"
        w.source_slots(addresses)
        step = "save"
        w.save(out / "db")
        source_exchanges.to_parquet(out / "db" / "source_exchanges.parquet", index=False)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"an accepted database fails in {step}: {type(e).__name__}: {e}") from e


def _scratch() -> Path:
    """A scratch directory of this process's own. libFuzzer ends the run with C's exit(),
    past Python's cleanup, so directories of earlier runs whose process is gone are removed
    here instead."""
    base = Path(tempfile.gettempdir())
    for old in base.glob("replay_db_fuzz.*"):
        pid = old.name.rsplit(".", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(old, ignore_errors=True)
    d = base / f"replay_db_fuzz.{os.getpid()}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    return d


class Harness:
    def __init__(self):
        self.scratch = _scratch()
        self.seeds = _seeds(self.scratch / "seeds")
        findings = os.environ.get("REPLAY_DB_FINDINGS")
        self.findings = Path(findings) if findings else None
        self.seen: set[str] = set()
        # What the inputs reached, printed now and then: a run that only ever hits one
        # refusal tests little.
        self.execs = self.accepted = 0
        self.refusals: set[str] = set()

    def __call__(self, data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        recipe = Recipe(fdp, self.seeds[fdp.ConsumeIntInRange(0, len(self.seeds) - 1)])
        recipe.apply()
        d, out = self.scratch / "db", self.scratch / "out"
        for p in (d, out):
            shutil.rmtree(p, ignore_errors=True)
        d.mkdir()
        recipe.write(d)
        self.execs += 1
        if self.execs % 10_000 == 0:
            print(f"#### {self.execs} inputs: {self.accepted} accepted, {len(self.refusals)} distinct refusals",
                  file=sys.stderr, flush=True)
        try:
            replay_preparation(d, out)
            self.accepted += 1
        except PathtwinError as e:
            # A refusal's kind: its message less the scratch path and the values.
            self.refusals.add(" ".join(w for w in str(e).replace(str(d), "").split() if not any(c.isdigit() for c in w))[:80])
            # The project's rule for bad input: one line.
            if "\n" in str(e):
                self._fail(AssertionError(f"a PathtwinError of several lines: {e!r}"), data)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - pyo3's PanicException is a BaseException
            self._fail(e, data)

    def _fail(self, e: BaseException, data: bytes) -> None:
        if self.findings is None:
            raise e
        # One record per exception type and innermost pathtwin frame (of the error an
        # accepted database caused, for replay_preparation's AssertionError).
        cause = e.__cause__ if isinstance(e, AssertionError) and e.__cause__ is not None else e
        tb = traceback.extract_tb(cause.__traceback__)
        ours = [f for f in tb if "/pathtwin/" in f.filename] or tb
        where = f"{ours[-1].filename.rsplit('/', 1)[-1]}:{ours[-1].lineno}" if ours else "?"
        key = f"{type(cause).__name__}@{where}"
        if cause is not e:
            key = f"{str(e).split(':')[0]}: {key}"
        if key in self.seen:
            return
        self.seen.add(key)
        self.findings.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha1(key.encode()).hexdigest()[:10]
        (self.findings / f"{h}.input").write_bytes(data)
        (self.findings / f"{h}.txt").write_text(f"{key}\n\n" + "".join(traceback.format_exception(e)))
        print(f"\n#### new finding {key} -> {self.findings / h}.txt", file=sys.stderr, flush=True)


def main() -> None:
    harness = Harness()

    def test_one_input(data: bytes) -> None:
        harness(data)

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
