#!/usr/bin/env python3
"""The lossy short-transfer tail: what a loss costs a short transfer in the simulator and in
the kernel (issue #26: "simulated connections that lose one packet take 40-575 ms longer than
the kernel's, which lose ~0-50 ms").

One CUBIC transfer over 20 Mbit/s, 60 ms, a 150-KB queue (the issue's path), run with many
seeds at a loss rate in both engines. The random-loss element draws from the run's seed in
both, so a seed drops the same packets in both wherever both send the same packets (the
same segment size and the same ACKs: the point of `profile = "linux"`). Per seed: each
engine's completion time less its lossless completion time (what the losses cost), and the
simulator's cost less the kernel's.

    sudo python3 bench/fidelity/tail.py                       # 200 KB, 0.5 % and 2 %, 40 seeds, linux profile
    sudo python3 bench/fidelity/tail.py --profile ns2         # the simulator as before the profile
    sudo python3 bench/fidelity/tail.py --size 100KB --seeds 100

Needs root (the emulator) and the pathtwin package; prints the table, writes JSON with
`--json`, exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _grid():
    spec = importlib.util.spec_from_file_location("bench_fidelity_run", HERE / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


grid = _grid()


def costs(size: str, loss: float, seeds: list[int], profile: str) -> list[dict]:
    """Per seed: both engines' completion, retransmissions and timeouts, and their costs over
    the lossless run."""
    import pathtwin

    queue_bdp = 150_000 / (20e6 / 8 * 0.06)
    lossless = grid.Cell(20, 60, 0.0, queue_bdp, "droptail", size, "cubic", 1)
    lossy = grid.Cell(20, 60, loss, queue_bdp, "droptail", size, "cubic", 1)
    base = {"emu": grid.run_engine("emu", lossless, 1), "sim": grid.run_engine("sim", lossless, 1, profile)}
    rows = []
    for seed in seeds:
        row: dict = {"seed": seed}
        for engine in ("emu", "sim"):
            cfg = grid.config(lossy, seed, profile="linux" if engine == "emu" else profile)
            res = (pathtwin.emulate if engine == "emu" else pathtwin.simulate)(cfg)
            m = grid.measure(res)
            row[engine] = m
            row[f"cost_{engine}"] = m["completion_s"] - base[engine]["completion_s"]
        row["excess"] = row["cost_sim"] - row["cost_emu"]
        rows.append(row)
    return rows


def describe(rows: list[dict]) -> str:
    lossy = [r for r in rows if r["emu"]["retransmits"] or r["sim"]["retransmits"]]

    def q(vals, p):
        vals = sorted(vals)
        return vals[min(len(vals) - 1, int(p * len(vals)))] if vals else float("nan")

    out = []
    for name, key in (("kernel's cost", "cost_emu"), ("simulator's cost", "cost_sim"), ("|simulator − kernel|", "excess")):
        v = [(abs(r[key]) if key == "excess" else r[key]) * 1e3 for r in lossy]
        out.append(f"  {name:20} median {q(v, 0.5):7.1f} ms  p90 {q(v, 0.9):7.1f} ms  max {max(v, default=float('nan')):7.1f} ms")
    same = sum(r["emu"]["retransmits"] == r["sim"]["retransmits"] for r in lossy)
    out.append(f"  {len(lossy)} of {len(rows)} seeds lost something; the same retransmission count in {same}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="200KB")
    ap.add_argument("--losses", default="0.005,0.02")
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--profile", default="linux", choices=("linux", "ns2"))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    seeds = list(range(1, args.seeds + 1))
    report = {}
    for loss in (float(x) for x in args.losses.split(",")):
        rows = costs(args.size, loss, seeds, args.profile)
        report[str(loss)] = rows
        print(f"{args.size}, loss {loss * 100:g} %, simulator profile {args.profile}:")
        print(describe(rows))
        worst = sorted(rows, key=lambda r: -abs(r["excess"]))[:5]
        for r in worst:
            print(f"    seed {r['seed']:3}: kernel {r['emu']['completion_s'] * 1e3:7.1f} ms ({r['emu']['retransmits']} retx, "
                  f"{r['emu']['timeouts']} RTO), sim {r['sim']['completion_s'] * 1e3:7.1f} ms ({r['sim']['retransmits']} retx, "
                  f"{r['sim']['timeouts']} RTO)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
