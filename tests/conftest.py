"""Shared helpers for the Python tests: running the CLI as a user would, loading a bench
script as a module, starting a child that a test will interrupt, checking that an emulator
test leaves no namespace behind."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run_cli(*args, timeout=600, **kw) -> subprocess.CompletedProcess:
    """Runs `pathtwin ARGS...` in a subprocess and returns the completed process."""
    return subprocess.run([sys.executable, "-m", "pathtwin.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kw)


def default_sigint() -> None:
    """`preexec_fn` for a child the test will stop with SIGINT, as Ctrl-C in a terminal does:
    SIGINT back to its default action. A shell's background job (`cmd &`, `nohup`) starts
    with SIGINT ignored, an ignored signal stays ignored across exec, and Python then
    installs no KeyboardInterrupt handler: the child would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_once_recorded(cmd: list[str], state: Path, steps: int, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """Runs ``cmd`` (a `pathtwin measure` command that keeps a resume file) until its resume
    file ``state`` holds at least ``steps`` finished steps, then stops it as Ctrl-C does and
    returns how it ended; fails if it ended before."""
    import json
    import time

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + timeout
    done: dict = {}
    while time.monotonic() < deadline and p.poll() is None and len(done) < steps:
        try:
            done = json.loads(state.read_text())["steps"]
        except (OSError, ValueError, KeyError):
            done = {}
        time.sleep(0.05)
    assert p.poll() is None, f"finished before it could be interrupted: {p.communicate()[1][-1000:]}"
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr)


def namespaces() -> set[str]:
    """The network namespaces that exist now."""
    return set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()


def _parent(pid: int) -> int:
    """The parent of process `pid` (0 if it is gone)."""
    try:
        # /proc/PID/stat: "pid (comm) state ppid ..."; comm may hold spaces, not ")".
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def owned_by_another_live_process(namespace: str) -> bool:
    """Whether `namespace` (pt-RUN-HOST) belongs to a live run of a process that is neither
    this one nor one it started: the run's state directory names its owner (pathtwin-emu's
    netns::Owner) and outlives its namespaces, so such a namespace is another session's
    emulation on the same machine, not a leak of this test."""
    run = namespace.split("-")[1]
    try:
        pid = int(Path(f"/run/pathtwin/{run}/owner").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    ancestor = pid
    while ancestor > 1:
        if ancestor == os.getpid():
            return False
        ancestor = _parent(ancestor)
    return Path(f"/proc/{pid}").exists()


def unavailable(reason: str) -> None:
    """Ends a test whose privilege or tool is missing: a skip on a developer's machine, a
    failure under CI (``CI`` set, as `.ci/run` does), where a skip would pass unseen."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}, and CI must run this test")
    pytest.skip(reason)


def require_emulator() -> None:
    """The emulator's privileges (root and iproute2), for a fixture of a wider scope than the
    tests' ``emulator`` (one measurement a module's tests share): ``unavailable`` without them."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        unavailable("the emulator needs root and iproute2")


@pytest.fixture
def emulator():
    """The emulator's privileges (root and iproute2). Without them a test is skipped on a
    developer's machine and fails under CI (``CI`` set, as `.ci/run` does), where a skip
    would pass unseen."""
    require_emulator()


#: Marks a test that runs the emulator (see ``emulator``).
needs_root = pytest.mark.usefixtures("emulator")


