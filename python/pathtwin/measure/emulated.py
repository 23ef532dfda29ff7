"""Measuring between hosts of an emulated ground truth: ``measure_emulated`` starts an
emulation of a topology (typically router level, ``[[link]]``) with its own ``[[flow]]``
cross traffic running as real kernel TCP, lets the cross traffic settle, and measures the
chosen hosts as it would real ones. The ground truth's ``[run] duration`` is stretched to
outlast the measurement (its workload would otherwise end first); nothing else of it changes.

Not here: the measurement (``session``), the emulator (``pathtwin.emulation``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional, Sequence

from ..config import ConfigSource, config_text, native_call
from ..errors import PathtwinError
from .session import Measurement, Progress, Settings, check_hosts, measure

#: Seconds the cross traffic runs before the first probe (its connections open and leave
#: slow start).
SETTLE_S = 3.0
#: The stretched run: longer than any measurement.
RUN_FOR = "1000000s"


def ground_truth(source: ConfigSource) -> dict:
    """The ground truth's config, validated by the schema, as a dict."""
    from .. import _native

    text, fmt, origin = config_text(source)
    return json.loads(native_call(_native.validate_config, text, fmt, origin))


def default_hosts(cfg: dict) -> list[str]:
    """The hosts to measure when none are named: those no ``[[flow]]`` uses (the others are
    the cross traffic's ends), or every host if that leaves fewer than two."""
    busy = {f["from"] for f in cfg.get("flow", [])} | {f["to"] for f in cfg.get("flow", [])}
    free = [h for h in cfg["hosts"] if h not in busy]
    return free if len(free) >= 2 else list(cfg["hosts"])


def measure_emulated(source: ConfigSource, hosts: Optional[Sequence[str]] = None, settings: Optional[Settings] = None,
                     out: Optional[Path] = None, state_file: Optional[Path] = None,
                     progress: Optional[Progress] = None, settle_s: float = SETTLE_S) -> Measurement:
    """Emulates ``source`` with its cross traffic and measures ``hosts`` (default:
    ``default_hosts``) with ``settings``; see ``session.measure`` for the rest."""
    from ..emulation import Emulation, require_root

    settings = settings or Settings()
    settings.check()
    cfg = ground_truth(source)
    names = check_hosts(list(hosts), cfg["hosts"]) if hosts is not None else default_hosts(cfg)
    if len(names) < 2:
        raise PathtwinError("the ground truth has fewer than two hosts to measure")
    require_root()
    cfg["run"]["duration"] = RUN_FOR
    origin = Path(str(source)).name if isinstance(source, (str, Path)) and "\n" not in str(source) else "<config>"
    context = {"ground_truth": origin, "ground_truth_config": cfg}
    # The kernel's tcp_info series is not needed here; sampling it would cost CPU the
    # emulator's loop needs.
    with Emulation(cfg, workload=bool(cfg.get("flow")), tcp_info=False) as net:
        time.sleep(settle_s)
        return measure([net[h] for h in names], settings, out=out, state_file=state_file, progress=progress,
                       context=context)
