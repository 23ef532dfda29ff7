"""How well a replay reproduced its source: per-connection response times side by side.

A connection's response time is Monkey's (§5.1): first request byte to last response byte,
as the server-side capture sees them, here over all of the connection's exchanges (for a
one-request connection, exactly the paper's). The original's come from the source capture's
exchange table, the replay's from the replay capture's, matched through the replay database
(connection i of the database was replayed from pipe address i). The summary gives the
paper's headline (the share within ±20 %, 86 % in its Fig. 6), the same within ±10 %, the
median error and the two-sample Kolmogorov-Smirnov distance between the two distributions
(the measure of a predictive replay, Fig. 10).

It also owns the paper's two finer readings of a replay. Figures 6-8 (:data:`CATEGORIES`,
:func:`breakdown`, :func:`categories`): the signed relative error per connection, for all of
them and per category of original response time, estimated bottleneck bandwidth and minimum
RTT, each category with its count, its share within ±20 % and its shares under- and
over-estimated ("over 60 % of replayed connections had a negative relative error", §5.1).
Figure 9 (:func:`halves`): the workload split in two halves in time, whose response-time
distributions should match — for the original, and for the replay. Drawing them is
:mod:`~pathtwin.replay.figures`'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import PathtwinError
from .workload import Workload


def response_times(exchanges: pd.DataFrame, key: str = "conn_id") -> pd.Series:
    """Per connection: last response byte minus first request byte, in ms."""
    x = exchanges.dropna(subset=["response_end_s"])
    g = x.groupby(key)
    return ((g["response_end_s"].max() - g["request_start_s"].min()) * 1e3).rename("response_time_ms")


def response_times_by_slot(conns: pd.DataFrame, exchanges: pd.DataFrame, addresses: list[str]) -> pd.Series:
    """Per-connection response times (ms) of a recorded run, indexed by the position of
    each connection's client address in ``addresses`` (pipe i's address is ``addresses[i]``);
    an address that carried a retried connection counts its first."""
    slot = {a: i for i, a in enumerate(addresses)}
    c = conns.assign(slot=conns["client_ip"].map(slot)).dropna(subset=["slot"])
    c = c.sort_values("start_s").drop_duplicates("slot")
    rt = response_times(exchanges).reindex(c["conn_id"].to_numpy())
    rt.index = c["slot"].astype(int).to_numpy()
    return rt


def carried_whole(db: Workload, replay_conns: pd.DataFrame, addresses: list[str]) -> pd.DataFrame:
    """The replayed connections that carried every request and response byte of their
    database connection (pipe i's address is ``addresses[i]``, database connection i). A
    replay cut short (Ctrl-C) ends its open connections with FINs or resets, so having
    closed says nothing; a connection whose bytes all crossed has its whole response time."""
    slot = replay_conns["client_ip"].map({a: i for i, a in enumerate(addresses)})
    want = db.exchanges.groupby("conn")[["request_bytes", "response_bytes"]].sum()
    whole = (replay_conns["unique_bytes_c2s"] >= slot.map(want["request_bytes"])) & \
            (replay_conns["unique_bytes_s2c"] >= slot.map(want["response_bytes"]))
    return replay_conns[whole]


def ks_distance(a, b) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    a, b = np.sort(np.asarray(a, float)), np.sort(np.asarray(b, float))
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    grid = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, grid, side="right") / len(a) - np.searchsorted(b, grid, side="right") / len(b))))


def compare(db: Workload, source_exchanges: pd.DataFrame, replay_conns: pd.DataFrame, replay_exchanges: pd.DataFrame,
            addresses: list[str]) -> pd.DataFrame:
    """One row per database connection: original and replayed response time, relative error,
    the connection's path (for the breakdowns by RTT and bandwidth) and its start (for the
halves in time)."""
    original = response_times(source_exchanges)
    replay = response_times_by_slot(replay_conns, replay_exchanges, addresses)
    out = db.conns[["conn", "start_s", "rtt_ms", "down_bps", "down_loss", "source_conn_id"]].copy()
    out["exchanges"] = out["conn"].map(db.exchanges.groupby("conn").size()).fillna(0).astype(int)
    out["original_ms"] = out["source_conn_id"].map(original)
    out["replay_ms"] = out["conn"].map(replay)
    out["rel_error"] = (out["replay_ms"] - out["original_ms"]) / out["original_ms"]
    return out


def summary(table: pd.DataFrame) -> dict:
    both = table.dropna(subset=["original_ms", "replay_ms"])
    err = both["rel_error"].abs()
    return {
        "connections": int(len(table)),
        "replayed": int(len(both)),
        "within_10pct": float((err <= 0.10).mean()) if len(both) else float("nan"),
        "within_20pct": float((err <= 0.20).mean()) if len(both) else float("nan"),
        "median_abs_error": float(err.median()) if len(both) else float("nan"),
        # The signed median: a replay consistently slower or faster than the capture.
        "median_bias": float(both["rel_error"].median()) if len(both) else float("nan"),
        "original_median_ms": float(both["original_ms"].median()) if len(both) else float("nan"),
        "replay_median_ms": float(both["replay_ms"].median()) if len(both) else float("nan"),
        "ks_distance": ks_distance(both["original_ms"], both["replay_ms"]),
    }


def ks_reading(s: dict) -> str:
    """What a user should read from ``summary``'s KS distance. KS is the largest gap between
    the two response-time CDFs: when the times cluster tightly, a shift of a few percent that
    leaves every connection within ±20 % alone moves it towards 1 (seen: 0.75 beside 100 %
    within ±20 %). So it is printed with both medians and the signed bias, and, when it reads
    high while the per-connection errors are small, with that explanation."""
    text = (f"distributions: KS distance {s['ks_distance']:.3f}; medians {s['original_median_ms']:.1f} ms captured, "
            f"{s['replay_median_ms']:.1f} ms replayed (median bias {100 * s['median_bias']:+.1f} %)")
    if s["ks_distance"] >= 0.5 and s["within_20pct"] >= 0.8:
        text += ("; the connections agree within ±20 %, so the KS distance reflects a consistent shift of tightly "
                 "clustered times, not a different shape")
    return text


@dataclass(frozen=True)
class Category:
    """One of the paper's breakdowns: a column of the comparison table cut into bins."""

    #: Key in ``summary.json``'s ``categories`` and in the PNG's name.
    name: str
    #: The figure of the paper it redraws, and what its legend is about.
    title: str
    column: str
    #: Bin edges, right-open: a value ``v`` is in bin i when ``edges[i] <= v < edges[i+1]``.
    edges: tuple
    labels: tuple


