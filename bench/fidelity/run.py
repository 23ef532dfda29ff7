#!/usr/bin/env python3
"""The simulator against the kernel: one topology file per cell of a grid of paths and
workloads, run by ``pathtwin.emulate`` (the kernel's TCP in network namespaces) and by
``pathtwin.simulate`` (the simulated TCP, ``[tcp] profile = "linux"``), both writing the same
``flows`` table; per cell, the median over seeds of each engine's completion time (sized
transfers) or goodput (long-lived flows), retransmissions and mean RTT, and the simulator's
error against the kernel (see README.md beside this file).

    sudo python3 bench/fidelity/run.py                 # the grid (about an hour), table + JSON
    sudo python3 bench/fidelity/run.py --quick         # the fast subset that tests/test_fidelity.py runs
    sudo python3 bench/fidelity/run.py --profile ns2   # the simulator as before the profile (kernel runs from the cache)
    sudo python3 bench/fidelity/run.py --only cubic    # cells whose name contains "cubic"

Kernel results are cached (``--cache``, default ``bench/out/fidelity-kernel.json``) by cell
and seed: the kernel does not change when the simulator does, so re-running after a change to
the simulator only re-simulates. ``--fresh`` ignores the cache. Needs root (the emulator) and
the pathtwin package. A benchmark, not a test: it prints the table and exits 0 whatever the
errors are.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_JSON = REPO / "bench" / "out" / "fidelity.json"
DEFAULT_CACHE = REPO / "bench" / "out" / "fidelity-kernel.json"

#: Bytes on the wire per full segment, and the kernel's payload per segment (timestamps).
WIRE = 1500
MSS = 1448
#: A long-lived flow's measuring time.
LONG_S = 15.0
#: No cell whose kernel run is expected to take longer than this (see `estimated_s`).
MAX_RUN_S = 25.0
#: The smallest queue a cell gets, whatever its BDP fraction: two full packets.
MIN_QUEUE = 2 * WIRE

#: The factors of the grid and their levels.
RATES_MBIT = (1, 10, 100)
RTTS_MS = (10, 50, 200)
LOSSES = (0.0, 0.005, 0.02)
QUEUES_BDP = (0.5, 1.0, 4.0)
QDISCS = ("droptail", "red")
WORKLOADS = ("10KB", "100KB", "1MB", "10MB", "50MB", "long")
CCS = ("reno", "cubic", "bbr")
FLOWS = (1, 4)


@dataclass(frozen=True)
class Cell:
    rate_mbit: float
    rtt_ms: float
    loss: float
    queue_bdp: float
    qdisc: str
    workload: str  # a size ("100KB") or "long"
    cc: str
    flows: int

    @property
    def name(self) -> str:
        return (f"{self.cc}-{self.flows}x{self.workload}-{self.rate_mbit:g}M-{self.rtt_ms:g}ms-"
                f"loss{self.loss * 100:g}-{self.queue_bdp:g}bdp-{self.qdisc}")

    @property
    def sized(self) -> bool:
        return self.workload != "long"

    @property
    def size_bytes(self) -> int:
        units = {"KB": 1000, "MB": 1000_000}
        return int(float(self.workload[:-2]) * units[self.workload[-2:]])

    @property
    def bdp_bytes(self) -> float:
        return self.rate_mbit * 1e6 / 8 * self.rtt_ms / 1e3

    @property
    def queue_bytes(self) -> int:
        return max(int(self.queue_bdp * self.bdp_bytes), MIN_QUEUE)


def estimated_s(c: Cell) -> float:
    """A rough upper estimate of the kernel run's length: a long-lived flow's measuring time,
    or a sized transfer at the smaller of its share of the link and the Mathis et al. rate
    (MSS/RTT · 1.22/√p, for the loss-based controllers), plus slow start's round trips."""
    if not c.sized:
        return LONG_S
    rtt = c.rtt_ms / 1e3
    share = c.rate_mbit * 1e6 / 8 * MSS / WIRE / c.flows
    if c.loss > 0 and c.cc != "bbr":
        share = min(share, MSS / rtt * 1.22 / math.sqrt(c.loss))
    rounds = 2 + math.log2(max(c.size_bytes / (10 * MSS), 1))
    return c.size_bytes / share + rounds * rtt


