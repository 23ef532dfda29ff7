"""One measurement of a set of hosts, step by step, resumable: the probe series from every
source at once, then, for every ordered pair, the parallel-flow throughput tests one at a
time (a path carries one test at a time, as the paper's iperf runs did), then the tests of
paths loaded together (``together_groups``: each host's paths out and in, its access links,
and every class of paths of different sources whose delays correlate), then the findings
and the model. Each finished step is in the state file (``state``) before the next starts.
A test ends only when its sinks have read all its connections' data (the senders' buffers
drain after they stop writing; each record's ``drain_s`` says how long), so the next test
starts on paths its predecessor no longer loads, with no gap to guess (the simulator's
tests stop at a fixed time instead and need one: ``simulated``).

``Settings`` holds and checks what a user can set; ``measure`` runs it with an optional
``Progress`` told of every step (the command line draws rich bars from it).

Not here: the steps' own work (``probes``, ``throughput``, ``shared``), the file's format
(``state``), writing the model (``model``), emulated ground truths (``emulated``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence

import numpy as np

from ..errors import PathtwinError
from . import model, shared
from .hosts import Host
from .operations import cc_name
from .probes import EchoServers, ProbeSeries, check_probe_settings, probe_all
from .state import State, state_path
from .throughput import parallel_flows, parallel_pairs

#: Flow counts of the reactivity table by default (NSDI'09 §4.5 measured one to eight).
DEFAULT_FLOWS = (1, 2, 4, 8)
#: Seconds the echo servers may serve beyond the probe series' length.
ECHO_MARGIN_S = 15.0
#: A host's paths out (or in) are a class, its uplink (downlink), when loaded together they
#: carry less than this share of the sum of what each carries alone with as many flows: a
#: tenth, above the 3-8 % that one path's tests move from one run to the next against
#: on/off cross traffic (a proposal; NSDI'09 has no access-link classes).
ACCESS_SHARE = 0.9

#: A path direction, (from, to).
Pair = tuple[str, str]


@dataclass
class Settings:
    """What a measurement does: ``flows`` the flow counts of each direction's reactivity
    table, ``duration_s`` each throughput test's length, ``probe_interval_s`` and
    ``probe_duration_s`` the probe series (ALGORITHMS.md §7: ~99 ms for 15 s), ``port`` the
    first of the two ports used (UDP probes, TCP tests); the default is below Linux's ephemeral
    range (32768-60999) and the emulated workload's servers (20000-32767), so no client
    connection on a measured host holds the port a test's sink must listen on. ``cc`` the
    throughput tests' congestion control; None leaves each source's default (the kernel's
    ``net.ipv4.tcp_congestion_control``, which differs between machines: the reactivity
    table is what that controller got), and every test records the one it ran."""

    flows: list[int] = field(default_factory=lambda: list(DEFAULT_FLOWS))
    duration_s: float = 10.0
    probe_interval_s: float = 0.099
    probe_duration_s: float = 15.0
    port: int = 17000
    rho_shared: float = shared.RHO_SHARED
    min_spread_s: float = shared.MIN_SPREAD_S
    #: Whether to load paths together (``together_groups``) after the per-pair tests.
    together: bool = True
    cc: Optional[str] = None

    def check(self) -> None:
        if not self.flows:
            raise PathtwinError("--flows: give at least one flow count")
        for n in self.flows:
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise PathtwinError(f"--flows: {n!r} is not a positive number of flows")
            if n > 256:
                raise PathtwinError(f"--flows: {n} flows is more than the 256 a test opens at most")
        if len(set(self.flows)) != len(self.flows):
            raise PathtwinError(f"--flows: {','.join(map(str, self.flows))} names a flow count twice")
        if not (self.duration_s > 0 and math.isfinite(self.duration_s)):
            raise PathtwinError(f"--duration: must be positive, not {self.duration_s:g} s")
        if self.duration_s < 1.0:
            raise PathtwinError(f"--duration: {self.duration_s:g} s is too short for TCP to leave slow start; give at least 1 s")
        check_probe_settings(self.probe_interval_s, self.probe_duration_s)
        if not 1024 <= self.port <= 65534:
            raise PathtwinError(f"--port: {self.port} is not between 1024 and 65534")
        if self.cc is not None:
            cc_name(self.cc, "--cc", PathtwinError)

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        d["flows"] = sorted(self.flows)
        if self.cc is None:
            del d["cc"]  # as recorded before ``cc`` was a setting: such a state still resumes
        return d


def parse_flows(text: str) -> list[int]:
    """``"1,2,4,8"`` -> ``[1, 2, 4, 8]``; anything else is a one-line error naming ``--flows``."""
    out = []
    for item in text.split(","):
        item = item.strip()
        try:
            n = int(item)
        except ValueError:
            raise PathtwinError(f"--flows: {item!r} is not a number of flows (expected e.g. 1,2,4,8)") from None
        out.append(n)
    s = Settings(flows=out)
    s.check()
    return sorted(out)


class Progress(Protocol):
    """What ``measure`` tells a display: the steps ahead, each step's start, and its end."""

    def plan(self, steps: list[tuple[str, str, float]]) -> None:
        """``(pair, step, expected seconds)`` for every step, done or not."""

    def start(self, pair: str, step: str) -> None: ...

    def done(self, pair: str, step: str) -> None: ...


