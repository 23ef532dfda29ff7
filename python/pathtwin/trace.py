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
``to_paths(conns)`` turns the connections into a ``paths`` topology (a path from the server
to each client) that ``pathtwin sim`` and ``pathtwin emu`` accept, every quantity per
direction as what it is — capacity from packet pairs, ABW only from network-limited
transfers (else a labelled lower bound), queue, random loss — with its confidence
(``estimates``; ``paths_toml`` writes the topology through the schema's serialiser and
``estimates_path`` names the JSON beside it).

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

__all__ = ["analyze", "workload", "diagnose", "verdict_table", "to_paths", "paths_toml", "estimates_path",
           "direction_label", "write_table", "read_table"]


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
    conns, _, stats, _ = _analyze(capture, server, progress, threads, exchanges=False)
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
    conns, exchanges, stats, _ = _analyze(capture, server, progress, threads, exchanges=True)
    return conns, exchanges, stats


def cross_traffic(
    capture: PathLike, server: Optional[str] = None, progress: Progress = None, threads: Optional[int] = None
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """``analyze`` plus each connection direction's cross traffic over time, from one pass:
    (one row per connection, one row per profile bin, capture counts).

    iBox's inference (SIGMETRICS 2022; ALGORITHMS.md §9): while the bottleneck's queue stood,
    the link sent at its capacity C, so what of C the connection did not get went to cross
    traffic. Bins are about a second of whole round trips; a bin whose queue stood for at
    least half its time gives ``cross_bps`` = C − the connection's delivery rate while it
    stood as a point (``point``, ± ``cross_error_bps``: the queue's backlog over that time),
    any other bin an upper bound (C − its delivery rate). Columns: ``conn_id`` (the
    connection table's), ``direction`` (``s2c`` seen at the sender, ``c2s`` at the
    receiver), ``start_s``, ``duration_s``, ``busy_s``, ``capacity_bps``,
    ``foreground_bps``, ``cross_bps``, ``cross_error_bps``, ``point``. A direction without a
    capacity estimate has no bins. Arguments as for ``analyze``.
    """
    conns, _, stats, bins = _analyze(capture, server, progress, threads, exchanges=False, cross=True)
    assert bins is not None
    return conns, bins, stats


def _analyze(capture, server, progress, threads, exchanges: bool, cross: bool = False):
    """The one pass behind ``analyze``, ``workload`` and ``cross_traffic``: (conns,
    exchanges or None, stats, profile bins or None)."""
    check_threads(threads)
    p = _check_file(capture)
    cols, xcols, stats, ccols = _native().trace_analyze(str(p), server, progress, threads or 0, exchanges, cross)
    return (_frame(cols), None if xcols is None else _frame(xcols), dict(stats),
            None if ccols is None else _frame(ccols))


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


# -- to-paths: a paths topology from the per-direction estimates ------------------------

#: The directions of a path from the server to a client, in the order a ``[[path]]`` with
#: ``between = [server, client]`` gives per-direction values, with their column suffixes.
DIRECTIONS = ("s2c", "c2s")
_ARROW = {"s2c": "{server}->{client}", "c2s": "{client}->{server}"}

# Columns to_paths reads (all of them from the trace analysis's connection table).
_PATH_COLUMNS = {"client_ip", "server_ip", "kept", "prune_reason", "min_rtt_ms", "rtt_samples", "start_s", "end_s",
                 "rwin_max_bytes"} | {
    f"{c}_{d}{u}" for d in DIRECTIONS for c, u in (
        ("data_packets", ""), ("capacity", "_bps"), ("capacity", "_se_bps"), ("capacity", "_pairs"),
        ("capacity", "_bias_bps"), ("capacity", "_bursts"), ("capacity", "_weight"), ("abw", "_bps"),
        ("abw", "_error_bps"), ("abw", "_floor_bps"), ("busy", "_ms"), ("queue_delay", "_ms"), ("limit", ""),
        ("congestion_losses", ""), ("noncongestion_loss", ""))}


def to_paths(conns: pd.DataFrame, server_name: str = "server", include_pruned: bool = False,
             cross_traffic: Optional[pd.DataFrame] = None) -> dict:
    """Turns connection rows into a ``paths`` topology: one path from the server to each
    client, every quantity per direction as what it is, with its confidence.

    Returns ``{"hosts": [...], "path": [...], "estimates": [...]}``: ``path`` holds the
    ``[[path]]`` entries as the config schema takes them (``between = [server, client]``,
    so per-direction values are server→client first), ``estimates`` one record per path
    saying, for the base RTT and for each direction's capacity, ABW, queue and loss, the
    value written, what kind of estimate it is (``point``, ``lower bound``, ``assumed``,
    ``derived``, ``default`` or ``unknown``), its samples and spread, and how it was made. A
    client seen in several connections gets one path:

    - **base RTT**: the smallest min RTT (handshake and Karn samples; Monkey's
      propagation-delay estimate);
    - **capacity**: the connections' packet-pair estimates (``capacity_*_bps``: same-burst
      ACK pairs server to client, same-TSval arrivals client to server), their least-squares
      fits pooled into one, with a standard error and a bound on locked jitter's bias;
      unmeasured, the model's default capacity, which limits nothing;
    - **ABW**: from connections whose queue stood for whole round trips (network-limited:
      ``abw_*_bps``), their estimates weighted by that time, ± their backlog bound. Where no
      connection was network-limited (too short, held by the receiver's window or by the
      application) the capture says only that the ABW is at least ``abw_*_floor_bps``: the
      schema needs an ABW, so the path gets ABW = capacity (no cross traffic modelled) and
      the estimate says so. A direction with nothing measured at all (the upstream of
      downloads) takes the other direction's ABW (``assumed``), so that Eq. 4's "forward"
      direction, the one of higher ABW, is a measured one;
    - **queue**: the largest queueing delay × capacity, a point estimate if that direction
      lost packets to a full queue (else the queue was at least that); fitted to NSDI'09
      Eq. 2 and Eq. 4 (``_native.fit_queues``: raised to Eq. 2, the excess lowered to fit Eq.
      4), derived by the model where not measured, left out when no queue meets both;
    - **loss**: random (non-congestion) loss per direction, pooled over data packets; a
      full queue's losses are the model queue's own;
    - **wmax**: the largest window the client advertised, for the bounds;
    - **ABW over time** (with ``cross_traffic``, the profile bins of ``cross_traffic()`` /
      `trace analyze --cross-traffic`): per direction, the client's connection with the
      most point bins gives ``abw_steps``, one step per point bin at its start (seconds
      from the capture's first connection, as a replay starts it; the first from 0 s):
      the written capacity less the bin's cross traffic. A later bin that only bounds the
      cross traffic adds a step only where the connection got more in it than
      ``RAISE_SHARE`` times the step before (the least the ABW was there: what it got);
      otherwise the step before holds. Fewer than two points write no steps. This is iBox's
      non-reactive cross traffic, replayed by the model's placeholders.

    Connections Monkey prunes for having no usable ACK pairs (its replay needs a bottleneck
    rate, a path estimate does not: an upload, say) count; those pruned for an incomplete
    handshake, termination or sequence only with ``include_pruned``. A connection needs a
    min RTT.
    """
    missing = _PATH_COLUMNS - set(conns.columns)
    if missing:
        raise PathtwinError(f"not a connection table of this version of `pathtwin trace analyze`: missing columns "
                            f"{', '.join(sorted(missing)[:4])}{' …' if len(missing) > 4 else ''}")
    usable = conns["kept"].astype(bool) | conns["prune_reason"].eq("no usable ACK pairs")
    df = conns if include_pruned else conns[usable]
    df = df[df["min_rtt_ms"].notna() & (df["min_rtt_ms"] > 0)]
    if df.empty:
        raise PathtwinError("no connection has a min RTT (nothing to turn into paths)")
    if cross_traffic is not None:
        missing = _PROFILE_COLUMNS - set(cross_traffic.columns)
        if missing:
            raise PathtwinError(f"not a cross-traffic table of `pathtwin trace analyze --cross-traffic`: missing columns "
                                f"{', '.join(sorted(missing)[:4])}")
    t0 = float(conns["start_s"].min())
    hosts = [server_name]
    paths, estimates = [], []
    for i, (client, g) in enumerate(sorted(df.groupby("client_ip"), key=lambda kv: str(kv[0]))):
        name = f"c{i}"
        hosts.append(name)
        entry, est = _path(server_name, name, str(client), g)
        if cross_traffic is not None:
            _abw_steps(entry, est, g, cross_traffic, t0)
        paths.append(entry)
        estimates.append(est)
    return {"hosts": hosts, "path": paths, "estimates": estimates}


def _capacity(g: pd.DataFrame, d: str) -> dict:
    """One direction's capacity over a client's connections: their least-squares fits pooled
    into one (1/C = Σ w/C_i / Σ w, w the fits' Σ bits²), its standard error from every
    burst's residual about the pooled fit, its bias bound the fits' bounds (on 1/C) pooled
    alike."""
    rows = g[g[f"capacity_{d}_bps"].notna() & (g[f"capacity_{d}_bps"] > 0) & (g[f"capacity_{d}_weight"] > 0)]
    pairs = int(g[f"capacity_{d}_pairs"].sum())
    source = ("same-burst ACK pairs before the first loss" if d == "s2c"
              else "client segments of one TSval arriving back to back, before the first upstream loss")
    if rows.empty:
        why = ("no same-burst ACK pairs before a loss" if d == "s2c"
               else "no back-to-back client segments with TCP timestamps (no upload)")
        return {"kind": "unknown", "value_bps": None, "pairs": pairs, "bursts": 0, "connections": 0, "how": why}
    x = 1.0 / rows[f"capacity_{d}_bps"].astype(float)
    w = rows[f"capacity_{d}_weight"].astype(float)
    n = rows[f"capacity_{d}_bursts"].astype(float)
    x_hat = float((w * x).sum() / w.sum())
    # A connection's residual sum about its own fit is SE_x²·w·(n − 1); about the pooled fit
    # it grows by w·(x − x̂)².
    se_x = (rows[f"capacity_{d}_se_bps"].astype(float) * x**2).fillna(0.0)
    resid = float((se_x**2 * w * (n - 1).clip(lower=0)).sum() + (w * (x - x_hat) ** 2).sum())
    bursts = int(n.sum())
    se = math.sqrt(resid / (bursts - 1) / w.sum()) / x_hat**2 if bursts >= 2 else None
    # C + bias = 1/(x − β): back to a bound on 1/C, pooled, and forth (unbounded once β ≥ x).
    c_i = 1.0 / x
    beta = x - 1.0 / (c_i + rows[f"capacity_{d}_bias_bps"].astype(float))
    beta_hat = float((w * beta).sum() / w.sum())
    bias = 1.0 / (x_hat - beta_hat) - 1.0 / x_hat if beta_hat < x_hat else math.inf
    how = (f"{source}: least squares over {bursts} burst(s) of {len(rows)} connection(s), a burst weighing its "
           f"length squared; se_bps is the bursts' scatter (jitter after the bottleneck independent of the "
           f"flow), bias_bps bounds jitter locked to it (every burst's last ACK delayed alike)")
    if not math.isfinite(bias):
        how += "; the bias is unbounded here (the pairs' gaps spread wider than the bursts last)"
    return {"kind": "point", "value_bps": 1.0 / x_hat, "se_bps": se, "bias_bps": bias if math.isfinite(bias) else None,
            "pairs": pairs, "bursts": bursts, "connections": len(rows), "how": how}


def _limits(g: pd.DataFrame, d: str) -> dict:
    counts = g[f"limit_{d}"].fillna("none").value_counts()
    return {str(k): int(v) for k, v in counts.items() if k != "none"}


def _abw(g: pd.DataFrame, d: str) -> dict:
    limits = _limits(g, d)
    point = g[g[f"abw_{d}_bps"].notna() & (g[f"busy_{d}_ms"] > 0)]
    if not point.empty:
        t = point[f"busy_{d}_ms"].astype(float)
        value = float((point[f"abw_{d}_bps"] * t).sum() / t.sum())
        error = float((point[f"abw_{d}_error_bps"] * t).sum() / t.sum())
        overlap = _overlapping(point)
        how = (f"delivery rate over {t.sum() / 1e3:.2f} s of rounds with a standing queue in {len(point)} "
               f"network-limited connection(s), ± the queue's backlog over that time")
        if overlap:
            how += "; some of them overlapped in time and shared the path, so each got a share"
        return {"kind": "point", "value_bps": value, "error_bps": error, "busy_s": float(t.sum() / 1e3),
                "connections": len(point), "limits": limits, "how": how}
    floors = g[f"abw_{d}_floor_bps"].dropna()
    why = ", ".join(f"{n} {k}" for k, n in limits.items()) or "no data"
    if not floors.empty:
        return {"kind": "lower bound", "value_bps": float(floors.max()), "limits": limits,
                "how": f"no connection kept the queue standing ({why}-limited): ABW at least the best "
                       f"throughput less a queue's backlog"}
    return {"kind": "unknown", "value_bps": None, "limits": limits,
            "how": f"nothing to bound it with ({why}{'' if why == 'no data' else '-limited'}; no capacity estimate)"}


def _overlapping(rows: pd.DataFrame) -> bool:
    spans = sorted(zip(rows["start_s"].astype(float), rows["end_s"].astype(float)))
    return any(b0 < a1 for (_, a1), (b0, _) in zip(spans, spans[1:]))


def _queue_delay(g: pd.DataFrame, d: str) -> dict:
    q = g[f"queue_delay_{d}_ms"].dropna()
    if q.empty:
        return {"kind": "unknown", "delay_ms": None}
    full = int(g[f"congestion_losses_{d}"].sum()) > 0
    return {"kind": "point" if full else "lower bound", "delay_ms": float(q.max()),
            "how": "largest queueing delay seen" + (", with losses to a full queue" if full else
                                                    "; the queue never overflowed, so it holds at least that")}


def _loss(g: pd.DataFrame, d: str) -> dict:
    packets = g[f"data_packets_{d}"].astype(float)
    rate = g[f"noncongestion_loss_{d}"]
    ok = rate.notna() & (packets > 0)
    n = float(packets[ok].sum())
    if n == 0:
        return {"kind": "unknown", "value": 0.0, "packets": 0, "how": "no data packets this way: no loss written"}
    value = float((rate[ok] * packets[ok]).sum() / n)
    congestion = int(g[f"congestion_losses_{d}"].sum())
    how = ("retransmissions less spurious ones and those with the queue at least half full" if d == "s2c"
           else "client segments lost before the capture point less those with the queue at least half full")
    return {"kind": "point", "value": min(max(value, 0.0), 1.0), "packets": int(n), "congestion_losses": congestion,
            "how": how}


def _path(server: str, name: str, client: str, g: pd.DataFrame) -> tuple[dict, dict]:
    """The ``[[path]]`` entry and the estimates record of one client."""
    from . import _native

    rtt_ms = float(g["min_rtt_ms"].min())
    est: dict = {"host": name, "client": client, "connections": int(len(g)),
                 "rtt": {"kind": "point", "value_ms": rtt_ms, "connections": int(len(g)),
                         "samples": int(g["rtt_samples"].sum()),
                         "how": "smallest min RTT (handshake, Karn samples); split evenly between the directions"}}
    queue_bytes = []
    for d in DIRECTIONS:
        cap, rate, qd, loss = _capacity(g, d), _abw(g, d), _queue_delay(g, d), _loss(g, d)
        c = cap["value_bps"]
        if c is None:
            c = float(_native.DEFAULT_PATH_CAPACITY_BPS)
            cap.update(kind="default", value_bps=c,
                       how=cap["how"] + "; the model's default capacity, which does not limit")
        cap["written_bps"] = _written_rate(c)
        if rate["kind"] == "point":
            a = min(rate["value_bps"], c)
            if a < rate["value_bps"]:
                rate["how"] += "; above the capacity estimate, so written as the capacity"
        else:
            a = c
            rate["how"] += "; written as the capacity (no cross traffic modelled)"
        rate["written_bps"] = _written_rate(a)
        measured = (None if qd["delay_ms"] is None or cap["kind"] != "point"
                    else int(qd["delay_ms"] / 1e3 * cap["value_bps"] / 8))
        qd["measured_bytes"] = measured
        queue_bytes.append(measured)
        est[d] = {"capacity": cap, "abw": rate, "queue": qd, "loss": loss}
    # A direction with nothing measured (the upstream of downloads) would, at the default
    # capacity and ABW = capacity, be the higher-ABW direction that NSDI'09 Eq. 4 takes as
    # "forward", and its bound would rest on no data (and often leave no feasible queue):
    # it takes the other direction's ABW instead, which it then does not exceed.
    for d, other in zip(DIRECTIONS, reversed(DIRECTIONS)):
        mine, theirs = est[d], est[other]
        if mine["capacity"]["kind"] == "default" and mine["abw"]["kind"] == "unknown" and theirs["capacity"]["kind"] == "point":
            mine["abw"].update(kind="assumed", written_bps=min(theirs["abw"]["written_bps"], mine["capacity"]["written_bps"]),
                               how=mine["abw"]["how"].split(";")[0] + "; not measured: written as the other direction's, "
                               "so that NSDI'09 Eq. 4 bounds the queues from the measured direction")
    capacity = [est[d]["capacity"]["written_bps"] for d in DIRECTIONS]
    abw = [est[d]["abw"]["written_bps"] for d in DIRECTIONS]
    rwin = g["rwin_max_bytes"].dropna()
    wmax = int(rwin.max()) if not rwin.empty else None
    est["wmax"] = ({"kind": "point", "value_bytes": wmax, "how": "largest window the client advertised"}
                   if wmax else {"kind": "default", "value_bytes": None, "how": "no window seen: the model's default"})
    fit = _native.fit_queues((abw[0], abw[1]), (capacity[0], capacity[1]), rtt_ms / 1e3, wmax,
                             (queue_bytes[0], queue_bytes[1]))
    for k, d in enumerate(DIRECTIONS):
        q = est[d]["queue"]
        q["bounds"] = {"eq2_lower_bytes": fit["lower"][k], "eq4_upper_total_bytes": fit["upper_total"]}
        if fit["queue"] is None:
            q.update(written_bytes=None, note="no queue meets both Eq. 2 and Eq. 4: left to the model's derivation")
        else:
            q["written_bytes"] = fit["queue"][k]
            if fit["derived"][k]:
                q.update(kind="derived", note="not measured: the model's split of Eq. 4 (NSDI'09 §2.2.2)")
            elif fit["raised"][k]:
                q["note"] = "raised to Eq. 2's lower bound"
            elif fit["lowered"]:
                q["note"] = "lowered with the other direction to fit Eq. 4"
    entry: dict = {
        "between": [server, name],
        "rtt": f"{rtt_ms:.3f}ms",
        "capacity": [f"{est[d]['capacity']['written_bps']}bit" for d in DIRECTIONS],
        "abw": [f"{est[d]['abw']['written_bps']}bit" for d in DIRECTIONS],
        "loss": [round(est[d]["loss"]["value"], 6) for d in DIRECTIONS],
    }
    if fit["queue"] is not None:
        entry["queue"] = [f"{est[d]['queue']['written_bytes']}B" for d in DIRECTIONS]
    if wmax:
        entry["wmax"] = f"{wmax}B"
    return entry, est


_PROFILE_COLUMNS = {"conn_id", "direction", "start_s", "foreground_bps", "cross_bps", "cross_error_bps", "point"}

#: The schema's names of a path's directions: ``between = [server, client]``.
_STEPS_KEY = {"s2c": "a_to_b", "c2s": "b_to_a"}


#: A bin without a standing queue raises the ABW step before it to what the connection got
#: in it when that is this much above the step: what a connection delivers while the queue
#: does not stand is a lower bound of the ABW (it left some of it unused), and a smaller
#: excess is within a point's own error.
RAISE_SHARE = 1.1


def _abw_steps(entry: dict, est: dict, g: pd.DataFrame, bins: pd.DataFrame, t0: float) -> None:
    """Adds ``abw_steps`` to a client's path entry from the profile bins of its connection
    with the most point bins, per direction, and says what it did in ``est``: a step at
    every bin with a standing queue (capacity less its cross traffic), and one at every later
    bin without one that delivered more than ``RAISE_SHARE`` times the step before it (the
    least the ABW was there: cubic over 60 ms does not fill a 15 Mbit/s step, and holding
    the 3-6 Mbit/s step before it had the model finish 125-139 % late)."""
    steps: dict = {}
    for d in DIRECTIONS:
        mine = bins[bins["conn_id"].isin(g["conn_id"]) & bins["direction"].eq(d)]
        points = mine[mine["point"].astype(bool)]
        capacity = est[d]["capacity"]["written_bps"]
        if len(points) < 2:
            est[d]["abw_steps"] = {"kind": "none", "points": int(len(points)), "bins": int(len(mine)),
                                   "how": "fewer than two bins with a standing queue: the ABW stays constant"}
            continue
        conn = int(points["conn_id"].value_counts().idxmax())
        chosen = mine[mine["conn_id"].eq(conn)].sort_values("start_s")
        points = chosen[chosen["point"].astype(bool)]

        def point_abw(b) -> float:
            return min(max(capacity - b.cross_bps, 1000.0), capacity)

        # The first point holds from the start: before it the connection was in slow start
        # or left the ABW unused (no standing queue), which gives no point of it.
        first = points.index[0]
        last = point_abw(points.loc[first])
        written = [["0.000s", f"{_written_rate(last)}bit"]]
        raised = 0
        for i, b in zip(chosen.index, chosen.itertuples(index=False)):
            if b.point:
                if i == first and not raised:
                    continue  # written from the start already
                last = point_abw(b)
            elif b.foreground_bps > RAISE_SHARE * last:
                last = min(float(b.foreground_bps), capacity)
                raised += 1
            else:
                continue
            written.append([f"{max(b.start_s - t0, 0.0):.3f}s", f"{_written_rate(last)}bit"])
        steps[_STEPS_KEY[d]] = written
        err = points["cross_error_bps"].dropna()
        est[d]["abw_steps"] = {
            "kind": "profile", "connection": conn, "points": int(len(points)), "bins": int(len(chosen)),
            "steps": len(written), "raised": raised, "max_error_bps": float(err.max()) if len(err) else None,
            "how": "capacity less the cross traffic of each bin with a standing queue (iBox), the "
                   "first from the start; a later bin without one raises the step before it to what "
                   "it delivered, when that is more"}
    if steps:
        entry["abw_steps"] = steps


def _written_rate(bps: float) -> int:
    """A rate as written: bit/s rounded to the kbit/s (at least 1 kbit/s)."""
    return max(round(bps / 1e3), 1) * 1000


def direction_label(d: str, server: str, client: str) -> str:
    """``server->client`` for ``s2c``, ``client->server`` for ``c2s``."""
    return _ARROW[d].format(server=server, client=client)


def estimates_path(output: PathLike) -> Path:
    """Where ``trace to-paths`` writes the estimates beside the topology ``output``
    (``paths.toml`` → ``paths.estimates.json``)."""
    output = Path(output)
    return output.with_name(output.stem + ".estimates.json")


def _summary(est: dict, server: str) -> list[str]:
    """Comment lines for one path: the client, then each direction's estimates in brief."""
    def rate(x) -> str:
        return "-" if x is None else f"{x / 1e6:.3g} Mbit/s"

    lines = [f"# {est['host']}: client {est['client']} ({est['connections']} connection(s)); base RTT "
             f"{est['rtt']['value_ms']:.3f} ms (smallest of {est['connections']})"]
    for d in DIRECTIONS:
        e = est[d]
        cap, abw, q, loss = e["capacity"], e["abw"], e["queue"], e["loss"]
        bias = "unbounded" if cap.get("bias_bps") is None else rate(cap["bias_bps"])
        c = (f"capacity {rate(cap['value_bps'])}" + (f" ± {rate(cap['se_bps'])} (se)" if cap.get("se_bps") else "")
             + f" ± {bias} (bias bound), {cap['bursts']} burst(s)" if cap["kind"] == "point"
             else f"capacity {cap['kind']} ({rate(cap['written_bps'])})")
        if abw["kind"] == "point":
            a = f"ABW {rate(abw['value_bps'])} ± {rate(abw['error_bps'])} (network-limited {abw['busy_s']:.2f} s)"
        elif abw["kind"] == "lower bound":
            a = f"ABW ≥ {rate(abw['value_bps'])}, written = capacity"
        elif abw["kind"] == "assumed":
            a = f"ABW not measured, written = the other direction's ({rate(abw['written_bps'])})"
        else:
            a = "ABW unknown, written = capacity"
        qt = (f"queue {q['written_bytes']} B ({q['kind']})" if q.get("written_bytes") is not None
              else "queue left to the model (no queue meets Eq. 2 and 4)")
        lt = f"loss {100 * loss['value']:.2f} % ({loss['packets']} packets)" if loss["kind"] == "point" else "loss unknown (0)"
        lines.append(f"#   {direction_label(d, server, est['host'])}: {c}; {a}; {qt}; {lt}")
    return lines


def paths_toml(topology: dict, source: str = "", estimates: str = "") -> str:
    """Renders ``to_paths`` output as TOML written by the config schema's own serialiser (so
    it parses back to the same config, defaults filled), under comments naming each client
    and summing up its estimates (``estimates``: the file that holds them all)."""
    import json

    from .config import native_call

    config = {"hosts": topology["hosts"], "path": topology["path"]}
    lines = [f"# paths inferred by `pathtwin trace to-paths` from {source}"] if source else []
    if estimates:
        lines.append(f"# every estimate with its kind, samples and spread: {estimates}")
    server = topology["hosts"][0]
    for est in topology.get("estimates", []):
        lines += _summary(est, server)
    head = "\n".join(lines) + "\n\n" if lines else ""
    return head + native_call(_native().config_toml, json.dumps(config), "json", "")
