#!/usr/bin/env python3
"""pathtwin's DiffServ markers (token bucket, srTCM, trTCM) feeding RIO-C, against ns-2's
`Queue/dsRED/edge` policers and `Queue/dsRED/core` (see README.md beside this file).

bench/aqm's dumbbell (eight Reno flows, RTTs 40-100 ms, 20 Mbit/s 2 ms bottleneck, 100-packet
buffer) with RIO-C at the bottleneck (ns-2's defaults: IN 15/30 p, max_p 0.02; OUT 5/15 p,
max_p 0.2) and a marker per sender: in ns-2 a dsRED/edge queue on the sender's access link
whose policy meters that flow, in pathtwin a `[[marker]] at = "s<i>"`. Two groups of four
flows, one of each RTT, differ in their committed rate (per flow; group A is flows 0, 2, 4, 6,
group B 1, 3, 5, 7): token bucket 3 and 1 Mbit/s, srTCM 4 and 0.5, trTCM 2.5 and 1.5, and
an oversubscribed token bucket, 6 and 2 Mbit/s, where IN is dropped too. Green is IN, yellow and red are OUT (ns-2:
code point 10 -> precedence 0, 11 and 12 -> precedence 1).

Per scenario, pathtwin vs ns-2 (means over seeded start-time draws, identical in both):
goodput per group, the green/yellow/red packets at the markers per group, IN and OUT
arrivals and drops at the bottleneck, the mean of the average queue (RIO-C's total average,
sampled every 0.1 s after the warm-up) and its 10th/90th percentiles.

    python3 bench/aqm/markers.py               # 60 s, 3 draws
    python3 bench/aqm/markers.py --quick       # 30 s, 2 draws

Needs `ns` (Debian `ns2`) and the pathtwin package. A benchmark: prints the table, exits 0;
tests/test_ns2_aqm.py asserts it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


aqm = _load("bench_aqm_run", HERE / "run.py")
tcp = aqm.tcp
RTTS = aqm.RTTS
QUEUE_PKTS = aqm.QUEUE_PKTS
WARMUP_S = aqm.WARMUP_S
Row = aqm.Row
mean = aqm.mean
fmt = aqm.fmt

#: ns-2's RIO defaults (ALGORITHMS.md §2), RIO-C; as in run.py, no gentle region, no `wait`.
RIO_IN = (15, 30, 0.02)
RIO_OUT = (5, 15, 0.2)
W_Q = 0.002
#: Flow i's group: A for the even flows, B for the odd ones (one of each RTT in each).
GROUPS = ["A" if i % 2 == 0 else "B" for i in range(len(RTTS))]
COLOURS = ("green", "yellow", "red")


@dataclass
class Scenario:
    name: str
    kind: str  # pathtwin's marker kind: "token-bucket" | "srtcm" | "trtcm"
    #: Per group, the marker's parameters: rates in bit/s, bucket sizes in bytes (IP).
    params: dict

    def ns2_policy(self, group: str) -> str:
        p = self.params[group]
        if self.kind == "token-bucket":
            return f"TokenBucket:{p['rate']}:{p['depth']}"
        if self.kind == "srtcm":
            return f"srTCM:{p['cir']}:{p['cbs']}:{p['ebs']}"
        return f"trTCM:{p['cir']}:{p['cbs']}:{p['pir']}:{p['pbs']}"

    def toml(self, host: str, group: str) -> list[str]:
        lines = ["[[marker]]", f'at = "{host}"', f'kind = "{self.kind}"']
        for k, v in self.params[group].items():
            unit = "bit" if k in ("rate", "cir", "pir") else "B"
            lines.append(f'{k} = "{v}{unit}"')
        return lines + [""]


SCENARIOS = {
    # A continuous token bucket: 10 packets of burst.
    "tb 3/1": Scenario("tb 3/1", "token-bucket", {
        "A": {"rate": 3_000_000, "depth": 15_000},
        "B": {"rate": 1_000_000, "depth": 15_000}}),
    # srTCM: a committed bucket of 3 packets and an excess bucket of 20; group A commits
    # 4 Mbit/s per flow, B 0.5 Mbit/s.
    "srtcm 4/0.5": Scenario("srtcm 4/0.5", "srtcm", {
        "A": {"cir": 4_000_000, "cbs": 4_500, "ebs": 30_000},
        "B": {"cir": 500_000, "cbs": 4_500, "ebs": 30_000}}),
    # trTCM: committed 2.5 (A) and 1.5 (B) Mbit/s, peak twice that; PBS twice CBS.
    "trtcm 2.5/1.5": Scenario("trtcm 2.5/1.5", "trtcm", {
        "A": {"cir": 2_500_000, "cbs": 15_000, "pir": 5_000_000, "pbs": 30_000},
        "B": {"cir": 1_500_000, "cbs": 15_000, "pir": 3_000_000, "pbs": 30_000}}),
    # Oversubscribed: 32 Mbit/s committed on a 20 Mbit/s link, so IN is dropped too.
    "tb 6/2 over": Scenario("tb 6/2 over", "token-bucket", {
        "A": {"rate": 6_000_000, "depth": 30_000},
        "B": {"rate": 2_000_000, "depth": 30_000}}),
}


def run_ns2(ns: str, sc: Scenario, duration: float, starts: list[float]) -> dict:
    cmd = [ns, str(HERE / "markers_dumbbell.tcl"), f"{duration:g}",
           ",".join(f"{r:.5f}" for r in tcp.path_rtts(RTTS)), ",".join(f"{s:g}" for s in starts),
           str(QUEUE_PKTS), f"{WARMUP_S:g}", ",".join(f"{x:g}" for x in (*RIO_IN, *RIO_OUT, W_Q)),
           ";".join(sc.ns2_policy(g) for g in GROUPS)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if r.returncode != 0:
        raise RuntimeError(f"ns-2 failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    out = json.loads(next(x for x in reversed(r.stdout.splitlines()) if x.startswith("{")))
    flows = out["flows"]
    assert all(f["edge_drops"] == 0 for f in flows), "an edge queue dropped"
    core = out["core"]
    if sc.kind == "token-bucket":
        # TokenBucket's one downgrade, code point 11, is pathtwin's red (OUT).
        for f in flows:
            f["red"], f["yellow"] = f["yellow"], 0
    drops = lambda cp: core[cp]["drops"] + core[cp]["edrops"]
    return {
        "flow_mbps": [f["bytes"] * 8 / duration / 1e6 for f in flows],
        "colours": [{c: f[c] for c in COLOURS} for f in flows],
        "in_arrivals": core["10"]["arrivals"],
        "out_arrivals": core["11"]["arrivals"] + core["12"]["arrivals"],
        "in_drops": drops("10"),
        "out_drops": drops("11") + drops("12"),
        # ns-2's dsRED: `edrops` early, `drops` forced (beyond max_th, or the buffer full).
        "early_drops": sum(core[cp]["edrops"] for cp in core),
        "forced_drops": sum(core[cp]["drops"] for cp in core),
        "avg_trace": out["avg_trace"],
    }


def scenario_toml(sc: Scenario, duration: float, starts: list[float]) -> str:
    rio = aqm.rio("", RIO_IN, RIO_OUT).toml
    toml = tcp.scenario_toml("reno", False, None, duration, RTTS, starts, queue=f"{QUEUE_PKTS}p", qdisc=rio,
                             sample_interval="100ms")
    markers = [line for i, g in enumerate(GROUPS) for line in sc.toml(f"s{i}", g)]
    return toml + "\n" + "\n".join(markers)


def run_pathtwin(sc: Scenario, duration: float, starts: list[float]) -> dict:
    import pathtwin

    res = pathtwin.simulate(scenario_toml(sc, duration, starts))
    q = res.queues.set_index("queue").loc["r1->r2"]
    series = res.queue_series
    trace = series[(series.queue == "r1->r2") & (series.time_s >= WARMUP_S)].avg_queue
    m = res.markers.set_index("marker")
    colours = []
    for i in range(len(RTTS)):
        row = m.loc[next(name for name in m.index if name.endswith(f" s{i}"))]
        colours.append({c: int(row[f"{c}_packets"]) for c in COLOURS})
    return {
        "flow_mbps": [b * 8 / duration / 1e6 for b in res.flows["bytes_delivered"]],
        "colours": colours,
        "in_arrivals": int(q.in_arrivals),
        "out_arrivals": int(q.out_arrivals),
        "in_drops": int(q.in_drops),
        "out_drops": int(q.out_drops),
        "early_drops": int(q.early_drops),
        "forced_drops": int(q.forced_drops),
        "avg_trace": [float(x) for x in trace],
    }


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


#: Metric keys in table order (per-group keys filled in by `metric_keys`).
def metric_keys(kind: str) -> list[str]:
    colours = ("green", "red") if kind == "token-bucket" else COLOURS
    keys = [f"goodput {g} Mb/s" for g in ("A", "B")] + ["goodput Mb/s"]
    keys += [f"{c} {g} pkts" for g in ("A", "B") for c in colours]
    if kind != "token-bucket":
        keys += [f"OUT {g} pkts" for g in ("A", "B")]  # yellow + red
    keys += ["in_arrivals", "out_arrivals", "in_drops", "out_drops", "early_drops", "forced_drops", "avg_queue", "avg_queue p10", "avg_queue p90"]
    return keys


def metric(run: dict, key: str) -> float:
    if key == "goodput Mb/s":
        return sum(run["flow_mbps"])
    if key.startswith("goodput "):
        g = key.split()[1]
        return sum(x for x, gg in zip(run["flow_mbps"], GROUPS) if gg == g)
    if key.endswith(" pkts"):
        colour, g, _ = key.split()
        colours = ("yellow", "red") if colour == "OUT" else (colour,)
        return sum(c[k] for c, gg in zip(run["colours"], GROUPS) if gg == g for k in colours)
    if key == "avg_queue":
        return mean(run["avg_trace"])
    if key.startswith("avg_queue p"):
        return percentile(run["avg_trace"], int(key.split("p")[-1]) / 100)
    return run[key]


def compare(ns: str, sc: Scenario, duration: float, draws: int) -> list[Row]:
    """Both simulators over `draws` start-time draws; one row per metric (means)."""
    runs = {"pathtwin": [], "ns2": []}
    for d in range(draws):
        starts = tcp.start_times(len(RTTS), d)
        runs["pathtwin"].append(run_pathtwin(sc, duration, starts))
        runs["ns2"].append(run_ns2(ns, sc, duration, starts))
    return [Row(sc.name, k, mean([metric(r, k) for r in runs["pathtwin"]]), mean([metric(r, k) for r in runs["ns2"]]))
            for k in metric_keys(sc.kind)]


def main(argv: list[str] | None = None) -> int:
    return aqm.cli(argv, SCENARIOS, compare,
                   "DiffServ markers -> RIO-C: 8 Reno flows in groups A and B (committed rates in the scenario "
                   "names), 20 Mbit/s 2 ms bottleneck, {queue}p buffer, {duration:g} s, mean of {draws} start-time "
                   "draws (* = more than 15 % from ns-2)")

if __name__ == "__main__":
    sys.exit(main())
