#!/usr/bin/env python3
"""pathtwin's simulated Reno, NewReno and SACK against ns-2 (see README.md beside this file).

Part 1, the RTT-mix dumbbell: four long-lived flows with different base RTTs share a
20 Mbit/s bottleneck with a 50-packet DropTail queue, no SACK (or SACK), unlimited window.
Per flow: payload bytes delivered in order by the end, pathtwin vs ns-2, and the ratio. A
single deterministic run of either simulator is phase-sensitive (DropTail and identical
packet sizes synchronise the flows: moving one packet's timing can swap two flows' shares),
so each configuration is run with several start-time draws, identical in both simulators,
and the per-flow means are compared.

Part 2, Fall & Floyd's 1–4 drop scenarios: `cargo test -p pathtwin-tcp --test
ns2_fall_floyd -- --nocapture` prints that table (the pathtwin side needs the crate's
virtual-time harness, which only a Rust test can drive).

    python3 bench/tcp/run.py                 # 60 s, 5 draws, 3 RTT mixes, 4 variants
    python3 bench/tcp/run.py --quick         # 20 s, 2 draws
    python3 bench/tcp/run.py --fall-floyd    # also run part 2 through cargo

Needs `ns` (Debian `ns2`) and the pathtwin Python package. A benchmark, not a test: it
prints the table and exits 0 whatever the ratios are.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

MSS = 1460
BOTTLENECK = dict(rate="20mbit", delay="2ms", queue="50p")
#: Receiver-side access link; the sender's access delay makes up the rest of the RTT.
DEST_ACCESS_DELAY_MS = 1.0
ACCESS_RATE = "100mbit"
#: Added to flow i's one-way access delay, (i + 1) times this, in both simulators. With every
#: delay a whole number of milliseconds and every serialisation time a multiple of 3.2 µs,
#: events coincide exactly all the time, and which of two simultaneous events goes first
#: (a departure freeing a queue slot, an arrival taking it) decides whose packet a full
#: DropTail queue drops: the two simulators break such ties differently, and that alone
#: moved the 30-ms flow of the 30-60-90-120 mix from 8 to 14 Mbit/s (Floyd & Jacobson's
#: phase effects). A few tens of microseconds per flow remove the ties and change no RTT by
#: more than 0.2 %.
TIE_BREAK_US = 17.37
#: Every RTT mix: the issue's, two equal pairs, and an even spread.
MIXES = {
    "20-40-80-160": [20, 40, 80, 160],
    "10-10-100-100": [10, 10, 100, 100],
    "30-60-90-120": [30, 60, 90, 120],
}
#: (label, cc, sack, newreno_timer) — what pathtwin runs; ns-2 runs the matching agent.
VARIANTS = [
    ("reno", "reno", False, None),
    ("newreno impatient", "newreno", False, "impatient"),
    ("newreno slow-but-steady", "newreno", False, "slow-but-steady"),
    ("sack", "newreno", True, None),
]


class Missing(Exception):
    """A peer is not installed; the message is the one line printed."""


def check_ns2() -> str:
    ns = shutil.which("ns")
    if not ns:
        raise Missing("ns-2 missing: no `ns` on PATH (DEBIAN_FRONTEND=noninteractive apt-get install -y ns2)")
    return ns


def peers(bench: str) -> str | None:
    """`ns`'s path when both peers are there; otherwise None, after printing in one line,
    prefixed with `bench` ("bench/tcp"), which one is missing."""
    try:
        ns = check_ns2()
        import pathtwin  # noqa: F401
    except Missing as e:
        print(f"{bench}: {e}", file=sys.stderr)
        return None
    except ImportError:
        print(f"{bench}: the pathtwin package is missing (pip install -e .)", file=sys.stderr)
        return None
    return ns


def start_times(n: int, draw: int) -> list[float]:
    """Flow start times: draw 0 is the plain i × 0.1 s stagger; later draws add a seeded
    uniform jitter of up to 0.1 s to each flow, so that the runs cover several phases."""
    if draw == 0:
        return [round(0.1 * i, 6) for i in range(n)]
    rng = random.Random(draw)
    return [round(0.1 * i + rng.uniform(0.0, 0.1), 6) for i in range(n)]


def path_rtts(rtts: list[int]) -> list[float]:
    """Each flow's base RTT in ms as both simulators build it: nominal plus 2 x (i + 1) x
    TIE_BREAK_US."""
    return [r + 2 * (i + 1) * TIE_BREAK_US / 1000 for i, r in enumerate(rtts)]


def ns2_variant(cc: str, sack: bool) -> str:
    return "sack" if sack else cc


def run_ns2(ns: str, cc: str, sack: bool, timer: str | None, duration: float, rtts: list[int],
            starts: list[float], trace: Path | None = None) -> list[dict]:
    """Runs bench/tcp/dumbbell.tcl; one dict per flow (rtt_ms, bytes, retransmits, timeouts)."""
    cmd = [ns, str(HERE / "dumbbell.tcl"), ns2_variant(cc, sack), timer or "impatient", f"{duration:g}",
           ",".join(f"{r:.5f}" for r in path_rtts(rtts)), ",".join(f"{s:g}" for s in starts)]
    if trace:
        cmd.append(str(trace))
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if r.returncode != 0:
        raise RuntimeError(f"ns-2 failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    line = next(x for x in reversed(r.stdout.splitlines()) if x.startswith("{"))
    flows = json.loads(line)["flows"]
    for f, r in zip(flows, rtts):
        f["rtt_ms"] = r
    return flows


def scenario_toml(cc: str, sack: bool, timer: str | None, duration: float, rtts: list[int],
                  starts: list[float], queue: str = BOTTLENECK["queue"], qdisc: list[str] | None = None,
                  sample_interval: str = "1s") -> str:
    """The same dumbbell as dumbbell.tcl, in pathtwin's `[[link]]` view. `queue` and `qdisc`
    (TOML lines such as `qdisc = "red"`) set the bottleneck's queue (bench/aqm)."""
    n = len(rtts)
    hosts = [f"s{i}" for i in range(n)] + [f"d{i}" for i in range(n)]
    lines = [
        "# Generated by bench/tcp/run.py: the ns-2 RTT-mix dumbbell (see README.md).",
        f"hosts = {json.dumps(hosts)}",
        'routers = ["r1", "r2"]',
        "",
        "[run]",
        f'duration = "{duration:g}s"',
        "seed = 1",
        f'sample_interval = "{sample_interval}"',
        "",
        "[tcp]",
        f'cc = "{cc}"',
        f"mss = {MSS}",
        f"sack = {'true' if sack else 'false'}",
        # ns-2's Sack1 is RFC 6675-style recovery without RACK or tail loss probes.
        "rack = false",
        "tlp = false",
        "delayed_ack = false",
        'min_rto = "200ms"',
        "initial_window = 2",
        'max_window = "1GB"',
        'rcv_window = "1GB"',
    ]
    if timer:
        lines.append(f'newreno_timer = "{timer}"')
    lines.append("")

    def link(a: str, b: str, rate: str, delay_ms: float, queue: str, extra: list[str] = ()) -> None:
        lines.extend(["[[link]]", f'between = ["{a}", "{b}"]', f'rate = "{rate}"',
                      f'delay = "{round(delay_ms * 1e6)}ns"', f'queue = "{queue}"', *extra, ""])

    link("r1", "r2", BOTTLENECK["rate"], float(BOTTLENECK["delay"].removesuffix("ms")), queue, qdisc or [])
    bn_ms = float(BOTTLENECK["delay"].removesuffix("ms"))
    for i, rtt in enumerate(path_rtts(rtts)):
        link(f"s{i}", "r1", ACCESS_RATE, rtt / 2 - bn_ms - DEST_ACCESS_DELAY_MS, "10000p")
        link("r2", f"d{i}", ACCESS_RATE, DEST_ACCESS_DELAY_MS, "10000p")
    for i in range(n):
        lines.extend(["[[flow]]", f'from = "s{i}"', f'to = "d{i}"', 'app = "bulk"', f'start = "{starts[i]:g}s"', ""])
    return "\n".join(lines)


