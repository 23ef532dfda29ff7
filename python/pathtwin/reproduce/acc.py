"""Reproductions of "Accumulation-based Congestion Control" (Wang, Kalyanaraman et al.;
``shared/papers/acc-monaco-accumulation-congestion-control.txt``): Monaco against Vegas.

- ``acc-4a`` (§IV-A): one 30 Mbit/s, 2 ms bottleneck shared by three sets of 10/5/5 flows
  (one-way delays 4/9/14 ms) that start at 0/10/20 s and stop at 30/40/50 s, with a 90-packet
  buffer (no loss, ~3 packets queued per flow, per-flow rates 3 → 2 → 1.5 → 3 → 6 Mbit/s) and
  a 55-packet buffer (losses and halving between 20 and 30 s).
- ``acc-4b`` (§IV-B): a parking lot of N = 2..9 bottlenecks (100 Mbit/s, 4 ms) crossed by
  three long flows of very different RTTs, with short flows on every single bottleneck; per
  flow rates, utilisation and queue per bottleneck beside the allocation the paper's
  optimisation framework (§II-B) predicts.

Choices the paper leaves open, each said where it is made: where the extra one-way delay of
sets 2 and 3 sits (the destination's access link), how many short flows share each
bottleneck in §IV-B (``short_per_link``), and the long flows' access delays. Packets are
1000 bytes on the wire, as in the paper's ns-2 runs (MSS 960 plus 40 bytes of headers), and
Monaco's target accumulation is 3 packets = 3000 bytes.

- ``acc-3c`` (§III-C): Vegas's two failures, an overestimated rtt_p and reverse-path
  congestion, against Monaco on a 10 Mbit/s dumbbell.

The reproductions describe runs as config dicts and read only the result tables; the
engines know nothing of them. All three are registered (``registry``); they run in the
simulator only (Monaco and Vegas are its controllers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..config import parse_quantity
from ..sim import simulate
from .registry import PaperValue, Progress, Reproduction, Request, register
from .text import print_table

#: 1000-byte packets on the wire (the paper's ns-2 packet size): 960 bytes of payload plus
#: 20 bytes of IP and 20 of TCP header.
PACKET_BYTES = 1000
MSS = 960

#: §IV-A's phases (seconds) and the per-flow rate the paper reports in each (Mbit/s), per set;
#: None where the set is not running.
PHASES_4A = [(0, 10), (10, 20), (20, 30), (30, 40), (40, 50)]
PAPER_RATE_4A = {
    1: [3.0, 2.0, 1.5, None, None],
    2: [None, 2.0, 1.5, 3.0, None],
    3: [None, None, 1.5, 3.0, 6.0],
}
#: Flows per set, their one-way propagation delays (ms) and their start/stop times (s).
SETS_4A = {1: (10, 4.0, 0, 30), 2: (5, 9.0, 10, 40), 3: (5, 14.0, 20, 50)}
#: Monaco's target accumulation (packets) and Vegas's band, which the queue is read against.
TARGET_PACKETS = 3.0
#: ns-2's `windowInit_` when the paper's simulations ran (ALGORITHMS.md §8).
NS2_INITIAL_WINDOW = 2
#: The controllers the reproductions compare, in the paper's order.
PAPER_CONTROLLERS = ("monaco", "vegas")


def controllers() -> tuple[str, ...]:
    """The paper's controllers this simulator runs (a build without one of them leaves its runs
    out, and the CLI says so)."""
    from .. import _native

    have = set(_native.simulator_congestion_controls())
    return tuple(c for c in PAPER_CONTROLLERS if c in have)


def _tcp(cc: str, initial_window: Optional[int] = None) -> dict:
    """Per-flow TCP settings of the reproductions: the paper's packet size, no delayed ACKs
    (ns-2's default sink), and a window limit that never binds. §IV passes ns-2's initial
    window of the paper's time, 2 packets: ten flows starting together with today's 10 would
    put 100 packets into §IV-A's 90-packet buffer before any controller could act."""
    t = {"cc": cc, "mss": MSS, "delayed_ack": False, "max_window": "16MiB", "rcv_window": "16MiB", "sack": True}
    if initial_window is not None:
        t["initial_window"] = initial_window
    if cc == "vegas":
        # The paper compares Monaco's a* = 3 packets with Vegas's band; α = 1, β = 3 are
        # Brakmo & Peterson's and ns-2's values (the ones the paper's ns-2 runs used).
        t["vegas"] = {"preset": "ns2"}
    return t


def _bottleneck_qdisc(cc: str) -> dict:
    """Monaco's routers serve its out-of-band control packets in a high-priority band; the
    data band is a DropTail FIFO either way, so Vegas sees the same queue."""
    return {"qdisc": "prio"} if cc == "monaco" else {}


def config_4a(cc: str = "monaco", buffer_packets: int = 90, duration_s: float = 50.0, seed: int = 1,
              sample_interval: str = "100ms") -> dict:
    """§IV-A's topology and workload as a links-view config."""
    hosts, links, flows = [], [], []
    links.append({"between": ["r1", "r2"], "rate": "30mbit", "delay": "2ms", "queue": f"{buffer_packets}p",
                  **_bottleneck_qdisc(cc)})
    for s, (n, one_way_ms, start, stop) in SETS_4A.items():
        if start >= duration_s:
            continue  # a shortened run ends before this set would start
        for i in range(n):
            src, dst = f"s{s}_{i}", f"d{s}_{i}"
            hosts += [src, dst]
            # 1 ms source access + 2 ms bottleneck + the rest on the destination's access link
            # (the paper: "connected to the bottleneck via a 10Mbps 1ms link", one-way 4/9/14 ms).
            links.append({"between": [src, "r1"], "rate": "10mbit", "delay": "1ms", **_bottleneck_qdisc(cc)})
            links.append({"between": ["r2", dst], "rate": "10mbit", "delay": f"{one_way_ms - 3.0:g}ms",
                          **_bottleneck_qdisc(cc)})
            flows.append({"from": src, "to": dst, "start": f"{start}s", "stop": f"{min(stop, duration_s):g}s",
                          "label": f"set{s}#{i}", "tcp": _tcp(cc, NS2_INITIAL_WINDOW)})
    return {
        "name": f"acc-4a-{cc}-{buffer_packets}p",
        "hosts": hosts,
        "routers": ["r1", "r2"],
        "run": {"duration": f"{duration_s:g}s", "seed": seed, "sample_interval": sample_interval},
        "link": links,
        "flow": flows,
    }


@dataclass
class Phase4A:
    start: float
    end: float
    active_flows: int
    rate_mbps: dict          # set -> mean per-flow rate on the wire (Mbit/s) over the phase's steady part
    queue_packets: float     # mean bottleneck queue over the steady part
    drops: int               # bottleneck drops in the whole phase
    utilisation: float       # bottleneck departures / capacity over the steady part


@dataclass
class Result4A:
    cc: str
    buffer_packets: int
    phases: list[Phase4A] = field(default_factory=list)
    timeouts: int = 0
    fast_retransmits: int = 0


#: The first seconds of a phase are transients (flows arriving or leaving); steady-state
#: numbers average over the rest, as the paper's reading of its Figure 3 does.
SETTLE_S = 3.0


def section4a(cc: str = "monaco", buffer_packets: int = 90, duration_s: float = 50.0, seed: int = 1,
              out: Optional[Path] = None) -> Result4A:
    """Runs §IV-A once and summarises it per phase."""
    cfg = config_4a(cc, buffer_packets, duration_s, seed)
    res = simulate(cfg, out=out)
    fs, qs = res.flow_series, res.queue_series
    bq = qs[qs.queue == "r1->r2"]
    set_of = {f"set{s}#{i}": s for s, (n, *_rest) in SETS_4A.items() for i in range(n)}
    result = Result4A(cc, buffer_packets)
    flows = res.flows
    result.timeouts = int(flows.timeouts.sum())
    result.fast_retransmits = int(flows.fast_retransmits.sum())
    for (t0, phase_end) in PHASES_4A:
        if t0 >= duration_s:
            break
        t1 = min(phase_end, duration_s)
        steady = (fs.time_s > t0 + SETTLE_S) & (fs.time_s <= t1)
        rates = {}
        for s in SETS_4A:
            labels = [lab for lab, k in set_of.items() if k == s]
            part = fs[steady & fs.label.isin(labels)]
            running = part[part.goodput_bps > 0]
            # On the wire, as the paper's rates (30 Mbit/s shared by 10 flows is 3 Mbit/s each).
            rates[s] = float(running.groupby("label").goodput_bps.mean().mean() / 1e6 * PACKET_BYTES / MSS) \
                if len(running) else None
        q_steady = bq[(bq.time_s > t0 + SETTLE_S) & (bq.time_s <= t1)]
        q_phase = bq[(bq.time_s > t0) & (bq.time_s <= t1)]
        span = float(q_steady.time_s.max() - q_steady.time_s.min()) if len(q_steady) > 1 else 0.0
        util = float(q_steady.departed_bytes.diff().dropna().sum() * 8 / span / 30e6) if span > 0 else float("nan")
        active = sum(n for (n, _d, start, stop) in SETS_4A.values() if start <= t0 and stop >= t1)
        result.phases.append(Phase4A(t0, t1, active, rates, float(q_steady.packets.mean()), int(q_phase.drops.sum()),
                                     util))
    return result


def print_4a(results: list[Result4A], console=None) -> None:
    """One table per run: per phase the per-flow rate of each set (ours / the paper's), the
    mean queue against target × flows, drops and utilisation."""
    from rich.table import Table

    for r in results:
        t = Table(title=f"ACC §IV-A — {r.cc}, {r.buffer_packets}-packet buffer: per-flow rate on the wire (Mbit/s) of each set "
                        f"(timeouts {r.timeouts}, fast retransmits {r.fast_retransmits})")
        for col in ("phase s", "flows", "set 1 (paper)", "set 2 (paper)", "set 3 (paper)",
                    f"queue pkts ({TARGET_PACKETS:g}×n)", "drops", "util."):
            t.add_column(col, justify="right", no_wrap=True)
        for i, p in enumerate(r.phases):
            cells = [f"{p.start:g}–{p.end:g}", str(p.active_flows)]
            for s in SETS_4A:
                ours, paper = p.rate_mbps.get(s), PAPER_RATE_4A[s][i]
                cells.append("—" if ours is None and paper is None else
                             f"{ours:.2f} ({paper:g})" if ours is not None and paper is not None else
                             f"{ours:.2f} (—)" if ours is not None else f"— ({paper:g})")
            cells += [f"{p.queue_packets:.1f} ({TARGET_PACKETS * p.active_flows:g})", str(p.drops),
                      f"{p.utilisation * 100:.1f} %"]
            t.add_row(*cells)
        print_table(t, console)


# --- §IV-B: the parking lot -------------------------------------------------------------------

#: Every bottleneck of §IV-B: 100 Mbit/s and 4 ms.
LOT_RATE_BPS = 100e6
#: Access delays (ms, each side) that give the three long flows very different RTTs (the paper
#: says only "very different"): base RTTs of 2·(2·d + 4·N) ms.
LONG_ACCESS_MS = (1.0, 10.0, 40.0)


def config_4b(cc: str = "monaco", n_bottlenecks: int = 3, short_per_link: int = 2, duration_s: float = 50.0,
              seed: int = 1, buffer_packets: int = 1000) -> dict:
    """§IV-B's linear topology: routers r0..rN, bottleneck j = r(j-1)–rj; the long flows enter
    at r0 and leave at rN; each bottleneck's short flows enter at its first router and leave at
    its second. Access links are 1 Gbit/s so that only the bottlenecks queue."""
    routers = [f"r{j}" for j in range(n_bottlenecks + 1)]
    hosts, links, flows = [], [], []
    q = {"queue": f"{buffer_packets}p", **_bottleneck_qdisc(cc)}
    for j in range(1, n_bottlenecks + 1):
        links.append({"between": [routers[j - 1], routers[j]], "rate": "100mbit", "delay": "4ms", **q})
    for k, d in enumerate(LONG_ACCESS_MS):
        src, dst = f"long{k}_s", f"long{k}_d"
        hosts += [src, dst]
        links.append({"between": [src, routers[0]], "rate": "1gbit", "delay": f"{d:g}ms", **q})
        links.append({"between": [routers[-1], dst], "rate": "1gbit", "delay": f"{d:g}ms", **q})
        flows.append({"from": src, "to": dst, "label": f"long{k}", "tcp": _tcp(cc, NS2_INITIAL_WINDOW)})
    for j in range(1, n_bottlenecks + 1):
        for i in range(short_per_link):
            src, dst = f"short{j}_{i}_s", f"short{j}_{i}_d"
            hosts += [src, dst]
            links.append({"between": [src, routers[j - 1]], "rate": "1gbit", "delay": "1ms", **q})
            links.append({"between": [routers[j], dst], "rate": "1gbit", "delay": "1ms", **q})
            flows.append({"from": src, "to": dst, "label": f"short{j}#{i}", "tcp": _tcp(cc, NS2_INITIAL_WINDOW)})
    return {
        "name": f"acc-4b-{cc}-N{n_bottlenecks}",
        "hosts": hosts,
        "routers": routers,
        "run": {"duration": f"{duration_s:g}s", "seed": seed, "sample_interval": "100ms"},
        "link": links,
        "flow": flows,
    }


def predicted_4b(n_bottlenecks: int, short_per_link: int, n_long: int = len(LONG_ACCESS_MS),
                 capacity_bps: float = LOT_RATE_BPS) -> dict:
    """The equilibrium of §II-B's framework when every flow keeps the same accumulation a*:
    flow i's rate is x_i = a* / Σ_{links j on its path} q_j (q_j = queueing delay of link j),
    so the allocation maximises Σ log x_i — proportional fairness. With N identical
    bottlenecks, k long flows and m short flows per bottleneck, every link has the same
    delay q, a short flow gets x_S = a*/q and a long one x_L = a*/(N·q); each link is full,
    k·x_L + m·x_S = C, so x_S = C / (m + k/N) and x_L = x_S / N. Each flow keeps a* in the
    network: a short flow all at its link, a long flow a*/N at each link, so a link holds
    (m + k/N)·a*. Rates here are on the wire (goodput is MSS/packet size of that)."""
    x_short = capacity_bps / (short_per_link + n_long / n_bottlenecks)
    return {"long_bps": x_short / n_bottlenecks, "short_bps": x_short,
            "queue_packets": (short_per_link + n_long / n_bottlenecks) * TARGET_PACKETS}


@dataclass
class Result4B:
    cc: str
    n_bottlenecks: int
    short_per_link: int
    long_goodput_bps: list[float]
    short_goodput_bps: float           # mean over all short flows
    utilisation: list[float]           # per bottleneck
    queue_packets: list[float]         # mean per bottleneck
    drops: int
    predicted: dict


def section4b(cc: str = "monaco", n_bottlenecks: int = 3, short_per_link: int = 2, duration_s: float = 50.0,
              seed: int = 1, out: Optional[Path] = None, settle_s: Optional[float] = None) -> Result4B:
    """Runs the parking lot once; rates and queues average over [settle_s, end), by default
    the last 40 % of the run: Monaco has no slow start, and its longest-RTT flow (184 ms)
    grows by 1.5 packets per round trip towards a window of some 250 packets, which takes
    most of the first 30 s."""
    if settle_s is None:
        settle_s = 0.6 * duration_s
    cfg = config_4b(cc, n_bottlenecks, short_per_link, duration_s, seed)
    res = simulate(cfg, out=out)
    fs, qs = res.flow_series, res.queue_series
    steady = fs[fs.time_s > settle_s]
    per_flow = steady.groupby("label").goodput_bps.mean()
    longs = [float(per_flow.get(f"long{k}", 0.0)) for k in range(len(LONG_ACCESS_MS))]
    shorts = per_flow[[lab for lab in per_flow.index if lab.startswith("short")]]
    utils, queues, drops = [], [], 0
    for j in range(1, n_bottlenecks + 1):
        q = qs[qs.queue == f"r{j - 1}->r{j}"]
        drops += int(q.drops.sum())
        qq = q[q.time_s > settle_s]
        span = float(qq.time_s.max() - qq.time_s.min())
        utils.append(float(qq.departed_bytes.diff().dropna().sum() * 8 / span / LOT_RATE_BPS))
        queues.append(float(qq.packets.mean()))
    return Result4B(cc, n_bottlenecks, short_per_link, longs, float(shorts.mean()), utils, queues, drops,
                    predicted_4b(n_bottlenecks, short_per_link))


def print_4b(results: list[Result4B], console=None) -> None:
    from rich.table import Table

    t = Table(title="ACC §IV-B — parking lot (goodput, Mbit/s; predicted = proportional fairness on the wire × MSS/packet)")
    for col in ("cc", "N", "long flows (pred.)", "short (pred.)", "utilisation min–max", "queue pkts (pred.)", "drops"):
        t.add_column(col, justify="right", no_wrap=True)
    share = MSS / PACKET_BYTES
    for r in results:
        p = r.predicted
        t.add_row(r.cc, str(r.n_bottlenecks),
                  " / ".join(f"{x / 1e6:.1f}" for x in r.long_goodput_bps) + f" ({p['long_bps'] * share / 1e6:.1f})",
                  f"{r.short_goodput_bps / 1e6:.1f} ({p['short_bps'] * share / 1e6:.1f})",
                  f"{min(r.utilisation) * 100:.1f}–{max(r.utilisation) * 100:.1f} %",
                  " / ".join(f"{q:.1f}" for q in r.queue_packets) + f" ({p['queue_packets']:.1f})",
                  str(r.drops))
    print_table(t, console)


# --- §III-C: Vegas's two failures, against Monaco --------------------------------------------

#: The §III-C dumbbell: one 10 Mbit/s bottleneck with 10 ms one-way delay each way and a buffer
#: deep enough that only a controller that keeps growing the queue ever loses a packet.
C3_RATE = "10mbit"
C3_BUFFER = "300p"


def config_3c_loaded_start(cc: str, duration_s: float = 60.0, seed: int = 1) -> dict:
    """"rtt_p overestimated": two flows of `cc` run from 0 s and keep their standing queue; a
    third starts at 20 s on the loaded path, so the smallest RTT it ever sees includes the
    others' queue. (Vegas-k is `cc = "vegas-k"`: Vegas with the base RTT taken over the last
    k = 20 samples, the paper's §III-A variant.)"""
    tcp = _tcp("vegas" if cc == "vegas-k" else cc)
    if cc == "vegas-k":
        tcp["vegas"] = {"preset": "ns2", "base_rtt_window": 20}
    hosts = ["a0", "a1", "a2", "b0", "b1", "b2"]
    links = [{"between": ["r1", "r2"], "rate": C3_RATE, "delay": "10ms", "queue": C3_BUFFER, **_bottleneck_qdisc(cc)}]
    for i in range(3):
        links.append({"between": [f"a{i}", "r1"], "rate": "1gbit", "delay": "1ms", **_bottleneck_qdisc(cc)})
        links.append({"between": ["r2", f"b{i}"], "rate": "1gbit", "delay": "1ms", **_bottleneck_qdisc(cc)})
    flows = [{"from": f"a{i}", "to": f"b{i}", "label": f"old{i}", "tcp": tcp} for i in range(2)]
    flows.append({"from": "a2", "to": "b2", "label": "new", "start": "20s", "tcp": tcp})
    return {"name": f"acc-3c-loaded-{cc}", "hosts": hosts, "routers": ["r1", "r2"],
            "run": {"duration": f"{duration_s:g}s", "seed": seed}, "link": links, "flow": flows}


def config_3c_reverse(cc: str, duration_s: float = 40.0, seed: int = 1) -> dict:
    """Reverse-path congestion: one forward flow of `cc` a→b, and from 10 s on, five Reno bulk
    flows b→a that keep the reverse direction's queue full, so the forward flow's ACKs (and
    Monaco's reverse control packets) wait in it."""
    tcp = _tcp(cc)
    links = [{"between": ["r1", "r2"], "rate": C3_RATE, "delay": "10ms", "queue": "100p", **_bottleneck_qdisc(cc)},
             {"between": ["a", "r1"], "rate": "1gbit", "delay": "1ms", **_bottleneck_qdisc(cc)},
             {"between": ["r2", "b"], "rate": "1gbit", "delay": "1ms", **_bottleneck_qdisc(cc)},
             {"between": ["c", "r2"], "rate": "1gbit", "delay": "1ms", **_bottleneck_qdisc(cc)},
             {"between": ["r1", "d"], "rate": "1gbit", "delay": "1ms", **_bottleneck_qdisc(cc)}]
    flows = [{"from": "a", "to": "b", "label": "forward", "tcp": tcp},
             {"from": "c", "to": "d", "label": "reverse", "count": 5, "start": "10s",
              "tcp": {"cc": "reno", "mss": MSS, "max_window": "16MiB", "rcv_window": "16MiB"}}]
    return {"name": f"acc-3c-reverse-{cc}", "hosts": ["a", "b", "c", "d"], "routers": ["r1", "r2"],
            "run": {"duration": f"{duration_s:g}s", "seed": seed}, "link": links, "flow": flows}


@dataclass
class Result3C:
    scenario: str
    cc: str
    utilisation: float            # forward bottleneck, over the measured window
    shares: dict                  # label -> goodput share of the bottleneck (goodput / rate)
    queue_packets: float          # mean forward bottleneck queue over the measured window
    queue_max: int
    drops: int                    # forward bottleneck drops over the whole run


def _section3c(cfg: dict, scenario: str, cc: str, since_s: float, out: Optional[Path]) -> Result3C:
    res = simulate(cfg, out=out)
    fs, qs = res.flow_series, res.queue_series
    q = qs[qs.queue == "r1->r2"]
    qq = q[q.time_s > since_s]
    span = float(qq.time_s.max() - qq.time_s.min())
    rate = 10e6
    steady = fs[fs.time_s > since_s]
    per_label = steady.assign(base=steady.label.str.replace(r"#\d+$", "", regex=True)).groupby(["base", "label"]) \
        .goodput_bps.mean().groupby("base").sum()
    return Result3C(scenario, cc,
                    float(qq.departed_bytes.diff().dropna().sum() * 8 / span / rate) if span > 0 else float("nan"),
                    {k: float(v) / rate for k, v in per_label.items()},
                    float(qq.packets.mean()), int(q.packets.max()), int(q.drops.sum()))


def section3c(ccs=None, out: Optional[Path] = None) -> list[Result3C]:
    """Both §III-C conditions for each controller (default: Vegas, Vegas-k and Monaco where
    the simulator has it); measured after the disturbance settles."""
    if ccs is None:
        ccs = ("vegas", "vegas-k") + tuple(c for c in controllers() if c == "monaco")
    results = []
    for cc in ccs:
        results.append(_section3c(config_3c_loaded_start(cc), "loaded start", cc, 30.0,
                                  Path(out) / f"loaded-{cc}" if out else None))
    for cc in [c for c in ccs if c != "vegas-k"]:
        results.append(_section3c(config_3c_reverse(cc), "reverse congestion", cc, 15.0,
                                  Path(out) / f"reverse-{cc}" if out else None))
    return results


def print_3c(results: list[Result3C], console=None) -> None:
    from rich.table import Table

    t = Table(title="ACC §III-C — Vegas's failures against Monaco (paper: Vegas < 10 % utilisation or a queue "
                    "growing until loss with a wrong rtt_p; underutilisation with reverse congestion; Monaco ≈ 100 %, no loss)")
    for col in ("condition", "cc", "utilisation", "goodput shares", "queue mean / max (pkts)", "drops"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in results:
        t.add_row(r.scenario, r.cc, f"{r.utilisation * 100:.1f} %",
                  ", ".join(f"{k} {v * 100:.0f} %" for k, v in sorted(r.shares.items())),
                  f"{r.queue_packets:.1f} / {r.queue_max}", str(r.drops))
    print_table(t, console)


# --- the registry's records ------------------------------------------------------------------

def _prepare(request: Request, progress: Progress | None) -> tuple[Optional[float], Callable[..., Optional[Path]]]:
    """What the three runs share: ``--duration`` in seconds (None: the paper's), a note when
    the simulator lacks one of the paper's controllers, and where each run's directory goes."""
    dur = parse_quantity("time", request.duration, "--duration") if request.duration else None
    missing = [c for c in PAPER_CONTROLLERS if c not in controllers()]
    if missing and progress is not None:
        progress(f"note: the simulator has no {', '.join(missing)} yet; running {', '.join(controllers())} only")
    out = request.out
    return dur, ((lambda *parts: Path(out).joinpath(*parts)) if out else (lambda *parts: None))


def _run_4a(request: Request, progress: Progress | None) -> list[Result4A]:
    """§IV-A for each controller with both buffers."""
    dur, sub = _prepare(request, progress)
    shorter: dict[str, Any] = {"duration_s": dur} if dur else {}
    return [section4a(cc, buf, **shorter, out=sub(f"{cc}-{buf}p"))
            for cc in controllers() for buf in (90, 55)]


def _run_4b(request: Request, progress: Progress | None) -> list[Result4B]:
    """§IV-B for each controller with N = 2..9 bottlenecks."""
    dur, sub = _prepare(request, progress)
    shorter: dict[str, Any] = {"duration_s": dur} if dur else {}
    return [section4b(cc, n, **shorter, out=sub(f"{cc}-N{n}"))
            for cc in controllers() for n in range(2, 10)]


def _run_3c(request: Request, progress: Progress | None) -> list[Result3C]:
    """§III-C's two conditions (their own durations: a ``--duration`` is checked, not used)."""
    _prepare(request, progress)
    return section3c(out=request.out)


def _as_json(results: list) -> list[dict]:
    return [dataclasses.asdict(r) for r in results]


def _ours_4a(results: list[Result4A]) -> dict[str, float]:
    """Monaco's run with the 90-packet buffer (the paper's Figure 3(a)) under ``paper``'s names."""
    run = next((r for r in results if r.cc == "monaco" and r.buffer_packets == 90), None)
    if run is None:
        return {}
    ours: dict[str, float] = {}
    for (t0, t1), p in zip(PHASES_4A, run.phases):
        for k, rate in p.rate_mbps.items():
            if rate is not None:
                ours[f"per-flow rate of set {k}, {t0}-{t1} s, 90-packet buffer"] = rate
    per_flow = [p.queue_packets / p.active_flows for p in run.phases if p.active_flows]
    if per_flow:
        ours["bottleneck queue per flow (the target accumulation)"] = sum(per_flow) / len(per_flow)
    return ours


def _ours_3c(results: list[Result3C]) -> dict[str, float | str]:
    """Our §III-C runs under ``paper``'s names (utilisation in %)."""
    by = {(r.scenario, r.cc): r for r in results}
    ours: dict[str, float | str] = {}
    if (v := by.get(("loaded start", "vegas"))) is not None:
        ours["Vegas utilisation with an overestimated rtt_p"] = v.utilisation * 100
    if (v := by.get(("loaded start", "vegas-k"))) is not None:
        ours["Vegas-k with an overestimated rtt_p"] = f"queue up to {v.queue_max} packets, {v.drops} drops"
    if (v := by.get(("reverse congestion", "vegas"))) is not None:
        ours["Vegas with reverse-path congestion"] = f"utilisation {v.utilisation * 100:.0f} %"
    monaco = [r for r in results if r.cc == "monaco"]
    if monaco:
        ours["Monaco utilisation, both conditions"] = min(r.utilisation for r in monaco) * 100
        ours["Monaco losses, both conditions"] = sum(r.drops for r in monaco)
    return ours


_ENGINE_NOTE = "Monaco and Vegas are the simulator's controllers"

register(Reproduction(
    name="acc-4a",
    description="ACC §IV-A: Monaco and Vegas on one bottleneck as three sets of flows come and go (90- and 55-packet buffers)",
    engines=("sim",),
    options=("duration",),
    paper=(
        *(PaperValue(f"per-flow rate of set {k}, {t0}-{t1} s, 90-packet buffer", rate, "Mbit/s", "ACC §IV-A, Figure 3(a2)")
          for k, rates in PAPER_RATE_4A.items() for (t0, t1), rate in zip(PHASES_4A, rates) if rate is not None),
        PaperValue("bottleneck queue per flow (the target accumulation)", TARGET_PACKETS, "packets", "ACC §IV-A, Figure 3(a1)"),
    ),
    runner=_run_4a,
    print_text=lambda results, request: print_4a(results),
    to_json=_as_json,
    engine_note=_ENGINE_NOTE,
    ours=_ours_4a,
))

register(Reproduction(
    name="acc-4b",
    description="ACC §IV-B: a parking lot of 2-9 bottlenecks crossed by long and short flows, against proportional fairness",
    engines=("sim",),
    options=("duration",),
    # The paper plots these runs without numbers; they are read against the allocation its
    # framework (§II-B) predicts, ``predicted_4b``.
    paper=(),
    runner=_run_4b,
    print_text=lambda results, request: print_4b(results),
    to_json=_as_json,
    engine_note=_ENGINE_NOTE,
))

register(Reproduction(
    name="acc-3c",
    description="ACC §III-C: Vegas's two failures (overestimated rtt_p, reverse-path congestion) against Monaco",
    engines=("sim",),
    options=(),
    paper=(
        PaperValue("Vegas utilisation with an overestimated rtt_p", "< 10", "%", "ACC §III-C (simulations of its [15])"),
        PaperValue("Vegas-k with an overestimated rtt_p", "queue grows until loss", "", "ACC §III-C (simulations of its [15])"),
        PaperValue("Vegas with reverse-path congestion", "underutilisation", "", "ACC §III-C"),
        PaperValue("Monaco utilisation, both conditions", "about 100", "%", "ACC §III-C (simulations of its [15])"),
        PaperValue("Monaco losses, both conditions", 0, "packets", "ACC §III-C (simulations of its [15])"),
    ),
    runner=_run_3c,
    print_text=lambda results, request: print_3c(results),
    to_json=_as_json,
    engine_note=_ENGINE_NOTE,
    ours=_ours_3c,
))
