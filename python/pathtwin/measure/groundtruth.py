"""What a router-level ground truth (``[[link]]`` view, ``examples/groundtruth/``) says the
measurement of its hosts should find, read from its links and its ``[[flow]]`` cross
traffic — the answer ``validate`` grades a model against:

- routes as the emulator takes them (``pathtwin_core::topology``): out of the source host,
  the path of least propagation delay among routers (hosts never carry transit), into the
  destination;
- base RTT of a pair: twice the propagation delays on its route;
- shared congestion from a source: destinations whose routes cross a common link direction
  that the cross traffic loads (its data between routers: a request/response flow's data
  runs server to client); only a queue that congestion moves is visible to delay
  correlation, so a shared but idle link is not a class;
- shared congestion across sources (``path_classes``): the same between the paths of every
  source at once — paths of different sources that meet on a loaded link direction.

Not here: measuring (``session``), grading (``validate``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from itertools import combinations

from ..errors import PathtwinError

Hop = tuple[str, str]


@dataclass
class GroundTruth:
    """A validated links-view config (``pathtwin.measure.emulated.ground_truth``'s dict)."""

    cfg: dict
    #: (a, b) -> (bit/s, one-way delay s) per link direction.
    links: dict[Hop, tuple[float, float]] = field(init=False)

    def __post_init__(self) -> None:
        from ..config import parse_per_direction, parse_quantity

        if not self.cfg.get("link"):
            raise PathtwinError("the ground truth has no [[link]]: validation needs a router-level topology")
        self.hosts = set(self.cfg["hosts"])
        self.links = {}
        self._adj: dict[str, list[str]] = {}
        for i, ln in enumerate(self.cfg["link"]):
            a, b = ln["between"]
            fwd, rev = parse_per_direction("rate", ln["rate"], f"link[{i}].rate")
            delay = parse_quantity("time", ln["delay"], f"link[{i}].delay")
            self.links[(a, b)], self.links[(b, a)] = (fwd, delay), (rev, delay)
            self._adj.setdefault(a, []).append(b)
            self._adj.setdefault(b, []).append(a)

    def route(self, a: str, b: str) -> list[Hop]:
        """Link directions from host ``a`` to host ``b`` (least delay; no transit hosts)."""
        best = {a: 0.0}
        prev: dict[str, str] = {}
        todo = [(0.0, a)]
        while todo:
            d, n = heapq.heappop(todo)
            if n == b:
                break
            if d > best[n] or (n != a and n in self.hosts):
                continue
            for m in self._adj.get(n, []):
                nd = d + self.links[(n, m)][1]
                if nd < best.get(m, float("inf")):
                    best[m], prev[m] = nd, n
                    heapq.heappush(todo, (nd, m))
        if b not in prev:
            raise PathtwinError(f"the ground truth has no route from {a} to {b}")
        hops, n = [], b
        while n != a:
            hops.append((prev[n], n))
            n = prev[n]
        return hops[::-1]

    def base_rtt_ms(self, a: str, b: str) -> float:
        return sum(self.links[h][1] for h in self.route(a, b) + self.route(b, a)) * 1e3

    def loaded(self) -> set[Hop]:
        """Link directions between routers that carry the cross traffic's data."""
        out: set[Hop] = set()
        for f in self.cfg.get("flow", []):
            src, dst = (f["to"], f["from"]) if f.get("app") == "reqresp" else (f["from"], f["to"])
            out |= {h for h in self.route(src, dst) if h[0] not in self.hosts and h[1] not in self.hosts}
        return out

    def shared_classes(self, source: str, dests: list[str]) -> list[set[str]]:
        """Classes (two or more destinations) of ``source`` whose routes meet on a loaded
        link direction, merged transitively."""
        loaded = self.loaded()
        on = {d: {h for h in self.route(source, d) if h in loaded} for d in dests}
        return merge_classes(dests, lambda a, b: bool(on[a] & on[b]))


    def path_classes(self, hosts: list[str]) -> list[set[Hop]]:
        """Classes (two or more paths ``(src, dst)`` between ``hosts``, of any sources) whose
        routes meet on a loaded link direction, merged transitively."""
        loaded = self.loaded()
        paths = [(a, b) for a in hosts for b in hosts if a != b]
        on = {p: {h for h in self.route(*p) if h in loaded} for p in paths}
        return merge_classes(paths, lambda p, q: bool(on[p] & on[q]))


def merge_classes(items: list, joined) -> list[set]:
    """The classes of two or more ``items`` that ``joined(a, b)`` links, transitively."""
    groups: list[set] = [{x} for x in items]
    for a, b in combinations(items, 2):
        if joined(a, b):
            ga = next(g for g in groups if a in g)
            gb = next(g for g in groups if b in g)
            if ga is not gb:
                ga |= gb
                groups.remove(gb)
    return [g for g in groups if len(g) >= 2]


def same_path_class_pairs(classes: list) -> set[tuple[Hop, Hop]]:
    """(p, q) with p < q for every two paths one class holds: the unit of the cross-source
    shared-bottleneck precision and recall."""
    return {(p, q) for c in classes for p, q in combinations(sorted(tuple(x) for x in c), 2)}


def same_class_pairs(classes: dict[str, list]) -> set[tuple[str, str, str]]:
    """(source, d1, d2) with d1 < d2 for every two destinations one of source's classes holds:
    the unit shared-bottleneck precision and recall count."""
    return {(s, a, b) for s, cs in classes.items() for c in cs for a, b in combinations(sorted(c), 2)}
