#!/usr/bin/env python3
"""Simulator scaling benchmark: how cost grows with the number of flows, pathtwin beside ns-2.

The dumbbell of run.py with N = 10, 100, 1 000 and 10 000 NewReno bulk flows; the bottleneck
grows with N (1 Mbit/s and 10 queue packets per flow) so that every flow keeps the same share
and the bottleneck carries ~83 packets per simulated second per flow. For each peer and N it
reports bottleneck packets, engine and process time, CPU, peak RSS, packets per second,
nanoseconds per bottleneck packet and memory per flow; then how the per-packet cost at the
largest N compares with the smallest (goal for pathtwin: within 2x). `--hour` adds one
simulated hour at 1 Gbit/s. Writes OUT/scale.json and OUT/scale.png.

    python3 bench/sim/scale.py                        # 10, 100, 1000, 10000 flows, both peers
    python3 bench/sim/scale.py --flows 10,100 --peers pathtwin
    python3 bench/sim/scale.py --hour                 # also the 1-hour 1 Gbit/s run (pathtwin)

The choices and the last measured numbers are in bench/sim/README.md ("Scaling"). This is a
benchmark script, never a test: it reports ratios and whether the goal is met, and exits 0
either way.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as base  # noqa: E402  (run.py: scenario, peers, measurement; shared, not copied)

DEFAULT_FLOWS = (10, 100, 1000, 10000)
MBIT_PER_FLOW = 1.0          # bottleneck rate per flow: N = 10 is run.py's 10 Mbit/s dumbbell
QUEUE_PKTS_PER_FLOW = 10     # bottleneck queue per flow: N = 10 is run.py's 100p
START_WINDOW_S = 1.0         # flow i starts at i * START_WINDOW_S / N (N = 10: run.py's 0.1 s)
TARGET_PKTS = 250_000        # default duration: about this many bottleneck packets ...
MIN_DURATION_S = 2.0         # ... but at least this long (all flows start within the first second)
GOAL_GROWTH = 2.0            # issue: per-packet cost at 10 000 flows within 2x of the cost at 10

# The long run (--hour): one simulated hour at 1 Gbit/s, 100 flows of 10 Mbit/s each.
HOUR = dict(flows=100, mbit=1000.0, queue_pkts=1000, stagger_s=0.01, duration_s=3600.0)
HOUR_PROBE_S = 36.0          # the shorter run that estimates the hour's runtime (1 %)


# ---------------------------------------------------------------------------- scenario

def bottleneck_pkts_per_s(mbit: float) -> float:
    """Full-size (1500-byte) packets per second the bottleneck can carry."""
    return mbit * 1e6 / ((base.MSS + 40) * 8)


def default_duration(flows: int) -> float:
    """Simulated seconds for N flows: ~TARGET_PKTS bottleneck packets, at least MIN_DURATION_S,
    rounded up to a whole second (N = 10: 300 s, 100: 30 s, 1 000: 3 s, 10 000: 2 s)."""
    d = TARGET_PKTS / bottleneck_pkts_per_s(flows * MBIT_PER_FLOW)
    return float(max(MIN_DURATION_S, math.ceil(d)))


def point(flows: int, duration_s: float) -> dict:
    """One measurement point: the dumbbell sized for N flows."""
    return dict(flows=flows, mbit=flows * MBIT_PER_FLOW, queue_pkts=flows * QUEUE_PKTS_PER_FLOW,
                stagger_s=START_WINDOW_S / flows, duration_s=duration_s)


# ---------------------------------------------------------------------------- running

def run_peer(peer: str, p: dict, exe, out: Path, tag: str) -> dict:
    """Runs one peer on point p; returns run.py's result dict plus the derived costs."""
    if peer == "pathtwin":
        bottleneck = dict(base.BOTTLENECK, rate=f"{p['mbit']:g}mbit", queue_pkts=p["queue_pkts"])
        # -q: no progress bar, whose lazy import of rich (after 1 s) would land in engine time.
        r = base.run_pathtwin(exe, p["duration_s"], False, out, tag=f"scale-{tag}", extra_args=("-q",),
                              flows=p["flows"], bottleneck=bottleneck, stagger_s=p["stagger_s"])
    else:
        # Manual routes: ns-2's default static routing is O(nodes^2) (see dumbbell.tcl).
        r = base.run_ns2(exe, p["duration_s"], False, flows=p["flows"], queue_pkts=p["queue_pkts"],
                         stagger_s=p["stagger_s"], scale=(p["mbit"], "manual"))
    r.pop("per_flow_bytes", None)  # 10 000 numbers per run; the totals are kept
    r.update(bottleneck_mbit=p["mbit"], queue_pkts=p["queue_pkts"], stagger_s=p["stagger_s"])
    return with_costs(r)


