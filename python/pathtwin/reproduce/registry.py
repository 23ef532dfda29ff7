"""The registry of reproductions: what each paper module declares about its experiments, in
one record per reproduction, and how a caller finds, runs and prints them.

A paper module (``nsdi09``, ``nsdi09_queues``, ``acc``, ``monarch``, ``thesis``) calls ``register`` at import
with a ``Reproduction``: its name (``nsdi09-table2``), a one-line description, the engines it
runs on, the options it takes, the paper's numbers with where the paper gives them, and three
functions: one that runs it and returns structured results, one that prints those as text
in the paper's layout, one that turns them into JSON; and, for the report of every
reproduction (``report``, `pathtwin reproduce all`), one that names our number for each of
the paper's (``ours``) and the tolerance it is judged by. ``pathtwin.reproduce`` imports every
paper module, so ``reproductions()`` lists them all, in order, and ``get(name)`` finds one;
the command line (`pathtwin reproduce`) only dispatches through here.

    from pathtwin import reproduce
    for r in reproduce.reproductions():
        request = r.request(engine="sim", duration="10s")
        r.print_text(r.run(request), request)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import PathtwinError

#: The engines a reproduction may run on, and how messages name them.
ENGINES = {"sim": "the simulator", "emu": "the emulator"}

#: The options a reproduction may take besides the engine and an output directory: seeds to
#: average over, a run duration overriding the paper's, and a subset of its configurations.
OPTIONS = ("seeds", "duration", "only")

#: Called with a line of progress (stderr on the command line) while a reproduction runs.
Progress = Callable[[str], None]


@dataclass(frozen=True)
class PaperValue:
    """One number the paper reports (or, where it gives none, its words), and where."""

    #: What was measured, e.g. "mean RTT, link mode".
    quantity: str
    #: The value: a number in ``unit``, or the paper's words ("> 300", "no loss").
    value: float | str
    #: Unit of ``value`` ("ms", "%", "Mbit/s", "B/s"; "" for counts, ratios and words).
    unit: str
    #: Where the paper says so, e.g. "NSDI'09 §4.2, Figure 5".
    source: str


@dataclass(frozen=True)
class Request:
    """What a caller asks of a reproduction: the engine, its options (None: the
    reproduction's default) and where to keep each run's result directory."""

    engine: str = "sim"
    seeds: int | None = None
    duration: str | None = None
    only: str | None = None
    out: Path | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise PathtwinError(f"--engine: expected {' or '.join(ENGINES)}, got {self.engine!r}")
        if self.seeds is not None and self.seeds < 1:
            raise PathtwinError("--seeds: must be at least 1")


@dataclass(frozen=True)
class Reproduction:
    """One reproduction of a paper's experiment, as its paper module declares it.

    ``runner(request, progress)`` runs it (``progress``, if given, takes lines to show while
    it runs) and returns its results; ``print_text(results, request)`` prints them in the
    paper's layout, ``to_json(results)`` makes them JSON-serializable. ``options`` are those
    of ``OPTIONS`` it uses (others are ignored), ``defaults`` their values when not given,
    ``paper`` the numbers it is compared with; ``engine_note`` says why it runs on
    ``engines`` only. ``ours(results)`` maps each of ``paper``'s quantities to our value
    (a number in the paper's unit, or words where ours is not one number; a quantity left
    out was not measured); ``tolerance`` is the relative difference the reproduction
    accepts (None: it states none, and the report's default applies); ``tolerance_abs``,
    if given, an absolute difference in the paper's unit instead, for numbers that are
    themselves errors (a relative tolerance on the paper's 2.1 % error would flag ours of
    0.003 %). ``figures(results)``, if given, draws the paper's figures from ``results``:
    ``(name, caption, matplotlib figure)`` each (`pathtwin reproduce NAME -o DIR` writes them
    as ``DIR/NAME.png``; `pathtwin reproduce all` puts them in its report)."""

    name: str
    description: str
    engines: tuple[str, ...]
    options: tuple[str, ...]
    paper: tuple[PaperValue, ...]
    runner: Callable[[Request, Progress | None], Any]
    print_text: Callable[[Any, Request], None]
    to_json: Callable[[Any], Any]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    engine_note: str = ""
    ours: Callable[[Any], Mapping[str, float | str]] | None = None
    tolerance: float | None = None
    tolerance_abs: float | None = None
    figures: Callable[[Any], list[tuple[str, str, Any]]] | None = None

    def save_figures(self, results: Any, out: Path) -> list[Path]:
        """Writes ``figures(results)`` as ``out/NAME.png``; returns the files."""
        from ..plot import _pyplot

        written = []
        for name, _caption, fig in self.figures(results) if self.figures is not None else []:
            Path(out).mkdir(parents=True, exist_ok=True)
            path = Path(out) / f"{name}.png"
            fig.savefig(path, dpi=100)
            _pyplot().close(fig)
            written.append(path)
        return written

    def request(self, **options: Any) -> Request:
        """A ``Request`` for this reproduction from ``options`` (``Request``'s fields), its
        defaults filling in what is not given; an engine it does not run on is an error."""
        request = Request(**options)
        if request.engine not in self.engines:
            where = " and ".join(ENGINES[e] for e in self.engines)
            raise PathtwinError(f"--engine: {self.name} runs in {where}" + (f" ({self.engine_note})" if self.engine_note else ""))
        filled = {k: v for k, v in self.defaults.items() if getattr(request, k) is None}
        return replace(request, **filled) if filled else request

    def run(self, request: Request | None = None, progress: Progress | None = None) -> Any:
        """Runs the reproduction as ``request`` asks (default: its defaults, in the
        simulator); returns its results."""
        request = self.request(**vars(request)) if request is not None else self.request()
        return self.runner(request, progress)

    def print_json(self, results: Any) -> None:
        """Prints ``results`` as indented JSON (what `pathtwin reproduce --json` prints)."""
        print(json.dumps(self.to_json(results), indent=2))


_REGISTRY: dict[str, Reproduction] = {}


def register(reproduction: Reproduction) -> Reproduction:
    """Adds a paper module's reproduction to the registry (each name once)."""
    assert reproduction.name not in _REGISTRY, f"reproduction {reproduction.name!r} registered twice"
    assert set(reproduction.engines) <= set(ENGINES) and set(reproduction.options) <= set(OPTIONS), reproduction.name
    _REGISTRY[reproduction.name] = reproduction
    return reproduction


def reproductions() -> list[Reproduction]:
    """Every registered reproduction, in the order the paper modules register them."""
    return list(_REGISTRY.values())


def get(name: str) -> Reproduction:
    """The reproduction called ``name``; an unknown name is a ``PathtwinError``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PathtwinError(f"unknown reproduction {name!r}: expected one of {', '.join(_REGISTRY)}") from None