def run_pathtwin(cc: str, sack: bool, timer: str | None, duration: float, rtts: list[int],
                 starts: list[float]) -> list[dict]:
    import pathtwin

    res = pathtwin.simulate(scenario_toml(cc, sack, timer, duration, rtts, starts))
    f = res.flows
    return [
        {"rtt_ms": rtts[i], "bytes": int(f["bytes_delivered"][i]), "retransmits": int(f["retransmits"][i]),
         "timeouts": int(f["timeouts"][i]), "fast_retransmits": int(f["fast_retransmits"][i])}
        for i in range(len(rtts))
    ]


@dataclass
class Row:
    mix: str
    variant: str
    rtt_ms: int
    pathtwin_mbps: float
    ns2_mbps: float
    pathtwin_timeouts: float
    ns2_timeouts: float

    @property
    def ratio(self) -> float:
        return self.pathtwin_mbps / self.ns2_mbps if self.ns2_mbps else float("nan")


def compare(ns: str, mix: str, rtts: list[int], variant: tuple, duration: float, draws: int) -> list[Row]:
    label, cc, sack, timer = variant
    pt_sum = [[0.0, 0.0] for _ in rtts]
    ns_sum = [[0.0, 0.0] for _ in rtts]
    for d in range(draws):
        starts = start_times(len(rtts), d)
        for acc, flows in ((pt_sum, run_pathtwin(cc, sack, timer, duration, rtts, starts)),
                           (ns_sum, run_ns2(ns, cc, sack, timer, duration, rtts, starts))):
            for i, fl in enumerate(flows):
                acc[i][0] += fl["bytes"] * 8 / duration / 1e6
                acc[i][1] += fl["timeouts"]
    return [Row(mix, label, rtts[i], pt_sum[i][0] / draws, ns_sum[i][0] / draws, pt_sum[i][1] / draws,
                ns_sum[i][1] / draws) for i in range(len(rtts))]


