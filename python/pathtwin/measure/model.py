"""Measurements -> a paths topology (the ``[[path]]`` view of the one config schema, NSDI'09
Table 1), written by the schema's own serialiser (``pathtwin._native.config_toml``).

Per host pair, one ``[[path]]``: ``rtt`` the smaller of the two directions' minimum round
trips (both are the same round trip, measured from either end); a ``reactivity`` table per
direction, ABW as a function of the number of foreground flows (``abw`` when one flow count
was measured); per direction, capacity the largest rate any test carried on it and the queue
the round-trip increase its tests saw at that capacity (``measured_queues``), fitted to
NSDI'09 Eq. 2 and 4 with ``wmax`` the flows' largest possible window, the smaller of the two
receivers' ``tcp_rmem`` maximum (the model's default, 64 KB without window scaling, would
make Eq. 4 infeasible for every path whose bandwidth-delay product exceeds it, which a
kernel with window scaling does not care about).

Why not the paper's 100 Mbit/s capacity everywhere: a queue whose capacity is far above its
ABW fills only at the rate the foreground offers beyond the ABW, and until it is full FIFO
service gives the foreground its share of the arrivals, not the ABW (the placeholders wait,
they are never dropped). A 1 MB queue at 100 Mbit/s before a 2 Mbit/s ABW took 20 s to
fill: c1's four paths out of three-sites.toml (a 2 Mbit/s uplink) carried 3.9 Mbit/s
together in 8-s tests through a class measured at 1.95, and one flow alone +10-15 %. The
measurement shows only that the capacity is at least the largest rate carried; the smallest
capacity it allows keeps a queue's fill time at the scale of the truth's. A byte queue at
that capacity must then be sized from what was measured, not from the 1 MB that drains in
80 ms at 100 Mbit/s (600 ms at 13 Mbit/s). Per source, each class of two or more
destinations whose delays correlate becomes a ``[[shared]]`` class (its queue's ABW is then
the flow-weighted mean of its paths' ABW, NSDI'09 §2.3, which the model computes while
running; the findings give it for equal flows on every member path). Paths that the
measurement loaded together (``session.together_groups``) and found sharing — a host's
paths out or in, its access link, or paths of different sources whose delays correlate —
become ``[[shared]]`` classes of those paths (``paths = [[from, to], ...]``) with the ABW
they achieved together (``abw``), a queue every member crosses after its own, which holds
the round-trip increase they shared loaded together as full-sized packets (``queue`` =
"Np", ``class_queue``).

Why a class's queue in packets: the measurement sees a queue only through the delay of its
own full-sized data packets, which cannot tell a buffer counted in packets from one counted
in bytes. The two differ once small packets share it, and a class's queue does when paths
in both directions are loaded: the ACKs of the data coming in wait in the uplink with the
data going out. Buffers that count packets are the common case (Linux's qdiscs and
``txqueuelen``, Dummynet's slots, ns-2's DropTail, every ground truth here); one counted in
bytes at the measured delay holds about twice the data when half its packets are ACKs. On
three-sites.toml with every pair loaded at once (simulated, 8 flows each), b1's uplink of
100 packets held 66 KB on average in the truth and its class 139 KB in bytes: the paths
into b carried 19.3 Mbit/s against the truth's 23.8, and 33 % of the paths were within
20 % of the truth; with the class's queue in packets, 57 %.

Not here: measuring (``probes``, ``throughput``, ``shared``).
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional, Sequence

from ..config import native_call
from ..emulation import MTU  # a class's packets when no test recorded the MTU
from ..errors import PathtwinError


def written_bps(bps: float) -> int:
    """A rate as the model writes it: rounded up to 100 bit/s, so that a capacity written
    from the largest ABW is not below that ABW, and queues fitted to Eq. 2 with these values
    are the ones the model checks."""
    return math.ceil(bps / 100) * 100


def rate(bps: float) -> str:
    return f"{written_bps(bps) / 1e3:.1f}kbit"


def loaded_queue_delay_s(records: dict[int, dict], base_ms: float) -> Optional[float]:
    """The largest round-trip increase a direction's tests saw over the pair's base RTT
    (s): the fullest its bottleneck queue was seen. None when no test kept a loaded RTT (a
    record from before them)."""
    rises = [r["rtt_loaded_ms"] - base_ms for r in records.values() if r.get("rtt_loaded_ms") is not None]
    return max(0.0, max(rises)) / 1e3 if rises else None


def measured_queues(abw_bps: Sequence[float], capacity_bps: Sequence[float], rtt_s: float, wmax: Optional[int],
                    delays_s: Sequence[Optional[float]]) -> Optional[list[int]]:
    """Per direction, the queue (bytes) that delays a packet by the measured ``delays_s`` at
    ``capacity_bps``, fitted to NSDI'09 Eq. 2 (raised to it) and Eq. 4 (``_native.fit_queues``,
    as ``trace to-paths`` fits its queues); ``abw_bps`` what the model sizes queues with (the
    table's first entry). A direction without a delay gets the model's derivation; None when
    no queue meets both equations (the model then derives both)."""
    from .. import _native

    measured = tuple(None if d is None else int(d * c / 8) for d, c in zip(delays_s, capacity_bps))
    fit = _native.fit_queues((int(abw_bps[0]), int(abw_bps[1])), (int(capacity_bps[0]), int(capacity_bps[1])), rtt_s,
                             wmax, (measured[0], measured[1]))
    return fit["queue"]


def class_queue(delay_s: float, capacity_bps: float, mtu: int) -> int:
    """The packets of ``mtu`` bytes that delay a packet by ``delay_s`` at ``capacity_bps``
    when they are all ahead of it: the class's queue in the unit buffers count (module doc);
    at least one."""
    return max(1, round(delay_s * capacity_bps / 8 / mtu))


def build(hosts: list[str], rtt: dict[str, dict], tput: dict[str, dict[int, dict]], classes: dict[str, list[list[str]]],
          together: Sequence[tuple[list[str], float, Optional[float]]] = ()) -> dict:
    """The config dict: ``rtt["a->b"]`` a probe summary, ``tput["a->b"][n]`` a throughput
    record, ``classes[source]`` its shared classes, ``together`` classes of paths (``"a->b"``)
    with the ABW they achieved loaded together (bit/s) and the queueing delay they shared
    (s; None: unknown, the class keeps its members' smallest queue)."""
    # The most each direction carried in any test: the least capacity its link can have.
    carried = {k: written_bps(max(r["abw_bps"] for r in recs.values())) for k, recs in tput.items() if recs}
    paths = []
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            ab, ba = f"{a}->{b}", f"{b}->{a}"
            mins = [rtt[k]["rtt_min_ms"] for k in (ab, ba) if k in rtt and rtt[k].get("rtt_min_ms") is not None]
            if not mins:
                raise PathtwinError(f"no probe between {a} and {b} came back: no base RTT to write")
            base_ms = float(f"{min(mins):.3f}")  # as written: the queues are fitted to the RTT the model reads
            p: dict[str, Any] = {"between": [a, b], "rtt": f"{base_ms:.3f}ms"}
            tables = []
            for k in (ab, ba):
                if not tput.get(k):
                    raise PathtwinError(f"no throughput measured for {k}")
                tables.append({str(n): tput[k][n]["abw_bps"] for n in sorted(tput[k])})
            for k, t in zip((ab, ba), tables):
                if any(v <= 0 for v in t.values()):
                    raise PathtwinError(f"{k}: a throughput measurement delivered nothing; the path carries no TCP")
            capacity = [carried[k] for k in (ab, ba)]
            p["capacity"] = [rate(c) for c in capacity]
            rmem = [r.get("receiver_rmem_max") for k in (ab, ba) for r in tput[k].values()]
            known = [x for x in rmem if isinstance(x, int) and x > 0]
            wmax = min(known) if known and len(known) == len(rmem) else None
            if wmax is not None:
                p["wmax"] = f"{wmax}B"
            queue = measured_queues([written_bps(next(iter(t.values()))) for t in tables], capacity, base_ms / 1e3, wmax,
                                    [loaded_queue_delay_s(tput[k], base_ms) for k in (ab, ba)])
            if queue is not None:
                p["queue"] = [f"{q}B" for q in queue]
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
        # At least each member's capacity: the class's link carried every member's tests.
        class_capacity = written_bps(max([abw] + [carried[m] for m in members]))
        cls["capacity"] = rate(class_capacity)
        if queue_delay is not None:
            mtu = max(r.get("mtu") or 0 for m in members for r in tput[m].values()) or MTU
            cls["queue"] = f"{class_queue(queue_delay, class_capacity, mtu)}p"
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
