"""The package's types: the stub of the native extension (``python/pathtwin/_native.pyi``)
says exactly what the extension exports, and mypy finds nothing wrong in the package (the
Makefile's `test-python` runs mypy too; this keeps both true for a bare `pytest`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (pip install mypy)")


def _mypy(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=600)


def test_the_native_stub_matches_the_extension():
    """stubtest compares every name, argument and default of the stub with the built
    extension: a change to the bindings must come with its stub."""
    r = _mypy("mypy.stubtest", "pathtwin._native")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean_on_the_package():
    r = _mypy("mypy", "python/pathtwin")
    assert r.returncode == 0, r.stdout + r.stderr
