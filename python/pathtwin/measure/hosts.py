"""What a measurement needs of a host, and starting the endpoint programs in one.

A host offers the typed operations of ``operations`` (echo, probe, sink, send), each started
as a ``Program`` whose result is waited for or which is stopped. Two kinds of host offer them:

- a ``MeasuredHost``: anything with a ``name``, an IPv4 address ``ip`` and a ``popen(args,
  **kwargs)`` that starts a process *on that host* — an emulated host (``pathtwin.Emulation``'s
  ``Host``, whose processes run in its network namespace) is one as it is. The operation
  becomes ``endpoints.py``'s arguments (``operations.argv``), run by the same interpreter as
  this process;
- an ``OperatingHost``: a host that carries the operations out itself and is only asked for
  them by name and typed parameters — a real host's agent (``remote.AgentHost``), which
  checks them against its limits first.

Not here: what the programs measure (``probes``, ``throughput``), the agent (``agent``).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence, Union

from ..errors import PathtwinError
from . import operations

ENDPOINTS = Path(__file__).with_name("endpoints.py")


class MeasuredHost(Protocol):
    name: str

    @property
    def ip(self) -> str: ...

    def popen(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen: ...


class Program(Protocol):
    """A started operation: its result (the program's JSON line) or its end."""

    def result(self, what: str, timeout: float) -> dict: ...

    def stop(self) -> None: ...


class OperatingHost(Protocol):
    name: str

    @property
    def ip(self) -> str: ...

    def operate(self, op: str, params: dict[str, Any]) -> Program:
        """Starts operation ``op``; returns once it listens (servers) or has started."""


#: What a measurement can measure between.
Host = Union[MeasuredHost, OperatingHost]


@functools.lru_cache(maxsize=1)
def machine_clock() -> Optional[str]:
    """This machine's boot id: every namespace of it, and every process, reads one
    ``CLOCK_REALTIME``."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def clock(host: Host) -> Optional[str]:
    """Which clock stamps ``host``'s probe times: an agent's machine as it said in its hello
    (``clock``; None from an agent that did not say), this machine's for a host of it."""
    return host.clock if hasattr(host, "clock") else machine_clock()


def operate(host: Host, op: str, ready: bool = True, **params: Any) -> Program:
    """Starts operation ``op`` with ``params`` on ``host``. On a ``MeasuredHost`` it is
    ``endpoints.py`` run through ``popen``; with ``ready`` the call returns once the program
    printed ``ready`` (``send`` prints none)."""
    if hasattr(host, "operate"):
        return host.operate(op, params)
    args = operations.argv(op, params)
    h: MeasuredHost = host
    if ready:
        return Local(h, start(h, *args))
    return Local(h, h.popen([sys.executable, str(ENDPOINTS), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True))


class Local:
    """A program started through a host's ``popen``."""

    def __init__(self, host: MeasuredHost, p: subprocess.Popen):
        self.host, self.p = host, p

    def result(self, what: str, timeout: float) -> dict:
        return result(self.host, self.p, what, timeout)

    def stop(self) -> None:
        stop(self.p)


def start(host: MeasuredHost, *args: str) -> subprocess.Popen:
    """Starts ``endpoints.py ARGS`` on ``host`` and returns once it printed ``ready`` (a
    program that cannot start exits, which ends the wait)."""
    p = host.popen([sys.executable, str(ENDPOINTS), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None  # a pipe
    line = p.stdout.readline()
    if line.strip() != "ready":
        stop(p)
        err = _stderr_tail(p)
        raise PathtwinError(f"host {host.name}: the {args[0]} program did not start" + (f": {err}" if err else ""))
    return p


def result(host: MeasuredHost, p: subprocess.Popen, what: str, timeout: float) -> dict:
    """The JSON line a started program prints at its end."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(p)
        raise PathtwinError(f"host {host.name}: {what} did not finish within {timeout:.0f} s") from None
    lines = [ln for ln in (out or "").splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (err or "").strip().splitlines()
        raise PathtwinError(f"host {host.name}: {what} failed (exit {p.returncode})" + (f": {tail[-1]}" if tail else ""))
    return json.loads(lines[-1])


def stop(p: subprocess.Popen) -> None:
    """Ends a program (a server that runs until told) and waits for it."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _stderr_tail(p: subprocess.Popen) -> str:
    try:
        err = p.stderr.read() if p.stderr is not None else ""
    except (OSError, ValueError):
        return ""
    lines = (err or "").strip().splitlines()
    return lines[-1] if lines else ""