def fmt(rows: list[Row]) -> str:
    head = (f"{'mix (ms)':<15}{'variant':<25}{'rtt':>5}{'pathtwin Mb/s':>15}{'ns-2 Mb/s':>11}{'ratio':>7}"
            f"{'RTOs pt':>9}{'RTOs ns':>9}")
    out = [head, "-" * len(head)]
    for r in rows:
        flag = "" if abs(r.ratio - 1) <= 0.10 else "  *"
        out.append(f"{r.mix:<15}{r.variant:<25}{r.rtt_ms:>5}{r.pathtwin_mbps:>15.3f}{r.ns2_mbps:>11.3f}"
                   f"{r.ratio:>7.3f}{r.pathtwin_timeouts:>9.1f}{r.ns2_timeouts:>9.1f}{flag}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 s, 2 draws")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds (default 60)")
    ap.add_argument("--draws", type=int, default=None, help="start-time draws per configuration (default 5)")
    ap.add_argument("--mixes", default=",".join(MIXES), help="comma-separated subset of " + ",".join(MIXES))
    ap.add_argument("--variants", default=None, help="comma-separated subset of the variant labels")
    ap.add_argument("--fall-floyd", action="store_true", help="also print the Fall & Floyd table (runs cargo)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    ap.add_argument("--ns2-tick", type=float, default=None,
                    help="ns-2's tcpTick_ in seconds (default 0.001, pathtwin's clock; ns-2's own default is 0.01)")
    args = ap.parse_args(argv)
    duration = args.duration or (20.0 if args.quick else 60.0)
    draws = args.draws or (2 if args.quick else 5)
    ns = peers("bench/tcp")
    if ns is None:
        return 2
    if args.ns2_tick is not None:
        os.environ["PATHTWIN_NS2_TCPTICK"] = f"{args.ns2_tick:g}"
    wanted = [v.strip() for v in args.variants.split(",")] if args.variants else [v[0] for v in VARIANTS]
    rows = []
    for mix in [m.strip() for m in args.mixes.split(",")]:
        for v in VARIANTS:
            if v[0] in wanted:
                print(f"running {mix} {v[0]} ...", file=sys.stderr, flush=True)
                rows.extend(compare(ns, mix, MIXES[mix], v, duration, draws))
    print(f"RTT-mix dumbbell: 20 Mbit/s 2 ms bottleneck, 50p DropTail, {duration:g} s, mean of {draws} "
          f"start-time draws; goodput per flow (* = more than 10 % from ns-2)")
    print(fmt(rows))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ | {"ratio": r.ratio} for r in rows], indent=2))
    if args.fall_floyd:
        print()
        r = subprocess.run(["cargo", "test", "-q", "-p", "pathtwin-tcp", "--test", "ns2_fall_floyd", "--",
                            "--nocapture", "--test-threads=1"], cwd=REPO, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"bench/tcp: the Fall & Floyd comparison failed:\n{r.stdout}{r.stderr}", file=sys.stderr)
        print("\n".join(line for line in r.stdout.splitlines()
                        if line.strip(". ") and not line.startswith(("running", "test result"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