def config(c: Cell, seed: int, profile: Optional[str] = "linux") -> dict:
    """The topology file of cell `c` for one seed: hosts a and b joined by a link-mode path
    (capacity = the cell's rate, no cross traffic), the cell's queue, discipline and random
    loss (both directions), and `flows` identical connections from a to b started together."""
    path: dict = {"between": ["a", "b"], "rtt": f"{c.rtt_ms:g}ms", "abw": f"{c.rate_mbit:g}mbit", "mode": "link",
                  "queue": f"{c.queue_bytes}B"}
    if c.loss:
        path["loss"] = c.loss
    if c.qdisc == "red":
        # Thresholds at a quarter and half of the buffer; gentle RED drops everything at
        # twice max_th, the buffer's end.
        path["qdisc"] = "red"
        path["red"] = {"min_th": f"{max(c.queue_bytes // 4, WIRE)}B", "max_th": f"{max(c.queue_bytes // 2, 2 * WIRE)}B",
                       "mean_packet": f"{WIRE}B"}
    tcp: dict = {"cc": c.cc}
    if profile is not None:
        tcp["profile"] = profile
    flow: dict = {"from": "a", "to": "b", "count": c.flows, "label": "f"}
    run: dict = {"seed": seed, "sample_interval": "100ms"}
    if c.sized:
        flow["bytes"] = c.workload
        run["duration"] = f"{max(4 * estimated_s(c), 30):.0f}s"
        run["until_done"] = True
    else:
        flow["stop"] = f"{LONG_S:g}s"
        run["duration"] = f"{LONG_S:g}s"
    return {"hosts": ["a", "b"], "run": run, "tcp": tcp, "path": [path], "flow": [flow]}


def measure(result) -> dict:
    """One run's numbers from its `flows` table: the mean completion time over the cell's
    connections (sized), their total goodput, total retransmissions and timeouts, the mean of
    their mean RTTs and the smallest RTT."""
    f = result.flows
    out = {
        "goodput_bps": float(f.goodput_bps.sum()),
        "retransmits": int(f.retransmits.sum()),
        "timeouts": int(f.timeouts.sum()),
        "rtt_mean_ms": float(f.rtt_mean_ms.mean()),
        "rtt_min_ms": float(f.rtt_min_ms.min()),
        "bytes": int(f.bytes_delivered.sum()),
        "complete": bool(result.run.get("complete", True)),
    }
    comp = [x for x in f.completion_s.tolist() if x == x]
    out["completion_s"] = statistics.fmean(comp) if len(comp) == len(f) else float("nan")
    # For sized transfers goodput is what each connection got while it ran.
    if comp and len(comp) == len(f):
        out["goodput_bps"] = float(sum(b * 8 / t for b, t in zip(f.bytes_delivered, comp)))
    return out


def run_engine(engine: str, c: Cell, seed: int, profile: str = "linux") -> dict:
    import pathtwin

    if engine == "emu":
        res = pathtwin.emulate(config(c, seed, profile="linux"))
    else:
        res = pathtwin.simulate(config(c, seed, profile=profile))
    return measure(res)


# --- the grid ----------------------------------------------------------------------------

#: The outside check of issue #26: one CUBIC transfer over 20 Mbit/s, 60 ms, 150 KB.
ANCHORS = [Cell(20, 60, loss, 150_000 / (20e6 / 8 * 0.06), "droptail", size, "cubic", 1)
           for size in ("200KB", "2MB", "8MB") for loss in LOSSES]


def grid(n: int = 150, seed: int = 26) -> list[Cell]:
    """The anchors, then `n` cells of the cross product of the factors, drawn so that every
    level of every factor appears about equally often: each factor deals its levels from a
    shuffled deck, reshuffled when empty (seeded, so the grid is the same every time); a
    cell whose kernel run would exceed MAX_RUN_S (`estimated_s`), or already drawn, is dealt
    again with the next cards."""
    rng = random.Random(seed)
    factors = [RATES_MBIT, RTTS_MS, LOSSES, QUEUES_BDP, QDISCS, WORKLOADS, CCS, FLOWS]
    decks: list[list] = [[] for _ in factors]

    def deal(i: int):
        if not decks[i]:
            decks[i] = list(factors[i])
            rng.shuffle(decks[i])
        return decks[i].pop()

    cells: list[Cell] = list(ANCHORS)
    seen = set(cells)
    tries = 0
    while len(cells) < len(ANCHORS) + n and tries < 100 * n:
        tries += 1
        c = Cell(*(deal(i) for i in range(len(factors))))
        if c in seen or estimated_s(c) > MAX_RUN_S:
            continue
        seen.add(c)
        cells.append(c)
    return cells