@dataclass
class Measurement:
    """What ``measure`` returns: the model (config dict and its TOML), the findings with
    every value's confidence, and where they were written."""

    config: dict
    toml: str
    findings: dict
    out: Optional[Path]
    state: Path


def _pairs(hosts: Sequence[Host]) -> list[tuple[Host, Host]]:
    return [(a, b) for a in hosts for b in hosts if a is not b]


def check_hosts(names: Sequence[str], known: Sequence[str], what: str = "--hosts") -> list[str]:
    """``names`` checked against the hosts there are: at least two, no repeats, none unknown."""
    names = [n.strip() for n in names]
    for n in names:
        if not n:
            raise PathtwinError(f"{what}: an empty host name")
        if n not in known:
            raise PathtwinError(f"{what}: no host {n!r}; the hosts are {', '.join(known)}")
    if len(set(names)) != len(names):
        raise PathtwinError(f"{what}: {','.join(names)} names a host twice")
    if len(names) < 2:
        raise PathtwinError(f"{what}: a measurement needs at least two hosts, got {len(names)}")
    return names


def measure(hosts: Sequence[Host], settings: Settings, out: Optional[Path] = None,
            state_file: Optional[Path] = None, progress: Optional[Progress] = None,
            context: Optional[dict[str, Any]] = None) -> Measurement:
    """Measures every ordered pair of ``hosts`` and returns the model. ``out`` (a TOML path)
    is written at the end; the state file (default: beside ``out``) after every step, and a
    state measured with the same settings (and ``context``, e.g. the ground truth) is
    resumed. Ctrl-C raises ``KeyboardInterrupt`` with every finished step kept."""
    settings.check()
    names = [h.name for h in hosts]
    check_hosts(names, names, what="hosts")
    if state_file is None:
        if out is None:
            raise PathtwinError("give an output file or a state file: a measurement keeps its steps in one")
        state_file = state_path(Path(out))
    st = State.open(Path(state_file), {**settings.record(), "hosts": names, **(context or {})})
    flows = sorted(settings.flows)
    pairs = _pairs(hosts)
    plan = [(h.name, "probe", settings.probe_duration_s + 1) for h in hosts]
    plan += [(f"{a.name}->{b.name}", f"{n} flow{'s' if n > 1 else ''}", settings.duration_s) for a, b in pairs for n in flows]
    plan += [(label, "together", settings.duration_s) for label, _ in access_groups(names) if settings.together]
    if progress is not None:
        progress.plan(plan)
        for pair, step, _ in plan:
            if (together_key(pair, max(flows)) if step == "together" else _step_key(pair, step)) in st.steps:
                progress.done(pair, step)

    if not st.done("probe"):
        for h in hosts:
            if progress is not None:
                progress.start(h.name, "probe")
        # The echo servers outlast every probe series (they start together, and each takes a
        # second beyond its length for the last echoes) by a margin for slow starts.
        with EchoServers(hosts, settings.port, serve_s=settings.probe_duration_s + ECHO_MARGIN_S):
            series = probe_all(hosts, {h.name: [d for d in hosts if d is not h] for h in hosts}, settings.port,
                               settings.probe_interval_s, settings.probe_duration_s,
                               on_done=(lambda s: progress.done(s, "probe")) if progress is not None else None)
        st.record("probe", {s: {d: ps.to_json() for d, ps in by.items()} for s, by in series.items()})
    tport = settings.port + 1
    for a, b in pairs:
        for n in flows:
            pair, step = f"{a.name}->{b.name}", f"{n} flow{'s' if n > 1 else ''}"
            key = _step_key(pair, step)
            if st.done(key):
                continue
            if progress is not None:
                progress.start(pair, step)
            st.record(key, parallel_flows(a, b, n, settings.duration_s, tport, settings.cc))
            if progress is not None:
                progress.done(pair, step)

    by_name = {h.name: h for h in hosts}
    for label, members in together_groups(names, st.steps["probe"], settings):
        key = together_key(label, max(flows))
        if st.done(key):
            continue
        if progress is not None and label.startswith(("out ", "in ")):
            progress.start(label, "together")
        records = parallel_pairs([(by_name[a], by_name[b]) for a, b in members], max(flows), settings.duration_s, tport,
                                 settings.cc)
        st.record(key, {"members": [list(m) for m in members], "records": records})
        if progress is not None and label.startswith(("out ", "in ")):
            progress.done(label, "together")

    return conclude(names, st, settings, out, context)


