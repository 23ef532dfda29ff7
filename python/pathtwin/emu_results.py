"""The emulator's result directory: its Parquet tables and its ``run.json``, from what
``pathtwin._native.EmuRun.stop()`` returns (``write_emu_results``).

Tables: ``queues``, ``queue_series``, ``flows``, ``routes``, ``timing``, ``pipes``,
``markers`` and ``flow_series``, in the layout of ``results.py`` (the simulator's where both
engines have one); ``run.json`` is built by ``results.run_record``, as the simulator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .results import MARKER_COLUMNS, run_record, write_result_dir


def _summary_rows(snapshot: dict) -> dict:
    rows: dict[str, list] = {k: [] for k in ("kind", "count", "mean_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns")}
    for kind, key in (("release", "lateness"), ("timer_wake", "wake_lateness")):
        s = snapshot[key]
        rows["kind"].append(kind)
        for k in ("count", "mean_ns", "p50_ns", "p99_ns", "p999_ns", "max_ns"):
            rows[k].append(s[k])
    return rows


def _columns(rows: list[dict], keys: Sequence[str]) -> dict:
    return {k: [r.get(k) for r in rows] for k in keys}


#: Columns of the emulator's ``flow_series`` (pathtwin-emu's ``sampler::FlowSeriesRow``).
FLOW_SERIES_COLUMNS = ("time_s", "flow", "label", "src", "dst", "src_port", "dst_port", "cwnd_bytes", "ssthresh_bytes",
                       "srtt_ms", "goodput_bps", "delivered_bytes", "retransmits", "cc", "state", "ca_state",
                       "rto_retransmits", "rttvar_ms", "min_rtt_ms", "rto_ms", "mss", "cwnd_segments",
                       "unacked_segments", "lost_segments", "delivery_rate_bps", "pacing_rate_bps", "bytes_sent",
                       "bytes_retrans", "bytes_received")


def aqm_columns(queues: list[dict]) -> dict:
    """The `queues` table's active-queue-management columns from the emulator's queue
    snapshots, as the simulator writes them: drops split into early and forced, ECN marks,
    and per drop precedence (RIO/FRIO; unmarked traffic is IN) arrivals and drops. A queue
    without an active queue manager has `aqm` null: all its drops are forced (tail) drops."""
    aqm = [q.get("aqm") or {} for q in queues]
    cols = {k: [a.get(k, q["drops"] if k == "forced_drops" else 0) for a, q in zip(aqm, queues)]
            for k in ("early_drops", "forced_drops", "ecn_marks")}
    for cls in ("in", "out"):
        per_class = [a.get(cls, {}) for a in aqm]
        cols[f"{cls}_arrivals"] = [c.get("arrivals", 0) for c in per_class]
        cols[f"{cls}_drops"] = [c.get("early_drops", 0) + c.get("forced_drops", 0) for c in per_class]
    return cols


def _pipe_columns(pipes: list[dict]) -> dict:
    """The ``pipes`` table: one row per ``[[pipe]]``, each two-way count as ``_down`` and
    ``_up`` columns."""
    cols = _columns(pipes, ("pipe", "server", "client", "address"))
    for key in ("packets_in", "packets_out", "queue_drops", "loss_drops"):
        for d, side in enumerate(("down", "up")):
            cols[f"{key}_{side}"] = [p[key][d] for p in pipes]
    return cols


def write_emu_results(out, raw: dict, wall_time_s: float, started_at: float, warnings: list, source) -> Path:
    """Writes an emulation's ``run.json`` and Parquet tables (layout of ``results.py``).

    Tables: ``queues`` (per queue totals, incl. placeholder share), ``queue_series``
    (occupancy, placeholder bytes, ABW, drops and active flows over time), ``flows`` (bytes
    per flow and direction, in and out of the network), ``routes`` (per host pair),
    ``timing`` (release and timer lateness quantiles), ``pipes`` (per ``[[pipe]]``: address,
    packets and drops each way; only when the config has pipes), ``markers`` (per ``[[marker]]``, the
    simulator's columns, ``results.MARKER_COLUMNS``) and ``flow_series`` (every sending TCP
    socket of every host every ``[run] sample_interval``, from the kernel's ``tcp_info``:
    the simulator's columns ``time_s``, ``flow``, ``label``, ``cwnd_bytes`` and
    ``ssthresh_bytes`` (the kernel's segments × ``snd_mss``), ``srtt_ms``, ``goodput_bps``,
    ``delivered_bytes`` (bytes acked), ``retransmits`` (segments, cumulative), plus the
    kernel's own: ``cc``, ``src``/``dst`` hosts and ports, ``state``, ``ca_state``,
    ``rto_retransmits``, ``rttvar_ms``, ``min_rtt_ms``, ``rto_ms``, ``mss``,
    ``cwnd_segments``, ``unacked_segments``, ``lost_segments``, ``delivery_rate_bps``,
    ``pacing_rate_bps``, ``bytes_sent``, ``bytes_retrans``, ``bytes_received``; see
    ``pathtwin_emu::sampler``).
    """
    snap = raw["snapshot"]
    names = {q["element"]: q["name"] for q in snap["queues"]}
    samples = raw["queue_samples"]
    series = _columns(samples, ("t_ns", "element", "packets", "bytes", "placeholder_packets", "placeholder_bytes",
                                "abw_bps", "drops", "placeholder_drops", "active_flows", "avg_queue"))
    series["t_s"] = [t * 1e-9 for t in series.pop("t_ns")]
    series["queue"] = [names.get(e, str(e)) for e in series["element"]]
    queue_keys = ("element", "name", "capacity_bps", "abw_bps", "limit", "arrivals", "departures", "departure_bytes",
                  "drops", "drop_bytes", "placeholder_arrivals", "placeholder_departures", "placeholder_departure_bytes",
                  "placeholder_drops", "placeholder_deferrals", "placeholder_share", "rate_changes")
    flows = raw["flows"]
    flow_keys = ("src", "dst", "proto", "src_port", "dst_port", "route_src", "route_dst", "first_ns", "last_ns",
                 "packets_in", "bytes_in", "payload_bytes_in", "packets_out", "bytes_out", "payload_bytes_out")
    route_keys = ("src", "dst", "packets_in", "bytes_in", "packets_out", "bytes_out", "write_drops")
    queues = _columns(snap["queues"], queue_keys)
    queues.update(aqm_columns(snap["queues"]))
    tables = {
        "queues": queues,
        "queue_series": series,
        "flows": _columns(flows, flow_keys),
        "routes": _columns(snap["routes"], route_keys),
        "timing": _summary_rows(snap),
        "markers": _columns([{**m, "marker": m["name"]} for m in snap.get("markers", [])], MARKER_COLUMNS),
    }
    if not raw.get("flow_series_written"):
        tables["flow_series"] = _columns(raw.get("flow_series", []), FLOW_SERIES_COLUMNS)
    if raw.get("pipes"):
        tables["pipes"] = _pipe_columns(raw["pipes"])
    run = run_record(
        engine="emu", config=raw["config"], resolved_paths=raw["resolved"], elements=raw["elements"],
        wall_time_s=wall_time_s, complete=True, warnings=warnings, source=source,
        run_id=snap["run_id"],
        hosts=raw["hosts"],
        started_at=started_at,
        emulated_s=snap["t_s"],
        timing={"release_lateness": snap["lateness"], "timer_wake_lateness": snap["wake_lateness"],
                "reordered_pushes": snap["reordered_pushes"], "high_priority": snap["high_priority"],
                "priority_switches": snap["priority_switches"]},
        host_counters=snap["hosts"],
        # Cost of the tcp_info sampling thread (sweeps of every host, µs each).
        tcp_sampling=raw.get("tcp_sampling"),
    )
    written = ["flow_series"] if raw.get("flow_series_written") else []
    return write_result_dir(Path(out), run, tables, written=written)
