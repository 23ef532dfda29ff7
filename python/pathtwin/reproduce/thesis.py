"""Reproduction of the TCP-friendly marker thesis's Chapter 4
(``shared/papers/tcp-friendly-marker-thesis-ch3-4.txt``): Tables 4.1–4.4.

One source sends 50 or 100 long-lived TCP flows to one destination through a marking router
R0, a bottleneck gateway R1 (10 Mbit/s towards R2, where RIO, FRIO or RED runs) and R2; the
round trip is 200 ms. Configurations A–D cross TCP SACK or Reno with "appropriate" (OUT
thresholds 10/200 KB) or "inappropriate" (10/30 KB) RED-like parameters; Cases 1–4 are the TCP
friendly marker with FRIO, the TCP friendly marker with RIO, a token bucket marker with RIO,
and no marker ("RIO defaults to RED using OUT parameters"). Both markers get 296 KB of tokens
every 400 ms (5.92 Mbit/s of IN traffic on a 10 Mbit/s link).

What the thesis leaves unsaid, and what this module chooses (each a constant below):

- Where the 200 ms sit: the thesis delays the destination's outgoing packets (the ACKs) by the
  whole round trip; a link delay is the same each way here, so R2–D carries 100 ms each way.
  TCP sees the same RTT either way; the forward data path has 100 ms more propagation than
  the thesis's, which changes nothing at the queue.
- The bottleneck buffer: not given. 500 KB, just above the IN class's 490 KB maximum
  threshold, so that RIO's thresholds and not the buffer decide what is dropped.
- Packet size and TCP: 1460-byte segments (the Ethernet testbed), an initial window of 2
  segments and a 1 s minimum RTO (RFC 2414 and RFC 2988, the rules of the thesis's time),
  no RACK or tail loss probes (they came a decade later), delayed ACKs on.
- Run length and starts: 100 s, flows starting at uniformly random times in the first
  second (seeded), metrics over the whole run; several seeds, averaged.
- RIO's remaining parameters: ns-2's (w_q 0.002, gentle off as in the thesis's era, the
  `wait` rule), RIO-C (OUT tested on the whole queue's average).

Metrics, as the thesis defines them: timeouts summed over the flows; the packet loss
probability at the bottleneck (drops over arrivals, %); mean per-flow goodput (bytes/s of new
data) and its coefficient of variation across the flows.

In the emulator (``--engine emu``, root) the same network carries the kernel's TCP: the
flows' settings become the hosts' (``emu_config``: SACK on or off, initial window 2, minimum
RTO 1 s, RACK and tail loss probes off through ``net.ipv4.tcp_recovery`` and
``tcp_early_retrans``), and the kernel's "reno" is NewReno (RFC 6582) with or without SACK:
Linux has no Reno of the thesis's kind, so configurations B and D run NewReno without SACK.
Timeouts are the kernel's count of retransmission-timer expiries per connection
(``tcpi_total_rto``, SYN timeouts included).

Registered as ``thesis-tcp-friendly`` (``registry``).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from pathlib import Path

from ..config import parse_quantity
from ..errors import PathtwinError
from ..sim import simulate
from .registry import PaperValue, Progress, Reproduction, Request, register
from .text import print_table

#: The thesis's numbers, Tables 4.1–4.4: per configuration and case, for 100 then 50 flows,
#: (timeouts, loss %, mean goodput B/s, CoV).
PAPER = {
    "A": {1: ((41, 4.0, 11421, 0.06), (2, 2.14, 22236, 0.03)),
          2: ((120, 5.46, 10575, 0.12), (9, 2.67, 20742, 0.04)),
          3: ((911, 7.75, 9705, 0.33), (253, 4.13, 18892, 0.12)),
          4: ((1322, 9.01, 9015, 0.38), (491, 5.25, 17865, 0.17))},
    "B": {1: ((62, 4.33, 11391, 0.07), (8, 2.49, 22079, 0.03)),
          2: ((176, 5.47, 10472, 0.14), (16, 2.83, 20635, 0.04)),
          3: ((1127, 12.49, 9660, 0.31), (350, 6.66, 18486, 0.19)),
          4: ((1405, 16.47, 8807, 0.37), (610, 9.63, 17319, 0.25))},
    "C": {1: ((92, 5.02, 10854, 0.07), (7, 2.79, 21687, 0.05)),
          2: ((152, 6.17, 10168, 0.13), (10, 3.63, 20104, 0.06)),
          3: ((1200, 9.16, 9092, 0.4), (320, 5.71, 17277, 0.22)),
          4: ((1864, 10.75, 8316, 0.45), (689, 7.03, 16825, 0.25))},
    "D": {1: ((130, 6.33, 10668, 0.08), (13, 3.43, 21315, 0.05)),
          2: ((239, 6.97, 10214, 0.15), (19, 4.01, 20168, 0.06)),
          3: ((1410, 13.98, 8954, 0.43), (413, 7.8, 17112, 0.33)),
          4: ((2163, 20.58, 8046, 0.5), (844, 11.2, 16152, 0.35))},
}
FLOW_COUNTS = (100, 50)

#: Configuration → (SACK on, OUT maximum threshold): A/B appropriate, C/D inappropriate.
CONFIGURATIONS = {"A": (True, "200KB"), "B": (False, "200KB"), "C": (True, "30KB"), "D": (False, "30KB")}
CASES = {1: "TCP friendly & FRIO", 2: "TCP friendly & RIO", 3: "token bucket & RIO", 4: "no marker & RED"}

OUT_MIN, OUT_MAX_P = "10KB", 0.25
IN_MIN, IN_MAX, IN_MAX_P = "50KB", "490KB", 0.005
BUFFER = "500KB"
TOKENS, INTERVAL = "296KB", "400ms"
BOTTLENECK = "r1->r2"
MSS = 1460
DURATION_S = 100.0
START_SPREAD_S = 1.0


def _tcp(sack: bool) -> dict:
    return {"cc": "reno" if not sack else "newreno", "sack": sack, "mss": MSS, "initial_window": 2, "min_rto": "1s",
            "rack": False, "tlp": False, "max_window": "1MB", "rcv_window": "1MB"}


def config(configuration: str, case: int, flows: int, seed: int = 1, duration_s: float = DURATION_S) -> dict:
    """One run of the thesis's experiment as a links-view config."""
    sack, out_max = CONFIGURATIONS[configuration]
    out_class = {"min_th": OUT_MIN, "max_th": out_max, "max_p": OUT_MAX_P}
    if case == 4:
        queue = {"qdisc": "red", "red": {**out_class, "gentle": False}}
    else:
        queue = {"qdisc": "frio" if case == 1 else "rio",
                 "rio": {"in": {"min_th": IN_MIN, "max_th": IN_MAX, "max_p": IN_MAX_P}, "out": out_class, "gentle": False}}
    links = [
        {"between": ["s", "r0"], "rate": "100mbit", "delay": "0.1ms", "queue": "1MB"},
        {"between": ["r0", "r1"], "rate": "100mbit", "delay": "0.1ms", "queue": "1MB"},
        {"between": ["r1", "r2"], "rate": "10mbit", "delay": "0.1ms", "queue": BUFFER, **queue},
        {"between": ["r2", "d"], "rate": "100mbit", "delay": "100ms", "queue": "1MB"},
    ]
    markers = []
    if case in (1, 2):
        markers.append({"between": ["r0", "r1"], "kind": "tcp-friendly", "interval": INTERVAL, "budget": TOKENS})
    elif case == 3:
        markers.append({"between": ["r0", "r1"], "kind": "token-bucket", "interval": INTERVAL, "bucket": TOKENS})
    rng = random.Random(seed)
    tcp = _tcp(sack)
    flow_list = [{"from": "s", "to": "d", "label": f"f{i}", "start": f"{rng.uniform(0, START_SPREAD_S) * 1000:.3f}ms",
                  "tcp": tcp} for i in range(flows)]
    cfg = {
        "name": f"thesis-{configuration}{case}-{flows}",
        "hosts": ["s", "d"],
        "routers": ["r0", "r1", "r2"],
        "run": {"duration": f"{duration_s:g}s", "seed": seed, "sample_interval": "500ms"},
        "link": links,
        "flow": flow_list,
    }
    if markers:
        cfg["marker"] = markers
    return cfg


