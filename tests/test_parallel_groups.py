"""The parallel phase's grouping (tests/conftest.py) as `make test` runs it: pytest-xdist's
`--dist loadgroup` on two workers, over a module written here. Expectations from what the
groups are for: a module-scoped fixture is set up once however its tests are spread, and the
tests of one ``xdist_group`` (fixed ports: tests/test_measure_agent.py) run on one worker.
Each test records its worker in a file, so the check reads what ran, not the scheduler's
plan."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import REPO

INNER = '''
import os, time
from pathlib import Path
import pytest

LOG = Path(__file__).with_name("log")


def record(what):
    with LOG.open("a") as f:
        f.write(f"{what} {os.environ['PYTEST_XDIST_WORKER']}\\n")


@pytest.mark.parametrize("k", range(6))
def test_alone(k):
    time.sleep(0.2)


@pytest.fixture(scope="module")
def made_once():
    record("fixture")


# After the tests of no group, so that without the grouping both workers would take some.
@pytest.mark.parametrize("k", range(6))
def test_reads_the_fixture(made_once, k):
    time.sleep(0.3)


@pytest.mark.xdist_group("ports")
@pytest.mark.parametrize("k", range(6))
def test_binds_a_fixed_port(k):
    record("ports")
    time.sleep(0.1)
'''


def test_a_module_fixture_is_made_once_and_a_group_stays_on_one_worker(tmp_path):
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--dist", "loadgroup",
                           str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "18 passed" in done.stdout, done.stdout[-2000:]
    lines = [line.split() for line in (tmp_path / "log").read_text().splitlines()]
    fixture = [worker for what, worker in lines if what == "fixture"]
    ports = {worker for what, worker in lines if what == "ports"}
    assert len(fixture) == 1, f"the module fixture was set up on {fixture}"
    assert len(ports) == 1, f"the group's tests ran on {sorted(ports)}"
