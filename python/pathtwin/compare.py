"""Two runs' flows side by side: ``compare_runs(run_a, run_b)``, for the simulator against the
emulator on one file, or a run before and after a change.

Both engines write the same ``flows`` table (one row per connection, labelled alike), so
flows are matched by label — the k-th flow of a label in one run with the k-th of that label
in the other, as both engines number a file's connections the same way. For every matched
flow it sets each metric of A beside B's with the difference and the relative difference
(B − A) / |A|: goodput, completion time of a sized transfer, retransmissions, smallest and
mean RTT, bytes delivered, and where either run has them completed responses and their
mean time. ``Comparison.frame()`` is that as a DataFrame, ``plot_comparison`` draws it (PNG);
`pathtwin compare` prints it. It reads only the result directories' ``run.json`` and
``flows.parquet``.

A simulation stands in for the kernel only with ``[tcp] profile = "linux"``
(docs/tcp-defaults.md): ``Comparison.notes`` says so when a simulation with the default
profile, ``"ns2"``, is compared with an emulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import PathtwinError

#: (column, name, unit, scale): the metrics compared, in order, as printed.
METRICS = (
    ("goodput_bps", "goodput", "Mbit/s", 1e-6),
    ("completion_s", "completion", "s", 1.0),
    ("retransmits", "retransmits", "", 1.0),
    ("rtt_min_ms", "min RTT", "ms", 1.0),
    ("rtt_mean_ms", "mean RTT", "ms", 1.0),
    ("bytes_delivered", "delivered", "MB", 1e-6),
    ("responses", "responses", "", 1.0),
    ("response_time_mean_s", "response time", "s", 1.0),
)
#: Metrics shown only where a flow of either run has them (a value other than NaN and 0).
OPTIONAL = {"completion_s", "responses", "response_time_mean_s"}


@dataclass
class Run:
    """One side of a comparison: its directory, ``run.json`` and ``flows`` table."""

    path: Path
    run: dict[str, Any]
    flows: Any  # a pandas DataFrame

    @property
    def name(self) -> str:
        """``engine:directory``, e.g. ``sim:out-sim``."""
        return f"{self.run.get('engine', '?')}:{self.path.name}"


@dataclass
class Comparison:
    """The matched flows of two runs: ``rows`` holds one dict per (flow, metric) with
    ``flow``, ``metric``, ``unit``, ``a``, ``b``, ``diff`` (B − A) and ``rel`` ((B − A) / |A|,
    NaN where A is 0 or missing), values in the metric's unit."""

    a: Run
    b: Run
    flows: list[str]
    rows: list[dict[str, Any]]
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    #: What the reader should know before trusting the differences (one sentence each).
    notes: list[str] = field(default_factory=list)

    def frame(self):
        """``rows`` as a DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=["flow", "metric", "unit", "a", "b", "diff", "rel"])


def read_run(path) -> Run:
    """A result directory's ``run.json`` and ``flows`` table; a one-line error if it is not a
    run, or has no flows."""
    import pandas as pd

    from .results import read_run_json

    path = Path(path)
    if not path.is_dir():
        raise PathtwinError(f"{path}: no such directory")
    run = read_run_json(path)
    flows = path / "flows.parquet"
    if "flows" not in run.get("tables", []) or not flows.is_file():
        why = " (an emulation of real applications runs no [[flow]] workload)" if run.get("engine") == "emu" else ""
        raise PathtwinError(f"{path}: the run has no flows table{why}")
    return Run(path=path, run=run, flows=pd.read_parquet(flows))


def _keys(flows) -> list[str]:
    """Each flow's key: its label, numbered `label [k]` from the second flow of that label."""
    seen: dict[str, int] = {}
    keys = []
    for label in flows["label"]:
        k = seen.get(label, 0)
        seen[label] = k + 1
        keys.append(label if k == 0 else f"{label} [{k}]")
    return keys


def _number(v) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return math.nan
    return x


def sim_profiles(run: dict[str, Any]) -> set[str]:
    """The TCP profiles a simulation's connections ran with: ``[tcp] profile`` (``"ns2"``
    when unset) and each flow's own ``tcp.profile``."""
    config = run.get("config") or {}
    default = (config.get("tcp") or {}).get("profile") or "ns2"
    return {default} | {(f.get("tcp") or {}).get("profile") or default for f in config.get("flow") or []}