@dataclass
class Metrics:
    timeouts: float
    loss_percent: float
    goodput_Bps: float
    cov: float


@dataclass
class Row:
    configuration: str
    case: int
    flows: int
    ours: Metrics
    paper: Metrics
    seeds: int
    per_seed: list = field(default_factory=list)


def emu_config(cfg: dict) -> dict:
    """``cfg`` for the emulator: every flow's TCP settings are the hosts' (the kernel sets
    them per host and route, not per connection; all flows of a run share them)."""
    flows = [{k: v for k, v in f.items() if k != "tcp"} for f in cfg["flow"]]
    return {**cfg, "tcp": dict(cfg["flow"][0]["tcp"]), "flow": flows}


def run_one(configuration: str, case: int, flows: int, seed: int = 1, duration_s: float = DURATION_S, out=None,
            engine: str = "sim") -> Metrics:
    cfg = config(configuration, case, flows, seed, duration_s)
    if engine == "emu":
        from ..emulation import emulate

        res = emulate(emu_config(cfg), out=out)
    else:
        res = simulate(cfg, out=out)
    f = res.flows
    q = res.queues[res.queues.queue == BOTTLENECK].iloc[0]
    goodput = f.bytes_delivered / duration_s
    mean = float(goodput.mean())
    return Metrics(timeouts=float(f.timeouts.sum()), loss_percent=100.0 * float(q.drops) / max(float(q.arrivals), 1.0),
                   goodput_Bps=mean, cov=float(goodput.std(ddof=0) / mean) if mean > 0 else float("nan"))