#: The three breakdowns of Figures 6-8, each of the *original* connection (§5.1: "of the
#: original connections in the trace").
#:
#: - response time: the paper's own bins (Fig. 6's legend: < 200 ms, 200-500, 500-1000,
#:   1000-1500, > 1500 ms);
#: - bottleneck bandwidth (the database's ``down_bps``, Monkey See's ACK-pair estimate): the
#:   text does not list Fig. 7's legend, so the bins are the access classes the paper itself
#:   draws its lines at — dial-up below 56 kbit/s (Fig. 2, §3.3.1's 5-packet queues), DSL and
#:   cable from 56 kbit/s to the 6 Mbit/s top subscriber rate (Fig. 3), split at 1.5 Mbit/s
#:   (above which one 1460-byte packet per millisecond, the trace's resolution, makes
#:   estimates unreliable, Fig. 3's caption) — and faster than 6 Mbit/s;
#: - minimum RTT (``rtt_ms``): neither is Fig. 8's, so doubling steps from 50 ms — the same
#:   continent (< 50 ms), across one (50-100), across an ocean (100-200), and the dial-up and
#:   satellite tail (> 200 ms), where Monkey's accuracy was worst.
CATEGORIES = (
    Category("response_time", "Figure 6: by original response time", "original_ms",
             (0.0, 200.0, 500.0, 1000.0, 1500.0, math.inf), ("< 200 ms", "200-500 ms", "500-1000 ms", "1000-1500 ms", "> 1500 ms")),
    Category("bandwidth", "Figure 7: by estimated bottleneck bandwidth", "down_bps",
             (0.0, 56e3, 1.5e6, 6e6, math.inf), ("< 56 kbit/s", "56 kbit/s-1.5 Mbit/s", "1.5-6 Mbit/s", "> 6 Mbit/s")),
    Category("min_rtt", "Figure 8: by minimum RTT", "rtt_ms",
             (0.0, 50.0, 100.0, 200.0, math.inf), ("< 50 ms", "50-100 ms", "100-200 ms", "> 200 ms")),
)

#: The label of the row and the line of every replayed connection (the paper's "total").
TOTAL = "total"