def with_costs(r: dict) -> dict:
    """Adds packets/s and ns per bottleneck packet (engine, process wall, CPU) to a result."""
    pkts = r["bottleneck_departures"]
    for key, name in (("engine_wall_s", "engine"), ("process_wall_s", "wall"), ("cpu_s", "cpu")):
        t = r.get(key)
        ok = pkts > 0 and t is not None and t > 0
        r[f"pps_{name}"] = pkts / t if ok else float("nan")
        r[f"ns_per_pkt_{name}"] = t / pkts * 1e9 if ok else float("nan")
    r["max_rss_mb"] = r["max_rss_kb"] / 1024
    return r


def resolve_peers(peers: list[str], pathtwin_cmd: str | None, mem_limit_gb: float) -> dict:
    """The command of each peer (memory cap included); raises base.Missing with the one line
    to print."""
    exes = {}
    # The peers first: a missing peer is the message that matters.
    if "ns-2" in peers:
        exes["ns-2"] = [base.check_ns2()]
    if "pathtwin" in peers:
        exes["pathtwin"] = shlex.split(pathtwin_cmd) if pathtwin_cmd else base.pathtwin_command()
        try:
            import pyarrow  # noqa: F401  (run.py reads pathtwin's tables with it)
        except ImportError:
            raise base.Missing("pyarrow missing (pip install pyarrow), needed to read pathtwin's tables")
    base.peak_rss_wrapper("-")  # raises Missing without GNU time
    cap = memory_cap(mem_limit_gb)
    return {peer: cap + cmd for peer, cmd in exes.items()}