def run(configurations=("A", "B", "C", "D"), cases=(1, 2, 3, 4), flow_counts=FLOW_COUNTS, seeds=(1, 2, 3),
        duration_s: float = DURATION_S, out=None, engine: str = "sim") -> list[Row]:
    """Every requested cell, averaged over `seeds`, in ``engine``."""
    rows = []
    for c in configurations:
        for case in cases:
            for n in flow_counts:
                per_seed = [run_one(c, case, n, s, duration_s, out=(out / f"{c}{case}-{n}-seed{s}") if out else None,
                                    engine=engine) for s in seeds]
                avg = Metrics(*(sum(getattr(m, k) for m in per_seed) / len(per_seed)
                                for k in ("timeouts", "loss_percent", "goodput_Bps", "cov")))
                paper = Metrics(*PAPER[c][case][FLOW_COUNTS.index(n)])
                rows.append(Row(c, case, n, avg, paper, len(seeds), per_seed=per_seed))
    return rows


def print_tables(rows: list[Row], console=None) -> None:
    """Tables 4.1–4.4 as the thesis lays them out, ours beside the thesis's (in brackets)."""
    from rich.table import Table

    titles = {"A": "4.1 — A: SACK, appropriate", "B": "4.2 — B: Reno, appropriate",
              "C": "4.3 — C: SACK, inappropriate", "D": "4.4 — D: Reno, inappropriate"}
    for c in dict.fromkeys(r.configuration for r in rows):
        t = Table(title=f"Table {titles[c]} RED-like parameters (ours (thesis))")
        t.add_column("case", no_wrap=True)
        counts = [n for n in FLOW_COUNTS if any(r.flows == n and r.configuration == c for r in rows)]
        for n in counts:
            for m in ("timeouts", "Ploss %", "goodput B/s", "CoV"):
                t.add_column(f"{n}: {m}", justify="right", no_wrap=True)
        for case in dict.fromkeys(r.case for r in rows if r.configuration == c):
            cells = [CASES[case]]
            for n in counts:
                r = next((r for r in rows if r.configuration == c and r.case == case and r.flows == n), None)
                if r is None:
                    cells += ["—"] * 4
                    continue
                o, p = r.ours, r.paper
                cells += [f"{o.timeouts:.0f} ({p.timeouts:g})", f"{o.loss_percent:.2f} ({p.loss_percent:g})",
                          f"{o.goodput_Bps:.0f} ({p.goodput_Bps:g})", f"{o.cov:.2f} ({p.cov:g})"]
            t.add_row(*cells)
        console = print_table(t, console)


# --- the thesis's bar charts (Figures 4.1.1-4.4.4) ---------------------------------------------

#: The thesis's four figures per configuration, in its order (Figure 4.k.1-4.k.4).
FIGURE_METRICS = (("timeouts", "Number of timeouts"), ("loss_percent", "Probability of loss (%)"),
                  ("goodput_Bps", "Average per-flow goodput (bytes/s)"), ("cov", "Goodput coefficient of variation"))


