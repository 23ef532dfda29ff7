"""The papers' numbers beside ours: a reproduction's rows (what was measured, the paper's
value and ours), each judged against a tolerance, as a report section. Judging is here
(``judge``); which of our numbers answers which of the paper's is the reproduction's own
business (its registry record's ``ours``, in ``pathtwin.reproduce``), and this module never
imports the papers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .page import Cell, esc, num, table

#: The relative difference beyond which a number is highlighted when its reproduction states
#: no tolerance of its own.
DEFAULT_TOLERANCE = 0.10


@dataclass(frozen=True)
class Row:
    """One of the paper's numbers (or its words) and ours."""

    quantity: str
    unit: str
    source: str
    paper: float | str
    ours: float | str | None


@dataclass(frozen=True)
class Verdict:
    """``within`` or ``outside`` the tolerance, or ``unjudged`` (words against words, or
    nothing measured); ``difference`` is relative ((ours − paper) / |paper|) where the paper
    gives a nonzero number."""

    status: str
    difference: float | None = None


#: The paper's words that bound a number: "< 10", "> 300", "well over 300", "about 100".
_BOUND = re.compile(r"^\s*(<|>|≤|≥|under|below|over|above|well over|up to|about|around|~)\s*([-+0-9.]+)\s*$")


def judge(paper: float | str, ours: float | str | None, tolerance: float = DEFAULT_TOLERANCE,
          absolute: float | None = None) -> Verdict:
    """Whether ``ours`` agrees with ``paper`` within ``tolerance`` (relative), or within
    ``absolute`` (in the paper's unit) if given. A bound in the paper's words ("< 10", "well
    over 300") is met or not; "about N" is N; a paper's 0 is met only by 0 (or within
    ``absolute``)."""
    if ours is None or isinstance(ours, str) or ours != ours:
        return Verdict("unjudged")
    if isinstance(paper, str):
        m = _BOUND.match(paper)
        if not m:
            return Verdict("unjudged")
        word, bound = m.group(1), float(m.group(2))
        if word in ("about", "around", "~"):
            paper = bound
        elif word in ("<", "≤", "under", "below", "up to"):
            return Verdict("within" if ours <= bound else "outside")
        else:
            return Verdict("within" if ours >= bound else "outside")
    rel = (float(ours) - float(paper)) / abs(float(paper)) if paper != 0 else None
    if absolute is not None:
        return Verdict("within" if abs(float(ours) - float(paper)) <= absolute else "outside", rel)
    if rel is None:
        return Verdict("within" if ours == 0 else "outside")
    return Verdict("within" if abs(rel) <= tolerance else "outside", rel)


def section(name: str, description: str, rows: Sequence[Row], tolerance: float | None, seconds: float,
            note: str = "", absolute: float | None = None, figures: str = "") -> str:
    """A reproduction's section: its rows in a table, our cell classed ``within``,
    ``outside`` or ``unjudged`` (``judge``: relative ``tolerance``, or ``absolute``);
    ``seconds`` is how long it ran; ``figures`` the paper's figures drawn from our results
    (``page.figure``'s HTML), after the table."""
    tol = DEFAULT_TOLERANCE if tolerance is None else tolerance
    cells = []
    for r in rows:
        v = judge(r.paper, r.ours, tol, absolute)
        ours = num(r.ours, "{:.4g}", css=f"num {v.status}") if isinstance(r.ours, (int, float)) \
            else Cell("–" if r.ours is None else str(r.ours), v.status)
        paper = num(r.paper, "{:.4g}") if isinstance(r.paper, (int, float)) else Cell(str(r.paper))
        diff = num(v.difference, "{:+.1f} %", 100.0) if v.difference is not None else Cell("", "num")
        cells.append([Cell(r.quantity), Cell(r.unit), paper, ours, diff, Cell(r.source)])
    outside = sum(judge(r.paper, r.ours, tol, absolute).status == "outside" for r in rows)
    stated = "its own" if tolerance is not None or absolute is not None else "none stated, the default"
    head = (f'<section class="reproduction" data-name="{esc(name)}"><h2>{esc(name)}</h2><p>{esc(description)}</p>'
            f"<p class=\"note\">Ran in {seconds:.1f} s. Tolerance "
            f"{f'{absolute:g} in the paper’s unit' if absolute is not None else f'{tol * 100:g} %'} ({stated}); "
            f"{outside} of {len(rows)} numbers outside it.{(' ' + esc(note)) if note else ''}</p>")
    if not rows:
        return head + '<p class="note">The paper gives no numbers for this experiment.</p>' + figures + "</section>"
    return head + table(["quantity", "unit", "paper", "ours", "difference", "source"], cells, css="paper") + figures + "</section>"


def failed_section(name: str, description: str, error: str) -> str:
    """A reproduction that did not run: its one-line error."""
    return (f'<section class="reproduction failed" data-name="{esc(name)}"><h2>{esc(name)}</h2><p>{esc(description)}</p>'
            f'<p class="note">Failed: {esc(error)}</p></section>')
