"""The measurement loop in both engines, side by side: `pathtwin measure --simulate` and
`pathtwin measure --emulate` on the same ground truth, hosts and settings, and what each
found per ordered pair (base RTT, ABW by flow count) and per source (shared classes), with
the simulated value over the emulated one, and the wall time of each.

    sudo python bench/measure/sim_vs_emu.py [--ground-truth examples/groundtruth/campus.toml]
        [--hosts s,d1,d2,d3] [--flows 1,4] [--duration 8s] [--probe-interval 20ms]
        [--probe-duration 8s] [--json]

The two are not expected to agree exactly: the emulated cross traffic and tests are the
kernel's TCP (CUBIC) on a real clock, the simulated ones the simulator's (NewReno by
default) on a virtual one, and on/off cross traffic leaves each test a different share. What
they should agree on is what the ground truth fixes: base RTTs (the emulator adds its
handling time, tens to hundreds of µs), the ABW of paths the cross traffic does not load
(the route's smallest rate), and the shared classes. Results go to
bench/out/measure/sim_vs_emu.json. This is a measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(engine: str, args) -> tuple[dict, float]:
    """The findings of one measurement and its wall time (s)."""
    from pathtwin.measure import Settings, measure_emulated, measure_simulated
    from pathtwin.measure.session import parse_flows
    from pathtwin.config import parse_quantity

    settings = Settings(flows=parse_flows(args.flows), duration_s=parse_quantity("time", args.duration, "--duration"),
                        probe_interval_s=parse_quantity("time", args.probe_interval, "--probe-interval"),
                        probe_duration_s=parse_quantity("time", args.probe_duration, "--probe-duration"))
    out = args.out / engine / "model.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    for stale in out.parent.glob("model*"):
        stale.unlink()
    hosts = args.hosts.split(",") if args.hosts else None
    start = time.perf_counter()
    measure = measure_simulated if engine == "sim" else measure_emulated
    m = measure(args.ground_truth, hosts=hosts, settings=settings, out=out)
    return m.findings, time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ground-truth", type=Path, default=REPO / "examples" / "groundtruth" / "campus.toml")
    ap.add_argument("--hosts", default="s,d1,d2,d3")
    ap.add_argument("--flows", default="1,4")
    ap.add_argument("--duration", default="8s")
    ap.add_argument("--probe-interval", default="20ms")
    ap.add_argument("--probe-duration", default="8s")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "measure")
    ap.add_argument("--json", action="store_true", help="print the report as JSON on standard output")
    args = ap.parse_args()

    found, wall = {}, {}
    for engine in ("sim", "emu"):
        print(f"measuring in the {'simulator' if engine == 'sim' else 'emulator'}...", file=sys.stderr)
        found[engine], wall[engine] = run(engine, args)
    sim, emu = found["sim"], found["emu"]
    rows = []
    for pair in sim["rtt"]:
        row = {"pair": pair, "rtt_sim_ms": sim["rtt"][pair]["rtt_min_ms"], "rtt_emu_ms": emu["rtt"][pair]["rtt_min_ms"]}
        for n in sim["throughput"][pair]:
            s, e = sim["throughput"][pair][n]["abw_bps"], emu["throughput"][pair][n]["abw_bps"]
            row[f"abw{n}_sim_bps"], row[f"abw{n}_emu_bps"], row[f"abw{n}_ratio"] = s, e, s / e if e else None
        rows.append(row)
    classes = {s: {"sim": sorted(map(sorted, sim["shared"][s]["classes"])),
                   "emu": sorted(map(sorted, emu["shared"][s]["classes"]))} for s in sim["shared"]}
    ratios = sorted(v for r in rows for k, v in r.items() if k.endswith("_ratio") and v is not None)
    report = {"ground_truth": str(args.ground_truth), "hosts": args.hosts, "flows": args.flows, "duration": args.duration,
              "wall_s": wall, "speedup": wall["emu"] / wall["sim"], "pairs": rows, "classes": classes,
              "classes_agree": all(c["sim"] == c["emu"] for c in classes.values()),
              "abw_ratio_median": ratios[len(ratios) // 2] if ratios else None,
              "abw_within_10pct": sum(abs(r - 1) <= 0.1 for r in ratios) / len(ratios) if ratios else None,
              "rtt_excess_emu_ms_max": max(r["rtt_emu_ms"] - r["rtt_sim_ms"] for r in rows)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sim_vs_emu.json").write_text(json.dumps(report, indent=1) + "\n")
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
    return 0


def print_report(report: dict) -> None:
    rows = report["pairs"]
    counts = [k[len("abw"):-len("_sim_bps")] for k in rows[0] if k.startswith("abw") and k.endswith("_sim_bps")]
    print(f"{'pair':>8} {'RTT sim':>9} {'RTT emu':>9}" + "".join(f" {'ABW' + n + ' sim':>9} {'emu':>7} {'ratio':>6}" for n in counts))
    for r in rows:
        print(f"{r['pair']:>8} {r['rtt_sim_ms']:9.3f} {r['rtt_emu_ms']:9.3f}"
              + "".join(f" {r[f'abw{n}_sim_bps'] / 1e6:9.2f} {r[f'abw{n}_emu_bps'] / 1e6:7.2f} {r[f'abw{n}_ratio']:6.3f}"
                        for n in counts))
    for s, c in report["classes"].items():
        print(f"from {s}: sim {c['sim']}, emu {c['emu']}")
    wall = report["wall_s"]
    print(f"wall time: simulated {wall['sim']:.1f} s, emulated {wall['emu']:.1f} s ({report['speedup']:.0f}x); "
          f"ABW sim/emu median {report['abw_ratio_median']:.3f}, {report['abw_within_10pct'] * 100:.0f} % within 10 %; "
          f"classes agree: {report['classes_agree']}")


if __name__ == "__main__":
    sys.exit(main())