def access_groups(names: Sequence[str]) -> list[tuple[str, list[Pair]]]:
    """Each host's paths out (``out h``: its uplink) and in (``in h``: its downlink), for hosts
    with two or more of each."""
    out: list[tuple[str, list[Pair]]] = []
    for h in names:
        others = [d for d in names if d != h]
        if len(others) >= 2:
            out.append((f"out {h}", [(h, d) for d in others]))
            out.append((f"in {h}", [(d, h) for d in others]))
    return out


def path_name(p: Pair) -> str:
    return f"{p[0]}->{p[1]}"


def probe_series(probe_step: dict) -> dict[str, dict[str, ProbeSeries]]:
    """The probe step's series, per source and destination."""
    return {s: {d: ProbeSeries.from_json(v) for d, v in by.items()} for s, by in probe_step.items()}


def cross_source_classes(probe: dict[str, dict[str, ProbeSeries]], settings: Settings) -> tuple[list[list[Pair]], dict]:
    """The delay-correlation classes among every source's paths at once (DCW over all of
    them, ``shared.cluster`` with its strict rule: both tests, complete linkage), and
    the clustering's record. Every source's probe rounds leave together, one
    ``probe_interval`` apart, so round r of one source's series lines up with round r of
    another's; clock offsets do not matter to the correlation and skew between machines is
    removed first (``one_way_delays``). Returns only the classes whose paths come from two or
    more sources: one source's are its own classes (``analyse``)."""
    series = {(s, d): ps for s, by in probe.items() for d, ps in by.items()}
    if len(series) < 2:
        return [], {"classes": []}
    # The rounds every series spans: a prober that started late skipped its first rounds
    # (``endpoints.probe``), and holding its first value over them would flatten a stretch
    # that the others' series move through.
    lo = max(int(ps.round.min()) if len(ps.round) else 0 for ps in series.values())
    hi = min(ps.rounds for ps in series.values())
    try:
        delays = {}
        for p, ps in series.items():
            keep = (ps.round >= lo) & (ps.round < hi)
            delays[path_name(p)] = shared.interpolate_lost(ps.round[keep] - lo, one_way_delays(ps)[0][keep], max(0, hi - lo))
    except PathtwinError as e:
        return [], {"classes": [], "error": str(e)}
    c = shared.cluster(delays, rho_shared=settings.rho_shared, min_spread_s=settings.min_spread_s, strict=True)
    classes: list[list[Pair]] = [[(x.split("->", 1)[0], x.split("->", 1)[1]) for x in cls] for cls in c.classes]
    cross = [sorted(cls) for cls in classes if len({a for a, _ in cls}) >= 2]
    record = {"classes": [[path_name(p) for p in cls] for cls in cross], "all_classes": c.classes,
              "disagreements": [list(p) for p in c.disagreements], "unjoined": [list(p) for p in c.unjoined],
              "rounds": [lo, hi]}
    return cross, record


