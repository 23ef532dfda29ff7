"""The resume file of a measurement: ``<output>.measure.json`` beside the model it will
write. It holds the settings, every finished step's raw result (probe series, throughput
records) and, once done, the findings; it is rewritten atomically after each step, so that
an interrupted run (Ctrl-C, a crash, a lost machine) keeps all it measured and the same
command resumes at the first step not done. When the measurement is complete it stays as
the record of what was measured, with every value's confidence.

Not here: which steps there are (``session``), what their results mean.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import PathtwinError

FORMAT = 1


def state_path(out: Path) -> Path:
    """The state file beside ``out`` (``model.toml`` -> ``model.measure.json``)."""
    return out.with_name(out.stem + ".measure.json") if out.suffix else out.with_name(out.name + ".measure.json")


class State:
    """The steps done so far, keyed by name (``probe``, ``tput a->b 4``), and the settings they
    were measured with."""

    def __init__(self, path: Path, settings: dict[str, Any]):
        self.path = path
        self.settings = settings
        self.steps: dict[str, Any] = {}
        self.findings: dict[str, Any] = {}
        self.resumed = 0

    @classmethod
    def open(cls, path: Path, settings: dict[str, Any]) -> "State":
        """A fresh state, or the one at ``path`` if it was measured with the same settings;
        a state from other settings is refused (its steps would not fit together)."""
        st = cls(path, settings)
        if not path.exists():
            return st
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise PathtwinError(f"{path}: not a measurement state file ({e}); remove it to start afresh") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise PathtwinError(f"{path}: not a measurement state file of format {FORMAT}; remove it to start afresh")
        old = data.get("settings", {})
        if old != settings:
            diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            raise PathtwinError(f"{path}: measured with other settings ({', '.join(diff)}); "
                                "run with the same ones to resume, or remove it to start afresh")
        st.steps = dict(data.get("steps", {}))
        st.resumed = len(st.steps)
        return st

    def done(self, step: str) -> bool:
        return step in self.steps

    def record(self, step: str, value: Any) -> None:
        """Keeps a finished step and writes the file at once."""
        self.steps[step] = value
        self.save()

    def save(self) -> None:
        data = {"format": FORMAT, "settings": self.settings, "steps": self.steps, "findings": self.findings}
        tmp = self.path.with_name("." + self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, allow_nan=False))
            os.replace(tmp, self.path)
        except OSError as e:
            raise PathtwinError(f"{self.path}: cannot write the measurement state ({e.strerror})") from None