def figures(rows: list[Row]) -> list[tuple[str, str, object]]:
    """The thesis's bar charts for each configuration in ``rows``, ours beside the thesis's:
    per configuration one matplotlib figure with its four panels (Figures 4.K.1-4.K.4:
    timeouts, loss probability, mean goodput, CoV), the flow counts on the x axis as the thesis
    draws them, a bar per case (ours filled, the thesis's hatched beside it); as the
    registry's ``(name, caption, figure)``."""
    out = []
    for k, c in enumerate(CONFIGURATIONS):
        mine = [r for r in rows if r.configuration == c]
        if mine:
            out.append((f"thesis-figure-4.{k + 1}", f"Figures 4.{k + 1}.1-4.{k + 1}.4, configuration {c}: ours and the "
                        "thesis's", figure(mine, f"4.{k + 1}")))
    return out


def figure(rows: list[Row], number: str):
    """One configuration's figure (see ``figures``); its panels' bars carry ``gid``s
    ``"ours CASE FLOWS"`` and ``"thesis CASE FLOWS"`` so that what they draw can be read back."""
    from ..plot import _pyplot

    plt = _pyplot()

    counts = sorted({r.flows for r in rows})
    cases = sorted({r.case for r in rows})
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    width = 0.8 / (2 * len(cases))
    for ax, (attr, label), sub in zip(axes.flat, FIGURE_METRICS, range(1, 5)):
        for i, case in enumerate(cases):
            for j, n in enumerate(counts):
                r = next((r for r in rows if r.case == case and r.flows == n), None)
                if r is None:
                    continue
                x = j - 0.4 + (2 * i + 0.5) * width
                ours = ax.bar(x, getattr(r.ours, attr), width, color=f"C{i}", label=CASES[case] if j == 0 else None)
                ours[0].set_gid(f"ours {case} {n}")
                theirs = ax.bar(x + width, getattr(r.paper, attr), width, color="white", edgecolor=f"C{i}", hatch="//",
                                label="thesis (hatched)" if i == j == 0 else None)
                theirs[0].set_gid(f"thesis {case} {n}")
        ax.set_xticks(range(len(counts)), [f"{n} flows" for n in counts])
        ax.set_title(f"Figure {number}.{sub}: {label}", fontsize=9)
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"Configuration {rows[0].configuration} (ours filled, the thesis's hatched)")
    fig.tight_layout()
    return fig


# --- the registry's record -------------------------------------------------------------------

def _run(request: Request, progress: Progress | None) -> list[Row]:
    """The configurations ``request.only`` names (default all), one after the other, over
    ``request.seeds`` seeds."""
    only, seeds = request.only, request.seeds
    assert seeds is not None  # the record's default fills it
    configurations = tuple(only.upper()) if only else tuple(CONFIGURATIONS)
    bad = [c for c in configurations if c not in CONFIGURATIONS]
    if bad:
        raise PathtwinError(f"--only: no configuration {''.join(bad)!r} (the thesis has A, B, C, D)")
    dur = parse_quantity("time", request.duration, "--duration") if request.duration else DURATION_S
    rows = []
    for c in configurations:
        rows += run((c,), seeds=tuple(range(1, seeds + 1)), duration_s=dur, out=Path(request.out) if request.out else None,
                    engine=request.engine)
        if progress is not None:
            progress(f"  configuration {c} done")
    return rows


_METRICS = (("timeouts", ""), ("packet loss probability", "%"), ("mean goodput", "B/s"), ("goodput CoV", ""))


def _ours(rows: list[Row]) -> dict[str, float]:
    """Our averages under the names of the registry's ``paper`` values."""
    return {f"configuration {r.configuration}, {CASES[r.case]}, {r.flows} flows: {metric}": value
            for r in rows for (metric, _unit), value in zip(_METRICS, dataclasses.astuple(r.ours))}


register(Reproduction(
    name="thesis-tcp-friendly",
    description="TCP-friendly marker thesis, Tables 4.1-4.4: markers over RIO, FRIO and RED with SACK and Reno",
    engines=("sim", "emu"),
    options=("seeds", "duration", "only"),
    defaults={"seeds": 3},
    paper=tuple(
        PaperValue(f"configuration {c}, {CASES[case]}, {n} flows: {metric}", value, unit, f"thesis Table 4.{k + 1}")
        for k, c in enumerate(CONFIGURATIONS) for case in CASES for n, values in zip(FLOW_COUNTS, PAPER[c][case])
        for (metric, unit), value in zip(_METRICS, values)
    ),
    runner=_run,
    print_text=lambda rows, request: print_tables(rows),
    to_json=lambda rows: [dataclasses.asdict(r) for r in rows],
    ours=_ours,
    figures=figures,
))
