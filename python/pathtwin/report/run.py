"""One run's section of a report: what was run (``run.json``'s facts and its resolved config,
collapsed, as TOML), the headline table (one row per flow of the ``flows`` table) and the
run's plots. The rule for which plots a run gets is ``plots_for`` (``docs/reports.md``
states it, and the browser test counts against it); the drawing is ``pathtwin.plot``'s.
Sweeps are ``sweep``'s, the papers' numbers ``paper``'s.
"""

from __future__ import annotations

import json

from ..results import Result
from .page import Cell, details, esc, figure, num, pre, table


def plots_for(result: Result) -> list[str]:
    """The plots a run's tables call for, in page order: ``throughput``, ``cwnd_rtt`` and
    ``throughput_delay`` with a non-empty ``flow_series``; ``queues`` with a non-empty
    ``queue_series``; ``goodput_cdf`` with a non-empty ``flows``; ``response_cdf`` when a
    flow completed responses."""
    def rows(name: str) -> int:
        t = result.tables.get(name)
        return 0 if t is None else len(t)

    names = []
    if rows("flow_series"):
        names += ["throughput", "cwnd_rtt", "throughput_delay"]
    if rows("queue_series"):
        names.append("queues")
    if rows("flows"):
        names.append("goodput_cdf")
        if "responses" in result.flows and (result.flows["responses"] > 0).any():
            names.append("response_cdf")
    return names


def config_text(config) -> str:
    """The resolved config as TOML through the schema's own serialiser, or as JSON if the
    schema no longer takes it (a run.json of an older pathtwin)."""
    from .. import _native

    text = json.dumps(config, indent=2, default=str)
    try:
        return _native.config_toml(text, "json", "run.json")
    except ValueError:
        return text


#: The headline table's columns: header, ``flows`` column, format, scale to the unit shown.
HEADLINE = (
    ("goodput (Mbit/s)", "goodput_bps", "{:.3f}", 1e-6),
    ("completion (s)", "completion_s", "{:.3f}", 1.0),
    ("retransmits", "retransmits", "{:.0f}", 1.0),
    ("mean RTT (ms)", "rtt_mean_ms", "{:.1f}", 1.0),
    ("min RTT (ms)", "rtt_min_ms", "{:.1f}", 1.0),
)


def headline(result: Result) -> str:
    """One row per flow: label, congestion control, then ``HEADLINE``'s columns (each cell
    keeping the table's exact value in ``data-value``)."""
    flows = result.tables.get("flows")
    if flows is None or not len(flows):
        return '<p class="note">No flows (the run had no [[flow]] workload).</p>'
    rows = []
    for _, f in flows.iterrows():
        rows.append([Cell(str(f["label"])), Cell(str(f.get("cc", "")))] +
                    [num(f[col], fmt, scale) if col in flows else Cell("–") for _, col, fmt, scale in HEADLINE])
    return table(["flow", "cc", *(h for h, *_ in HEADLINE)], rows, css="headline")


def facts(result: Result) -> str:
    run = result.run
    items = [("engine", run.get("engine")), ("seed", run.get("seed")), ("source", run.get("source")),
             ("complete", run.get("complete")), ("wall time (s)", run.get("wall_time_s")),
             ("pathtwin", f"{run.get('pathtwin_version')} ({run.get('git_revision')})")]
    rows = [[k, "–" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))] for k, v in items]
    warnings = "".join(f"<li>{esc(w)}</li>" for w in run.get("warnings") or [])
    return table(["run", ""], rows, css="facts") + (f"<p>Warnings:</p><ul>{warnings}</ul>" if warnings else "")


def figures(result: Result) -> str:
    from .. import plot

    title = result.run.get("source") or result.run.get("engine", "")
    parts = []
    for name in plots_for(result):
        if name == "throughput":
            parts.append(figure(plot.throughput_figure(result, title), name, "Goodput per flow over time"))
        elif name == "cwnd_rtt":
            parts.append(figure(plot.cwnd_rtt_figure([result]), name, "Congestion window and smoothed RTT over time"))
        elif name == "throughput_delay":
            parts.append(figure(plot.throughput_delay_figure([result]), name,
                                "Throughput against mean RTT per flow, coloured by congestion control"))
        elif name == "queues":
            parts.append(figure(plot.queue_figure(result, title), name, "Queue occupancy over time"))
        elif name == "goodput_cdf":
            fl = result.flows
            samples = {cc: g["goodput_bps"] / 1e6 for cc, g in fl.groupby("cc", sort=False)} if "cc" in fl \
                else {"flows": fl["goodput_bps"] / 1e6}
            parts.append(figure(plot.cdf_figure(samples, "goodput (Mbit/s)", "CDF of per-flow goodput"), name,
                                "CDF of per-flow goodput, per congestion control"))
        elif name == "response_cdf":
            fl = result.flows[result.flows["responses"] > 0]
            parts.append(figure(plot.cdf_figure({"flows": fl["response_time_mean_s"] * 1e3}, "mean response time (ms)",
                                                "CDF of per-flow mean response time"), name,
                                "CDF of the flows' mean response times"))
    return "".join(parts)


def section(result: Result, heading: str) -> str:
    """The run's whole section."""
    return (f'<section class="run"><h2>{esc(heading)}</h2>{facts(result)}'
            f'{details("Configuration (resolved, TOML)", pre(config_text(result.run.get("config", {}))))}'
            f"<h3>Flows</h3>{headline(result)}<h3>Plots</h3>{figures(result)}</section>")
