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

    python3 bench/sweep/run.py                     # 100 points of 60 s simulated, 3 rounds
    python3 bench/sweep/run.py --points 40 --duration 10s --repeat 1

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
    """The same points, one after the other in this process: the baseline. The git revision
    for run.json is asked once, as a sweep does (``simulate`` would otherwise spawn git for
    every point, a cost the loop would carry and the sweep not)."""
    import pathtwin
    from pathtwin.results import git_revision

    start = time.perf_counter()
    revision = git_revision()
    for seed in range(1, points + 1):
        cfg = scenario(duration)
        cfg["run"]["seed"] = seed
        pathtwin.simulate(cfg, out=out / f"p{seed}", revision=revision)
    return time.perf_counter() - start


def _warm() -> None:
    """A pool process's initializer: imports and the native module, as a warm worker's."""
    with tempfile.TemporaryDirectory() as d:
        plain_loop(2, "1s", Path(d))


def _seeds_loop(seeds: list[int], duration: str, out: str) -> float:
    import pathtwin

    start = time.perf_counter()
    for seed in seeds:
        cfg = scenario(duration)
        cfg["run"]["seed"] = seed
        pathtwin.simulate(cfg, out=Path(out) / f"p{seed}", revision="bench")
    return time.perf_counter() - start


def parallel_loops(points: int, duration: str, out: Path, processes: int) -> float:
    """The machine's own ceiling: the points split over ``processes`` plain loops running at
    once in separate processes, no Dask (wall time of the slowest)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=_warm) as pool:
        list(pool.map(time.sleep, [0.2] * processes))  # every process started and warm
        shares = [list(range(1 + k, points + 1, processes)) for k in range(processes)]
        start = time.perf_counter()
        list(pool.map(_seeds_loop, shares, [duration] * processes, [str(out)] * processes))
        return time.perf_counter() - start


def swept(points: int, duration: str, out: Path, workers: int) -> tuple[float, float, float]:
    """(cluster start-up, wall time of a one-point sweep, sweep wall time) with ``workers``
    local workers. The one-point sweep, first, is the sweep's fixed cost (git, reading and
    validating the spec, opening and writing sweep.json, connecting to the scheduler)
    beside one point."""
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
        # Twice: the first imports what a sweep needs into this process (pyarrow.dataset and
        # pandas, ~0.4 s, paid once per command), the second is the fixed cost of a sweep.
        for k in range(2):
            start = time.perf_counter()
            pathtwin.sweep(spec(1, duration), out.with_name(f"{out.name}-one{k}"), scheduler=cluster.scheduler_address)
            single = time.perf_counter() - start
        start = time.perf_counter()
        res = pathtwin.sweep(spec(points, duration), out, scheduler=cluster.scheduler_address)
        wall = time.perf_counter() - start
    if res.failed:
        raise SystemExit(f"bench/sweep: {res.failed} points failed: {res.points.error.dropna().iloc[0]}")
    return startup, single, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--duration", default="60s", help="simulated time per point")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of all three runs; the fastest of each is kept")
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    # The three runs interleaved, round after round, and the fastest of each kept: on a shared
    # machine another process's load comes and goes, and hits all three alike this way.
    loops, ones, twos, up1s, up2s, singles, pairs = [], [], [], [], [], [], []
    for r in range(args.repeat):
        work = Path(tempfile.mkdtemp(prefix="sweep-bench-", dir=args.out))
        try:
            # Warm this process as the workers are warmed (imports, the native module).
            plain_loop(2, args.duration, work / "warm")
            loops.append(plain_loop(args.points, args.duration, work / "loop"))
            up1, single, one = swept(args.points, args.duration, work / "w1", 1)
            up2, _, two = swept(args.points, args.duration, work / "w2", 2)
            pairs.append(parallel_loops(args.points, args.duration, work / "pair", 2))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        ones.append(one)
        twos.append(two)
        up1s.append(up1)
        up2s.append(up2)
        singles.append(single)
    loop, one, two, up1, up2, single, pair = min(loops), min(ones), min(twos), min(up1s), min(up2s), min(singles), min(pairs)
    load_after = os.getloadavg()[0]
    n = args.points
    rate = {"loop": n / loop, "1 worker": n / one, "2 workers": n / two}
    rate["2 loops"] = n / pair
    scaling = rate["2 workers"] / (2 * rate["1 worker"])
    machine = rate["2 loops"] / (2 * rate["loop"])
    overhead_ms = (one - loop) / n * 1000
    # Per point beyond the fixed cost: the N-point sweep less the one-point sweep, spread over
    # the N - 1 further points, less what the loop spends on a point.
    marginal_ms = ((one - single) / (n - 1) - loop / n) * 1000 if n > 1 else float("nan")
    print(f"{n} points of {args.duration} simulated, {os.cpu_count()} cores, fastest of {args.repeat} rounds; "
          f"load average {load_before:.2f} before, {load_after:.2f} after")
    print(f"{'run':<10} {'wall s':>8} {'points/s':>9} {'per point ms':>13}")
    for name, wall in (("loop", loop), ("1 worker", one), ("2 workers", two), ("2 loops", pair)):
        print(f"{name:<10} {wall:8.2f} {n / wall:9.2f} {wall / n * 1000:13.1f}")
    print(f"cluster start-up: {up1:.2f} s (1 worker), {up2:.2f} s (2 workers), not counted above")
    print(f"scaling, 2 workers / (2 x 1 worker): {scaling:.2f}  (goal >= {GOAL_SCALING}: {'met' if scaling >= GOAL_SCALING else 'NOT met'})")
    print(f"  the machine's own: two plain loops in two processes at once, no Dask: {machine:.2f} of 2 x one loop; "
          f"2 workers / 2 loops: {rate['2 workers'] / rate['2 loops']:.2f}")
    print(f"1 worker / loop: {one / loop:.3f}x; overhead per point: {overhead_ms:.1f} ms  "
          f"(goal < {GOAL_OVERHEAD_MS:g} ms: {'met' if overhead_ms < GOAL_OVERHEAD_MS else 'NOT met'})")
    print(f"  of which fixed per sweep: a one-point sweep took {single:.2f} s (the loop: {loop / n:.3f} s a point); "
          f"beyond it, {marginal_ms:.1f} ms per point")
    (args.out / "results.json").write_text(json.dumps({
        "points": n, "duration": args.duration, "cores": os.cpu_count(), "repeat": args.repeat,
        "load_average": [load_before, load_after], "rounds": {"loop": loops, "1": ones, "2": twos, "2 loops": pairs}, "loop_s": loop, "one_worker_s": one,
        "two_workers_s": two, "startup_s": {"1": up1, "2": up2}, "points_per_s": rate, "scaling": scaling, "machine_scaling": machine,
        "overhead_ms_per_point": overhead_ms, "one_point_sweep_s": single, "marginal_overhead_ms_per_point": marginal_ms},
        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