def together_groups(names: Sequence[str], probe_step: dict, settings: Settings) -> list[tuple[str, list[Pair]]]:
    """The tests of paths loaded together, each as (label, member paths): the access groups,
    then the cross-source classes the probes found (none unless ``settings.together``)."""
    if not settings.together:
        return []
    return groups_of(names, cross_source_classes(probe_series(probe_step), settings)[0])


def groups_of(names: Sequence[str], cross: list[list[Pair]]) -> list[tuple[str, list[Pair]]]:
    """The access groups of ``names``, then a group per cross-source class that is not one of
    them: a class of every path into (or out of) one host is that host's access group,
    loaded once and one class of the model (``together_findings``). Measured twice it became
    two classes of the same paths, two queues in series where the truth has one (three-sites,
    a1, b1, c1, c2: every path into b1 is also the class the probes found through
    core1 -> core2, measured at 29.1 and 28.1 Mbit/s with 60 and 58 ms of queue)."""
    access = access_groups(names)
    known = {frozenset(members) for _, members in access}
    return access + [("paths " + ",".join(path_name(p) for p in cls), cls) for cls in cross if frozenset(cls) not in known]


def together_key(label: str, flows: int) -> str:
    return f"together {label} {flows}"


def conclude(names: list[str], st: State, settings: Settings, out: Optional[Path], context: Optional[dict[str, Any]]) -> Measurement:
    """The findings and the model from a state holding every step, written to ``out`` (if
    given) and kept in the state file: how every way of measuring ends."""
    findings = analyse(names, st.steps, sorted(settings.flows), settings)
    cfg = model.build(names, findings["rtt"], {k: {int(n): v for n, v in t.items()} for k, t in findings["throughput"].items()},
                      {s: c["classes"] for s, c in findings["shared"].items()},
                      [(g["members"], g["abw_bps"], g.get("queue_delay_s")) for g in findings["together"] if g["class"]])
    text = model.toml(cfg, _header(names, findings, context))
    st.findings = findings
    st.save()
    if out is not None:
        try:
            Path(out).write_text(text)
        except OSError as e:
            raise PathtwinError(f"{out}: cannot write the model ({e.strerror})") from None
    return Measurement(cfg, text, findings, Path(out) if out is not None else None, st.path)


def _step_key(pair: str, step: str) -> str:
    return "probe" if step == "probe" else f"tput {pair} {step.split()[0]}"


