#!/usr/bin/env python3
"""Sweep benchmark: points per second of `pathtwin.sweep` with 1 and 2 Dask workers, and its
overhead per point against a plain Python loop calling the simulator on the same points.

The points: one path (20 ms, 50 Mbit/s ABW, 0.1 % loss so that every seed differs) with two
bulk flows, swept over ``seed`` (N points, ``--points``), each ``--duration`` simulated. Every
run writes the same tables (the loop calls ``pathtwin.simulate(config, out=DIR)``, as the
sweep's workers do), so the difference is the sweep's own work: validating every point,
Dask's scheduling, moving files into the datasets, recording ``sweep.json``.

The Dask cluster is started before the clock starts (``LocalCluster`` with processes and one
thread per worker, as ``pathtwin sweep`` makes it; its start-up is printed separately) and
the sweep connects to it with ``scheduler=``.

    python3 bench/sweep/run.py                     # 100 points of 60 s simulated
    python3 bench/sweep/run.py --points 40 --duration 10s

Reported: wall time and points/s of the loop, of 1 worker and of 2 workers; the scaling
ratio (2 workers' rate / (2 × 1 worker's rate), goal ≥ 0.9, with as many cores as workers);
the overhead per point of 1 worker against the loop (goal < 20 ms). A benchmark, never a
test: it prints whether the goals are met and exits 0 either way. Numbers: README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_OUT = REPO / "bench" / "out" / "sweep"

GOAL_SCALING = 0.9
GOAL_OVERHEAD_MS = 20.0


def scenario(duration: str) -> dict:
    return {
        "hosts": ["a", "b"],
        "run": {"duration": duration},
        "tcp": {"cc": "cubic"},
        "path": [{"between": ["a", "b"], "rtt": "20ms", "abw": "50mbit", "loss": "0.1%"}],
        "flow": [{"from": "a", "to": "b"}, {"from": "a", "to": "b"}],
    }


def spec(points: int, duration: str) -> dict:
    return {"scenario": scenario(duration), "grid": {"seed": list(range(1, points + 1))}}


def plain_loop(points: int, duration: str, out: Path) -> float:
    """The same points, one after the other in this process: the baseline."""
    import pathtwin

    start = time.perf_counter()
    for seed in range(1, points + 1):
        cfg = scenario(duration)
        cfg["run"]["seed"] = seed
        pathtwin.simulate(cfg, out=out / f"p{seed}")
    return time.perf_counter() - start


def swept(points: int, duration: str, out: Path, workers: int) -> tuple[float, float]:
    """(cluster start-up, sweep wall time) with ``workers`` local workers."""
    import dask
    from distributed import LocalCluster

    import pathtwin
    from pathtwin.sweeps.runner import WORKER_SATURATION

    t0 = time.perf_counter()
    with dask.config.set({"distributed.scheduler.worker-saturation": WORKER_SATURATION}), \
            LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                         silence_logs=logging.ERROR) as cluster:
        startup = time.perf_counter() - t0
        # Each worker imports pathtwin and pyarrow on its first point; warm them, as a
        # sweep of hundreds of points would be after its first few.
        from distributed import Client

        with Client(cluster) as client:
            client.run(lambda: __import__("pathtwin.sweeps.point") and __import__("pyarrow.parquet"))
        start = time.perf_counter()
        res = pathtwin.sweep(spec(points, duration), out, scheduler=cluster.scheduler_address)
        wall = time.perf_counter() - start
    if res.failed:
        raise SystemExit(f"bench/sweep: {res.failed} points failed: {res.points.error.dropna().iloc[0]}")
    return startup, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--duration", default="60s", help="simulated time per point")
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-", dir=args.out))
    try:
        # Warm this process as the workers are warmed (imports, the native module).
        plain_loop(2, args.duration, work / "warm")
        loop = plain_loop(args.points, args.duration, work / "loop")
        up1, one = swept(args.points, args.duration, work / "w1", 1)
        up2, two = swept(args.points, args.duration, work / "w2", 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.points
    rate = {"loop": n / loop, "1 worker": n / one, "2 workers": n / two}
    scaling = rate["2 workers"] / (2 * rate["1 worker"])
    overhead_ms = (one - loop) / n * 1000
    print(f"{n} points of {args.duration} simulated, {os.cpu_count()} cores")
    print(f"{'run':<10} {'wall s':>8} {'points/s':>9} {'per point ms':>13}")
    for name, wall in (("loop", loop), ("1 worker", one), ("2 workers", two)):
        print(f"{name:<10} {wall:8.2f} {n / wall:9.2f} {wall / n * 1000:13.1f}")
    print(f"cluster start-up: {up1:.2f} s (1 worker), {up2:.2f} s (2 workers), not counted above")
    print(f"scaling, 2 workers / (2 x 1 worker): {scaling:.2f}  (goal >= {GOAL_SCALING}: {'met' if scaling >= GOAL_SCALING else 'NOT met'})")
    print(f"1 worker / loop: {one / loop:.3f}x; overhead per point: {overhead_ms:.1f} ms  "
          f"(goal < {GOAL_OVERHEAD_MS:g} ms: {'met' if overhead_ms < GOAL_OVERHEAD_MS else 'NOT met'})")
    (args.out / "results.json").write_text(json.dumps({
        "points": n, "duration": args.duration, "cores": os.cpu_count(), "loop_s": loop, "one_worker_s": one,
        "two_workers_s": two, "startup_s": {"1": up1, "2": up2}, "points_per_s": rate, "scaling": scaling,
        "overhead_ms_per_point": overhead_ms}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
