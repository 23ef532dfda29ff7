"""A sweep's spec: what a user writes (a scenario, settings fixed for every point, axes as a
grid and/or a list of cases, the engine) read and expanded into points, and each point's
config checked by the one schema (``_native.validate_config``) before anything runs.

A key names a value of the config as a path of table names and array indices,
``path[0].rtt``, ``tcp.cc``, ``flow[1].cc``; ``seed`` is short for ``run.seed``, and
``engine`` is not a config key but the engine a point runs in. The format is documented in
``docs/sweeps.md``.

A spec the user must fix (a syntax error, an unknown spec key, an axis that is not a list,
a key that leads nowhere, every point rejected by the schema) is a one-line
``PathtwinError`` naming the file and the key. A point that alone is invalid (one value of
an axis the schema refuses) is not: it keeps its error line and the others run.

Not here: running a point (``point``), the sweep directory and its datasets (``store``),
Dask (``runner``).
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import PathtwinError

#: The spec's own top-level keys.
SPEC_KEYS = ("scenario", "engine", "set", "grid", "case")
#: Engines a point may run in.
ENGINES = ("sim", "emu")
#: Short keys, for the axes users sweep most.
ALIASES = {"seed": "run.seed"}
#: The axis that picks a point's engine instead of setting a config key.
ENGINE_AXIS = "engine"

_SEGMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)$")
_INDEX = re.compile(r"\[(\d+)\]")
#: Where serde's error points in the JSON text we handed it: meaningless to a user, who wrote
#: TOML (the key before it says where).
_JSON_POSITION = re.compile(r" at line \d+ column \d+$")


@dataclass(frozen=True)
class Axis:
    """One swept key: ``name`` as the user wrote it (the partition column), the values in the
    order of the points, and ``kind``, the partition column's type ("bool", "int", "float"
    or "string"; values of mixed or structured types become strings, tables as JSON)."""

    name: str
    values: tuple[Any, ...]
    kind: str

    def label(self, value: Any) -> Any:
        """``value`` as the partition column holds it."""
        if self.kind == "string" and not isinstance(value, str):
            return json.dumps(value, sort_keys=True, default=str)
        if self.kind == "float":
            return float(value)
        return value


@dataclass
class Point:
    """One run of a sweep: its ``values`` per axis, its ``engine``, its full config (``None``
    when the schema refused it, ``error`` then says why, in one line)."""

    index: int
    values: dict[str, Any]
    engine: str
    config: dict[str, Any] | None
    error: str | None = None

    @property
    def id(self) -> str:
        return f"p{self.index:05d}"


@dataclass
class SweepSpec:
    """A read and expanded spec. ``origin`` names it in errors (its file, or "sweep spec");
    ``fingerprint`` changes whenever a point would run differently (the scenario's content
    included), and so tells a resumed sweep whether its directory is still this spec's."""

    origin: str
    scenario: str | None
    engine: str
    fixed: dict[str, Any]
    axes: list[Axis]
    points: list[Point]
    fingerprint: str
    described: dict[str, Any] = field(default_factory=dict)

    def labels(self, point: Point) -> dict[str, Any]:
        """The point's partition values, axis by axis."""
        return {a.name: a.label(point.values[a.name]) for a in self.axes}


