#!/usr/bin/env python3
"""The training run of the profile-guided build (`scripts/build.sh`): drives an instrumented
`pathtwin` through the work users give it, so the compiler learns which branches are hot.

It runs the commands as a user does, through the command line, each on inputs of its own
(never the benchmarks' scenarios or captures, so a benchmark measures what any run gets):

- the NSDI'09 Table 2 example (paths with placeholder cross traffic and reactivity);
- a dumbbell shared by every simulated controller, with SACK and without, over DropTail,
  RED and strict priority;
- `pathtwin trace analyze` (with the workload) of a generated capture.

    python3 scripts/pgo_train.py [--pathtwin CMD]

Runs in a temporary directory and keeps nothing; exits non-zero if a command fails (a build
trained on a failing run would be tuned to an error path).
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTROLLERS = ("reno", "newreno", "cubic", "bic", "vegas", "bbr", "monaco")


def dumbbell(qdisc: str, sack: bool) -> str:
    """Seven flows, one per controller, with RTTs from 20 to 140 ms over a 20 Mbit/s link."""
    hosts = [f"s{i}" for i in range(len(CONTROLLERS))] + [f"d{i}" for i in range(len(CONTROLLERS))]
    lines = [f"hosts = {hosts!r}".replace("'", '"'), 'routers = ["r1", "r2"]', "[run]", 'duration = "20s"',
             'sample_interval = "100ms"', "[tcp]", f"sack = {str(sack).lower()}", "[[link]]",
             'between = ["r1", "r2"]', 'rate = "20mbit"', 'delay = "5ms"', 'queue = "120p"']
    if qdisc == "red":
        lines += ['qdisc = "red"', "[link.red]", 'min_th = "10p"', 'max_th = "40p"', "max_p = 0.1"]
    elif qdisc == "prio":
        lines += ['qdisc = "prio"']
    for i, cc in enumerate(CONTROLLERS):
        lines += ["[[link]]", f'between = ["s{i}", "r1"]', 'rate = "100mbit"', f'delay = "{5 + 5 * i}ms"',
                  'queue = "1000p"', "[[link]]", f'between = ["r2", "d{i}"]', 'rate = "100mbit"', 'delay = "1ms"',
                  'queue = "1000p"']
    for i, cc in enumerate(CONTROLLERS):
        lines += ["[[flow]]", f'from = "s{i}"', f'to = "d{i}"', f'cc = "{cc}"', f'start = "{0.1 * i:.1f}s"']
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pathtwin", default=f"{sys.executable} -m pathtwin.cli", metavar="CMD",
                    help="the pathtwin command to train (default: this interpreter's)")
    args = ap.parse_args()
    cmd = shlex.split(args.pathtwin)
    with tempfile.TemporaryDirectory(prefix="pathtwin-pgo-") as tmp:
        tmp = Path(tmp)
        runs = [["sim", str(ROOT / "examples" / "nsdi09-table2.toml"), "-o", str(tmp / "table2"), "-q"]]
        for qdisc in ("droptail", "red", "prio"):
            for sack in (True, False):
                scenario = tmp / f"dumbbell-{qdisc}-{sack}.toml"
                scenario.write_text(dumbbell(qdisc, sack))
                runs.append(["sim", str(scenario), "-o", str(tmp / scenario.stem), "-q"])
        capture = tmp / "train.pcap"
        subprocess.run([sys.executable, str(ROOT / "bench" / "trace" / "gen_capture.py"), str(capture),
                        "--packets", "300000", "--concurrent", "120", "--seed", "7"], check=True,
                       stdout=subprocess.DEVNULL)
        runs.append(["trace", "analyze", str(capture), "-o", str(tmp / "conns.parquet"),
                     "--exchanges", str(tmp / "exchanges.parquet")])
        runs.append(["trace", "analyze", str(capture), "--threads", "1"])
        for run in runs:
            r = subprocess.run(cmd + run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                print(f"pgo_train: `pathtwin {' '.join(run)}` failed: {r.stderr.strip()}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