#: The fast subset (tests/test_fidelity.py): short runs that cover each controller, both
#: disciplines, loss and no loss, short and long paths, one and four flows.
QUICK = [
    Cell(20, 60, 0.0, 1.0, "droptail", "200KB", "cubic", 1),
    Cell(20, 60, 0.0, 1.0, "droptail", "2MB", "cubic", 1),
    Cell(20, 60, 0.005, 1.0, "droptail", "2MB", "cubic", 1),
    Cell(10, 50, 0.02, 1.0, "droptail", "100KB", "cubic", 1),
    Cell(10, 50, 0.0, 1.0, "red", "1MB", "reno", 4),
    Cell(100, 10, 0.0, 4.0, "droptail", "10MB", "reno", 1),
    # 200 ms at 5 Mbit/s, not 10: at 10 the kernel is a coin toss between two completion
    # times (README, "HyStart's ACK train at 200 ms"), which no median of three seeds matches.
    Cell(5, 200, 0.0, 1.0, "droptail", "1MB", "cubic", 1),
    Cell(10, 50, 0.0, 1.0, "droptail", "1MB", "bbr", 1),
]


# --- comparison --------------------------------------------------------------------------

@dataclass
class CellResult:
    cell: Cell
    seeds: list[int]
    emu: list[dict] = field(default_factory=list)
    sim: list[dict] = field(default_factory=list)

    def metric(self) -> str:
        return "completion_s" if self.cell.sized else "goodput_bps"

    def median(self, engine: str, key: str) -> float:
        vals = [r[key] for r in getattr(self, engine) if r[key] == r[key]]
        return statistics.median(vals) if vals else float("nan")

    def error(self, key: Optional[str] = None) -> float:
        """sim/kernel − 1 of the medians over seeds."""
        key = key or self.metric()
        k = self.median("emu", key)
        return self.median("sim", key) / k - 1 if k else float("nan")

    def spread(self, engine: str, key: Optional[str] = None) -> float:
        """(max − min)/median over the seeds: how much one engine varies with the seed."""
        key = key or self.metric()
        vals = [r[key] for r in getattr(self, engine) if r[key] == r[key]]
        if len(vals) < 2:
            return 0.0
        m = statistics.median(vals)
        return (max(vals) - min(vals)) / m if m else float("nan")

    def emulator_overhead(self) -> float:
        """What the emulator adds to every round trip (its smallest RTT sample less the
        path's), as a share of the kernel's completion time, counting one per round trip
        the transfer took at least (handshake and slow start): an estimate of the error
        that is the emulator's, not the kernel's."""
        if not self.cell.sized:
            return 0.0
        extra = max(self.median("emu", "rtt_min_ms") - self.cell.rtt_ms, 0.0) / 1e3
        comp = self.median("emu", "completion_s")
        rounds = comp / (self.cell.rtt_ms / 1e3)
        return extra * rounds / comp if comp else 0.0

    def to_json(self) -> dict:
        d = {"cell": asdict(self.cell), "name": self.cell.name, "seeds": self.seeds, "emu": self.emu, "sim": self.sim,
             "metric": self.metric(), "error": self.error()}
        for key in ("completion_s", "goodput_bps", "retransmits", "rtt_mean_ms"):
            d[f"error_{key}"] = self.error(key)
        d["spread_emu"], d["spread_sim"] = self.spread("emu"), self.spread("sim")
        return d


def summary(results: list[CellResult], tolerance: float = 0.10) -> dict:
    """The issue's measures: the median |error| of each cell's metric (completion time of
    sized transfers, goodput of long-lived flows) and of completion time alone, and the share
    of cells within `tolerance` on completion time (sized cells) and on goodput (every cell)."""
    def errs(key: Optional[str], cells) -> list[float]:
        out = [abs(r.error(key)) for r in cells]
        return [e for e in out if e == e]

    def share(vals: list[float]) -> float:
        return sum(e <= tolerance for e in vals) / len(vals) if vals else float("nan")

    metric = errs(None, results)
    completion = errs("completion_s", [r for r in results if r.cell.sized])
    goodput = errs("goodput_bps", results)
    spreads = [r.spread("emu") for r in results]
    return {
        "cells": len(results),
        "median_abs_error": statistics.median(metric) if metric else float("nan"),
        "median_abs_completion_error": statistics.median(completion) if completion else float("nan"),
        "within": share(metric),
        "within_completion": share(completion),
        "within_goodput": share(goodput),
        "sized_cells": len(completion),
        "tolerance": tolerance,
        "median_kernel_spread": statistics.median(spreads) if spreads else float("nan"),
    }


