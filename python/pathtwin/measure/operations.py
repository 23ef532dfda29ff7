"""The typed measurement operations a measured host offers, and the one mapping of an
operation to the endpoint program's arguments.

There are four, one per program of ``endpoints``: ``echo`` (UDP echo server), ``probe`` (a
probe series to destinations), ``sink`` (TCP sink of N connections) and ``send`` (N parallel
TCP flows to an address for a duration). An operation is a name and typed parameters
(``PARAMS``); ``argv`` turns it into ``endpoints.py``'s arguments. An emulated host runs that
argv itself (``hosts``); an agent first ``check``s a request against its ``Limits`` (every
parameter typed and bounded, destinations inside ``--allow``, ports in range) and runs the
very same argv, so what a request can make an agent run is exactly these four programs with
numbers, IPv4 literals and congestion control names it checked — never a command or an
argument list it was sent.

Parameters only an agent uses: ``duration`` of ``echo`` (how long it keeps the server: it is
stopped then whatever happens) and ``rate_bps`` of ``send`` (the flows' total, enforced by
kernel pacing); an emulated host's argv leaves them out, as it always did. A ``sink``'s
``duration`` (its test's) is the agent's deadline too, and the sink stops reading
``endpoints.SINK_DRAIN_LIMIT_S`` after it, on any host. ``cc`` of ``send`` (the flows'
congestion control; without it the host's default) goes to the kernel, which says whether
it has it.

Not here: the wire (``protocol``), the agent's server (``agent``), the programs (``endpoints``).
"""

from __future__ import annotations

import ipaddress
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Optional


class CcName(str):
    """The kind of a parameter that names a kernel congestion control (``send``'s ``cc``):
    lowercase letters, digits and underscores, at most ``CC_NAME_MAX`` of them, as the
    kernel's own names are; whether the host's kernel has it is the kernel's to say."""


#: Longest congestion control name: the kernel's ``TCP_CA_NAME_MAX`` (16) less its NUL.
CC_NAME_MAX = 15
_CC_NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{CC_NAME_MAX - 1}}}")

#: Operation -> its parameters: name -> (type, required). ``float`` accepts integers;
#: ``int`` refuses booleans; ``str`` is an IPv4 literal, ``list`` a list of them; ``CcName``
#: a congestion control's name.
PARAMS: dict[str, dict[str, tuple[type, bool]]] = {
    "echo": {"port": (int, True), "duration": (float, False)},
    "probe": {"port": (int, True), "interval": (float, True), "duration": (float, True), "dests": (list, True),
              "start_at": (int, False)},
    "sink": {"port": (int, True), "flows": (int, True), "every": (float, True), "duration": (float, False)},
    "send": {"addr": (str, True), "port": (int, True), "flows": (int, True), "duration": (float, True),
             "rate_bps": (float, False), "cc": (CcName, False)},
}
OPS = tuple(PARAMS)
#: IP bytes of one probe (64-byte payload, UDP and IP headers): what a probe series' rate counts.
PROBE_IP_BYTES = 92
#: Most destinations one probe series may name.
MAX_DESTS = 64
#: Longest a probe series may wait for its ``start_at`` (s): the controller schedules every
#: source's first round a moment ahead so that they start together, not a series for later.
MAX_START_WAIT_S = 10.0
#: The sink's counter period must lie here (s): shorter would load the host, longer would
#: leave too few samples per quarter second.
EVERY_RANGE = (0.01, 1.0)


class Refused(Exception):
    """A request an agent does not carry out; the message is the one-line reason."""


@dataclass
class Limits:
    """What an agent allows: the rate of what it sends (bit/s, probes and flows alike), how
    long anything it runs may last, how many flows a test may open, the destinations it may
    send to (none: it only receives), and the ports its servers and flows may use."""

    max_rate_bps: float = 1e9
    max_duration_s: float = 60.0
    max_flows: int = 16
    allow: list[ipaddress.IPv4Network] = field(default_factory=list)
    ports: tuple[int, int] = (1024, 65535)
    #: The agent's own listening port, which no operation may take.
    own_port: Optional[int] = None

    def record(self) -> dict[str, Any]:
        return {"max_rate_bps": self.max_rate_bps, "max_duration_s": self.max_duration_s, "max_flows": self.max_flows,
                "allow": [str(n) for n in self.allow], "ports": list(self.ports)}


def argv(op: str, p: dict[str, Any], bind: Optional[str] = None) -> list[str]:
    """``endpoints.py``'s arguments for operation ``op`` with parameters ``p``; ``bind`` the
    address an agent's servers listen on (an emulated host's listen on every address)."""
    if op == "echo":
        return ["echo", "--port", str(p["port"])] + (["--bind", bind] if bind else [])
    if op == "probe":
        start = ["--start-at", str(p["start_at"])] if p.get("start_at") is not None else []
        return ["probe", "--port", str(p["port"]), "--interval", repr(p["interval"]), "--duration", repr(p["duration"]),
                *start, *p["dests"]]
    if op == "sink":
        test = ["--duration", repr(p["duration"])] if p.get("duration") is not None else []
        return ["sink", "--port", str(p["port"]), "--flows", str(p["flows"]), "--every", repr(p["every"]), *test] + (
            ["--bind", bind] if bind else [])
    if op == "send":
        rate = ["--max-rate", repr(p["rate_bps"])] if p.get("rate_bps") is not None else []
        cc = ["--cc", p["cc"]] if p.get("cc") is not None else []
        return ["send", "--port", str(p["port"]), "--flows", str(p["flows"]), "--duration", repr(p["duration"]), *rate,
                *cc, p["addr"]]
    raise ValueError(f"no operation {op!r}")


