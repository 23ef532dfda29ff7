"""HTML reports: one self-contained page (inline style, figures as base64 PNG, no script and
no request anywhere) for result directories and sweeps, and the papers' numbers beside ours.

``write_report(["out/run", "out/sweep"], "report.html")`` is `pathtwin report`: each
directory a section, a run (``run.json``) by ``run``, a sweep (``sweep.json``) by ``sweep``.
``paper`` renders a reproduction's paper-against-ours table; running the reproductions and
asking them for their numbers is ``pathtwin.reproduce.report``'s (the papers stay out of
this package). ``page`` is the HTML itself. What a report holds, and which plots each kind
of directory gets, is in ``docs/reports.md``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import PathtwinError
from .page import document

__all__ = ["write_report", "write_page", "section_for"]


def section_for(path: str | os.PathLike) -> str:
    """The report section of one directory: a sweep's or a run's; anything else is a
    one-line ``PathtwinError`` naming it."""
    path = Path(path)
    if (path / "sweep.json").is_file():
        from ..sweeps.store import read_sweep
        from .sweep import section

        return section(read_sweep(path), f"Sweep {path}")
    if (path / "run.json").is_file():
        from ..results import read_result_dir
        from .run import section as run_section

        return run_section(read_result_dir(path), f"Run {path}")
    what = "does not exist" if not path.exists() else "is not a directory" if not path.is_dir() else \
        "is not a run or sweep directory (no run.json or sweep.json)"
    raise PathtwinError(f"{path}: {what}")


def write_page(out: str | os.PathLike, title: str, sections: Sequence[str]) -> Path:
    """Writes the page of ``sections`` to ``out``."""
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(document(title, sections), encoding="utf-8")
    except OSError as e:
        raise PathtwinError(f"{out}: cannot write ({e.strerror or e})") from None
    return out


def write_report(paths: Sequence[str | os.PathLike], out: str | os.PathLike, title: str | None = None) -> Path:
    """One page for ``paths`` (result directories and sweep directories), written to
    ``out``; every directory is read before anything is written."""
    if not paths:
        raise PathtwinError("report: name at least one run or sweep directory")
    sections = [section_for(p) for p in paths]
    return write_page(out, title or "pathtwin report: " + ", ".join(str(p) for p in paths), sections)
