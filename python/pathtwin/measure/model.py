"""Measurements -> a paths topology (the ``[[path]]`` view of the one config schema, NSDI'09
Table 1), written by the schema's own serialiser (``pathtwin._native.config_toml``).

Per host pair, one ``[[path]]``: ``rtt`` the smaller of the two directions' minimum round
trips (both are the same round trip, measured from either end); a ``reactivity`` table per
direction, ABW as a function of the number of foreground flows (``abw`` when one flow count
was measured); capacity the model's default 100 Mbit/s unless a measured ABW comes near it;
queues derived by the model (Eq. 2 and 4) with ``wmax`` the flows' largest possible window,
the smaller of the two receivers' ``tcp_rmem`` maximum (the model's default, 64 KB without
window scaling, would make Eq. 4 infeasible for every path whose bandwidth-delay product
exceeds it, which a kernel with window scaling does not care about). Per source, each class of two or more
destinations whose delays correlate becomes a ``[[shared]]`` class (its queue's ABW is then
the flow-weighted mean of its paths' ABW, NSDI'09 §2.3, which the model computes while
running; the findings give it for equal flows on every member path). Paths that the
measurement loaded together (``session.together_groups``) and found sharing — a host's
paths out or in, its access link, or paths of different sources whose delays correlate —
become ``[[shared]]`` classes of those paths (``paths = [[from, to], ...]``) with the ABW
they achieved together (``abw``), a queue every member crosses after its own, whose delay
when full (``queue_delay``) is the round-trip increase they shared loaded together.

Not here: measuring (``probes``, ``throughput``, ``shared``).
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional, Sequence

from ..config import native_call
from ..errors import PathtwinError

#: The model's default capacity (NSDI'09's implementation: 100 Mbit/s); raised when a
#: measured ABW needs more room (capacity must exceed ABW).
DEFAULT_CAPACITY_BPS = 100e6


def rate(bps: float) -> str:
    return f"{bps / 1e3:.1f}kbit"


def capacity_for(abw_bps: float) -> str | None:
    """The capacity to write for a queue whose ABW reaches ``abw_bps``, when the default's
    does not leave room (capacity must exceed ABW): one decimal step above."""
    if abw_bps < 0.9 * DEFAULT_CAPACITY_BPS:
        return None
    return rate(10 ** math.ceil(math.log10(abw_bps / 0.9)))


def build(hosts: list[str], rtt: dict[str, dict], tput: dict[str, dict[int, dict]], classes: dict[str, list[list[str]]],
          together: Sequence[tuple[list[str], float, Optional[float]]] = ()) -> dict:
    """The config dict: ``rtt["a->b"]`` a probe summary, ``tput["a->b"][n]`` a throughput
    record, ``classes[source]`` its shared classes, ``together`` classes of paths (``"a->b"``)
    with the ABW they achieved loaded together (bit/s) and the queueing delay they shared
    (s; None: unknown, the class keeps its members' smallest queue)."""
    paths = []
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            ab, ba = f"{a}->{b}", f"{b}->{a}"
            mins = [rtt[k]["rtt_min_ms"] for k in (ab, ba) if k in rtt and rtt[k].get("rtt_min_ms") is not None]
            if not mins:
                raise PathtwinError(f"no probe between {a} and {b} came back: no base RTT to write")
            p: dict[str, Any] = {"between": [a, b], "rtt": f"{min(mins):.3f}ms"}
            tables = []
            for k in (ab, ba):
                if not tput.get(k):
                    raise PathtwinError(f"no throughput measured for {k}")
                tables.append({str(n): tput[k][n]["abw_bps"] for n in sorted(tput[k])})
            for k, t in zip((ab, ba), tables):
                if any(v <= 0 for v in t.values()):
                    raise PathtwinError(f"{k}: a throughput measurement delivered nothing; the path carries no TCP")
            capacity = capacity_for(max(v for t in tables for v in t.values()))
            if capacity is not None:
                p["capacity"] = capacity
            rmem = [r.get("receiver_rmem_max") for k in (ab, ba) for r in tput[k].values()]
            known = [x for x in rmem if isinstance(x, int) and x > 0]
            if known and len(known) == len(rmem):
                p["wmax"] = f"{min(known)}B"
            if all(len(t) == 1 for t in tables):
                p["abw"] = [rate(next(iter(t.values()))) for t in tables]
            else:
                p["reactivity"] = [{n: rate(v) for n, v in t.items()} for t in tables]
            paths.append(p)
    shared = [{"source": s, "destinations": list(c), "direction": "out"} for s in hosts for c in classes.get(s, [])]
    for members, abw, queue_delay in together:
        if abw <= 0:
            raise PathtwinError(f"{', '.join(members)} together delivered nothing; the paths carry no TCP")
        cls: dict[str, Any] = {"paths": [m.split("->", 1) for m in members], "abw": rate(abw)}
        capacity = capacity_for(abw)
        if capacity is not None:
            cls["capacity"] = capacity
        if queue_delay is not None:
            cls["queue_delay"] = f"{queue_delay * 1e3:.1f}ms"
        shared.append(cls)
    cfg: dict[str, Any] = {"hosts": list(hosts), "path": paths}
    if shared:
        cfg["shared"] = shared
    return cfg


def shared_abw(tput: dict[str, dict[int, dict]], source: str, members: list[str]) -> dict[str, float]:
    """NSDI'09 §2.3's ABW of a shared bottleneck with n flows on every member path: the
    flow-weighted mean of the members' ABW(n), i.e. their plain mean (bit/s, by n)."""
    counts = sorted(set.intersection(*(set(tput[f"{source}->{d}"]) for d in members)))
    return {str(n): sum(tput[f"{source}->{d}"][n]["abw_bps"] for d in members) / len(members) for n in counts}


def toml(cfg: dict, header: list[str]) -> str:
    """The config as TOML by the schema's serialiser (validated on the way), under comment
    lines ``header``."""
    from .. import _native

    text = native_call(_native.config_toml, json.dumps(cfg), "json", "")
    return "".join(f"# {h}\n" for h in header) + "\n" + text