def run_points(peers: list[str], exes: dict, points: list[dict], out: Path) -> tuple[list[dict], list[dict]]:
    """Runs every point, smallest first, the peers one after the other (never in parallel).

    Returns (results, failures): a run that fails (e.g. over the memory limit) is recorded and
    the others go on, so that one peer's limit does not hide the other peer's numbers.
    """
    results, failures = [], []
    for p in points:
        for peer in peers:
            print(f"running {peer}: {p['flows']} flows, {p['mbit']:g} Mbit/s, {p['duration_s']:g} s simulated ...",
                  file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                results.append(run_peer(peer, p, exes[peer], out, f"{p['flows']}f-{p['duration_s']:g}s"))
            except RuntimeError as e:
                failures.append({"peer": peer, "flows": p["flows"], "duration_s": p["duration_s"],
                                 "after_s": time.perf_counter() - t0, "error": str(e)})
                print(f"bench/sim/scale: {peer} failed at {p['flows']} flows: {e}", file=sys.stderr, flush=True)
    return results, failures


def memory_cap(gb: float) -> list[str]:
    """A prlimit prefix capping a run's data segment (heap, anonymous memory), so that a peer
    that outgrows the machine fails alone instead of pushing the shared host into OOM. The cap
    goes on each run, not on this script, which must still read the results afterwards."""
    if gb <= 0:
        return []
    prlimit = shutil.which("prlimit")
    if not prlimit:
        raise base.Missing("prlimit missing (util-linux), needed for --mem-limit-gb; or pass --mem-limit-gb 0")
    return [prlimit, f"--data={int(gb * 2**30)}", "--"]


# ---------------------------------------------------------------------------- derived numbers

def by_peer(results: list[dict]) -> dict[str, list[dict]]:
    """Results per peer, sorted by flow count."""
    out: dict[str, list[dict]] = {}
    for r in sorted(results, key=lambda r: r["flows"]):
        out.setdefault(r["peer"], []).append(r)
    return out


def add_memory_per_flow(results: list[dict]) -> None:
    """Memory per flow at each N: peak RSS growth over the smallest N, per added flow (KiB)."""
    for rows in by_peer(results).values():
        first = rows[0]
        for r in rows:
            dn = r["flows"] - first["flows"]
            r["kib_per_flow"] = (r["max_rss_kb"] - first["max_rss_kb"]) / dn if dn else None


def growth(results: list[dict], failures: list[dict]) -> list[dict]:
    """Per-packet cost at the largest N over the cost at the smallest, per peer and clock; a
    peer that failed at a larger N misses the goal whatever its ratio up to there."""
    rows = []
    for peer, rs in by_peer(results).items():
        lo, hi = rs[0], rs[-1]
        if lo is hi:
            continue
        row = {"peer": peer, "flows_lo": lo["flows"], "flows_hi": hi["flows"]}
        for name in ("engine", "wall", "cpu"):
            row[name] = hi[f"ns_per_pkt_{name}"] / lo[f"ns_per_pkt_{name}"]
        failed = [f["flows"] for f in failures if f["peer"] == peer and f["flows"] > hi["flows"]]
        if failed:
            row["failed_at_flows"] = max(failed)
        if peer == "pathtwin":
            row["goal"] = GOAL_GROWTH
            row["goal_met"] = row["engine"] <= GOAL_GROWTH and not failed
        rows.append(row)
    return rows


def peer_ratios(results: list[dict]) -> list[dict]:
    """pathtwin / ns-2 at each N: packets/s (engine, wall, CPU) and peak RSS."""
    rows = []
    peers = by_peer(results)
    ns2 = {r["flows"]: r for r in peers.get("ns-2", [])}
    for pt in peers.get("pathtwin", []):
        o = ns2.get(pt["flows"])
        if o is None:
            continue
        rows.append({"flows": pt["flows"],
                     **{f"pps_{k}": pt[f"pps_{k}"] / o[f"pps_{k}"] for k in ("engine", "wall", "cpu")},
                     "rss": pt["max_rss_kb"] / o["max_rss_kb"]})
    return rows


# ---------------------------------------------------------------------------- printing

def fmt_points(results: list[dict]) -> str:
    """One row per peer and N."""
    head = (f"{'peer':<9}{'flows':>7}{'Mbit/s':>8}{'sim s':>7}{'bn pkts':>10}{'engine s':>10}{'wall s':>9}"
            f"{'cpu s':>8}{'pkts/s eng':>12}{'pkts/s wall':>13}{'ns/pkt eng':>12}{'ns/pkt wall':>13}"
            f"{'peak RSS MB':>13}{'KiB/flow':>10}")
    lines = [head, "-" * len(head)]
    for r in sorted(results, key=lambda r: (r["flows"], r["peer"] != "pathtwin")):
        kib = r.get("kib_per_flow")
        lines.append(
            f"{r['peer']:<9}{r['flows']:>7d}{r['bottleneck_mbit']:>8g}{r['duration_s']:>7g}"
            f"{r['bottleneck_departures']:>10d}{r['engine_wall_s']:>10.3f}{r['process_wall_s']:>9.2f}{r['cpu_s']:>8.2f}"
            f"{r['pps_engine']:>12,.0f}{r['pps_wall']:>13,.0f}{r['ns_per_pkt_engine']:>12,.0f}"
            f"{r['ns_per_pkt_wall']:>13,.0f}{r['max_rss_mb']:>13.1f}{(f'{kib:.1f}' if kib is not None else '-'):>10}")
    return "\n".join(lines)


def fmt_ratios(rows: list[dict]) -> str:
    """pathtwin / ns-2 per N."""
    head = f"{'flows':>7}  {'pathtwin / ns-2:':<17}{'pkts/s eng':>11}{'pkts/s wall':>13}{'pkts/s cpu':>12}{'peak RSS':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['flows']:>7d}  {'':<17}{r['pps_engine']:>10.2f}x{r['pps_wall']:>12.2f}x"
                     f"{r['pps_cpu']:>11.2f}x{r['rss']:>9.2f}x")
    return "\n".join(lines)