@pytest.fixture
def small_disk(tmp_path):
    """A directory on its own 64-KiB tmpfs, which a test fills to see what a full disk does
    (mounting needs root: skipped on a developer's machine without it, a failure under CI)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        unavailable("a full disk is made with a small tmpfs, which needs root and mount")
    disk = tmp_path / "small-disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.fixture
def no_namespace_left_behind():
    """Fails the test if it left a pathtwin namespace behind (its own, not another
    process's running emulation)."""
    before = namespaces()
    yield
    left = {n for n in namespaces() - before if n.startswith("pt-") and not owned_by_another_live_process(n)}
    assert not left, f"namespaces left behind: {left}"


def load_script(relpath: str, name: str):
    """Imports the script at `relpath` (from the repository root, e.g. a bench runner) as
    module `name`."""
    spec = importlib.util.spec_from_file_location(name, REPO / relpath)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def cli():
    return run_cli


def pytest_configure(config):
    os.environ.setdefault("MPLBACKEND", "Agg")
    config.addinivalue_line("markers", "serial: sends real traffic in real time (an emulation, loopback, a kernel "
                                       "relay): `make test` runs these one at a time, after the parallel phase, so "
                                       "that no other test's CPU load falls into what they measure")
    config.addinivalue_line("markers", "untimed: uses the emulator's privileges but sends no traffic and times nothing "
                                       "(a refusal before any host exists): not made ``serial`` by the ``emulator`` "
                                       "fixture, so it runs in the parallel phase")
    config.addinivalue_line("markers", "long: a parallel-phase test of tens of seconds, which pytest-xdist's workers "
                                       "start first (``pytest_collection_modifyitems``)")


#: Marks a test that measures real traffic in real time (see ``pytest_configure``). Every
#: test that runs the emulator (uses the ``emulator`` fixture, as ``needs_root`` does) is
#: one without saying so.
serial = pytest.mark.serial

#: Marks a test that needs the emulator's privileges to reach a refusal but sends no traffic
#: (see ``pytest_configure``): it stays in the parallel phase.
untimed = pytest.mark.untimed


@pytest.fixture
def capture_tools():
    """tcpdump and /dev/net/tun, which the tests that capture real traffic need: without
    them a test is skipped on a developer's machine and fails under CI (``unavailable``)."""
    if shutil.which("tcpdump") is None or not os.path.exists("/dev/net/tun"):
        unavailable("needs tcpdump and /dev/net/tun")


#: Tests that capture real traffic with tcpdump through a TUN device (the kernel ground
#: truths, replays and calibrations of captures).
needs_capture = pytest.mark.usefixtures("capture_tools")


#: Marks a parallel-phase test that runs for tens of seconds (see ``pytest_configure``).
long = pytest.mark.long


# tryfirst: the groups must be marked before pytest-xdist's own hook reads ``xdist_group``
# into the node ids its `--dist loadgroup` scheduler splits the work by.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "emulator" in getattr(item, "fixturenames", ()) and item.get_closest_marker("untimed") is None:
            item.add_marker(serial)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for item, group in _module_fixture_groups(items).items():
            item.add_marker(pytest.mark.xdist_group(group))
        if getattr(config.option, "loadgroup", False):
            for item in items:
                _name_group_in_node_id(item)
        # The workers take tests in collection order: the long ones go first, so that none
        # starts last and finishes the phase alone while the other workers idle. (Not in one
        # process: a module's tests split apart would set its module fixtures up twice.)
        # `--dist loadgroup` sends a group's tests to one worker as one unit, the groups with
        # most tests first, and the tests of no group after them in this order.
        items.sort(key=lambda item: item.get_closest_marker("long") is None)


def _name_group_in_node_id(item) -> None:
    """What pytest-xdist's `--dist loadgroup` does on a worker, where it no longer takes: the
    test's ``xdist_group`` names appended to its node id (``ID@NAME``), from which the
    controller's scheduler reads the group. pytest-xdist 3.8 writes them to ``item._nodeid``,
    which pytest 9.2 no longer reads (its node ids are structured, ``item._id``), so every
    group was silently spread over the workers like ungrouped tests: the fixed ports of
    tests/test_measure_agent.py bound by two workers at once, and each module fixture set up
    on both (pytest-xdist issue #1386, fix pending in pull request #1388). Only where node ids
    are structured; elsewhere pytest-xdist's own hook still does it."""
    node_id = getattr(item, "_id", None)
    if node_id is None or hasattr(item, "_nodeid"):
        return
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
    if names and "@" not in str(node_id):
        item._id = type(node_id).parse(f"{node_id}@{'_'.join(names)}")


def _module_fixture_groups(items) -> dict:
    """An xdist group for each set of tests that share a module-scoped fixture (directly
    or through another test's), named after the module and one fixture (``MODULE-FIXTURE``:
    no ``::``, which the JUnit XML would take for a class): pytest-xdist sends a
    group to one worker, so that the fixture's work (a simulation, a reproduction, an ns-2
    comparison: 20-35 s each) is done once in the parallel phase, not once on every worker
    that runs one of its tests. Tests that name a group themselves keep it."""
    parent: dict = {}

    def find(key):
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    keyed = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group") is not None:
            continue
        keys = [(item.nodeid.split("::")[0], name) for name, defs in info.name2fixturedefs.items()
                if defs and defs[-1].scope == "module"]
        for key in keys[1:]:
            parent[find(key)] = find(keys[0])
        if keys:
            keyed[item] = keys[0]
    return {item: "{}-{}".format(Path(find(key)[0]).stem, find(key)[1]) for item, key in keyed.items()}


def met_in_one_of(attempts: int, run, shortfalls):
    """Runs ``run()`` until ``shortfalls(result)`` (what the result misses, as lines) is
    empty, at most ``attempts`` times; fails with every attempt's shortfalls otherwise. A
    miss followed by a pass is not hidden: it is a warning in the run's summary
    (``RetriedWarning``), so that a model at the edge of its bound shows.

    For the emulator's fidelity checks against a paper's numbers: this VM shares its host,
    which now and then slows it for minutes (in one CI run two such checks gave path-mode
    errors of 11-17 % and a 32 ms RTT excess, where the same commit otherwise gives 2-8 % and
    under 2 ms, also with both cores busy). A model that is wrong misses every attempt."""
    missed = []
    for k in range(attempts):
        result = run()
        lines = shortfalls(result)
        if lines:
            missed.append(f"attempt {k + 1}: " + "; ".join(lines))
            continue
        if missed:
            warnings.warn(RetriedWarning(f"passed at attempt {k + 1} after: " + " | ".join(missed)), stacklevel=2)
        return result
    pytest.fail("\n".join(missed))


class RetriedWarning(UserWarning):
    """A check of ``met_in_one_of`` that passed only after a miss."""


#: Tests skipped in this session, with their reasons (see ``pytest_sessionfinish``).
_skipped: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(f"{report.nodeid}: {_skip_reason(report)}")


def pytest_collectreport(report):
    if report.skipped:
        _skipped.append(f"{report.nodeid}: {_skip_reason(report)}")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def pytest_sessionfinish(session, exitstatus):
    """Under CI (``CI`` set, as `.ci/run` does) a skipped test fails the run: a missing tool
    or privilege there would otherwise turn a capability's checks into a silent pass. On a
    developer's machine the skips are listed with their reasons (``-rs`` in pyproject)."""
    if _skipped and os.environ.get("CI") and session.exitstatus == 0:
        print(f"\nCI: {len(_skipped)} test(s) skipped, which CI does not allow:", file=sys.stderr)
        for line in _skipped:
            print(f"  {line}", file=sys.stderr)
        session.exitstatus = 1
