"""Does the twin behave like the measured paths? ``validate`` repeats every throughput test
of a measurement (each ordered pair, each flow count, the same length and the same programs
over the same kernel TCP) between the hosts of an emulation of the model it wrote, and
compares the twin's throughput with the measured one — NSDI'09 §4.5's check of the
reactivity model (Figure 8: the error per path and flow count; 80 % of the paper's paths
within 20 %).

Not here: measuring (``session``); the model (``model``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import PathtwinError
from .session import Progress
from .state import state_path
from .throughput import parallel_flows

#: NSDI'09 §4.5's yardstick: the share of tests within this relative error.
WITHIN = 0.20


@dataclass
class Validation:
    """Per test (``pair``, ``flows``): measured and twin ABW (bit/s), the twin's relative
    error and the congestion control its flows ran (``cc``: the measured test's); ``within``
    the share of tests within ``WITHIN``."""

    rows: list[dict]
    within: float

    def as_dict(self) -> dict:
        return {"rows": self.rows, "within_20pct": self.within}


def load_record(model: Path) -> dict:
    """The measurement's record beside ``model`` (``NAME.measure.json``), complete."""
    rec_path = state_path(model)
    try:
        rec = json.loads(rec_path.read_text())
    except FileNotFoundError:
        raise PathtwinError(f"{rec_path}: no measurement record beside {model} (validate needs the model "
                            "`pathtwin measure` wrote, with its record)") from None
    except (OSError, ValueError) as e:
        raise PathtwinError(f"{rec_path}: not a measurement record ({e})") from None
    if not rec.get("findings"):
        raise PathtwinError(f"{rec_path}: the measurement is not complete; run it to its end first")
    return rec


def validate(model: Path, out: Optional[Path] = None, progress: Optional[Progress] = None) -> Validation:
    """Repeats the measurement's throughput tests in an emulation of ``model`` and compares
    (root). Writes ``out`` (JSON) if given."""
    from ..emulation import Emulation, require_root

    model = Path(model)
    if not model.is_file():
        raise PathtwinError(f"{model}: no such file")
    rec = load_record(model)
    settings = rec["settings"]
    flows = sorted(settings["flows"])
    hosts = list(settings["hosts"])
    tests = [(a, b, n) for a in hosts for b in hosts if a != b for n in flows]
    require_root()
    if progress is not None:
        progress.plan([(f"{a}->{b}", f"{n} flow{'s' if n > 1 else ''}", settings["duration_s"]) for a, b, n in tests])
    rows = []
    with Emulation(model, tcp_info=False) as net:
        for a, b, n in tests:
            pair, step = f"{a}->{b}", f"{n} flow{'s' if n > 1 else ''}"
            if progress is not None:
                progress.start(pair, step)
            step_rec = rec["steps"][f"tput {a}->{b} {n}"]
            # The controller the measured test ran (None in a record from before tests recorded
            # it), so that a twin on a machine of another default repeats the same test.
            twin = parallel_flows(net[a], net[b], n, settings["duration_s"], settings["port"] + 1, step_rec.get("cc"))
            measured = step_rec["abw_bps"]
            rows.append({"pair": pair, "flows": n, "measured_bps": measured, "twin_bps": twin["abw_bps"],
                         "error": (twin["abw_bps"] - measured) / measured if measured > 0 else float("nan"),
                         "twin_std_bps": twin["std_bps"], "cc": twin["cc"]})
            if progress is not None:
                progress.done(pair, step)
    within = sum(abs(r["error"]) <= WITHIN for r in rows) / len(rows)
    v = Validation(rows, within)
    if out is not None:
        try:
            Path(out).write_text(json.dumps(v.as_dict(), indent=1))
        except OSError as e:
            raise PathtwinError(f"{out}: cannot write the validation ({e.strerror})") from None
    return v
