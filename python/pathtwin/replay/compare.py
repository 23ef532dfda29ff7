"""How well a replay reproduced its source: per-connection response times side by side.

A connection's response time is Monkey's (§5.1): first request byte to last response byte,
as the server-side capture sees them, here over all of the connection's exchanges (for a
one-request connection, exactly the paper's). The original's come from the source capture's
exchange table, the replay's from the replay capture's, matched through the replay database
(connection i of the database was replayed from pipe address i). The summary gives the
paper's headline (the share within ±20 %, 86 % in its Fig. 6), the same within ±10 %, the
median error and the two-sample Kolmogorov-Smirnov distance between the two distributions
(the measure of a predictive replay, Fig. 10).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

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
    and the connection's path (for the breakdowns by RTT and bandwidth)."""
    original = response_times(source_exchanges)
    replay = response_times_by_slot(replay_conns, replay_exchanges, addresses)
    out = db.conns[["conn", "rtt_ms", "down_bps", "down_loss", "source_conn_id"]].copy()
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


def breakdown(table: pd.DataFrame, by: str, bins, labels) -> pd.DataFrame:
    """Share within ±20 % per bin of ``by`` (the paper's Figs. 6-8: by response time,
    bandwidth, RTT)."""
    both = table.dropna(subset=["original_ms", "replay_ms"]).copy()
    both["bin"] = pd.cut(both[by], bins=bins, labels=labels)
    g = both.groupby("bin", observed=False)
    return pd.DataFrame({"connections": g.size(), "within_20pct": g["rel_error"].apply(lambda e: float((e.abs() <= 0.2).mean()) if len(e) else float("nan"))})