def _notes(a: Run, b: Run) -> list[str]:
    engines = {a.run.get("engine"), b.run.get("engine")}
    if engines != {"sim", "emu"}:
        return []
    sim = a if a.run.get("engine") == "sim" else b
    if "ns2" in sim_profiles(sim.run):
        return [f"{sim.name} ran the simulator's own TCP (profile \"ns2\"); against the kernel, simulate the file "
                "with [tcp] profile = \"linux\" (docs/tcp-defaults.md)"]
    return []


def compare_runs(run_a, run_b) -> Comparison:
    """Matches the flows of two result directories (or ``Run``s) by label and sets their
    metrics side by side. A one-line error if either is not a run with flows, or if no flow
    label is in both."""
    a = run_a if isinstance(run_a, Run) else read_run(run_a)
    b = run_b if isinstance(run_b, Run) else read_run(run_b)
    ka, kb = _keys(a.flows), _keys(b.flows)
    common = [k for k in ka if k in set(kb)]
    if not common:
        def some(keys):
            return ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "") if keys else "none"

        raise PathtwinError(f"no flow in common: {a.path} has {some(ka)}; {b.path} has {some(kb)}")
    row_a = {k: i for i, k in enumerate(ka)}
    row_b = {k: i for i, k in enumerate(kb)}
    shown = []
    for col, name, unit, scale in METRICS:
        if col not in a.flows.columns or col not in b.flows.columns:
            continue
        if col in OPTIONAL:
            values = [_number(f[col].iloc[r[k]]) for k in common for f, r in ((a.flows, row_a), (b.flows, row_b))]
            if not any(v == v and v != 0 for v in values):
                continue
        shown.append((col, name, unit, scale))
    rows = []
    for k in common:
        for col, name, unit, scale in shown:
            va = _number(a.flows[col].iloc[row_a[k]]) * scale
            vb = _number(b.flows[col].iloc[row_b[k]]) * scale
            diff = vb - va
            rel = diff / abs(va) if va == va and va != 0 else math.nan
            rows.append({"flow": k, "metric": name, "unit": unit, "a": va, "b": vb, "diff": diff, "rel": rel})
    return Comparison(a=a, b=b, flows=common, rows=rows, only_a=[k for k in ka if k not in row_b],
                      only_b=[k for k in kb if k not in row_a], notes=_notes(a, b))


def plot_comparison(c: Comparison, out_dir) -> list[Path]:
    """Draws ``compare_flows.png`` in ``out_dir``: one panel per metric, A's and B's bar
    side by side for every matched flow (at most 40, the first)."""
    from .plot import _pyplot, _save

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PathtwinError(f"{out}: cannot create directory ({e.strerror})") from None
    plt = _pyplot()
    metrics = list(dict.fromkeys((r["metric"], r["unit"]) for r in c.rows))
    flows = c.flows[:40]
    cols = min(3, len(metrics))
    nrows = (len(metrics) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.0 * nrows + 0.4 * max(len(f) for f in flows) / 8), squeeze=False)
    width = 0.4
    for ax, (metric, unit) in zip(axes.flat, metrics):
        by_flow = {r["flow"]: r for r in c.rows if r["metric"] == metric}
        xs = range(len(flows))
        ax.bar([x - width / 2 for x in xs], [by_flow[f]["a"] for f in flows], width, label=f"A {c.a.name}")
        ax.bar([x + width / 2 for x in xs], [by_flow[f]["b"] for f in flows], width, label=f"B {c.b.name}")
        ax.set_title(f"{metric} ({unit})" if unit else metric, fontsize="medium")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(flows, rotation=45 if len(flows) > 3 else 0, ha="right" if len(flows) > 3 else "center", fontsize="small")
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.suptitle(f"A {c.a.name} against B {c.b.name}", fontsize="medium")
    fig.legend(handles, labels, loc="upper right", fontsize="small")
    return [_save(fig, out / "compare_flows.png", plt)]
