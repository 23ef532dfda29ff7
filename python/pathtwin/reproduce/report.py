"""`pathtwin reproduce all -o DIR`: every registered reproduction run in the simulator, one
after the other, and one page (``DIR/report.html``) with, per reproduction, the paper's
numbers beside ours, each judged by the reproduction's tolerance (``pathtwin.report.paper``
renders and judges) and the paper's figures drawn from ours where the reproduction draws
them. Each reproduction keeps its runs' result directories under
``DIR/runs/NAME/`` (`pathtwin report` draws any of them), and ``DIR/reproductions.json``
holds the same rows as the page. What a reproduction runs and what its numbers mean stays
in its paper module; this module only goes through the registry.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import PathtwinError
from ..report import page, write_page
from ..report.paper import DEFAULT_TOLERANCE, Row, failed_section, judge, section
from .registry import Progress, Reproduction, get, reproductions


@dataclass
class Outcome:
    """One reproduction's part of the report: its rows, how long it ran, or its error."""

    name: str
    seconds: float
    rows: list[Row] = field(default_factory=list)
    error: str | None = None


def selected(only: str | None) -> list[Reproduction]:
    """Every reproduction, or those ``only`` names (comma-separated), in registry order."""
    if not only:
        return reproductions()
    names = [n.strip() for n in only.split(",") if n.strip()]
    picked = {get(n).name for n in names}  # an unknown name is a one-line error
    return [r for r in reproductions() if r.name in picked]


def rows_of(record: Reproduction, results) -> list[Row]:
    """The paper's values of ``record`` beside ours (None where ours is not named)."""
    ours = record.ours(results) if record.ours is not None else {}
    return [Row(p.quantity, p.unit, p.source, p.value, ours.get(p.quantity)) for p in record.paper]


def run_all(out: str | Path, only: str | None = None, progress: Progress | None = None) -> list[Outcome]:
    """Runs the reproductions (all, or ``only``) in the simulator with their defaults and
    writes ``out/report.html`` and ``out/reproductions.json``; returns the outcomes. A
    reproduction that fails with a ``PathtwinError`` is reported with its error, and the
    others run."""
    out = Path(out)
    records = selected(only)
    outcomes, sections = [], []
    started = time.perf_counter()
    for record in records:
        if progress is not None:
            progress(f"{record.name}: running")
        t0 = time.perf_counter()
        try:
            results = record.run(record.request(engine="sim", out=out / "runs" / record.name))
            outcome = Outcome(record.name, time.perf_counter() - t0, rows_of(record, results))
            note = "" if record.ours is not None else "This reproduction does not name its numbers for the report."
            drawn = "".join(page.figure(fig, name, caption) for name, caption, fig in
                            (record.figures(results) if record.figures is not None else []))
            sections.append(section(record.name, record.description, outcome.rows, record.tolerance, outcome.seconds, note,
                                    record.tolerance_abs, drawn))
        except PathtwinError as e:
            outcome = Outcome(record.name, time.perf_counter() - t0, error=str(e))
            sections.append(failed_section(record.name, record.description, str(e)))
        outcomes.append(outcome)
        if progress is not None:
            progress(f"{record.name}: {'failed: ' + outcome.error if outcome.error else 'done'} in {outcome.seconds:.1f} s")
    total = time.perf_counter() - started
    intro = (f"<p>{len(records)} reproductions in the simulator, each with its defaults, in {total:.0f} s. A cell of ours "
             f"is red when it lies outside the reproduction's tolerance (or {DEFAULT_TOLERANCE * 100:g} % where it states "
             "none), green within it, grey where words are compared with words. Each reproduction's runs are under "
             "runs/NAME/.</p>")
    write_page(out / "report.html", "pathtwin: the papers' numbers beside ours", [intro, *sections])
    _write_json(out / "reproductions.json", outcomes, {r.name: (r.tolerance, r.tolerance_abs) for r in records}, total)
    return outcomes


def _write_json(path: Path, outcomes: Sequence[Outcome], tolerances: dict, total: float) -> None:
    def row(r: Row, tol: tuple[float | None, float | None]) -> dict:
        v = judge(r.paper, r.ours, DEFAULT_TOLERANCE if tol[0] is None else tol[0], tol[1])
        return {**asdict(r), "verdict": v.status, "difference": v.difference}

    data = {"seconds": total,
            "reproductions": [{"name": o.name, "seconds": o.seconds, "error": o.error,
                               "rows": [row(r, tolerances[o.name]) for r in o.rows]} for o in outcomes]}
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
