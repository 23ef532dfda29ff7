"""Shared helpers for the Python tests: running the CLI as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run_cli(*args, timeout=600, **kw) -> subprocess.CompletedProcess:
    """Runs `pathtwin ARGS...` in a subprocess and returns the completed process."""
    return subprocess.run([sys.executable, "-m", "pathtwin.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


@pytest.fixture
def cli():
    return run_cli


def pytest_configure(config):
    os.environ.setdefault("MPLBACKEND", "Agg")
