"""Trace analysis straight to files, without pandas: the checks of a capture's path and of
an output's directory, and ``analyze_files``, the analysis behind `pathtwin trace analyze`.

It imports neither pandas nor pyarrow (nor pathlib: 3-4 ms of a command's start-up), so the
command line's fast path runs on it; ``pathtwin.trace``, the DataFrame API, checks its paths
with the same functions, so that both say the same. Only ``csv=True`` goes through pandas
(``pathtwin.trace``), to write exactly the CSV it always wrote.
"""

from __future__ import annotations

import math
import os

from .errors import PathtwinError

# Not `typing.TYPE_CHECKING`: `trace analyze` does not import typing at all.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def check_capture(capture: str | os.PathLike[str]) -> str:
    """The capture's path; a missing file or a directory is a ``PathtwinError``. (This
    module uses ``os.path``: pathlib's import is 3-4 ms of the command's start-up.)"""
    p = os.fspath(capture)
    if not os.path.exists(p):
        raise PathtwinError(f"{p}: no such capture file")
    if os.path.isdir(p):
        raise PathtwinError(f"{p}: is a directory, not a capture file")
    return p


def check_output(path: str | os.PathLike[str] | None) -> None:
    """An output's directory must exist (checked before the analysis, not after it)."""
    if path is None:
        return
    parent = os.path.dirname(os.fspath(path))
    if parent and not os.path.isdir(parent):
        raise PathtwinError(f"{os.fspath(path)}: directory {parent} does not exist")


def check_threads(threads: int | None) -> None:
    """``threads`` is None (chosen by processors and capture size) or a positive integer."""
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise PathtwinError(f"threads must be a positive integer, not {threads!r}")


def missing(v: Any) -> bool:
    """Whether a cell is empty: None (the engine's) or NaN (pandas')."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def analyze_files(capture: str | os.PathLike[str], output: str | os.PathLike[str] | None = None,
                  exchanges_out: str | os.PathLike[str] | None = None, server: str | None = None,
                  progress: Callable[[int], None] | None = None, threads: int | None = None, head: int = 20,
                  csv: bool = False, cross_traffic_out: str | os.PathLike[str] | None = None) -> Mapping[str, Any]:
    """Analyzes a capture (Monkey See), writes one row per connection to ``output`` and, if
    given, one row per request/response exchange to ``exchanges_out`` and one per bin of each
    connection direction's cross traffic over time to ``cross_traffic_out`` (Parquet, or CSV
    with ``csv``), and returns what a summary prints: ``{"stats", "connections", "kept", "pruned",
    "head", "exchanges", "cross_traffic_bins"}`` as ``_native.trace_analyze_files`` returns it (capture counts,
    connections and those kept for replay, ``(reason, connections)`` of the pruned ones, most
    frequent first, the first ``head`` connections as lists by column, exchanges). Other
    arguments as for ``pathtwin.trace.analyze``."""
    check_threads(threads)
    path = check_capture(capture)
    check_output(output)
    check_output(exchanges_out)
    check_output(cross_traffic_out)
    if csv:
        return _analyze_to_csv(path, output, exchanges_out, server, progress, threads, head, cross_traffic_out)
    from . import _native

    return _native.trace_analyze_files(path, output, exchanges_out, server, progress, threads or 0, max(head, 0),
                                       cross_traffic_out)


def _analyze_to_csv(capture: str, output: str | os.PathLike[str] | None, exchanges_out: str | os.PathLike[str] | None,
                    server: str | None, progress: Callable[[int], None] | None, threads: int | None,
                    head: int, cross_traffic_out: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The ``csv`` path: the Python API's frames written by pandas, summarized as the
    engine summarizes (``trace_analyze_files``'s dict)."""
    from . import trace

    conns, exchanges, stats, bins = trace._analyze(capture, server, progress, threads, exchanges=exchanges_out is not None,
                                                   cross=cross_traffic_out is not None)
    if output is not None:
        trace.write_table(conns, output, csv=True)
    if exchanges is not None and exchanges_out is not None:
        trace.write_table(exchanges, exchanges_out, csv=True)
    if bins is not None and cross_traffic_out is not None:
        trace.write_table(bins, cross_traffic_out, csv=True)
    reasons = conns.loc[~conns["kept"], "prune_reason"] if len(conns) else []
    pruned: dict[str, int] = {}
    for r in reasons:
        pruned[r] = pruned.get(r, 0) + 1
    first = conns.head(max(head, 0))
    return {
        "stats": stats,
        "connections": len(conns),
        "kept": int(conns["kept"].sum()) if len(conns) else 0,
        "pruned": sorted(pruned.items(), key=lambda kv: -kv[1]),
        "head": {c: [None if missing(v) else v for v in first[c].tolist()] for c in first.columns},
        "exchanges": 0 if exchanges is None else len(exchanges),
        "cross_traffic_bins": 0 if bins is None else len(bins),
    }