def fmt_growth(rows: list[dict]) -> str:
    """How the per-packet cost grows from the smallest to the largest N."""
    lines = []
    for r in rows:
        goal = ""
        if "goal" in r:
            goal = f"  goal <= {r['goal']:g}x (engine): {'met' if r['goal_met'] else 'MISSED'}"
        if "failed_at_flows" in r:
            goal += f" (failed at {r['failed_at_flows']} flows)"
        lines.append(f"{r['peer']:<9} ns per bottleneck packet at {r['flows_hi']} flows / at {r['flows_lo']}: "
                     f"engine {r['engine']:.2f}x, wall {r['wall']:.2f}x, cpu {r['cpu']:.2f}x{goal}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the hour

def run_hour(peers: list[str], exes: dict, out: Path, probe_s: float) -> list[dict]:
    """One simulated hour at 1 Gbit/s per peer, each preceded by a probe run that estimates it."""
    results = []
    for peer in peers:
        probe = run_peer(peer, dict(HOUR, duration_s=probe_s), exes[peer], out, f"hour-probe-{probe_s:g}s")
        est = estimate_hour(probe)
        print(f"{peer}: the hour at {HOUR['mbit']:g} Mbit/s, {HOUR['flows']} flows: a {probe_s:g}-s probe took "
              f"{probe['process_wall_s']:.1f} s; estimated {est:.0f} s ({est / 60:.1f} min) for {HOUR['duration_s']:g} s",
              file=sys.stderr, flush=True)
        r = run_peer(peer, HOUR, exes[peer], out, "hour")
        r.update(estimated_wall_s=est, probe=probe)
        results.append(r)
    return results


def estimate_hour(probe: dict) -> float:
    """Extrapolates the probe: its set-up (process minus engine time) plus engine time scaled
    to the hour (the probe is past the start-up transient for most of its length)."""
    setup = max(probe["process_wall_s"] - probe["engine_wall_s"], 0.0)
    return setup + probe["engine_wall_s"] * HOUR["duration_s"] / probe["duration_s"]


def fmt_hour(rows: list[dict]) -> str:
    """The hour's results."""
    head = (f"{'peer':<9}{'flows':>6}{'Mbit/s':>8}{'sim s':>7}{'bn pkts':>12}{'engine s':>10}{'wall s':>9}"
            f"{'estimate s':>12}{'pkts/s eng':>12}{'pkts/s wall':>13}{'peak RSS MB':>13}{'goodput Mb/s':>14}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['peer']:<9}{r['flows']:>6d}{r['bottleneck_mbit']:>8g}{r['duration_s']:>7g}"
                     f"{r['bottleneck_departures']:>12d}{r['engine_wall_s']:>10.1f}{r['process_wall_s']:>9.1f}"
                     f"{r['estimated_wall_s']:>12.1f}{r['pps_engine']:>12,.0f}{r['pps_wall']:>13,.0f}"
                     f"{r['max_rss_mb']:>13.1f}{r['goodput_bps'] / 1e6:>14.1f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plot

def plot(results: list[dict], failures: list[dict], path: Path) -> None:
    """ns per bottleneck packet and peak RSS against flows (log x), one line per peer; a run
    that failed is an x on the axis at its flow count."""
    import matplotlib

    matplotlib.use("Agg")  # no display on a benchmark host
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for peer, rs in by_peer(results).items():
        n = [r["flows"] for r in rs]
        ax1.plot(n, [r["ns_per_pkt_engine"] for r in rs], "o-", label=f"{peer} (engine)")
        ax1.plot(n, [r["ns_per_pkt_wall"] for r in rs], "o--", alpha=0.6, label=f"{peer} (process wall)")
        ax2.plot(n, [r["max_rss_mb"] for r in rs], "o-", label=peer)
    for f in failures:
        for ax in (ax1, ax2):
            ax.plot([f["flows"]], [0.02], "x", color="red", ms=10, transform=ax.get_xaxis_transform())
            ax.annotate(f"{f['peer']} failed", (f["flows"], 0.05), xycoords=ax.get_xaxis_transform(),
                        ha="right", fontsize=8, color="red")
    ax1.set(xscale="log", yscale="log", xlabel="flows (1 Mbit/s of bottleneck each)",
            ylabel="ns per bottleneck packet", title="cost per packet")
    ax2.set(xscale="log", yscale="log", xlabel="flows", ylabel="peak RSS (MB)", title="memory")
    for ax in (ax1, ax2):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"dumbbell scaling, {os.cpu_count()} CPUs", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flows", default=",".join(map(str, DEFAULT_FLOWS)),
                    help="comma-separated flow counts (default 10,100,1000,10000)")
    ap.add_argument("--durations", default=None,
                    help="comma-separated simulated seconds, one per flow count "
                         f"(default: ~{TARGET_PKTS:,} bottleneck packets, at least {MIN_DURATION_S:g} s)")
    ap.add_argument("--peers", default="pathtwin,ns-2", help="comma-separated subset of pathtwin,ns-2")
    ap.add_argument("--pathtwin", default=None, metavar="CMD",
                    help="command that runs pathtwin (default: `pathtwin` on PATH), "
                         "e.g. '.venv/bin/python -m pathtwin.cli'")
    ap.add_argument("--hour", action="store_true",
                    help=f"also simulate one hour at {HOUR['mbit']:g} Mbit/s, {HOUR['flows']} flows (pathtwin; long)")
    ap.add_argument("--hour-peer", action="store_true", help="run ns-2 for the hour too (longer still)")
    ap.add_argument("--hour-only", action="store_true", help="only the hour, no flow-count points")
    ap.add_argument("--hour-probe", type=float, default=HOUR_PROBE_S,
                    help=f"simulated seconds of the run that estimates the hour (default {HOUR_PROBE_S:g})")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0,
                    help="data-segment limit (prlimit --data) per run in GiB, 0 for none (default 8: the host is shared)")
    ap.add_argument("--out", type=Path, default=base.DEFAULT_OUT, help=f"output directory (default {base.DEFAULT_OUT})")
    return ap.parse_args(argv)