def analyse(names: list[str], steps: dict[str, Any], flows: list[int], settings: Settings) -> dict:
    """The findings from the recorded steps: per ordered pair the base RTT and the throughput
    table, per source the shared classes, each with its confidence."""
    probe = probe_series(steps["probe"])
    rtt = {f"{s}->{d}": ps.summary() for s, by in probe.items() for d, ps in by.items()}
    tput: dict[str, dict[str, dict]] = {}
    for a in names:
        for b in names:
            if a != b:
                tput[f"{a}->{b}"] = {str(n): steps[f"tput {a}->{b} {n}"] for n in flows}
    clusters: dict[str, dict] = {}
    for s, by in probe.items():
        dests = list(by)
        if len(dests) < 2:
            continue
        deskewed = {d: one_way_delays(by[d]) for d in dests}
        try:
            delays = {d: shared.interpolate_lost(by[d].round, deskewed[d][0], by[d].rounds) for d in dests}
        except PathtwinError as e:
            clusters[s] = {"classes": [], "error": str(e)}
            continue
        c = shared.cluster(delays, rho_shared=settings.rho_shared, min_spread_s=settings.min_spread_s)
        d = c.as_dict()
        d["clock_skew_ppm"] = {k: round(deskewed[k][1] * 1e6, 3) for k in dests if by[k].independent_clocks}
        d["shared_abw_bps"] = [model.shared_abw({k: {int(n): v for n, v in t.items()} for k, t in tput.items()}, s, cls)
                               for cls in c.classes]
        clusters[s] = d
    cross, cross_record = cross_source_classes(probe, settings)
    groups = groups_of(names, cross) if settings.together else []
    return {"rtt": rtt, "throughput": tput, "shared": clusters, "shared_paths": cross_record,
            "together": together_findings(groups, steps, tput, max(flows), rtt, cross),
            "cc": {"asked": settings.cc, "ran": congestion_controls_ran(steps)}}


def congestion_controls_ran(steps: dict[str, Any]) -> list[str]:
    """The congestion controls the throughput tests' senders ran, as each test recorded it
    (a test from before tests recorded it, or from an older agent, adds none)."""
    records = [r for k, r in steps.items() if k.startswith("tput ")]
    records += [r for k, v in steps.items() if k.startswith("together ") for r in v["records"]]
    return sorted({r["cc"] for r in records if r.get("cc")})


def together_findings(groups: list[tuple[str, list[Pair]]], steps: dict[str, Any], tput: dict[str, dict[str, dict]],
                      flows: int, rtt: dict[str, dict], cross: Sequence[Sequence[Pair]] = ()) -> list[dict]:
    """Per together test: its members, what they carried together (IP level, bit/s) and the
    sum of what each carried alone with as many flows; ``class`` whether the model holds it
    as a ``[[shared]]`` class: always for a cross-source delay class (``cross``; an access
    group with the same members stands for it, ``groups_of``), for another access group
    when together they carried less than ``ACCESS_SHARE`` of the sum; ``queue_delay_s`` the
    queueing delay they shared (``shared_queue_delay_s``). A test not run (a state from
    before these tests) is left out."""
    delay_classes = {frozenset(cls) for cls in cross}
    out = []
    for label, members in groups:
        rec = steps.get(together_key(label, flows))
        if rec is None:
            continue
        together = sum(r["abw_bps"] for r in rec["records"])
        alone = sum(tput[path_name(p)][str(flows)]["abw_bps"] for p in members)
        access = label.startswith(("out ", "in ")) and frozenset(members) not in delay_classes
        out.append({"label": label, "members": [path_name(p) for p in members], "abw_bps": together, "alone_sum_bps": alone,
                    "share": together / alone if alone > 0 else None,
                    "class": (not access) or (alone > 0 and together < ACCESS_SHARE * alone),
                    "queue_delay_s": shared_queue_delay_s(members, rec["records"], rtt)})
    return out


def shared_queue_delay_s(members: Sequence[Pair], records: Sequence[dict], rtt: dict[str, dict]) -> Optional[float]:
    """The queueing delay paths loaded together shared: the smallest of their round-trip
    increases (each test's ``rtt_loaded_ms`` less the pair's base RTT), since a queue every
    member crosses delays each of them by as much and some by more (their own queues too).
    TCP keeps a drop-tail bottleneck nearly full, so this is the class queue's delay when
    full, which the model keeps as that many full-sized packets at the class's capacity
    (``model.class_queue``; a DSL uplink's 100 packets at 2 Mbit/s: 0.6 s, against the
    80 ms that the default 1 MB drains in at 100 Mbit/s). None when a
    test has no loaded round trip (a state from before these records), or when the increase
    is within ``shared.MIN_SPREAD_S``, the delay spread below which the probes see no
    congestion either."""
    rises = []
    for p, r in zip(members, records):
        loaded, base = r.get("rtt_loaded_ms"), rtt.get(path_name(p), {}).get("rtt_min_ms")
        if loaded is None or base is None:
            return None
        rises.append((loaded - base) / 1e3)
    d = min(rises) if rises else 0.0
    return d if d >= shared.MIN_SPREAD_S else None


