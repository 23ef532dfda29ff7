"""The HTML of a report page: its one inline style sheet, escaping, tables, collapsible
blocks, and figures embedded as base64 PNG, so that a page needs nothing but itself (no
script, no font, no request to any server). It knows nothing of runs, sweeps or papers:
``run``, ``sweep`` and ``paper`` build their sections from these pieces.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: The page's only style sheet, inline. System fonts only: a web font would be a fetch.
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; }
th { background: #f2f2f2; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.outside { background: #fdd; font-weight: bold; }
td.within { background: #dfd; }
td.unjudged { color: #777; }
tr.failed td { color: #a00; }
details { margin: .8em 0; } summary { cursor: pointer; color: #036; }
pre { background: #f7f7f7; padding: .8em; overflow: auto; font-size: .8em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #555; }
p.note { color: #555; font-size: .9em; }
"""


def esc(value: object) -> str:
    """``value`` as HTML text."""
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, an optional class (``num``, ``outside``, ...) and an optional
    exact value kept in ``data-value``, so that a reader (a test, a script) gets the number
    itself and not its rounded text."""

    text: str
    css: str = ""
    value: object = None

    def html(self) -> str:
        cls = f' class="{esc(self.css)}"' if self.css else ""
        data = f' data-value="{esc(repr(self.value))}"' if self.value is not None else ""
        return f"<td{cls}{data}>{esc(self.text)}</td>"


def num(value, fmt: str = "{:.3g}", scale: float = 1.0, css: str = "num") -> Cell:
    """A numeric cell showing ``value * scale`` with ``fmt`` ("–" for a missing or NaN value),
    keeping ``value`` itself (unscaled) in ``data-value``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return Cell("–", css)
    if v != v:
        return Cell("–", css, v)
    return Cell(fmt.format(v * scale), css, value if isinstance(value, (int, float)) else v)


def table(headers: Sequence[str], rows: Iterable[Sequence[Cell | str]], css: str = "",
          row_classes: Sequence[str] | None = None) -> str:
    """An HTML table; plain strings become text cells."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{esc(row_classes[i])}"' if row_classes and row_classes[i] else ""
        body.append(f"<tr{cls}>" + "".join((c if isinstance(c, Cell) else Cell(str(c))).html() for c in row) + "</tr>")
    cls = f' class="{esc(css)}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def details(summary: str, body_html: str) -> str:
    """A collapsible block, closed until clicked."""
    return f"<details><summary>{esc(summary)}</summary>{body_html}</details>"


def pre(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


def figure(fig, name: str, caption: str) -> str:
    """A matplotlib figure as an inline PNG (``data:`` URL) with its caption; the figure is
    closed. ``name`` goes into ``data-plot``, saying which plot it is."""
    from ..plot import _pyplot

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    _pyplot().close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<figure class="plot" data-plot="{esc(name)}"><img alt="{esc(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{esc(caption)}</figcaption></figure>')


def document(title: str, sections: Sequence[str]) -> str:
    """The whole page."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{esc(title)}</h1>{''.join(sections)}</body></html>\n")