def plan(args: argparse.Namespace) -> list[dict]:
    """The points to run, from --flows and --durations."""
    flows = [int(x) for x in args.flows.split(",") if x.strip()]
    if args.durations:
        durations = [float(x) for x in args.durations.split(",")]
        if len(durations) != len(flows):
            raise ValueError(f"--durations has {len(durations)} values for {len(flows)} flow counts")
    else:
        durations = [default_duration(n) for n in flows]
    return [point(n, d) for n, d in zip(flows, durations)]


def fmt_failures(failures: list[dict]) -> str:
    """The runs that did not finish."""
    return "\n".join(f"{f['peer']:<9}{f['flows']:>7d} flows: FAILED after {f['after_s']:.1f} s: {f['error']}"
                     for f in failures)


def report(results: list[dict], failures: list[dict], hour: list[dict]) -> dict:
    """Prints the tables; returns what goes into scale.json."""
    add_memory_per_flow(results)
    ratio_rows, growth_rows = peer_ratios(results), growth(results, failures)
    host = f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"
    if results or failures:
        print(f"dumbbell, N NewReno bulk flows (no SACK): bottleneck {MBIT_PER_FLOW:g} Mbit/s and "
              f"{QUEUE_PKTS_PER_FLOW}p DropTail per flow, 45 ms; access 100 Mbit/s 2.5 ms; starts within "
              f"{START_WINDOW_S:g} s; {host}")
    if results:
        print(fmt_points(results))
    if failures:
        print(fmt_failures(failures))
    if results:
        if ratio_rows:
            print()
            print(fmt_ratios(ratio_rows))
        if growth_rows:
            print()
            print(fmt_growth(growth_rows))
    if hour:
        print(f"\none simulated hour: {HOUR['flows']} NewReno bulk flows, {HOUR['mbit']:g} Mbit/s "
              f"{HOUR['queue_pkts']}p bottleneck, 45 ms; starts within 1 s; {host}")
        print(fmt_hour(hour))
    return {
        "scenario": {"mbit_per_flow": MBIT_PER_FLOW, "queue_pkts_per_flow": QUEUE_PKTS_PER_FLOW,
                     "start_window_s": START_WINDOW_S, "mss": base.MSS, "access": base.ACCESS,
                     "bottleneck_delay": base.BOTTLENECK["delay"], "hour": HOUR},
        "host": {"cpus": os.cpu_count(), "loadavg": os.getloadavg(),
                 "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "results": results,
        "failures": failures,
        "ratios": ratio_rows,
        "growth": growth_rows,
        "hour": hour,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = set(peers) - {"pathtwin", "ns-2"}
    if unknown:
        print(f"bench/sim/scale: unknown peer(s) {sorted(unknown)}", file=sys.stderr)
        return 2
    try:
        points = [] if args.hour_only else plan(args)
        exes = resolve_peers(peers, args.pathtwin, args.mem_limit_gb)
    except base.Missing as e:
        print(f"bench/sim/scale: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"bench/sim/scale: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    # A failed run is reported by the last line of its stderr: for a Rust abort that is the
    # panic or allocation message only without a backtrace after it.
    os.environ["RUST_BACKTRACE"] = "0"

    try:
        results, failures = run_points(peers, exes, points, args.out)
        hour_peers = [p for p in peers if p == "pathtwin" or args.hour_peer]
        hour = run_hour(hour_peers, exes, args.out, args.hour_probe) if (args.hour or args.hour_only) else []
    except (RuntimeError, OSError, KeyError) as e:
        print(f"bench/sim/scale: a run failed: {e}", file=sys.stderr)
        return 1

    data = report(results, failures, hour)
    data["host"]["mem_limit_gb"] = args.mem_limit_gb
    path = args.out / ("scale-hour.json" if args.hour_only else "scale.json")
    path.write_text(json.dumps(data, indent=2))
    written = [str(path)]
    if results:
        plot(results, failures, args.out / "scale.png")
        written.append(str(args.out / "scale.png"))
    print("\nwritten: " + ", ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