def read_spec(source: str | os.PathLike | Mapping) -> SweepSpec:
    """Reads a spec from a TOML file, TOML text, or a dict (a scenario path in a dict or text
    is relative to the working directory; in a file, to the file's directory)."""
    import tomllib

    if isinstance(source, Mapping):
        return expand(dict(source), origin="sweep spec", base_dir=Path.cwd())
    text = str(source)
    if isinstance(source, os.PathLike) or ("\n" not in text and "=" not in text):
        path = Path(source)
        try:
            raw = path.read_text()
        except FileNotFoundError:
            raise PathtwinError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise PathtwinError(f"{path}: is a directory, expected a sweep spec (TOML)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise PathtwinError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
        try:
            doc = tomllib.loads(raw)
        except tomllib.TOMLDecodeError as e:
            raise PathtwinError(f"{path}: {e}") from None
        return expand(doc, origin=str(path), base_dir=path.parent)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PathtwinError(f"sweep spec: {e}") from None
    return expand(doc, origin="sweep spec", base_dir=Path.cwd())


def expand(doc: dict[str, Any], origin: str, base_dir: Path) -> SweepSpec:
    """The points of a spec document: every case crossed with every combination of the grid
    (a spec with neither is one point), each config validated."""
    unknown = [k for k in doc if k not in SPEC_KEYS]
    if unknown:
        raise PathtwinError(f"{origin}: unknown key `{unknown[0]}` (a sweep spec has {', '.join(SPEC_KEYS)})")
    scenario, scenario_path = _scenario(doc.get("scenario"), origin, base_dir)
    engine = doc.get("engine", "sim")
    if engine not in ENGINES:
        raise PathtwinError(f"{origin}: engine: {engine!r} is not one of {', '.join(ENGINES)}")
    fixed = _flat(_table(doc.get("set", {}), "set", origin), "set", origin, leaf_lists=False)
    grid = _flat(_table(doc.get("grid", {}), "grid", origin), "grid", origin, leaf_lists=True)
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise PathtwinError(f"{origin}: grid.{key}: an axis is a non-empty list of values, not {values!r}")
    cases = _cases(doc.get("case", []), origin)
    case_keys = list(cases[0]) if cases else []
    both = [k for k in case_keys if k in grid]
    if both:
        raise PathtwinError(f"{origin}: {both[0]} is both a grid axis and a case key")
    for key in [*case_keys, *grid, *fixed]:
        _check_key(key, origin)
    fixed_and_swept = [k for k in fixed if k in grid or k in case_keys]
    if fixed_and_swept:
        raise PathtwinError(f"{origin}: {fixed_and_swept[0]} is both in [set] and an axis")
    if ENGINE_AXIS in fixed:
        raise PathtwinError(f"{origin}: set.engine: give the engine as the spec's `engine`, or sweep it as an axis")

    combos: list[dict[str, Any]] = []
    for case in cases or [{}]:
        for values in itertools.product(*grid.values()):
            combos.append({**case, **dict(zip(grid, values))})
    names = [*case_keys, *grid]
    axes = [_axis(name, [c[name] for c in combos]) for name in names]
    seen: dict[str, int] = {}
    points = []
    for i, values in enumerate(combos):
        key = json.dumps([a.label(values[a.name]) for a in axes], default=str)
        if key in seen:
            raise PathtwinError(f"{origin}: point {i} repeats point {seen[key]} ({_describe(values)})")
        seen[key] = i
        point_engine = values.get(ENGINE_AXIS, engine)
        if point_engine not in ENGINES:
            raise PathtwinError(f"{origin}: engine: {point_engine!r} is not one of {', '.join(ENGINES)}")
        config = copy.deepcopy(scenario)
        for k, v in [*fixed.items(), *((k, v) for k, v in values.items() if k != ENGINE_AXIS)]:
            assign(config, k, copy.deepcopy(v), origin)
        point = Point(index=i, values=values, engine=point_engine, config=config)
        point.error = validate(config, scenario_path or origin)
        if point.error is not None:
            point.config = None
        points.append(point)
    if all(p.error is not None for p in points):
        raise PathtwinError(f"{origin}: {points[0].error}" + (f" (and every other of the {len(points)} points)" if len(points) > 1 else ""))

    described = {"scenario": scenario_path if scenario_path else scenario, "engine": engine, "set": fixed,
                 "grid": grid, "case": cases}
    fingerprint = hashlib.sha256(json.dumps({"scenario": scenario, "engine": engine, "set": fixed,
                                             "points": [p.values for p in points]},
                                            sort_keys=True, default=str).encode()).hexdigest()[:16]
    return SweepSpec(origin=origin, scenario=scenario_path, engine=engine, fixed=fixed, axes=axes, points=points,
                     fingerprint=fingerprint, described=described)


def validate(config: dict[str, Any], origin: str) -> str | None:
    """The schema's one-line complaint about ``config``, or None if it is valid."""
    from .. import _native

    try:
        _native.validate_config(json.dumps(config, default=str), "json", origin)
    except _native.ConfigError as e:
        return _JSON_POSITION.sub("", str(e))
    return None


def parse_key(key: str) -> list[str | int]:
    """``"path[0].rtt"`` -> ``["path", 0, "rtt"]`` (after aliases); a malformed key raises
    ``ValueError``."""
    key = ALIASES.get(key, key)
    parts: list[str | int] = []
    for segment in key.split("."):
        m = _SEGMENT.match(segment)
        if m is None:
            raise ValueError(f"`{segment}` is not a name or name[index]")
        parts.append(m.group(1))
        parts.extend(int(i) for i in _INDEX.findall(m.group(2)))
    return parts


def assign(config: dict[str, Any], key: str, value: Any, origin: str) -> None:
    """Sets ``key`` of ``config`` to ``value``, making the tables on the way that do not
    exist yet (``[run]`` in a scenario without one); an index past an array's end, or a key
    through a value that is not a table, is a one-line error."""
    if key == ENGINE_AXIS:
        return
    parts = parse_key(key)
    node: Any = config
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = _join(parts[:depth + 1])
        if isinstance(part, int):
            if not isinstance(node, list):
                raise PathtwinError(f"{origin}: {key}: {_join(parts[:depth])} is not an array in the scenario")
            if part >= len(node):
                raise PathtwinError(f"{origin}: {key}: the scenario has {len(node)} {_join(parts[:depth])} entries, no {where}")
            if last:
                node[part] = value
            else:
                node = node[part]
            continue
        if not isinstance(node, dict):
            raise PathtwinError(f"{origin}: {key}: {_join(parts[:depth])} is not a table in the scenario")
        if last:
            node[part] = value
        else:
            if part not in node:
                if isinstance(parts[depth + 1], int):
                    raise PathtwinError(f"{origin}: {key}: the scenario has no {part} entries")
                node[part] = {}
            node = node[part]


def _join(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _check_key(key: str, origin: str) -> None:
    if key == ENGINE_AXIS:
        return
    try:
        parse_key(key)
    except ValueError as e:
        raise PathtwinError(f"{origin}: {key}: not a config key ({e}); quote keys with indices: \"path[0].rtt\"") from None


def _scenario(value: Any, origin: str, base_dir: Path) -> tuple[dict[str, Any], str | None]:
    """The scenario config as a dict, and its file (None when given inline): TOML, or JSON
    for a file ending in ``.json`` (``config.file_format``, as every engine reads it)."""
    import tomllib

    from ..config import file_format, loads

    if value is None:
        raise PathtwinError(f"{origin}: scenario: missing (a topology TOML's path, or an inline [scenario] table)")
    if isinstance(value, dict):
        return value, None
    if not isinstance(value, str):
        raise PathtwinError(f"{origin}: scenario: a path or a table, not {type(value).__name__}")
    path = Path(value)
    if not path.is_absolute():
        path = base_dir / path
    try:
        return loads(path.read_text(), file_format(path)), str(path)
    except FileNotFoundError:
        raise PathtwinError(f"{origin}: scenario: {path}: no such file") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise PathtwinError(f"{path}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PathtwinError(f"{origin}: scenario: {path}: cannot read ({getattr(e, 'strerror', None) or e})") from None


def _table(value: Any, name: str, origin: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PathtwinError(f"{origin}: {name}: expected a table ([{name}]), not {type(value).__name__}")
    return value


def _flat(table: dict[str, Any], section: str, origin: str, leaf_lists: bool) -> dict[str, Any]:
    """Nested tables as dotted keys: ``[grid] tcp.cc = [...]`` (TOML's nesting) is the key
    ``tcp.cc`` as ``"tcp.cc" = [...]`` is. A value that is a table is set key by key."""
    out: dict[str, Any] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                walk(v, key)
            else:
                out[key] = v

    walk(table, "")
    if leaf_lists:
        for key, v in out.items():
            if not isinstance(v, list):
                raise PathtwinError(f"{origin}: {section}.{key}: an axis is a list of values, not {v!r}")
    return out


def _cases(value: Any, origin: str) -> list[dict[str, Any]]:
    """The ``[[case]]`` entries, flattened; every case must set the same keys (each is an
    axis, and a point needs a value on each)."""
    if not isinstance(value, list) or not all(isinstance(c, dict) for c in value):
        raise PathtwinError(f"{origin}: case: expected [[case]] tables")
    cases = [_flat(c, f"case[{i}]", origin, leaf_lists=False) for i, c in enumerate(value)]
    if any(not c for c in cases):
        raise PathtwinError(f"{origin}: case[{next(i for i, c in enumerate(cases) if not c)}]: an empty case")
    for i, c in enumerate(cases[1:], start=1):
        if set(c) != set(cases[0]):
            missing = sorted(set(cases[0]) ^ set(c))[0]
            raise PathtwinError(f"{origin}: case[{i}]: sets other keys than case[0] ({missing}); every case sets the same keys")
    return cases


def _axis(name: str, values: list[Any]) -> Axis:
    # Distinct by type and value: 1, 1.0 and true are three values to a config.
    by_repr: dict[str, Any] = {}
    for v in values:
        by_repr.setdefault(f"{type(v).__name__}:{json.dumps(v, sort_keys=True, default=str)}", v)
    distinct = list(by_repr.values())
    if all(isinstance(v, bool) for v in distinct):
        kind = "bool"
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in distinct):
        kind = "int"
    elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in distinct):
        kind = "float"
    else:
        kind = "string"
    return Axis(name=name, values=tuple(distinct), kind=kind)


def _describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())
