"""Trace analysis from Python: captures to DataFrames, and inferences to a paths topology.

``analyze(capture)`` runs Monkey See's per-connection inference (one row per TCP
connection: endpoints, termination, kept or pruned and why, MSS and options, RTTs, bytes,
retransmissions, loss, bottleneck bandwidth, delayed-ACK policy, receiver window, HTTP
timings, server and query delays, timeouts). ``workload(capture)`` returns, from the same
single pass, that table and the replay's workload: one row per request/response exchange
of every connection (request and response bytes, header bytes before Monkey's
header/results split, server and query delays, response time, the client's think time).
``diagnose(capture)`` runs Monarch's self-diagnosis over probe flows (one row per flow with
its verdict) and ``verdict_table`` summarizes it like the paper's Table 5.
``to_paths(conns)`` turns the kept connections into a ``paths`` topology (a path from the
server to each client) that ``pathtwin sim`` and ``pathtwin emu`` accept.

The analyses are the Rust crate ``pathtwin-trace``; this module only wraps columns into
pandas and writes files. Capture problems raise ``PathtwinError`` with one line.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable, Optional, Union

import pandas as pd

from .errors import PathtwinError

# The checks of input and output paths that `pathtwin trace analyze` runs without this module
# (and so without pandas), so that both say the same.
from .trace_files import check_capture, check_output, check_threads

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], None]]

__all__ = ["analyze", "workload", "diagnose", "verdict_table", "to_paths", "paths_toml", "write_table", "read_table"]


def _native():
    from . import _native

    return _native


def _check_file(capture: PathLike) -> Path:
    return Path(check_capture(capture))


def analyze(
    capture: PathLike, server: Optional[str] = None, progress: Progress = None, threads: Optional[int] = None
) -> tuple[pd.DataFrame, dict]:
    """Analyzes a pcap/pcapng capture; returns (one row per connection, capture counts).

    ``server`` ("IP" or "IP:PORT") fixes which side is the server and ignores other traffic;
    by default the receiver of each SYN is the server. ``progress(bytes_read)`` is called
    about every megabyte. ``threads`` splits a large capture file's flows over that many
    threads (default: by processor count and capture size); the result is the same.
    """
    conns, _, stats = _analyze(capture, server, progress, threads, exchanges=False)
    return conns, stats


def workload(
    capture: PathLike, server: Optional[str] = None, progress: Progress = None, threads: Optional[int] = None
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """``analyze`` plus the workload a replay re-creates, from one pass over the capture:
    (one row per connection, one row per request/response exchange, capture counts).

    Exchange rows are in (``conn_id``, ``exchange``) order, ``conn_id`` being the
    connection table's. Columns: ``request_start_s``, ``request_end_s``, ``request_bytes``,
    ``response_start_s``, ``response_end_s``, ``response_bytes`` (new bytes: retransmissions
    count once), ``header_bytes`` (response bytes before Monkey's header/results split; NaN
    when there is none), ``server_delay_ms`` (last request packet to first response packet),
    ``query_delay_ms``, ``response_time_ms`` (first request byte to last response byte) and
    ``think_ms`` (the previous response's end to this request's start; NaN for the first).
    Arguments as for ``analyze``.
    """
    conns, exchanges, stats = _analyze(capture, server, progress, threads, exchanges=True)
    return conns, exchanges, stats


def _analyze(capture, server, progress, threads, exchanges: bool):
    """The one pass behind ``analyze`` and ``workload``: (conns, exchanges or None, stats)."""
    check_threads(threads)
    p = _check_file(capture)
    cols, xcols, stats = _native().trace_analyze(str(p), server, progress, threads or 0, exchanges)
    return _frame(cols), None if xcols is None else _frame(xcols), dict(stats)


def _frame(cols: dict) -> pd.DataFrame:
    return pd.DataFrame({name: _column(c) for name, c in cols.items()})


def _column(c):
    """A native column: `(dtype, bytes)` of packed numbers, or a list."""
    if isinstance(c, tuple):
        import numpy as np

        # A copy: frombuffer's array is read-only and would stay tied to the bytes.
        return np.frombuffer(c[1], dtype=c[0]).copy()
    return c


def diagnose(capture: PathLike, progress: Progress = None) -> tuple[pd.DataFrame, dict]:
    """Monarch's self-diagnosis of every probe flow in a capture: (one row per flow, counts)."""
    p = _check_file(capture)
    cols, stats = _native().trace_diagnose(str(p), progress)
    return pd.DataFrame(cols), dict(stats)


VERDICTS = ("Confirmed", "Inaccurate", "Indeterminate")


