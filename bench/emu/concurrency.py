"""How many emulations one machine holds at once without disturbing each other (issue #27:
the limit a sweep's emulation points run under).

Runs K identical emulations at once (separate `pathtwin emu run` processes, K = 1, 2, ...),
each one path carrying kernel TCP flows for a fixed time, at a light and at a heavy rate, and
compares every emulation with the same one alone: its release lateness (how late the loop
handed packets over, from `run.json`'s `timing`), its goodput and its mean RTT. An
emulation is disturbed when its lateness p99 exceeds DISTURBED_P99_US, or its goodput moves
more than DISTURBED_SHARE from running alone; the limit at a rate is the largest K with no
emulation disturbed. The mean RTT is reported, not judged: CUBIC's sawtooth moves it by 2-3
% from one run alone to the next (measured), and what concurrency adds to it is the
lateness, judged directly.

    sudo python bench/emu/concurrency.py [--max 3] [--duration 10] [--rates 20mbit,400mbit] [--json OUT]

Run it on a quiet machine: anything else running is a concurrent "emulation" it does not
count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

#: Release lateness p99 above which an emulation's timing is disturbed: a tenth of a
#: millisecond is under 1 % of the 20-ms RTT of the paths below and of a 1500-byte packet's
#: time at 100 Mbit/s, the precision the emulator's own tests rely on; running alone, the
#: loop's p99 is tens of microseconds (bench/emu/run.py).
DISTURBED_P99_US = 100.0
#: Goodput moved this much from running alone (the tests' tightest tolerances on emulated
#: goodput are 2-5 %).
DISTURBED_SHARE = 0.02
#: The two loads: a light one (a few DSL or cable paths' worth) and a heavy one.
RATES = ("20mbit", "400mbit")
RTT = "20ms"


def config(rate: str, duration_s: float, flows: int) -> str:
    """One link-mode path of ``rate`` and a bandwidth-delay product of buffer, with
    ``flows`` CUBIC flows from a to b for the whole run."""
    from pathtwin.config import parse_quantity

    bdp = int(parse_quantity("rate", rate, "rate") * parse_quantity("time", RTT, "rtt") / 8)
    return "\n".join([
        'hosts = ["a", "b"]',
        f'[run]\nduration = "{duration_s:g}s"',
        '[tcp]\ncc = "cubic"\nprofile = "linux"',
        f'[[path]]\nbetween = ["a", "b"]\nrtt = "{RTT}"\nabw = "{rate}"\nmode = "link"\nqueue = "{bdp}B"',
        *(f'[[flow]]\nfrom = "a"\nto = "b"\nlabel = "f{i}"' for i in range(flows)),
    ]) + "\n"


def run_at_once(k: int, rate: str, duration_s: float, flows: int, work: Path) -> list[dict]:
    """K emulations started together; each one's lateness, goodput and RTT."""
    procs = []
    for i in range(k):
        d = work / f"{rate}-k{k}-{i}"
        d.mkdir(parents=True)
        (d / "topology.toml").write_text(config(rate, duration_s, flows))
        procs.append((d, subprocess.Popen([sys.executable, "-m", "pathtwin.cli", "emu", "run", str(d / "topology.toml"), "-o",
                                           str(d / "out")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    rows = []
    for d, p in procs:
        _, err = p.communicate(timeout=duration_s * 10 + 120)
        if p.returncode != 0:
            raise SystemExit(f"emulation {d.name} failed: {err.strip().splitlines()[-1:]}")
        run = json.loads((d / "out" / "run.json").read_text())
        late = run["timing"]["release_lateness"]
        f = pd.read_parquet(d / "out" / "flows.parquet")
        rows.append({"k": k, "rate": rate, "lateness_p50_us": late["p50_ns"] / 1e3, "lateness_p99_us": late["p99_ns"] / 1e3,
                     "lateness_p999_us": late["p999_ns"] / 1e3, "lateness_max_us": late["max_ns"] / 1e3,
                     "goodput_bps": float(f["goodput_bps"].sum()),
                     "rtt_mean_ms": float((f["rtt_mean_ms"] * f["goodput_bps"]).sum() / f["goodput_bps"].sum())})
    return rows


def disturbed(row: dict, alone: dict) -> list[str]:
    """What moved in ``row`` against the same emulation ``alone``."""
    why = []
    if row["lateness_p99_us"] > DISTURBED_P99_US:
        why.append(f"lateness p99 {row['lateness_p99_us']:.0f} µs")
    change = row["goodput_bps"] / alone["goodput_bps"] - 1
    if abs(change) > DISTURBED_SHARE:
        why.append(f"goodput {100 * change:+.1f} %")
    return why


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=3, help="the most emulations at once to try")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds each emulation runs")
    ap.add_argument("--flows", type=int, default=2, help="CUBIC flows per emulation")
    ap.add_argument("--rates", default=",".join(RATES), help="comma-separated path rates")
    ap.add_argument("--json", type=Path, help="write the rows and limits here")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("the emulator needs root: run with sudo")
    cores = os.cpu_count() or 1
    rows: list[dict] = []
    limits: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rate in a.rates.split(","):
            # Alone twice: how far one emulation moves from itself, run after run, is the
            # yardstick the thresholds must stand above.
            first, again = (run_at_once(1, rate, a.duration, a.flows, Path(tmp) / f"alone{i}")[0] for i in range(2))
            noise = {key: abs(again[key] / first[key] - 1) for key in ("goodput_bps", "rtt_mean_ms")}
            print(f"{rate:>8} alone, twice: goodput {100 * noise['goodput_bps']:.1f} %, mean RTT "
                  f"{100 * noise['rtt_mean_ms']:.1f} % apart; lateness p99 {first['lateness_p99_us']:.0f} and "
                  f"{again['lateness_p99_us']:.0f} µs", flush=True)
            rows += [dict(first, k=0, repeat=1), dict(again, k=0, repeat=2)]
            alone = first
            limits[rate] = 0
            for k in range(1, a.max + 1):
                got = run_at_once(k, rate, a.duration, a.flows, Path(tmp))
                for r in got:
                    r["disturbed"] = disturbed(r, alone)
                rows += got
                worst = max(got, key=lambda r: r["lateness_p99_us"])
                print(f"{rate:>8} K={k}: lateness p99 worst {worst['lateness_p99_us']:7.0f} µs, max "
                      f"{max(r['lateness_max_us'] for r in got) / 1e3:6.1f} ms; goodput "
                      f"{min(r['goodput_bps'] for r in got) / alone['goodput_bps']:.3f}-"
                      f"{max(r['goodput_bps'] for r in got) / alone['goodput_bps']:.3f} of alone; mean RTT "
                      f"{max(r['rtt_mean_ms'] for r in got) / alone['rtt_mean_ms']:.3f}; "
                      + ("; ".join(sorted({w for r in got for w in r["disturbed"]})) or "undisturbed"), flush=True)
                if any(r["disturbed"] for r in got):
                    break
                limits[rate] = k
    print(f"\n{cores} cores: " + ", ".join(f"{n} emulation(s) at {rate} undisturbed" for rate, n in limits.items()))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"cores": cores, "duration_s": a.duration, "flows": a.flows,
                                      "disturbed_p99_us": DISTURBED_P99_US, "disturbed_share": DISTURBED_SHARE,
                                      "limits": limits, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
