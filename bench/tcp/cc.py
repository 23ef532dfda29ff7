#!/usr/bin/env python3
"""pathtwin's simulated Vegas, CUBIC and BIC against ns-2 on dumbbells of 1, 2 and 10 flows
(see README.md beside this file, "Vegas, CUBIC and BIC").

ns-2 runs its own `Agent/TCP/Vegas` and, for CUBIC and BIC, `Agent/TCP/Linux` (ns-2.35's
port of the Linux 2.6 modules) with `select_ca cubic|bic` and a SACK sink; pathtwin runs
`cc = "vegas"` (preset "ns2", no SACK), `"cubic"` (preset "ns2": Linux 2.6's constants as
ns-2.35's port runs them, HyStart off) and `"bic"` (Linux 2.6 defaults) with SACK and ns-2's
TCP-Linux loss recovery. Per flow: payload delivered in order by the end, pathtwin vs ns-2
and the ratio; for the bottleneck: the mean number of packets in it (waiting or on the link)
in both and the ratio. Each draw deals both simulators the same start times and, for CUBIC
and BIC, the same RTT phases (rtt_offsets). The settings that must match (packet size,
window, RTO, RTT clock, the tie-breaking delays) are those of run.py, whose helpers this
script reuses.

    python3 bench/tcp/cc.py                  # 60 s from 20 s on, 8 draws, 1/2/10 flows x vegas/cubic/bic
    python3 bench/tcp/cc.py --draws 24       # the README's table, with the paired comparison and CIs
    python3 bench/tcp/cc.py --phase-sweep    # two flows, the 80-ms flow moved by 0-0.5 ms
    python3 bench/tcp/cc.py --quick          # 20 s from 5 s on, 1 draw
    python3 bench/tcp/cc.py --cc vegas --flows 2

Needs `ns` (Debian `ns2`) and the pathtwin Python package. A benchmark, not a test: it
prints the table and exits 0 whatever the ratios are.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load_run():
    """run.py's helpers (start times, tie-breaking delays, ns-2 check, constants)."""
    if "bench_tcp_run" in sys.modules:
        return sys.modules["bench_tcp_run"]
    spec = importlib.util.spec_from_file_location("bench_tcp_run", HERE / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


run = _load_run()

#: Packets that may wait at the bottleneck, per controller. Vegas: large enough that it never
#: fills (α 1, β 3 segments per flow), so that the comparison isolates congestion avoidance
#: (ns-2's Vegas cuts to 3/4 on a fast retransmit, pathtwin's halves, as Linux's). CUBIC and
#: BIC: 1.5 BDPs of the 40-ms path, so that losses come every few seconds.
QUEUE_PKTS = {"vegas": 400, "cubic": 100, "bic": 100}
#: Goodput and queue are measured from here on (steady state): the first slow start differs
#: by design (ns-2's Vegas averages the round's RTTs and leaves slow start early; ns-2's Linux
#: agent takes seconds to repair the first overshoot), see README.md.
WARMUP_S = 20.0
#: Base RTTs (ms) per scenario: the flow counts of the issue, with different RTTs so that
#: the order of the flows means something.
SCENARIOS = {
    1: [40],
    2: [40, 80],
    10: [20, 30, 40, 50, 60, 70, 80, 90, 100, 110],
}
CCS = ("vegas", "cubic", "bic")
#: The sampling interval of pathtwin's queue_series, whose snapshot mean is the time mean.
QUEUE_SAMPLE = "2ms"
#: One packet's service time at the bottleneck (1500 bytes at 20 Mbit/s), in ms. A long-lived
#: flow's packets reach a full DropTail queue at a fixed offset from its departures, its RTT
#: modulo this time, and that phase decides whose packets the queue drops (Floyd & Jacobson,
#: "On Traffic Phase Effects in Packet-Switched Gateways", 1992): moving the 80-ms flow of the
#: two-flow dumbbell by 0.1 ms moves it from 2.0 to 14.0 Mbit/s in ns-2 (README.md, "Phase
#: effects"). Each draw after the first adds to every flow's RTT an offset drawn uniformly
#: from one service time, in both simulators alike, so that the draws average over phases
#: instead of comparing one arbitrary phase.
PHASE_SPAN_MS = (run.MSS + 40) * 8 / 20e6 * 1e3

#: Confidence of ratio_ci's intervals (Result.ratio_cis).
CI_LEVEL = 0.95


def rtt_offsets(n: int, draw: int) -> list[float]:
    """Per-flow RTT offsets in ms for a draw: none in draw 0, else uniform in
    [0, PHASE_SPAN_MS), seeded by the draw (independent of the start-time jitter's stream)."""
    if draw == 0:
        return [0.0] * n
    rng = random.Random(f"phase-{draw}")
    return [round(rng.uniform(0.0, PHASE_SPAN_MS), 5) for _ in range(n)]


def run_ns2(ns: str, cc: str, duration: float, rtts: list[int], starts: list[float],
            queue: int | None = None, warmup: float = 0.0) -> dict:
    """Runs cc_dumbbell.tcl; per flow bytes and timeouts, and the bottleneck's mean packets
    (waiting per the queue monitor, plus the fraction of time one was on the link)."""
    queue = queue or QUEUE_PKTS[cc]
    cmd = [ns, str(HERE / "cc_dumbbell.tcl"), cc, f"{duration:g}", ",".join(f"{r:.5f}" for r in run.path_rtts(rtts)),
           ",".join(f"{s:g}" for s in starts), str(queue), f"{warmup:g}"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if r.returncode != 0:
        raise RuntimeError(f"ns-2 failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    out = json.loads(next(x for x in reversed(r.stdout.splitlines()) if x.startswith("{")))
    return {"bytes": [f["bytes"] for f in out["flows"]], "timeouts": [f["timeouts"] for f in out["flows"]],
            "queue_pkts": out["queue_waiting"] + out["link_busy"]}


#: Loss-recovery settings of the SACK (CUBIC, BIC) runs. By default pathtwin recovers as
#: ns-2.35's Agent/TCP/Linux does (read in its source; README.md, part 3, "Why pathtwin timed
#: out more"), so that the comparison isolates the congestion controllers:
#: - `[tcp] lost_retransmit`: Linux 2.6's detection of lost retransmissions
#:   (tcp_mark_lost_retrans), which ns-2's Agent/TCP/Linux models;
#: - DupThresh 4: ns-2.35's TCP-Linux scoreboard deems a packet lost only once 4 packets
#:   above it are SACKed (`ScoreBoard1::UpdateScoreBoard`: seq <= fack_ - (3 + 1)); Linux's
#:   FACK rule (fackets_out > reordering) needs 3.
#: `--rfc-recovery` turns both off (RFC 6675 recovery, DupThresh 3), `--dupthresh N` sets N.
#: `--ns2-timer`: `[tcp] ns2_rto_restart_every_ack`, ns-2's TCP-Linux restarts the
#: retransmission timer on every ACK, duplicate ACKs included (neither RFC 6298 nor Linux);
#: off by default (measured: no closer to ns-2, README.md).
LOST_RETRANSMIT = True
#: pathtwin's CUBIC preset: "ns2" (Linux 2.6's constants without the RTT look-ahead, as
#: ns-2.35's port runs them); `--cubic-preset linux-2.6` keeps the look-ahead.
CUBIC_PRESET = "ns2"
NS2_RTO_RESTART = False
#: Which controllers' draws also draw each flow's phase (rtt_offsets): the loss-based ones,
#: whose flows fill the DropTail queue and lose packets by phase; Vegas's never fills its
#: (README.md, "Phase effects", has Vegas with and without). `--phase on|off` overrides.
PHASE_DRAWS = {"cubic": True, "bic": True, "vegas": False}
DUPTHRESH = 4


def scenario_toml(cc: str, duration: float, rtts: list[int], starts: list[float], queue: int | None = None) -> str:
    """The same dumbbell as cc_dumbbell.tcl, in pathtwin's `[[link]]` view."""
    n = len(rtts)
    queue = queue or QUEUE_PKTS[cc]
    hosts = [f"s{i}" for i in range(n)] + [f"d{i}" for i in range(n)]
    sack = cc != "vegas"  # ns-2's Vegas runs with a plain sink; its Linux agent with Sack1
    lines = [
        "# Generated by bench/tcp/cc.py: the ns-2 Vegas/CUBIC/BIC dumbbell (see README.md).",
        f"hosts = {json.dumps(hosts)}",
        'routers = ["r1", "r2"]',
        "",
        "[run]",
        f'duration = "{duration:g}s"',
        "seed = 1",
        f'sample_interval = "{QUEUE_SAMPLE}"',
        "",
        "[tcp]",
        f'cc = "{cc}"',
        f"mss = {run.MSS}",
        f"sack = {'true' if sack else 'false'}",
        "rack = false",
        "tlp = false",
        "delayed_ack = false",
        'min_rto = "200ms"',
        # ns-2's Vegas sends its first segment alone (its output() makes no SYN of it) and,
        # at the second ACK, sets cwnd to windowInit_ (2) and grows it by one: windows of 1,
        # 1, 3, 3, 6, 6, 12 ... After pathtwin's handshake an initial window of 3 gives the
        # same 3, 3, 6, 6, 12 ... (README.md, part 3), so slow start ends where ns-2's does.
        f"initial_window = {3 if cc == 'vegas' else 2}",
        'max_window = "1GB"',
        'rcv_window = "1GB"',
        "",
    ]
    if sack and LOST_RETRANSMIT:
        # ns-2's Agent/TCP/Linux marks a retransmission lost once data sent after it is
        # SACKed, as Linux 2.6 (tcp_mark_lost_retrans); RFC 6675 waits for the timer.
        lines.insert(lines.index("tlp = false") + 1, "lost_retransmit = true")
    if sack and DUPTHRESH != 3:
        lines.insert(lines.index("tlp = false") + 1, f"dupack_threshold = {DUPTHRESH}")
    if sack and NS2_RTO_RESTART:
        # ns-2's Agent/TCP/Linux restarts the retransmission timer on every ACK (dupACKs
        # too); RFC 6298 and Linux only on ACKs of new data (README.md, part 3).
        lines.insert(lines.index("tlp = false") + 1, "ns2_rto_restart_every_ack = true")
    if cc == "vegas":
        lines += ["[tcp.vegas]", 'preset = "ns2"', 'rules = "ns2"', ""]
    elif cc == "cubic":
        # ns-2.35's tcp_cubic.c: β = 819/1024, no HyStart (Linux 2.6.29), and no look-ahead
        # (its bictcp_acked never records the minimum RTT that bictcp_update adds).
        lines += ["[tcp.cubic]", f'preset = "{CUBIC_PRESET}"', "hystart = false", ""]

    def link(a: str, b: str, rate: str, delay_ms: float, q: str) -> None:
        lines.extend(["[[link]]", f'between = ["{a}", "{b}"]', f'rate = "{rate}"',
                      f'delay = "{round(delay_ms * 1e6)}ns"', f'queue = "{q}"', ""])

    bn_ms = float(run.BOTTLENECK["delay"].removesuffix("ms"))
    link("r1", "r2", run.BOTTLENECK["rate"], bn_ms, f"{queue}p")
    for i, rtt in enumerate(run.path_rtts(rtts)):
        link(f"s{i}", "r1", run.ACCESS_RATE, rtt / 2 - bn_ms - run.DEST_ACCESS_DELAY_MS, "10000p")
        link("r2", f"d{i}", run.ACCESS_RATE, run.DEST_ACCESS_DELAY_MS, "10000p")
    for i in range(n):
        lines.extend(["[[flow]]", f'from = "s{i}"', f'to = "d{i}"', 'app = "bulk"', f'start = "{starts[i]:g}s"', ""])
    return "\n".join(lines)


BOTTLENECK_QUEUE = "r1->r2"


def run_pathtwin(cc: str, duration: float, rtts: list[int], starts: list[float], queue: int | None = None,
                 warmup: float = 0.0) -> dict:
    """The same measurements as run_ns2, over warmup..duration: bytes delivered in order
    (flow_series' delivered_bytes at the last sample before warmup subtracted), and the mean
    of the bottleneck's queue_series `packets` snapshots from warmup on.

    The series are read as columns with numpy, not as DataFrames row by row: a 60-s run has
    300 000 queue samples, and building and walking them in Python took twice as long as
    the simulation itself (2.3 s against 0.5 s per draw; the phase draws of
    tests/test_ns2_cc.py run hundreds)."""
    import numpy as np
    import pathtwin

    res = pathtwin.simulate(scenario_toml(cc, duration, rtts, starts, queue))
    f = res.table_columns("flows")
    qs = res.table_columns("queue_series")
    names = np.asarray(qs["queue"])
    at = (names == BOTTLENECK_QUEUE) & (np.asarray(qs["time_s"], dtype=float) > warmup)
    if not at.any():
        raise RuntimeError(f"no queue named {BOTTLENECK_QUEUE!r} in queue_series (have {sorted(set(names.tolist()))})")
    pk = np.asarray(qs["packets"], dtype=float)[at]
    before = [0] * len(rtts)
    if warmup > 0:
        fs = res.table_columns("flow_series")
        flow = np.asarray(fs["flow"], dtype=np.int64)
        early = np.asarray(fs["time_s"], dtype=float) <= warmup + 1e-9
        delivered = np.asarray(fs["delivered_bytes"], dtype=np.int64)
        for i in range(len(rtts)):
            # The last sample at or before the warm-up's end, in the table's order.
            rows = np.flatnonzero(early & (flow == i))
            if len(rows):
                before[i] = int(delivered[rows[-1]])
    return {"bytes": [int(f["bytes_delivered"][i]) - before[i] for i in range(len(rtts))],
            # Whole run, as cc_dumbbell.tcl reports them (flow_series has no timeout column).
            "timeouts": [int(f["timeouts"][i]) for i in range(len(rtts))],
            "queue_pkts": float(pk.sum()) / len(pk)}


@dataclass
class Result:
    """One scenario × controller, means over the draws."""
    flows: int
    cc: str
    rtts: list[int]
    pathtwin_mbps: list[float]
    ns2_mbps: list[float]
    pathtwin_timeouts: list[float]
    ns2_timeouts: list[float]
    pathtwin_queue: float
    ns2_queue: float
    per_draw: list = field(default_factory=list)
    #: Seconds over which goodput is measured (duration − warmup).
    measured_s: float = 0.0

    def ratios(self) -> list[float]:
        return [p / n if n else float("nan") for p, n in zip(self.pathtwin_mbps, self.ns2_mbps)]

    @property
    def queue_ratio(self) -> float:
        return self.pathtwin_queue / self.ns2_queue if self.ns2_queue else float("nan")

    def draws_mbps(self, who: str) -> list[list[float]]:
        """Per flow, its goodput in every draw (Mbit/s); `who` is "pathtwin" or "ns2"."""
        return [[mbps(d[who]["bytes"][i], self.measured_s) for d in self.per_draw] for i in range(self.flows)]

    def paired_t(self) -> list[float]:
        """Per flow, the paired t of the per-draw goodput differences, pathtwin − ns-2 (their
        mean ÷ its standard error; nan below two draws). Each draw deals both simulators the
        same start times and phases, so the draw-to-draw swing of a flow's share (a factor of
        ten where the phase decides which flow a full queue favours) cancels in the
        difference: |t| ≥ 3 is a difference the draws cannot explain."""
        return [paired_t(pt, ns) for pt, ns in zip(self.draws_mbps("pathtwin"), self.draws_mbps("ns2"))]

    def ratio_cis(self, level: float = CI_LEVEL) -> list[tuple[float, float]]:
        """Per flow, the confidence interval of its ratio (pathtwin's mean goodput ÷ ns-2's)
        over the paired draws (ratio_ci)."""
        return [ratio_ci(pt, ns, level) for pt, ns in zip(self.draws_mbps("pathtwin"), self.draws_mbps("ns2"))]

    def same_winner(self) -> int:
        """Draws in which the flow with the most goodput is the same flow in both simulators."""
        def top(goodputs: list[int]) -> int:
            return max(range(len(goodputs)), key=goodputs.__getitem__)
        return sum(top(d["pathtwin"]["bytes"]) == top(d["ns2"]["bytes"]) for d in self.per_draw)

    def spread(self) -> list[dict]:
        """Per flow, how the difference from ns-2 compares with the draws' own spread.

        - `ns2_halves`, `pathtwin_halves`: mean over the first half of the draws ÷ mean over
          the second half, in each simulator. How far from 1 these are is how well the
          reference reproduces itself with half the draws: a bar tighter than that cannot be
          told from the start-time draw.
        - `t`: Welch's t of the two simulators' per-draw goodputs (difference of means ÷ its
          standard error); |t| ≥ 3 is a difference the draws cannot explain.
        """
        rows = []
        for pt, ns in zip(self.draws_mbps("pathtwin"), self.draws_mbps("ns2")):
            rows.append({"ns2_halves": half_ratio(ns), "pathtwin_halves": half_ratio(pt), "t": welch_t(pt, ns)})
        return rows


def mbps(nbytes: int, seconds: float) -> float:
    """Goodput in Mbit/s of `nbytes` delivered over `seconds`."""
    return nbytes * 8 / seconds / 1e6


def half_ratio(xs: list[float]) -> float:
    """Mean of the first half of `xs` ÷ mean of the second half (nan below two values)."""
    h = len(xs) // 2
    if h == 0:
        return float("nan")
    a, b = statistics.fmean(xs[:h]), statistics.fmean(xs[h:2 * h])
    return a / b if b else float("nan")


def t_ratio(diff: float, se: float) -> float:
    """A t statistic, `diff` ÷ its standard error `se`: ±inf when the samples are constant
    and differ (se = 0), 0 when they are constant and agree."""
    if se == 0:
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / se


def welch_t(a: list[float], b: list[float]) -> float:
    """Welch's t statistic of two samples' means (nan below two values each)."""
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    se = (statistics.variance(a, ma) / len(a) + statistics.variance(b, mb) / len(b)) ** 0.5
    return t_ratio(ma - mb, se)


def paired_t(a: list[float], b: list[float]) -> float:
    """The paired t statistic of `a` − `b`, draw by draw (nan below two pairs)."""
    diffs = [x - y for x, y in zip(a, b)]
    if len(diffs) < 2:
        return float("nan")
    mean = statistics.fmean(diffs)
    return t_ratio(mean, statistics.stdev(diffs, mean) / math.sqrt(len(diffs)))


def t_quantile(p: float, df: int) -> float:
    """The `p` quantile (p ≥ 0.5) of Student's t with `df` ≥ 1 degrees of freedom: its
    distribution function in closed form for whole df (Abramowitz & Stegun 26.7.3-4, with
    θ = atan(t/√df)), inverted by bisection."""
    if not 0.5 <= p < 1 or df < 1:
        raise ValueError(f"t_quantile: p {p} outside [0.5, 1) or df {df} below 1")

    def central(t: float) -> float:  # P(|T| < t)
        th = math.atan(t / math.sqrt(df))
        c2 = math.cos(th) ** 2
        if df % 2:
            term = total = 1.0  # 1 + 2/3 c² + (2·4)/(3·5) c⁴ + ... up to c^(df−3)
            for k in range(1, (df - 1) // 2):
                term *= c2 * (2 * k) / (2 * k + 1)
                total += term
            return 2 / math.pi * (th + (math.sin(th) * math.cos(th) * total if df > 1 else 0.0))
        term = total = 1.0  # 1 + 1/2 c² + (1·3)/(2·4) c⁴ + ... up to c^(df−2)
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return math.sin(th) * total

    lo, hi = 0.0, 1.0
    while central(hi) < 2 * p - 1:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if central(mid) < 2 * p - 1 else (lo, mid)
    return (lo + hi) / 2


def ratio_ci(a: list[float], b: list[float], level: float = CI_LEVEL) -> tuple[float, float]:
    """Confidence interval of mean(a) ÷ mean(b) from paired samples (draw i of `a` and of `b`
    dealt the same starts and phases): Fieller's interval, the ratios R for which the paired
    t of a − R·b is within Student's t quantile (n − 1 degrees of freedom) of 0, i.e. the
    paired t test of "pathtwin's goodput is R times ns-2's", inverted.

    Why this one: the bar is on the ratio of the mean goodputs (Result.ratios), and each
    draw's pair shares its phase, so a − R·b cancels the draw-to-draw swing as paired_t's
    differences do; with a, b normal enough in their means (24 draws and more) the interval
    is exact, where the delta method (R ± t·sd(a − R·b)/(√n·mean(b)), its first-order
    form) is symmetric by approximation. Per-draw log ratios would estimate the geometric
    mean of the per-draw ratios instead, which is not the ratio of means and is dominated by
    the draws in which a flow that loses the phase gets a tenth of a Mbit/s.

    Solves (ā − R·b̄)² = q²·(s_aa − 2R·s_ab + R²·s_bb)/n for R (q the t quantile, s the
    sample (co)variances). (nan, nan) below two pairs; (−inf, inf) when b̄ itself is not
    resolved from 0 (b̄² ≤ q²·s_bb/n), where no bounded interval exists."""
    n = len(a)
    if n < 2 or len(b) != n:
        return (float("nan"), float("nan"))
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    saa = statistics.variance(a, ma)
    sbb = statistics.variance(b, mb)
    sab = sum((x - ma) * (y - mb) for x, y in zip(a, b)) / (n - 1)
    g = t_quantile(0.5 + level / 2, n - 1) ** 2 / n
    # (b̄² − g·s_bb)·R² − 2(ā·b̄ − g·s_ab)·R + (ā² − g·s_aa) = 0
    qa, qb, qc = mb * mb - g * sbb, ma * mb - g * sab, ma * ma - g * saa
    if qa <= 0:
        return (-math.inf, math.inf)
    root = math.sqrt(max(qb * qb - qa * qc, 0.0))
    return ((qb - root) / qa, (qb + root) / qa)


def compare(ns: str, cc: str, nflows: int, duration: float, draws: int, queue: int | None = None,
            warmup: float = 0.0) -> Result:
    rtts = SCENARIOS[nflows]
    acc = {k: [0.0] * nflows for k in ("pm", "nm", "pt", "nt")}
    pq = nq = 0.0
    per_draw = []
    for d in range(draws):
        starts = run.start_times(nflows, d)
        drawn = [r + o for r, o in zip(rtts, rtt_offsets(nflows, d))] if PHASE_DRAWS[cc] else rtts
        p = run_pathtwin(cc, duration, drawn, starts, queue, warmup)
        n = run_ns2(ns, cc, duration, drawn, starts, queue, warmup)
        per_draw.append({"starts": starts, "rtts": drawn, "pathtwin": p, "ns2": n})
        for i in range(nflows):
            acc["pm"][i] += mbps(p["bytes"][i], duration - warmup) / draws
            acc["nm"][i] += mbps(n["bytes"][i], duration - warmup) / draws
            acc["pt"][i] += p["timeouts"][i] / draws
            acc["nt"][i] += n["timeouts"][i] / draws
        pq += p["queue_pkts"] / draws
        nq += n["queue_pkts"] / draws
    return Result(nflows, cc, rtts, acc["pm"], acc["nm"], acc["pt"], acc["nt"], pq, nq, per_draw, duration - warmup)


def fmt(results: list[Result]) -> str:
    head = (f"{'flows':>5} {'cc':<6}{'rtt':>5}{'pathtwin Mb/s':>15}{'ns-2 Mb/s':>11}{'ratio':>7}"
            f"{'RTOs pt':>9}{'RTOs ns':>9}{'queue pt':>10}{'queue ns':>10}{'q ratio':>9}")
    out = [head, "-" * len(head)]
    for r in results:
        for i, ratio in enumerate(r.ratios()):
            flag = "" if abs(ratio - 1) <= 0.10 else " *"
            q = (f"{r.pathtwin_queue:>10.1f}{r.ns2_queue:>10.1f}{r.queue_ratio:>9.3f}"
                 + ("" if abs(r.queue_ratio - 1) <= 0.20 else " q*")) if i == 0 else ""
            out.append(f"{r.flows:>5} {r.cc:<6}{r.rtts[i]:>5}{r.pathtwin_mbps[i]:>15.3f}{r.ns2_mbps[i]:>11.3f}"
                       f"{ratio:>7.3f}{r.pathtwin_timeouts[i]:>9.1f}{r.ns2_timeouts[i]:>9.1f}{q}{flag}")
    return "\n".join(out)


def fmt_spread(results: list[Result]) -> str:
    """Each flow's ratio to ns-2 beside the draws' own spread (see Result.spread) and the
    draw-by-draw comparison (Result.paired_t, Result.same_winner)."""
    head = (f"{'flows':>5} {'cc':<6}{'rtt':>5}{'ratio':>7}{'ns-2 1st/2nd half':>19}"
            f"{'pathtwin 1st/2nd half':>23}{'welch t':>9}{'paired t':>10}{f'{CI_LEVEL:.0%} CI':>16}")
    out = [head, "-" * len(head)]
    for r in results:
        for i, (ratio, sp, t, ci) in enumerate(zip(r.ratios(), r.spread(), r.paired_t(), r.ratio_cis())):
            flag = "" if 0.9 <= ci[0] <= ci[1] <= 1.1 else " *"
            out.append(f"{r.flows:>5} {r.cc:<6}{r.rtts[i]:>5}{ratio:>7.3f}{sp['ns2_halves']:>19.3f}"
                       f"{sp['pathtwin_halves']:>23.3f}{sp['t']:>9.2f}{t:>10.2f}"
                       f"{f'{ci[0]:.3f}-{ci[1]:.3f}':>16}{flag}")
        if r.flows > 1:
            out.append(f"{'':>12}the same flow fastest in both: {r.same_winner()} of {len(r.per_draw)} draws")
    return "\n".join(out)


#: Offsets (ms) added to the 80-ms flow's RTT by `--phase-sweep`: within one service time.
SWEEP_OFFSETS_MS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def phase_sweep(ns: str, cc: str, duration: float, warmup: float) -> str:
    """The two-flow dumbbell with the 80-ms flow's RTT moved by fractions of a service time
    (draw 0's start times): each flow's goodput in both simulators, per offset."""
    head = f"{'cc':<6}{'80-ms flow +ms':>15}{'pathtwin 40 / 80 ms':>22}{'ns-2 40 / 80 ms':>18}"
    out = [head, "-" * len(head)]
    rtts = SCENARIOS[2]
    for off in SWEEP_OFFSETS_MS:
        drawn = [rtts[0], rtts[1] + off]
        starts = run.start_times(2, 0)
        p = run_pathtwin(cc, duration, drawn, starts, None, warmup)
        n = run_ns2(ns, cc, duration, drawn, starts, None, warmup)
        pm = [mbps(b, duration - warmup) for b in p["bytes"]]
        nm = [mbps(b, duration - warmup) for b in n["bytes"]]
        out.append(f"{cc:<6}{off:>15.1f}{pm[0]:>14.2f} / {pm[1]:>5.2f}{nm[0]:>10.2f} / {nm[1]:>5.2f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    global LOST_RETRANSMIT, NS2_RTO_RESTART, DUPTHRESH, PHASE_DRAWS, CUBIC_PRESET
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 s, 1 draw")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds (default 60)")
    ap.add_argument("--draws", type=int, default=None,
                    help="draws per case (default 8: with phase draws a flow's share swings by a factor of ten "
                         "from draw to draw, and from 4 draws on the paired comparison is printed)")
    ap.add_argument("--cc", default=",".join(CCS), help="comma-separated subset of " + ",".join(CCS))
    ap.add_argument("--flows", default=",".join(map(str, SCENARIOS)), help="comma-separated subset of 1,2,10")
    ap.add_argument("--queue", type=int, default=None, help=f"bottleneck buffer in packets (default {QUEUE_PKTS})")
    ap.add_argument("--warmup", type=float, default=None,
                    help=f"measure goodput and queue from this time on (default {WARMUP_S:g} s, 5 s with --quick; RTOs are whole-run)")
    ap.add_argument("--rfc-recovery", action="store_true",
                    help="CUBIC/BIC: RFC 6675 recovery with DupThresh 3, without Linux 2.6's lost-retransmission "
                         "detection (default: ns-2's TCP-Linux recovery)")
    ap.add_argument("--ns2-timer", action="store_true",
                    help="CUBIC/BIC: restart the RTO timer on every ACK, as ns-2's TCP-Linux")
    ap.add_argument("--dupthresh", type=int, default=None,
                    help=f"CUBIC/BIC: pathtwin's DupThresh (default {DUPTHRESH} as ns-2's TCP-Linux, 3 with --rfc-recovery)")
    ap.add_argument("--cubic-preset", choices=("ns2", "linux-2.6", "rfc9438"), default=CUBIC_PRESET,
                    help=f"pathtwin's [tcp.cubic] preset (default {CUBIC_PRESET}: as ns-2.35's port, no RTT look-ahead)")
    ap.add_argument("--phase", choices=("auto", "on", "off"), default="auto",
                    help="whether draws after the first also move each flow's RTT within one service time "
                         "(auto: for CUBIC and BIC, not for Vegas)")
    ap.add_argument("--phase-sweep", action="store_true",
                    help="two flows only: move the 80-ms flow's RTT by 0-0.5 ms and print both simulators' goodputs")
    ap.add_argument("--json", type=Path, default=None, help="also write the results (with every draw) to this file")
    args = ap.parse_args(argv)
    LOST_RETRANSMIT = not args.rfc_recovery
    CUBIC_PRESET = args.cubic_preset
    NS2_RTO_RESTART = args.ns2_timer
    DUPTHRESH = args.dupthresh or (3 if args.rfc_recovery else 4)
    if args.phase != "auto":
        PHASE_DRAWS = dict.fromkeys(CCS, args.phase == "on")
    duration = args.duration or (20.0 if args.quick else 60.0)
    draws = args.draws or (1 if args.quick else 8)
    if args.warmup is None:
        args.warmup = 5.0 if args.quick else WARMUP_S
    if args.warmup >= duration:
        print(f"bench/tcp: --warmup {args.warmup:g} must be below the duration {duration:g}", file=sys.stderr)
        return 2
    ns = run.peers("bench/tcp")
    if ns is None:
        return 2
    ccs = [c.strip() for c in args.cc.split(",")]
    unknown = [c for c in ccs if c not in CCS]
    if unknown:
        print(f"bench/tcp: --cc: unknown controller {unknown[0]!r} (have {', '.join(CCS)})", file=sys.stderr)
        return 2
    if args.phase_sweep:
        for cc in ccs:
            print(f"Two flows, {duration:g} s measured from {args.warmup:g} s; goodput in Mbit/s")
            print(phase_sweep(ns, cc, duration, args.warmup))
        return 0
    results = []
    for n in [int(x) for x in args.flows.split(",")]:
        if n not in SCENARIOS:
            print(f"bench/tcp: --flows: no scenario with {n} flows (have {', '.join(map(str, SCENARIOS))})", file=sys.stderr)
            return 2
        for cc in ccs:
            print(f"running {n} flows {cc} ...", file=sys.stderr, flush=True)
            results.append(compare(ns, cc, n, duration, draws, args.queue, args.warmup))
    buffers = f"{args.queue}p" if args.queue else ", ".join(f"{q}p ({c})" for c, q in QUEUE_PKTS.items())
    print(f"Vegas/CUBIC/BIC dumbbell: 20 Mbit/s 2 ms bottleneck, {buffers} DropTail, {duration:g} s (measured from "
          f"{args.warmup:g} s), mean of "
          f"{draws} draws (start times; RTT phases too for {', '.join(c for c in CCS if PHASE_DRAWS[c]) or 'none'}); goodput per flow (* = more than 10 % from ns-2), mean packets in the "
          f"bottleneck (q* = more than 20 %)")
    print(fmt(results))
    if draws >= 4:
        print(f"\nThe same flows against the spread of the {draws} draws: each simulator's mean over the first half "
              f"of the draws ÷ its mean over the second half, Welch's t of the per-draw goodputs, and the paired t "
              f"of the per-draw differences (each draw deals both simulators the same starts and phases), and the "
              f"{CI_LEVEL:.0%} confidence interval of the ratio (ratio_ci; * = not inside 0.9-1.1)")
        print(fmt_spread(results))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ | {"ratios": r.ratios(), "queue_ratio": r.queue_ratio,
                                                        "spread": r.spread(), "paired_t": r.paired_t(),
                                                        "ratio_cis": r.ratio_cis()}
                                         for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