def verdict_table(flows: pd.DataFrame) -> pd.DataFrame:
    """Counts and shares of each verdict, with a total row (the layout of Monarch's Table 5)."""
    total = len(flows)
    counts = [int((flows["verdict"] == v).sum()) if total else 0 for v in VERDICTS]
    rows = [(v, n, 100.0 * n / total if total else math.nan) for v, n in zip(VERDICTS, counts)]
    rows.append(("Traces total", total, 100.0 if total else math.nan))
    return pd.DataFrame(rows, columns=["result", "flows", "percent"])


def write_table(df: pd.DataFrame, path: PathLike, csv: bool = False) -> None:
    """Writes a result table as Parquet (default) or CSV."""
    path = Path(path)
    check_output(path)
    if csv:
        df.to_csv(path, index=False)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path)


def read_table(path: PathLike) -> pd.DataFrame:
    """Reads a table written by ``write_table`` (Parquet, or CSV by extension)."""
    path = Path(path)
    if not path.exists():
        raise PathtwinError(f"{path}: no such file")
    try:
        if path.suffix.lower() == ".csv":
            return pd.read_csv(path)
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pandas()
    except PathtwinError:
        raise
    except Exception as e:  # pyarrow and pandas raise many types for a foreign file
        raise PathtwinError(f"{path}: not a connection table ({type(e).__name__}: {str(e).splitlines()[0]})") from None


def to_paths(conns: pd.DataFrame, server_name: str = "server", include_pruned: bool = False) -> dict:
    """Turns connection rows into a ``paths`` topology: one path from the server to each client.

    A client seen in several connections gets one path: the smallest min RTT (Monkey's
    propagation-delay estimate), the median bottleneck bandwidth, and the pooled loss rate
    (retransmissions less spurious ones over data packets). ABW is the bottleneck estimate in
    both directions (Monkey's assumption 3: the upstream is never the bottleneck); loss is
    downstream only; queues follow Monkey Do's rule by rate. Only kept connections are used
    unless ``include_pruned``; those lacking an RTT or a bandwidth estimate are skipped.
    """
    required = {"client_ip", "server_ip", "min_rtt_ms", "bottleneck_bps", "kept", "loss_rate", "data_packets_s2c"}
    missing = required - set(conns.columns)
    if missing:
        raise PathtwinError(f"not a connection table: missing columns {', '.join(sorted(missing))}")
    df = conns if include_pruned else conns[conns["kept"].astype(bool)]
    df = df[df["min_rtt_ms"].notna() & df["bottleneck_bps"].notna() & (df["min_rtt_ms"] > 0)]
    if df.empty:
        raise PathtwinError("no connection has both a min RTT and a bandwidth estimate (nothing to turn into paths)")
    hosts = [server_name]
    paths = []
    for i, (client, g) in enumerate(sorted(df.groupby("client_ip"), key=lambda kv: str(kv[0]))):
        name = f"c{i}"
        hosts.append(name)
        rtt_ms = float(g["min_rtt_ms"].min())
        bps = float(g["bottleneck_bps"].median())
        data = float(g["data_packets_s2c"].sum())
        lost = float((g["loss_rate"].fillna(0.0) * g["data_packets_s2c"]).sum())
        loss = min(max(lost / data, 0.0), 1.0) if data > 0 else 0.0
        # Monkey Do's pipe queues by downstream rate (§3.3.1), the model's own rule.
        q_down, q_up = _native().monkey_pipe_queues(int(bps))
        paths.append(
            {
                "between": [server_name, name],
                "rtt": f"{rtt_ms:.3f}ms",
                "abw": f"{bps / 1e3:.1f}kbit",
                "loss": [round(loss, 6), 0.0],
                "queue": [q_down, q_up],
                "_client_ip": str(client),
                "_connections": int(len(g)),
            }
        )
    return {"hosts": hosts, "path": paths}


def paths_toml(topology: dict, source: str = "") -> str:
    """Renders ``to_paths`` output as TOML written by the config schema's own serialiser (so
    it parses back to the same config, defaults filled), under a comment naming each client
    host's address."""
    import json

    from .config import native_call

    config = {"hosts": topology["hosts"],
              "path": [{k: v for k, v in p.items() if not k.startswith("_")} for p in topology["path"]]}
    lines = [f"# paths inferred by `pathtwin trace to-paths` from {source}"] if source else []
    lines += [f"# {p['between'][1]}: client {p['_client_ip']} ({p['_connections']} connection(s))" for p in topology["path"]]
    return "\n".join(lines) + "\n\n" + native_call(_native().config_toml, json.dumps(config), "json", "")
