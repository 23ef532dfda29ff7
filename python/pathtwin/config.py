"""Turning what a user hands us (a path, a TOML string, a dict) into text for the Rust schema.

Python never restates the schema: it only decides how to pass the config to
``pathtwin._native`` (TOML text as is, dicts as JSON) and turns schema errors into
``PathtwinError`` with the same one-line message.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from collections.abc import Iterable, Mapping

from .errors import PathtwinError

#: A TOML file's path, TOML text, or the config as a dict.
ConfigSource = str | os.PathLike | Mapping


def file_format(path: Path) -> str:
    """A config file's format by its name: JSON when it ends in ``.json``, else TOML."""
    return "json" if path.suffix.lower() == ".json" else "toml"


def loads(text: str, fmt: str) -> dict:
    """Config text in ``fmt`` ("toml" or "json") as a dict, not checked by the schema."""
    if fmt == "json":
        return json.loads(text)
    import tomllib

    return tomllib.loads(text)


def config_text(source: ConfigSource) -> tuple[str, str, str]:
    """Returns ``(text, format, origin)`` for a file path (JSON when it ends in ``.json``,
    else TOML), a TOML string or a dict."""
    if isinstance(source, Mapping):
        return json.dumps(source), "json", ""
    if isinstance(source, (str, os.PathLike)):
        text = str(source)
        if isinstance(source, os.PathLike) or ("\n" not in text and "=" not in text):
            path = Path(source)
            try:
                return path.read_text(), file_format(path), str(path)
            except FileNotFoundError:
                raise PathtwinError(f"{path}: no such file") from None
            except IsADirectoryError:
                raise PathtwinError(f"{path}: is a directory, expected a TOML file") from None
            except UnicodeDecodeError:
                raise PathtwinError(f"{path}: not a text file") from None
            except OSError as e:
                raise PathtwinError(f"{path}: {e.strerror}") from None
        return text, "toml", ""
    raise PathtwinError(f"config must be a path, TOML text or a dict, not {type(source).__name__}")


def native_call(fn, *args, **kwargs):
    """Calls into the native module, turning its ConfigError into PathtwinError."""
    from . import _native

    try:
        return fn(*args, **kwargs)
    except _native.ConfigError as e:
        raise PathtwinError(str(e)) from None


def parse_quantity(kind: str, text: str, what: str) -> float:
    """Parses a unit string ("10mbit", "50ms", ...) with the Rust parser; errors name ``what``."""
    from . import _native

    try:
        return _native.parse_quantity(kind, text)
    except _native.ConfigError as e:
        raise PathtwinError(f"{what}: {e}") from None


def parse_per_direction(kind: str, value, what: str) -> tuple[float, float]:
    """A value per direction as a config writes it (one value for both, ``"a/b"``, or a
    two-element list) of ``kind`` ("rate", "size" or "queue"), parsed by the schema's own
    rule: ``(a→b, b→a)``; errors name ``what``."""
    from . import _native

    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise PathtwinError(f"{what}: expected one value per direction, got {len(value)}")
        a, b = (_native.parse_per_direction(kind, str(v)) for v in value)
        return a[0], b[0]
    try:
        return _native.parse_per_direction(kind, str(value))
    except _native.ConfigError as e:
        raise PathtwinError(f"{what}: {e}") from None


def parse_assignments(items: Iterable[str], what: str, form: str = "KEY=VALUE") -> dict[str, str]:
    """``["a=1", "b = x"]`` -> ``{"a": "1", "b": "x"}`` (command-line settings); an item that
    is not ``form`` is a one-line error naming ``what``."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise PathtwinError(f"{what} {item!r} is not {form}")
        out[key.strip()] = value.strip()
    return out
