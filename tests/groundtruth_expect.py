"""What a router-level ground truth (``examples/groundtruth/``) says a measurement of its
hosts must find, read from its links and ``[[flow]]`` cross traffic by the tests themselves
(not by ``pathtwin.measure.groundtruth``, which the tool grades with): routes (the tree's),
base RTTs with the probes' serialization, the link directions the cross traffic loads, and
the shared classes those make. Used by the measurement tests in both engines
(``test_measure_emu.py``, ``test_measure_sim.py``).
"""

from __future__ import annotations

import functools
import tomllib
from collections import deque
from pathlib import Path

from pathtwin.config import parse_per_direction, parse_quantity

#: IP bytes of a probe (64 B payload + UDP + IP) and of its echo (36 B payload).
PROBE_IP, ECHO_IP = 92, 64

class Truth:
    """The ground truth's topology: link directions with rate and delay, routes (a tree)."""

    def __init__(self, path: Path):
        cfg = tomllib.loads(path.read_text())
        self.cfg = cfg
        self.links: dict[tuple[str, str], tuple[float, float]] = {}  # (a, b) -> (bit/s, s)
        adj: dict[str, list[str]] = {}
        for i, ln in enumerate(cfg["link"]):
            a, b = ln["between"]
            fwd, rev = parse_per_direction("rate", ln["rate"], f"link[{i}].rate")
            delay = parse_quantity("time", ln["delay"], f"link[{i}].delay")
            self.links[(a, b)] = (fwd, delay)
            self.links[(b, a)] = (rev, delay)
            adj.setdefault(a, []).append(b)
            adj.setdefault(b, []).append(a)
        self.adj = adj
        self.flows = cfg.get("flow", [])

    def route(self, a: str, b: str) -> list[tuple[str, str]]:
        """Link directions from a to b (the only path in a tree)."""
        prev = {a: a}
        todo = deque([a])
        while todo:
            n = todo.popleft()
            for m in self.adj[n]:
                if m not in prev:
                    prev[m] = n
                    todo.append(m)
        hops, n = [], b
        while n != a:
            hops.append((prev[n], n))
            n = prev[n]
        return hops[::-1]

    def rtt_ms(self, a: str, b: str) -> float:
        fwd = sum(2 * d + PROBE_IP * 8 / r for r, d in (self.links[h] for h in self.route(a, b)))
        back = sum(ECHO_IP * 8 / r for r, _d in (self.links[h] for h in self.route(b, a)))
        return (fwd + back) * 1e3

    def full_queue_s(self, link: tuple[str, str]) -> float:
        """How long the queue on ``link`` (a link direction) delays a packet when full of
        full-size packets: its limit at its rate, as the simulator resolves them (a link
        without ``queue`` has the engines' default)."""
        q = self._queues.loc[f"{link[0]}->{link[1]}"]
        limit = str(q["limit"])
        size = int(limit[:-1]) * 1500 if limit.endswith("p") else parse_quantity("size", limit, "queue")
        return size * 8 / float(q["capacity_bps"])

    @functools.cached_property
    def _queues(self):
        from pathtwin.sim import simulate

        res = simulate({**self.cfg, "flow": [], "run": {**self.cfg.get("run", {}), "duration": "0.1s"}})
        return res.queues.set_index("queue")

    def cross_routes(self) -> list[tuple[str, str]]:
        """Host pairs the cross traffic's bytes travel (both directions of every [[flow]])."""
        return sorted({(f["from"], f["to"]) for f in self.flows} | {(f["to"], f["from"]) for f in self.flows})

    def loaded(self) -> set[tuple[str, str]]:
        """Link directions where the cross traffic queues: those carrying its data (a
        request/response flow's responses, server to client) between routers."""
        out = set()
        for f in self.flows:
            src, dst = self.data_ends(f)
            out |= {h for h in self.route(src, dst) if h[0] not in (src,) and h[1] not in (dst,)}
        return out

    @staticmethod
    def data_ends(flow: dict) -> tuple[str, str]:
        """Where a ``[[flow]]``'s data goes: client to server, but a request/response flow's
        responses (the bulk of it) from server to client."""
        return (flow["to"], flow["from"]) if flow.get("app") == "reqresp" else (flow["from"], flow["to"])


def expected_classes(truth: Truth, src: str, dests: list[str]) -> set[frozenset[str]]:
    loaded = truth.loaded()
    on = {d: {h for h in truth.route(src, d) if h in loaded} for d in dests}
    parent = {d: d for d in dests}
    for i, a in enumerate(dests):
        for b in dests[i + 1:]:
            if on[a] & on[b]:
                parent[parent[b]] = parent[a]
                for k in parent:
                    if parent[k] == b:
                        parent[k] = parent[a]
    groups: dict[str, set[str]] = {}
    for d in dests:
        groups.setdefault(parent[d], set()).add(d)
    return {frozenset(g) for g in groups.values() if len(g) >= 2}


def expected_path_classes(truth: Truth, hosts: list[str]) -> set[frozenset[tuple[str, str]]]:
    """Classes of paths of any sources between ``hosts``: those whose routes cross a common
    loaded link direction, merged transitively (the cross-source twin of
    ``expected_classes``, written on its own, not by the tool's ``groundtruth``)."""
    loaded = truth.loaded()
    paths = [(a, b) for a in hosts for b in hosts if a != b]
    on = {p: {h for h in truth.route(*p) if h in loaded} for p in paths}
    classes: list[set[tuple[str, str]]] = []
    for p in paths:
        if not on[p]:
            continue
        touching = [c for c in classes if any(on[p] & on[q] for q in c)]
        merged = {p}.union(*touching)
        classes = [c for c in classes if c not in touching] + [merged]
    return {frozenset(c) for c in classes if len(c) >= 2}


def access_limited(truth: Truth, hosts: list[str], host: str, out: bool) -> float:
    """The rate (bit/s) of ``host``'s own link in the direction its paths out (``out``) or in
    take: the most its paths together can carry."""
    other = next(d for d in hosts if d != host)
    hop = truth.route(host, other)[0] if out else truth.route(other, host)[-1]
    return truth.links[hop][0]


def probe_wait_bound_ms(truth: Truth, hosts: list[str], src: str, dst: str) -> float:
    """The most a probe's round trip can wait behind the other datagrams of its round: every
    source probes every destination at once, back to back, and each probe is echoed as it
    arrives, so a probe or its echo may queue behind any of those that cross a link of its
    round trip, one serialization each at the round trip's slowest link."""
    mine = set(truth.route(src, dst)) | set(truth.route(dst, src))
    slowest = min(truth.links[h][0] for h in mine)
    wait = 0.0
    for a in hosts:
        for b in hosts:
            if a == b or (a, b) == (src, dst):
                continue
            for hops, size in ((truth.route(a, b), PROBE_IP), (truth.route(b, a), ECHO_IP)):
                if mine & set(hops):
                    wait += size * 8 / slowest
    return wait * 1e3


def written_queue_s(cls: dict) -> float:
    """How long a measured model's ``[[shared]]`` class delays a packet when its queue is
    full of full-size packets: the packets it writes (``queue = "Np"``) at its capacity, as
    ``Truth.full_queue_s`` reads a link's."""
    queue = str(cls["queue"])
    assert queue.endswith("p"), f"a class's queue is written in packets: {queue}"
    return int(queue[:-1]) * 1500 * 8 / parse_quantity("rate", cls["capacity"], "capacity")