def print_table(results: list[CellResult], out=sys.stdout) -> None:
    hdr = (f"{'cell':58} {'metric':>10} {'kernel':>9} {'sim':>9} {'err':>7} {'spread k/s':>11} "
           f"{'retx k/s':>11} {'rtt k/s':>13}")
    print(hdr, file=out)
    for r in results:
        m = r.metric()
        scale, unit = (1.0, "s") if m == "completion_s" else (1e-6, "Mb/s")
        k, s = r.median("emu", m) * scale, r.median("sim", m) * scale
        e = r.error()
        flag = " *" if abs(e) > 0.10 else ""
        print(f"{r.cell.name:58} {unit:>10} {k:9.3f} {s:9.3f} {e * 100:+6.1f}% "
              f"{r.spread('emu') * 100:5.0f}/{r.spread('sim') * 100:<4.0f}% "
              f"{r.median('emu', 'retransmits'):5.0f}/{r.median('sim', 'retransmits'):<5.0f} "
              f"{r.median('emu', 'rtt_mean_ms'):6.1f}/{r.median('sim', 'rtt_mean_ms'):<6.1f}{flag}", file=out)
    s = summary(results)
    tol = f"{s['tolerance'] * 100:.0f} %"
    print(f"\n{s['cells']} cells ({s['sized_cells']} sized): median |error| {s['median_abs_error'] * 100:.1f} % "
          f"(completion time {s['median_abs_completion_error'] * 100:.1f} %); within {tol}: "
          f"completion time {s['within_completion'] * 100:.0f} % of sized cells, goodput {s['within_goodput'] * 100:.0f} % "
          f"of cells, the cell's metric {s['within'] * 100:.0f} %; "
          f"median kernel spread across seeds {s['median_kernel_spread'] * 100:.1f} %", file=out)


def load_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run_cells(cells: list[Cell], seeds: list[int], profile: str, cache_path: Optional[Path], fresh: bool,
              progress: bool = True, kernel_only: bool = False) -> list[CellResult]:
    cache = {} if (fresh or cache_path is None) else load_cache(cache_path)
    results = []
    t0 = time.time()
    for i, c in enumerate(cells):
        r = CellResult(c, list(seeds))
        for seed in seeds:
            key = f"{c.name}#{seed}"
            if key not in cache:
                cache[key] = run_engine("emu", c, seed)
                if cache_path is not None:
                    cache_path.parent.mkdir(parents=True, exist_ok=True)
                    cache_path.write_text(json.dumps(cache))
            r.emu.append(cache[key])
            if not kernel_only:
                r.sim.append(run_engine("sim", c, seed, profile))
        results.append(r)
        if progress:
            err = "" if kernel_only else f": error {r.error() * 100:+.1f} %"
            print(f"[{i + 1}/{len(cells)} {time.time() - t0:.0f}s] {c.name}{err}", file=sys.stderr, flush=True)
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the fast subset of tests/test_fidelity.py")
    ap.add_argument("--cells", type=int, default=150, help="cells drawn from the cross product (besides the anchors)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--profile", default="linux", choices=("linux", "ns2"), help="the simulator's [tcp] profile")
    ap.add_argument("--only", default=None, help="only cells whose name contains this")
    ap.add_argument("--json", type=Path, default=DEFAULT_JSON)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--fresh", action="store_true", help="run the kernel again even where the cache has it")
    ap.add_argument("--list", action="store_true", help="print the cells and their estimated run time, and stop")
    ap.add_argument("--kernel-only", action="store_true", help="only fill the kernel cache (run it on a quiet machine)")
    ap.add_argument("--cached-only", action="store_true",
                    help="only the cells whose kernel runs are all in the cache (simulate while the kernel runs fill it)")
    args = ap.parse_args(argv)
    cells = QUICK if args.quick else grid(args.cells)
    if args.only:
        cells = [c for c in cells if args.only in c.name]
    if args.cached_only:
        cache = load_cache(args.cache)
        cells = [c for c in cells if all(f"{c.name}#{s}" in cache for s in range(1, args.seeds + 1))]
    if args.list:
        for c in cells:
            print(f"{c.name:60} ~{estimated_s(c):5.1f} s")
        print(f"{len(cells)} cells, ~{sum(estimated_s(c) for c in cells) * args.seeds / 60:.0f} min of emulation")
        return 0
    seeds = list(range(1, args.seeds + 1))
    results = run_cells(cells, seeds, args.profile, args.cache, args.fresh, kernel_only=args.kernel_only)
    if args.kernel_only:
        return 0
    print_table(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"profile": args.profile, "summary": summary(results),
                                     "cells": [r.to_json() for r in results]}, indent=1))
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