def queue_note(g: dict) -> str:
    """A together test's shared queueing delay for a line of text ("" when none was found)."""
    d = g.get("queue_delay_s")
    return f", queue {d * 1e3:.0f} ms" if d is not None else ""


def one_way_delays(ps: ProbeSeries) -> tuple[np.ndarray, float]:
    """A series' one-way delays for shared-bottleneck detection, and the clock skew taken
    out of them (s per s): as measured between hosts of one machine (one clock, skew 0);
    between machines, with the clocks' skew removed (``shared.remove_skew``)."""
    if ps.independent_clocks and len(ps.round) >= 2:
        return shared.remove_skew(ps.sent / 1e9, ps.one_way_s)
    return ps.one_way_s, 0.0


def cc_note(cc: dict) -> str:
    """What the findings' ``cc`` says, in a line: the reactivity tables are what that
    congestion control got, and a default differs between machines."""
    ran = ", ".join(cc["ran"]) or "not recorded"
    if cc["asked"]:
        return f"throughput tests' congestion control: {ran} (--cc {cc['asked']})"
    return f"throughput tests' congestion control: {ran} (each source's default; --cc chooses one)"


def _header(names: list[str], f: dict, context: Optional[dict]) -> list[str]:
    """Comment lines for the model: where it comes from and each value's confidence."""
    lines = [f"measured by `pathtwin measure` between {', '.join(names)}"]
    if context and context.get("ground_truth"):
        lines[0] += f" in {'a simulation' if context.get('engine') == 'sim' else 'an emulation'} of {context['ground_truth']}"
    lines.append(cc_note(f["cc"]))
    for k, r in f["rtt"].items():
        if r.get("rtt_min_ms") is None:
            continue
        t = f["throughput"][k]
        abw = ", ".join(f"{n}: {v['abw_bps'] / 1e6:.2f}±{v['std_bps'] / 1e6:.2f} Mbit/s (n={v['samples']})" for n, v in t.items())
        lines.append(f"{k}: rtt min {r['rtt_min_ms']:.3f} ms (p5 {r['rtt_p5_ms']:.3f}, {r['samples']} probes, "
                     f"{r['lost']} lost); abw {abw}")
    for s, c in f["shared"].items():
        if "error" in c:
            lines.append(f"from {s}: shared bottlenecks not tested: {c['error']}")
            continue
        cls = "; ".join("{" + ", ".join(x) + "} (flow-weighted ABW, n flows per path: "
                        + ", ".join(f"{n}: {v / 1e6:.2f}" for n, v in c["shared_abw_bps"][i].items()) + " Mbit/s)"
                        for i, x in enumerate(c["classes"])) or "none"
        extra = []
        if c["disagreements"]:
            extra.append("Rubenstein disagrees on " + ", ".join("/".join(p) for p in c["disagreements"]))
        if c["undecided"]:
            extra.append("Rubenstein undecided on " + ", ".join("/".join(p) for p in c["undecided"]))
        lines.append(f"from {s}: shared {cls}" + (f" ({'; '.join(extra)})" if extra else ""))
    for g in f.get("together", []):
        lines.append(f"{g['label'].split(' ')[0] if g['label'].startswith('paths') else g['label']} together: "
                     f"{g['abw_bps'] / 1e6:.2f} Mbit/s, alone {g['alone_sum_bps'] / 1e6:.2f} in sum" + queue_note(g)
                     + (" (a shared class)" if g["class"] else "")
                     + (f": {', '.join(g['members'])}" if g["label"].startswith("paths") else ""))
    return lines