def check(op: Any, params: Any, limits: Limits) -> dict[str, Any]:
    """The request's parameters, typed and within ``limits``; ``Refused`` with the first
    thing wrong otherwise. An agent needs ``duration`` of every operation (it stops each at
    its end) and ``rate_bps`` of ``send`` (no unpaced flows)."""
    if not isinstance(op, str) or op not in PARAMS:
        raise Refused(f"unknown operation {str(op)[:40]!r} (this agent runs only {', '.join(OPS)})")
    if not isinstance(params, dict):
        raise Refused(f"{op}: params must be an object")
    spec = PARAMS[op]
    for k in params:
        if k not in spec:
            # A command or an argument list is refused here like any other unknown key: the
            # agent maps an operation to its program itself.
            raise Refused(f"{op}: unknown parameter {str(k)[:40]!r} (an agent runs no command it is sent; "
                          f"{op} takes {', '.join(spec)})")
    out: dict[str, Any] = {}
    for k, (kind, _required) in spec.items():
        needed = _required or k == "duration" or (op == "send" and k == "rate_bps")
        if k not in params or params[k] is None:
            if needed:
                raise Refused(f"{op}: parameter {k!r} is missing")
            continue
        out[k] = _typed(op, k, kind, params[k])
    _bounds(op, out, limits)
    return out


def _typed(op: str, k: str, kind: type, v: Any) -> Any:
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise Refused(f"{op}: {k} must be an integer, not {_short(v)}")
        return v
    if kind is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise Refused(f"{op}: {k} must be a finite number, not {_short(v)}")
        return float(v)
    if kind is CcName:
        return cc_name(v, f"{op}: {k}", Refused)
    if kind is str:
        return _ipv4(op, k, v)
    if not isinstance(v, list) or not v:
        raise Refused(f"{op}: {k} must be a non-empty list of IPv4 addresses")
    if len(v) > MAX_DESTS:
        raise Refused(f"{op}: {len(v)} destinations is more than the {MAX_DESTS} a probe series may name")
    return [_ipv4(op, k, x) for x in v]


def cc_name(v: Any, what: str, error: type[Exception]) -> str:
    """``v`` if it is a congestion control's name (``CcName``), else ``error`` naming ``what``."""
    if not isinstance(v, str) or not _CC_NAME.fullmatch(v):
        raise error(f"{what}: {_short(v)} is not a congestion control's name (lowercase letters, digits and _, "
                    f"at most {CC_NAME_MAX}; e.g. cubic)")
    return v


def _ipv4(op: str, k: str, v: Any) -> str:
    """An IPv4 literal, written back in its canonical form (no host names: an agent resolves
    nothing, and nothing that is not an address reaches the program's arguments)."""
    try:
        return str(ipaddress.IPv4Address(v)) if isinstance(v, str) else _bad(op, k, v)
    except ValueError:
        return _bad(op, k, v)


def _bad(op: str, k: str, v: Any) -> str:
    raise Refused(f"{op}: {k} must be an IPv4 address, not {_short(v)}")


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _bounds(op: str, p: dict[str, Any], lim: Limits) -> None:
    port = p["port"]
    if not lim.ports[0] <= port <= lim.ports[1]:
        raise Refused(f"{op}: port {port} is outside this agent's --ports {lim.ports[0]}-{lim.ports[1]}")
    if port == lim.own_port:
        raise Refused(f"{op}: port {port} is the agent's own")
    d = p["duration"]
    if d <= 0:
        raise Refused(f"{op}: duration {d:g} s is not positive")
    if d > lim.max_duration_s:
        raise Refused(f"{op}: duration {d:g} s is above this agent's --max-duration {lim.max_duration_s:g} s")
    if "flows" in p and not 1 <= p["flows"] <= lim.max_flows:
        raise Refused(f"{op}: {p['flows']} flows is outside 1..{lim.max_flows} (this agent's --max-flows)")
    if "every" in p and not EVERY_RANGE[0] <= p["every"] <= EVERY_RANGE[1]:
        raise Refused(f"{op}: every {p['every']:g} s is outside {EVERY_RANGE[0]:g}..{EVERY_RANGE[1]:g} s")
    if op == "probe":
        if p["interval"] <= 0:
            raise Refused(f"probe: interval {p['interval']:g} s is not positive")
        wait = (p.get("start_at", 0) - time.time_ns()) / 1e9
        if wait > MAX_START_WAIT_S:
            raise Refused(f"probe: start_at is {wait:.1f} s away, more than {MAX_START_WAIT_S:g} s")
        rate = len(p["dests"]) * PROBE_IP_BYTES * 8 / p["interval"]
        if rate > lim.max_rate_bps:
            raise Refused(f"probe: {len(p['dests'])} destination(s) every {p['interval']:g} s is {rate:.4g} bit/s, "
                          f"above this agent's --max-rate {lim.max_rate_bps:.4g} bit/s")
    if op == "send":
        r = p["rate_bps"]
        if not 0 < r <= lim.max_rate_bps:
            raise Refused(f"send: rate {r:.4g} bit/s is " + ("not positive" if r <= 0 else
                          f"above this agent's --max-rate {lim.max_rate_bps:.4g} bit/s"))
    for a in p.get("dests", []) + ([p["addr"]] if "addr" in p else []):
        if not any(ipaddress.IPv4Address(a) in n for n in lim.allow):
            allowed = ", ".join(map(str, lim.allow)) or "none: the agent was started without --allow"
            raise Refused(f"{op}: destination {a} is outside --allow ({allowed})")
