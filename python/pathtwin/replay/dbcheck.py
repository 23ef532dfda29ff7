"""What a replay database on disk may hold: the checks :meth:`Workload.load` (and
:func:`pathtwin.replay.load_source`, for ``source_exchanges.parquet``) apply to what they read.

A database directory may come from anywhere (another machine, an older pathtwin, a hand
edit), and the replay turns its values into a simulator config and into the emulator's agent
specs: a NaN RTT, a string where a size belongs or an exchange of a connection that does not
exist would otherwise surface as a traceback deep in that conversion, or as an error about
the simulator's config that names no file. Here every such value is refused on load with a
one-line :class:`PathtwinError` naming the file, the column and the row.

The bounds are what the replay can carry out, not what a capture is likely to show: times up
to :data:`TIME_MAX_S` (the simulator's limit on an exchange's delays), sizes up to
:data:`SIZE_MAX` (the agents build each message in memory), rates up to :data:`RATE_MAX`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..errors import PathtwinError

#: Longest time a database may hold (start, delays, think times): the simulator's bound on a
#: replayed exchange's delays.
TIME_MAX_S = 1e6
#: Largest request or response: the agents hold each message in memory.
SIZE_MAX = 2**30
#: Fastest path rate (1 Tbit/s).
RATE_MAX = 1e12
#: Longest RTT, in ms (1000 s).
RTT_MAX_MS = 1e6
#: Client MSS bounds: Linux's TCP_MIN_MSS (the emulator's clients set it on a socket) and
#: the simulator's upper limit.
MSS_MIN, MSS_MAX = 88, 65_000
#: Largest receive buffer (Linux's window limit with scaling, 1 GiB).
RWIN_MAX = 2**30
#: What a database directory holds, for the error when a file is missing.
FILES = "a replay database holds conns.parquet, exchanges.parquet and workload.json"
#: Integers beyond this would lose precision in the float64 a nullable column is read as.
ID_MAX = 2**53


@dataclass(frozen=True)
class Column:
    """One column's rule: its kind ("int", "float", "bool" or "str"), whether it may hold
    nulls, and the closed range its numbers must lie in (``lo_open``: the lower bound
    excluded)."""

    name: str
    kind: str
    lo: float = -math.inf
    hi: float = math.inf
    nullable: bool = False
    lo_open: bool = False


CONN_RULES = (
    Column("conn", "int", 0, ID_MAX),
    Column("start_s", "float", 0.0, TIME_MAX_S),
    Column("rtt_ms", "float", 0.0, RTT_MAX_MS),
    Column("down_bps", "float", 0.0, RATE_MAX, lo_open=True),
    Column("up_bps", "float", 0.0, RATE_MAX, lo_open=True),
    # A pipe that drops everything would leave its connection hanging until the replay's cap.
    Column("down_loss", "float", 0.0, 0.999),
    Column("up_loss", "float", 0.0, 0.999),
    # Null: the client's default (the capture showed none).
    Column("mss", "int", MSS_MIN, MSS_MAX, nullable=True),
    Column("rwin_bytes", "int", 1, RWIN_MAX, nullable=True),
    Column("quickack", "bool"),
    Column("source_conn_id", "int", -ID_MAX, ID_MAX, nullable=True),
    Column("source_client", "str", nullable=True),
    # Null: no offsets recorded (random loss stands in); else space-separated offsets.
    Column("down_lost_offsets", "str", nullable=True),
)
#: Conns columns an older database lacks, and the value they take then.
OPTIONAL_CONN = {"down_lost_offsets": None}
#: Lost offsets name bytes of a 32-bit sequence space.
OFFSET_LIMIT = 2**32
EXCHANGE_RULES = (
    Column("conn", "int", 0, ID_MAX),
    Column("exchange", "int", 0, ID_MAX),
    Column("request_bytes", "int", 1, SIZE_MAX),
    Column("response_bytes", "int", 0, SIZE_MAX),
    # -1: the response is written at once.
    Column("header_bytes", "int", -1, SIZE_MAX),
    Column("server_delay_s", "float", 0.0, TIME_MAX_S),
    Column("query_delay_s", "float", 0.0, TIME_MAX_S),
    Column("think_s", "float", 0.0, TIME_MAX_S),
)
#: The columns of the source's exchange table that the comparison reads.
SOURCE_EXCHANGE_RULES = (
    Column("conn_id", "int", -ID_MAX, ID_MAX),
    Column("request_start_s", "float", nullable=True),
    Column("response_end_s", "float", nullable=True),
)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def read_parquet(path: Path) -> pd.DataFrame:
    """The table in ``path``, or a :class:`PathtwinError` saying why it cannot be read."""
    import pyarrow.parquet as pq

    try:
        # One file, read as such (read_table's dataset layer refuses a repeated column name
        # with a message that names no column).
        with pq.ParquetFile(path) as f:
            table = f.read()
        names = table.column_names
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise PathtwinError(f"{path}: column {_name(dup[0])} appears more than once")
        # The pandas metadata in the file's schema is as untrusted as the rest; the replay
        # database has no index to restore.
        return table.to_pandas(ignore_metadata=True)
    except PathtwinError:
        raise
    except Exception as e:  # noqa: BLE001
        # An untrusted file through pyarrow: its errors span Arrow's own family
        # (ArrowInvalid, ArrowNotImplementedError, ArrowTypeError, ...), OSError and the
        # pandas conversion's; any of them means the same to the user.
        if isinstance(e, FileNotFoundError):
            raise PathtwinError(f"{path}: missing ({FILES})") from None
        raise PathtwinError(f"{path}: not a readable parquet table ({_one_line(e)})") from None


def read_meta(path: Path) -> dict:
    """``workload.json``: the server's port, the skipped connections and the vantage point,
    checked."""
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise PathtwinError(f"{path}: missing ({FILES})") from None
    except (OSError, ValueError, RecursionError) as e:
        # ValueError: bad JSON or bad UTF-8; RecursionError: JSON nested too deep to parse.
        raise PathtwinError(f"{path}: not a replay database's workload.json ({_one_line(e)})") from None
    if not isinstance(meta, dict):
        raise PathtwinError(f"{path}: a JSON object was expected, not {type(meta).__name__}")
    port = meta.get("port", 80)
    # bool is an int in Python, but `true` is no port.
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise PathtwinError(f"{path}: port {_short(port)} is not a TCP port (1-65535)")
    skipped = meta.get("skipped", {})
    if not isinstance(skipped, dict):
        raise PathtwinError(f"{path}: skipped must map reasons to counts, not be {type(skipped).__name__}")
    for reason, n in skipped.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise PathtwinError(f"{path}: skipped[{_short(reason)}] is {_short(n)}, not a count of connections")
    vantage = meta.get("vantage", "server")
    if vantage not in ("server", "client"):
        raise PathtwinError(f"{path}: vantage {_short(vantage)} is neither \"server\" nor \"client\"")
    iw = meta.get("server_initial_window")
    if iw is not None and (not isinstance(iw, int) or isinstance(iw, bool) or iw < 1):
        raise PathtwinError(f"{path}: server_initial_window {_short(iw)} is not a number of segments")
    return {"port": port, "skipped": dict(skipped), "vantage": vantage, "server_initial_window": iw}


def _name(n: str) -> str:
    """A column name as written, unless it would break the message's one line."""
    return n if n.isprintable() and n.strip() == n and n else _short(n)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def check_table(df: pd.DataFrame, rules: tuple[Column, ...], path: Path, keep_extra: bool = False) -> pd.DataFrame:
    """``df`` with each rule's column checked and brought to one dtype (int64, float64 —
    for integers with nulls —, bool or object of str/None), in the rules' order; other
    columns dropped unless ``keep_extra``. Refuses the first bad value with its row."""
    missing = [c.name for c in rules if c.name not in df.columns]
    if missing:
        raise PathtwinError(f"{path}: lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    out = {c.name: _column(df[c.name], c, path) for c in rules}
    clean = pd.DataFrame(out, index=pd.RangeIndex(len(df)))
    if keep_extra:
        extra = df.drop(columns=[c.name for c in rules]).reset_index(drop=True)
        clean = pd.concat([clean, extra], axis=1)
    return clean


def _where(path: Path, rule: Column, row: int) -> str:
    return f"{path}: column {rule.name}, row {row}"


def _column(s: pd.Series, rule: Column, path: Path) -> pd.Series:
    values = s.tolist() if rule.kind in ("bool", "str") else None
    if rule.kind == "bool":
        for row, v in enumerate(values or []):
            if not isinstance(v, (bool, np.bool_)):
                what = "null" if _is_null(v) else f"{_short(v)}, not true or false"
                raise PathtwinError(f"{_where(path, rule, row)}: {what}")
        return pd.Series(values, dtype=bool)
    if rule.kind == "str":
        for row, v in enumerate(values or []):
            if _is_null(v):
                if not rule.nullable:
                    raise PathtwinError(f"{_where(path, rule, row)}: null")
            elif not isinstance(v, str):
                raise PathtwinError(f"{_where(path, rule, row)}: {_short(v)}, not text")
        return pd.Series([None if _is_null(v) else v for v in values or []], dtype=object)
    if s.dtype == object and all(_is_null(x) for x in s.tolist()):
        # A column of nulls only (parquet's null type: every connection without an MSS, say).
        s = pd.Series(np.full(len(s), np.nan))
    # Numbers: booleans, text, dates and the like are not.
    if pd.api.types.is_bool_dtype(s.dtype) or not pd.api.types.is_numeric_dtype(s.dtype) \
            or pd.api.types.is_complex_dtype(s.dtype):
        raise PathtwinError(f"{path}: column {rule.name} holds {s.dtype}, not numbers")
    v = s.to_numpy(dtype=float, na_value=np.nan)
    null = np.isnan(v)
    reasons = [
        (null & (not rule.nullable), "null"),
        (np.isinf(v), "not finite"),
        (~null & ~np.isinf(v) & ((v < rule.lo) | (v <= rule.lo if rule.lo_open else False) | (v > rule.hi)),
         f"not in {'(' if rule.lo_open else '['}{_number(rule.lo)}, {_number(rule.hi)}]"),
    ]
    if rule.kind == "int":
        with np.errstate(invalid="ignore"):
            reasons.append((~null & np.isfinite(v) & (np.floor(v) != v), "not a whole number"))
    for bad, why in reasons:
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            raise PathtwinError(f"{_where(path, rule, row)}: " + ("null or NaN" if why == "null" else f"{_number(v[row])} is {why}"))
    if rule.kind == "int" and not null.any():
        # Exact: integers whose float64 image was checked, all below 2^53.
        return pd.Series(v.astype(np.int64))
    return pd.Series(v)


def _number(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and x == int(x) and abs(x) <= 2**53 else f"{x:g}"


def _is_null(v: Any) -> bool:
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, float) and math.isnan(v)


def with_optional_columns(conns: pd.DataFrame) -> pd.DataFrame:
    """``conns`` with every optional column an older database lacks, at its default."""
    missing = {k: v for k, v in OPTIONAL_CONN.items() if k not in conns.columns}
    return conns.assign(**{k: [v] * len(conns) for k, v in missing.items()}) if missing else conns


def check_lost_offsets(conns: pd.DataFrame, path: Path) -> None:
    """Each ``down_lost_offsets`` is whole numbers below 2^32, ascending, separated by spaces."""
    for row, v in enumerate(conns["down_lost_offsets"].tolist()):
        if v is None:
            continue
        words = v.split()
        if not all(w.isascii() and w.isdigit() for w in words):
            bad = next(w for w in words if not (w.isascii() and w.isdigit()))
            raise PathtwinError(f"{path}: column down_lost_offsets, row {row}: {_short(bad)} is not a byte offset")
        offsets = [int(w) for w in words]
        if any(o >= OFFSET_LIMIT for o in offsets):
            raise PathtwinError(f"{path}: column down_lost_offsets, row {row}: an offset is beyond 2^32 - 1")
        if offsets != sorted(offsets):
            raise PathtwinError(f"{path}: column down_lost_offsets, row {row}: offsets not in ascending order")


def check_references(conns: pd.DataFrame, exchanges: pd.DataFrame, conns_path: Path, exchanges_path: Path) -> None:
    """The two tables agree: connection i is row i of ``conns`` (pipe i carries it, in
    both engines and in the comparison), every exchange names one of them once, and every
    connection has an exchange (Monkey See keeps only connections with a request)."""
    if len(conns) == 0:
        raise PathtwinError(f"{conns_path}: no connections")
    ids = conns["conn"].to_numpy()
    off = np.flatnonzero(ids != np.arange(len(conns)))
    if len(off):
        row = int(off[0])
        raise PathtwinError(f"{conns_path}: column conn, row {row}: {int(ids[row])}, but connection i must be row i "
                            "(pipe i carries it)")
    xc = exchanges["conn"].to_numpy()
    unknown = np.flatnonzero(xc >= len(conns))
    if len(unknown):
        row = int(unknown[0])
        raise PathtwinError(f"{exchanges_path}: column conn, row {row}: {int(xc[row])} names no connection of {conns_path.name}")
    dup = exchanges.duplicated(subset=["conn", "exchange"]).to_numpy()
    if dup.any():
        row = int(np.flatnonzero(dup)[0])
        raise PathtwinError(f"{exchanges_path}: row {row} repeats exchange {int(exchanges['exchange'].iloc[row])} "
                            f"of connection {int(xc[row])}")
    lone = np.setdiff1d(np.arange(len(conns)), xc)
    if len(lone):
        raise PathtwinError(f"{conns_path}: connection {int(lone[0])} has no exchange in {exchanges_path.name}")


def check_source_exchanges(path: Path) -> Optional[pd.DataFrame]:
    """``source_exchanges.parquet`` (the source's exchange table, for the original response
    times), checked; None when the database has none."""
    if not path.exists():
        return None
    return check_table(read_parquet(path), SOURCE_EXCHANGE_RULES, path, keep_extra=True)