def replayed(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a comparison table with both response times: what the figures count."""
    return table.dropna(subset=["original_ms", "replay_ms"])


def _shares(e: pd.Series) -> dict:
    """Count, share within ±20 %, and the signed shares of one set of relative errors. An
    error of exactly 0 is neither under nor over, so the two need not add up to 1."""
    n = len(e)
    if n == 0:
        return {"connections": 0, "within_20pct": math.nan, "under": math.nan, "over": math.nan, "median_error": math.nan}
    return {"connections": n, "within_20pct": float((e.abs() <= 0.2).mean()), "under": float((e < 0).mean()),
            "over": float((e > 0).mean()), "median_error": float(e.median())}


def breakdown(table: pd.DataFrame, by: str, bins, labels) -> pd.DataFrame:
    """Per bin of ``by`` (right-open: ``bins[i] <= value < bins[i+1]``) over the replayed
    connections: how many, the share within ±20 %, the shares with a negative (``under``)
    and a positive (``over``) relative error, and the median signed error — one row per
    label, in order, empty bins included (0 connections, NaN shares). The paper's Figs. 6-8
    by response time, bandwidth and RTT (:data:`CATEGORIES`)."""
    if by not in table.columns:
        raise PathtwinError(f"breakdown by {by!r}: the comparison table has no such column")
    if len(bins) != len(labels) + 1:
        raise PathtwinError(f"breakdown by {by!r}: {len(bins)} bin edges for {len(labels)} labels (one edge more than labels)")
    both = replayed(table)
    try:
        cut = pd.cut(both[by], bins=list(bins), labels=list(labels), right=False)
    except ValueError as e:  # edges not increasing, labels repeated
        raise PathtwinError(f"breakdown by {by!r}: {e}") from None
    rows = [_shares(both["rel_error"][cut == label]) for label in labels]
    return pd.DataFrame(rows, index=pd.Index(list(labels), name="bin"))


def categories(table: pd.DataFrame) -> dict:
    """Figures 6-8 as numbers: ``{"total": {...}, "response_time": {"bins": [{"label", ...},
    ...], ...}, "bandwidth": ..., "min_rtt": ...}``, each bin :func:`breakdown`'s row, a share
    of an empty bin ``None`` (JSON has no NaN; and None == None where NaN != NaN). A connection
    whose ``by`` value is missing or outside the edges falls in no bin (the edges start at 0
    and end at infinity, so only a missing estimate does); ``unbinned`` counts those."""
    both = replayed(table)
    out: dict = {TOTAL: {k: (int(v) if k == "connections" else _number(v)) for k, v in _shares(both["rel_error"]).items()}}
    for cat in CATEGORIES:
        b = breakdown(table, cat.column, cat.edges, cat.labels)
        rows = [{"label": label, **{k: (int(v) if k == "connections" else _number(v)) for k, v in r.items()}}
                for label, r in zip(cat.labels, b.to_dict("records"))]
        # The open upper end is null: JSON has no infinity.
        out[cat.name] = {"title": cat.title, "column": cat.column, "edges": [_number(e) if math.isfinite(e) else None for e in cat.edges],
                         "bins": rows,
                         "unbinned": int(len(both) - sum(r["connections"] for r in rows))}
    return out


def _number(v) -> float | None:
    """A float for JSON, None for NaN (an empty bin's share, a KS distance of an empty half)."""
    f = float(v)
    return None if math.isnan(f) else f


def category_of(table: pd.DataFrame, cat: Category) -> pd.Series:
    """Each row's bin label in ``cat`` (NaN outside every bin), as :func:`breakdown` cuts."""
    return pd.cut(table[cat.column], bins=list(cat.edges), labels=list(cat.labels), right=False)


def halves(table: pd.DataFrame, start: str = "start_s") -> dict:
    """Figure 9: the workload cut in two halves in time — at the middle of its connections'
    start times, as the paper cut its 2:15-3:06 pm trace at 2:40 — and each half's
    response-time distribution compared with the other's (two-sample KS distance, medians),
    for the original response times and for the replayed ones. Two halves of one workload
    are equivalent workloads (§5.2), so the original's KS distance is the noise floor a
    predictive replay's distance (Fig. 10) should be read against, and the replay's halves
    should be as alike as the original's. Over the replayed connections, so that both
    readings count the same connections; a statistic of an empty half is None."""
    if start not in table.columns:
        raise PathtwinError(f"halves: the comparison table has no {start!r} column")
    both = replayed(table)
    t = both[start].astype(float)
    split = float((t.min() + t.max()) / 2) if len(t) else math.nan
    first, second = both[t < split], both[t >= split]
    out: dict = {"split_s": _number(split), "first": int(len(first)), "second": int(len(second))}
    for col, key in (("original_ms", "original"), ("replay_ms", "replay")):
        a, b = first[col], second[col]
        out[key] = {"ks_distance": _number(ks_distance(a, b)),
                    "first_median_ms": _number(a.median()), "second_median_ms": _number(b.median())}
    return out
