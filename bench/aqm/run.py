#!/usr/bin/env python3
"""pathtwin's RED and RIO against ns-2's `Queue/RED` and `Queue/dsRED` (RIO-C) on one
dumbbell (see README.md beside this file).

Eight Reno flows (RTTs 40-100 ms, two of each) share bench/tcp's 20 Mbit/s, 2 ms bottleneck
with a 100-packet buffer under each scenario's discipline. Per scenario, pathtwin vs ns-2:
drops at the bottleneck, the mean of the average queue (sampled every 0.1 s after the
warm-up), the aggregate goodput, the goodput per RTT class, and the per-class (IN/OUT)
throughput at the bottleneck. Every packet is unmarked — IN for RIO in both simulators —
so the RIO scenario checks the IN curve, the RIO-C averages and the idle decay against
ns-2's dsRED, not the OUT class; markers.py beside this file feeds RIO-C from DiffServ
markers (token bucket, srTCM, trTCM) against ns-2's dsRED edge policers. Several seeded
start-time draws, identical in both simulators, are averaged (bench/tcp's reason: one run
is phase-sensitive).

    python3 bench/aqm/run.py               # 60 s, 3 draws
    python3 bench/aqm/run.py --quick       # 30 s, 2 draws

Needs `ns` (Debian `ns2`) and the pathtwin package. A benchmark: prints the table, exits 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _bench_tcp():
    path = HERE.parent / "tcp" / "run.py"
    spec = importlib.util.spec_from_file_location("bench_tcp_run", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


tcp = _bench_tcp()
RTTS = [40, 40, 60, 60, 80, 80, 100, 100]
QUEUE_PKTS = 100
WARMUP_S = 5.0
LINK_MBPS = 20.0
PACKET_BITS = (tcp.MSS + 40) * 8


@dataclass
class Scenario:
    name: str
    kind: str  # "red" | "rio": ns-2's queue class
    #: ns-2's PARAMS argument of aqm_dumbbell.tcl.
    ns2_params: list
    #: pathtwin's bottleneck TOML lines.
    toml: list = field(default_factory=list)


def red(name: str, min_th: int, max_th: int, max_p: float, gentle: bool, wait: bool = True) -> Scenario:
    # ns-2.35's RED never drops while the queue holds at most one packet: short_queue_exempt.
    b = lambda x: "true" if x else "false"  # noqa: E731
    return Scenario(name, "red", [min_th, max_th, max_p, 0.002, int(gentle), int(wait)],
                    ['qdisc = "red"', f'red = {{ min_th = "{min_th}p", max_th = "{max_th}p", max_p = {max_p}, '
                     f'w_q = 0.002, gentle = {b(gentle)}, wait = {b(wait)}, mean_packet = "500B", short_queue_exempt = true }}'])


def rio(name: str, inp: tuple, out: tuple) -> Scenario:
    # ns-2's dsRED has no gentle region and no `wait` (diffserv/dsredq.cc): both off here.
    cls = lambda t: f'{{ min_th = "{t[0]}p", max_th = "{t[1]}p", max_p = {t[2]} }}'  # noqa: E731
    return Scenario(name, "rio", [*inp, *out, 0.002],
                    ['qdisc = "rio"', f"rio = {{ in = {cls(inp)}, out = {cls(out)}, w_q = 0.002, coupled = true, "
                     'gentle = false, wait = false, mean_packet = "500B" }'])


SCENARIOS = {
    "red 5/15": red("red 5/15", 5, 15, 0.1, gentle=False),
    "red gentle 15/45": red("red gentle 15/45", 15, 45, 0.1, gentle=True),
    # A bare qdisc = "red" against ns-2.35's Queue/RED left at its defaults: thresholds and
    # weight from the link (6250/18750 bytes, w_q 0.0002 here), byte mode; the average queue
    # reads in bytes on both sides.
    "red ns-2 defaults": Scenario("red ns-2 defaults", "red", [], ['qdisc = "red"']),
    # ns-2's RIO defaults (ALGORITHMS.md §2).
    "rio-c 15/30 in": rio("rio-c 15/30 in", (15, 30, 0.02), (5, 15, 0.2)),
}

#: The numbers compared, per scenario and simulator.
METRICS = ("drops", "avg_queue", "goodput_mbps", "in_mbps", "out_mbps")


def run_ns2(ns: str, sc: Scenario, duration: float, starts: list[float]) -> dict:
    cmd = [ns, str(HERE / "aqm_dumbbell.tcl"), sc.kind, f"{duration:g}",
           ",".join(f"{r:.5f}" for r in tcp.path_rtts(RTTS)), ",".join(f"{s:g}" for s in starts),
           str(QUEUE_PKTS), f"{WARMUP_S:g}", ",".join(f"{p:g}" for p in sc.ns2_params)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if r.returncode != 0:
        raise RuntimeError(f"ns-2 failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    out = json.loads(next(x for x in reversed(r.stdout.splitlines()) if x.startswith("{")))
    return {
        "drops": out["drops"],
        "early_drops": out["early_drops"],
        "avg_queue": out["avg_queue"],
        "flow_mbps": [f["bytes"] * 8 / duration / 1e6 for f in out["flows"]],
        "in_mbps": (out["in_arrivals"] - out["in_drops"]) * PACKET_BITS / duration / 1e6,
        "out_mbps": (out["out_arrivals"] - out["out_drops"]) * PACKET_BITS / duration / 1e6,
    }


def run_pathtwin(sc: Scenario, duration: float, starts: list[float]) -> dict:
    import pathtwin

    toml = tcp.scenario_toml("reno", False, None, duration, RTTS, starts, queue=f"{QUEUE_PKTS}p", qdisc=sc.toml,
                             sample_interval="100ms")
    res = pathtwin.simulate(toml)
    q = res.queues.set_index("queue").loc["r1->r2"]
    series = res.queue_series
    avg = series[(series.queue == "r1->r2") & (series.time_s >= WARMUP_S)].avg_queue.mean()
    return {
        "drops": int(q.drops),
        "early_drops": int(q.early_drops),
        "avg_queue": float(avg),
        "flow_mbps": [b * 8 / duration / 1e6 for b in res.flows["bytes_delivered"]],
        "in_mbps": (q.in_arrivals - q.in_drops) * PACKET_BITS / duration / 1e6,
        "out_mbps": (q.out_arrivals - q.out_drops) * PACKET_BITS / duration / 1e6,
    }


@dataclass
class Row:
    scenario: str
    metric: str
    pathtwin: float
    ns2: float

    @property
    def ratio(self) -> float:
        return self.pathtwin / self.ns2 if self.ns2 else float("nan")


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def compare(ns: str, sc: Scenario, duration: float, draws: int) -> list[Row]:
    """Both simulators over `draws` start-time draws; one row per metric (means)."""
    runs = {"pathtwin": [], "ns2": []}
    for d in range(draws):
        starts = tcp.start_times(len(RTTS), d)
        runs["pathtwin"].append(run_pathtwin(sc, duration, starts))
        runs["ns2"].append(run_ns2(ns, sc, duration, starts))

    def metric(side: str, key: str) -> float:
        if key == "goodput_mbps":
            return mean([sum(r["flow_mbps"]) for r in runs[side]])
        if key.startswith("rtt "):
            idx = [i for i, r in enumerate(RTTS) if r == int(key.split()[1])]
            return mean([sum(r["flow_mbps"][i] for i in idx) for r in runs[side]])
        return mean([r[key] for r in runs[side]])

    keys = list(METRICS[:3]) + [f"rtt {r} Mb/s" for r in sorted(set(RTTS))] + list(METRICS[3:])
    if sc.kind == "rio":
        keys.insert(1, "early_drops")
    return [Row(sc.name, k, metric("pathtwin", k), metric("ns2", k)) for k in keys]


def fmt(rows: list[Row]) -> str:
    head = f"{'scenario':<20}{'metric':<16}{'pathtwin':>11}{'ns-2':>11}{'ratio':>8}"
    out = [head, "-" * len(head)]
    for r in rows:
        flag = "" if r.ns2 == 0 and r.pathtwin == 0 or abs(r.ratio - 1) <= 0.15 else "  *"
        out.append(f"{r.scenario:<20}{r.metric:<16}{r.pathtwin:>11.3f}{r.ns2:>11.3f}{r.ratio:>8.3f}{flag}")
    return "\n".join(out)


def cli(argv: list[str] | None, scenarios: dict, compare_fn, title: str) -> int:
    """The command line both comparisons share (this one and markers.py): pick scenarios,
    run each against ns-2, print `title` (formatted with duration, draws and buffer) and the
    table, optionally write JSON."""
    ap = argparse.ArgumentParser(description=title.split(":")[0])
    ap.add_argument("--quick", action="store_true", help="30 s, 2 draws")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds (default 60)")
    ap.add_argument("--draws", type=int, default=None, help="start-time draws per scenario (default 3)")
    ap.add_argument("--scenarios", default=None, help="comma-separated subset of " + ", ".join(scenarios))
    ap.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    duration = args.duration or (30.0 if args.quick else 60.0)
    draws = args.draws or (2 if args.quick else 3)
    ns = tcp.peers("bench/aqm")
    if ns is None:
        return 2
    names = [s.strip() for s in args.scenarios.split(",")] if args.scenarios else list(scenarios)
    rows = []
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows.extend(compare_fn(ns, scenarios[name], duration, draws))
    print(title.format(duration=duration, draws=draws, queue=QUEUE_PKTS))
    print(fmt(rows))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ | {"ratio": r.ratio} for r in rows], indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli(argv, SCENARIOS, compare, "AQM dumbbell: 8 Reno flows, 20 Mbit/s 2 ms bottleneck, {queue}p buffer, "
                                         "{duration:g} s, mean of {draws} start-time draws (* = more than 15 % from ns-2)")

if __name__ == "__main__":
    sys.exit(main())
