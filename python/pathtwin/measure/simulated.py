"""The whole measurement in the simulator: ``measure_simulated`` measures hosts of a ground
truth as ``measure_emulated`` does, but on the simulator's virtual clock, so that a
measurement of a network takes seconds and repeats bit for bit (issue #25: "the whole loop
also runs in the simulator ... so it can be swept in seconds").

The same steps, in simulations of the ground truth with its own ``[[flow]]`` cross traffic
(simulated TCP, as reactive as the emulator's kernel TCP):

- after ``SETTLE_S``, in one simulation, the probe series: a ``[[probe]]`` entry per ordered pair, every
  source's probes to its destinations leaving together (back to back on its first link),
  with the measuring tool's datagram sizes and its interval and length;
- then every throughput test, each in a simulation of its own from ``SETTLE_S`` (with a seed
  of its own, ``seed_of_test``): a ``[[flow]]`` of N bulk connections from a to b for
  ``duration``, its per-connection delivered bytes sampled every 50 ms as the tool's sink
  samples its sockets. The live tool's next test waits until its sink has read every
  connection to its close, and what a test wrote ahead of its stop drains long after it (up
  to 2 x 64 KB a connection, ``app.rs``: eight connections through a 2-Mbit/s uplink drain
  4.3-4.7 s); tests one after another in one simulation would start inside that tail;
- then, likewise (which paths to load together depends on what the probes found), the tests
  of paths loaded together (``session.together_groups``), each group's tests at once, each
  group in a simulation of its own.

The simulation's ``probes`` table and ``flow_series`` become the steps the live session
records (``ProbeSeries``, ``throughput.summarize``), and the same analysis makes the model
(``session.conclude``). What differs from a live measurement is only the measured
network's TCP (the simulator's endpoints instead of the kernel's) and that the echo leaves
the instant its probe arrives.

Not here: the analysis (``session``, ``shared``, ``model``), the live programs.
"""

from __future__ import annotations

import copy
import zlib
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ..config import ConfigSource, parse_quantity
from ..errors import PathtwinError
from .emulated import SETTLE_S, default_hosts, ground_truth
from .probes import ProbeSeries
from .session import Measurement, Settings, check_hosts, conclude, together_groups, together_key
from .state import State, state_path
from .throughput import BUCKET_S, SAMPLE_S, buckets, loaded_rtt_ms, summarize

#: Seconds a tests' simulation runs on after their stop (``add_tests``): each record reads
#: its connections a bucket past it (``throughput_step``).
RUN_TAIL_S = 1.0
#: Seconds after the probe series before the first test: the last echoes return.
PROBE_TAIL_S = 1.0


#: A throughput test: from, to, parallel flows.
Test = tuple[str, str, int]


def probe_steps(probes, names: Sequence[str], interval_s: float) -> dict:
    """The ``probe`` step (``{src: {dst: ProbeSeries as JSON}}``) from the ``probes`` table:
    a round is answered when its probe and its echo both arrived. The simulated echo leaves
    the instant its probe arrives: no wait in a server to take out of the round trip."""
    out: dict[str, dict[str, Any]] = {s: {} for s in names}
    for (src, dst), rows in probes.groupby(["src", "dst"], observed=True, sort=False):
        answered = rows[rows.arrived_ns.notna() & rows.echoed_ns.notna()]
        out[str(src)][str(dst)] = ProbeSeries(
            str(src), str(dst), len(rows), interval_s, answered["round"].to_numpy(np.int64),
            answered.sent_ns.to_numpy(np.int64), answered.arrived_ns.to_numpy(np.int64),
            answered.echoed_ns.to_numpy(np.int64)).to_json()
    return out


def by_time(series, column: str = "delivered_bytes"):
    """One column of ``flow_series`` for every connection at every sample: one row per sample
    time (ns), one column per connection; delivered bytes are 0 before a connection's first
    sample, other columns missing (NaN). Built once per run: every test reads its own
    columns of it."""
    table = series.pivot_table(index="time_s", columns="flow", values=column, aggfunc="last")
    if column == "delivered_bytes":
        table = table.fillna(0)
    table.index = (table.index.to_numpy() * 1e9).round().astype(np.int64)
    return table


def connections_loaded_rtt_ms(srtt, conns: list, window_ns: Sequence[int]) -> Optional[float]:
    """``throughput.loaded_rtt_ms`` of connections ``conns`` from their smoothed RTTs at every
    sample (``by_time(series, "srtt_ms")``: the senders' estimate, what a kernel's
    ``tcp_info`` reports) in the test's averaged window. A connection that never had an
    estimate in the run has no column in the table (the pivot leaves all-NaN columns out;
    with every pair of three-sites.toml at once some of the 120 connections had none): it
    counts as NaN, no estimate."""
    window = srtt.loc[(srtt.index >= window_ns[0]) & (srtt.index <= window_ns[1])]
    return loaded_rtt_ms(window.reindex(columns=conns).to_numpy(dtype=float).ravel())


def throughput_step(flows, delivered, entry: int, start_s: float, n: int, duration_s: float, tcp: dict,
                    srtt=None) -> dict:
    """A test's throughput record from its connections' delivered bytes at every sample
    (``by_time``), as ``throughput.parallel_flows`` makes it from the sink's counters, and
    with ``srtt`` (their smoothed RTTs, ``by_time(series, "srtt_ms")``) the round trip they
    had meanwhile (``rtt_loaded_ms``). ``tcp`` is the run's ``tcp_defaults``: a full
    segment's payload and IP bytes turn goodput into the IP-level ABW, and the largest window
    stands where the kernel's ``tcp_rmem`` maximum does (the model's ``wmax``)."""
    conns = flows[flows.entry == entry].flow.tolist()
    if len(conns) != n:
        raise PathtwinError(f"the simulation ran {len(conns)} of the test's {n} connections")
    t0_ns = int(round(start_s * 1e9))
    until_ns = t0_ns + int(round((duration_s + BUCKET_S) * 1e9))
    window = delivered.loc[(delivered.index > t0_ns) & (delivered.index <= until_ns)].reindex(columns=conns, fill_value=0)
    # From the test's start, when nothing was delivered (the sink's first sample is at its
    # first accept).
    samples = [(t0_ns, [0] * n)] + [(int(t), [int(v) for v in row]) for t, row in zip(window.index, window.to_numpy())]
    rec = summarize(buckets(samples, t0_ns, BUCKET_S, n), BUCKET_S, duration_s, tcp["payload"], tcp["ip_bytes"], n,
                    t0_ns=t0_ns)
    rec["receiver_rmem_max"] = int(tcp["max_window"])
    rec["kernel_counts"] = False
    ran = flows.loc[flows.entry == entry, "cc"].unique().tolist()
    rec["cc"] = str(ran[0]) if len(ran) == 1 else None
    if srtt is not None:
        rec["rtt_loaded_ms"] = connections_loaded_rtt_ms(srtt, conns, rec["window_ns"])
    return rec


def add_probes(cfg: dict, names: Sequence[str], settings: Settings, at_s: float) -> float:
    """Adds the probe series to ``cfg`` (a ``[[probe]]`` per ordered pair of ``names`` from
    ``at_s``); returns when the first test may start."""
    end = at_s + settings.probe_duration_s
    cfg["probe"] = [{"from": a, "to": b, "interval": f"{settings.probe_interval_s!r}s", "start": f"{at_s!r}s",
                     "stop": f"{end!r}s"} for a in names for b in names if a != b]
    return end + PROBE_TAIL_S


def add_tests(cfg: dict, batch: Sequence[Test], duration_s: float, at_s: float,
              cc: Optional[str] = None) -> list[tuple[int, float, int]]:
    """Adds the tests of ``batch`` to ``cfg``'s ``[[flow]]`` entries, all at ``at_s`` for
    ``duration_s``, with congestion control ``cc`` (None: the ground truth's ``[tcp]``, as a
    live test runs its host's default); sets ``[run]`` to cover them and to sample every
    ``SAMPLE_S`` (as the tool's sink). Returns per test its ``[[flow]]`` index, start (s)
    and flow count."""
    flows = cfg.setdefault("flow", [])
    index = []
    for a, b, n in batch:
        index.append((len(flows), at_s, n))
        flows.append({"from": a, "to": b, "app": "bulk", "count": n, "start": f"{at_s!r}s",
                      "stop": f"{at_s + duration_s!r}s", "label": f"test {a}->{b} x{n}"} | ({"cc": cc} if cc else {}))
    run = cfg.setdefault("run", {})
    run["duration"] = f"{at_s + duration_s + RUN_TAIL_S!r}s"
    run["sample_interval"] = f"{SAMPLE_S!r}s"
    return index


def check_cc(cfg: dict, test: Test, cc: str) -> None:
    """``--cc``'s refusal before anything is simulated: the simulator's own check of ``cfg``
    with ``test`` running ``cc`` (it names the controllers it has)."""
    from .. import _native
    from ..config import config_text, native_call

    run = copy.deepcopy(cfg)
    add_tests(run, [test], 1.0, 0.0, cc)
    try:
        native_call(_native.Simulation, *config_text(run))
    except PathtwinError as e:
        # The check is of the one flow added: its error, not the flow's place in the file.
        raise PathtwinError(f"--cc {cc}: {str(e).split(': ', 1)[-1]}") from None


def simulate_complete(cfg: dict, keep: Optional[Path] = None, progress: bool = False):
    """The simulation's result, whole: Ctrl-C during it raises ``KeyboardInterrupt`` (its
    tests are not whole, and nothing is recorded)."""
    from ..sim import simulate

    res = simulate(cfg, out=keep, progress=progress)
    if res.run["interrupted"]:
        # Ctrl-C: a test cut short measures nothing; a simulation takes seconds to redo.
        raise KeyboardInterrupt
    if not res.run["complete"]:
        raise PathtwinError("the simulation ended before its tests did")
    return res


def throughput_records(res, index: list[tuple[int, float, int]], duration_s: float) -> list[dict]:
    """Every test's throughput record (``throughput_step``, with the round trip its
    connections had)."""
    flows, delivered, srtt = res.flows, by_time(res.flow_series), by_time(res.flow_series, "srtt_ms")
    return [throughput_step(flows, delivered, entry, start_s, n, duration_s, res.run["tcp_defaults"], srtt)
            for entry, start_s, n in index]


def seed_of_test(base: int, purpose: str, k: int) -> int:
    """The seed of the ``k``-th of a list of tests each simulated on its own: from the ground
    truth's ``base`` seed, and ``purpose`` (a measurement's tests and a grading's are the
    same list in the same order, and with the same seeds each grading test would meet the
    very cross traffic its measurement did, packet for packet); a u32, as TOML holds it."""
    return zlib.crc32(f"{purpose} {base} {k}".encode())


def onoff_cycle_s(cfg: dict) -> float:
    """The longest on + off cycle of ``cfg``'s on/off ``[[flow]]``s (s; 0 without one)."""
    return max((parse_quantity("time", f["on"], "flow.on") + parse_quantity("time", f["off"], "flow.off")
                for f in cfg.get("flow", []) if f.get("app") == "onoff"), default=0.0)


def throughput_tests(cfg: dict, batches: Sequence[Sequence[Test]], duration_s: float, settle_s: float = SETTLE_S,
                     keep: Optional[Path] = None, purpose: Optional[str] = None,
                     cc: Optional[str] = None) -> list[list[dict]]:
    """Simulates ``cfg`` (its own ``[[flow]]`` cross traffic running from the start) with each
    batch of throughput tests in a simulation of its own from ``settle_s`` (``add_tests``):
    a test starts on no other test's tail, as the live tool's follow one another once the one
    before has closed its connections. With ``purpose``, each batch's simulation has a seed
    of its own (``seed_of_test``), and its tests start later by a share of the cross traffic's
    on/off cycle that the seed picks: on/off periods are fixed, and every test started at
    ``settle_s`` would meet the very same phase of them (unlike tests one after another, or
    live). Without it, ``cfg``'s seed and ``settle_s``. ``cc``: the tests' congestion control
    (``add_tests``). ``keep``: a directory for each
    simulation's own results (in it ``A->B xN`` for a batch of one test, else ``batch K``).
    Returns each test's record, per batch."""
    base = int(cfg.get("run", {}).get("seed", 1))
    cycle_s = onoff_cycle_s(cfg)
    out = []
    for k, batch in enumerate(batches):
        run = copy.deepcopy(cfg)
        at_s = settle_s
        if purpose is not None:
            seed = run.setdefault("run", {})["seed"] = seed_of_test(base, purpose, k)
            at_s += cycle_s * (seed % 1000) / 1000
        index = add_tests(run, batch, duration_s, at_s, cc)
        name = f"{batch[0][0]}->{batch[0][1]} x{batch[0][2]}" if len(batch) == 1 else f"batch {k}"
        res = simulate_complete(run, keep / name if keep is not None else None)
        out.append(throughput_records(res, index, duration_s))
    return out


def measure_simulated(source: ConfigSource, hosts: Optional[Sequence[str]] = None, settings: Optional[Settings] = None,
                      out: Optional[Path] = None, state_file: Optional[Path] = None, progress: bool = False,
                      settle_s: float = SETTLE_S, keep: Optional[Path] = None) -> Measurement:
    """Simulates ``source`` (a ground truth) with its cross traffic and the measurement of
    ``hosts`` (default: ``default_hosts``) with ``settings``; returns the model as
    ``measure_emulated`` does. ``progress`` shows the probe simulation's progress bar;
    ``keep`` names a directory for the simulations' own results: the probe series' tables
    in it, each test's (its flows among the cross traffic's) in ``tests/A->B xN``
    (``throughput_tests``). A state file holding every step (the same command run again) is
    concluded without simulating."""
    settings = settings or Settings()
    settings.check()
    truth = ground_truth(source)
    if truth.get("probe"):
        raise PathtwinError("the ground truth has [[probe]] entries of its own; the measurement adds its probes")
    names = check_hosts(list(hosts), truth["hosts"]) if hosts is not None else default_hosts(truth)
    if len(names) < 2:
        raise PathtwinError("the ground truth has fewer than two hosts to measure")
    if state_file is None:
        if out is None:
            raise PathtwinError("give an output file or a state file: a measurement keeps its steps in one")
        state_file = state_path(Path(out))
    if settings.cc is not None:
        check_cc(truth, (names[0], names[1], 1), settings.cc)
    origin = Path(str(source)).name if isinstance(source, (str, Path)) and "\n" not in str(source) else "<config>"
    context = {"ground_truth": origin, "ground_truth_config": truth, "engine": "sim", "settle_s": settle_s}
    st = State.open(Path(state_file), {**settings.record(), "hosts": names, **context})
    tests = [(a, b, n) for a in names for b in names if a != b for n in sorted(settings.flows)]
    if not st.done("probe"):
        cfg = copy.deepcopy(truth)
        cfg.setdefault("run", {})["duration"] = f"{add_probes(cfg, names, settings, settle_s)!r}s"
        probes = simulate_complete(cfg, keep, progress).tables.get("probes")
        if probes is None:
            raise PathtwinError("the simulation sent no probes")
        st.steps["probe"] = probe_steps(probes, names, settings.probe_interval_s)
        st.save()
    todo = [(f"tput {a}->{b} {n}", (a, b, n)) for a, b, n in tests if not st.done(f"tput {a}->{b} {n}")]
    if todo:
        records = throughput_tests(truth, [[test] for _, test in todo], settings.duration_s, settle_s,
                                   keep / "tests" if keep is not None else None, purpose="measure", cc=settings.cc)
        st.steps.update({key: batch[0] for (key, _), batch in zip(todo, records)})
        st.save()
    n = max(settings.flows)
    groups = [(label, members) for label, members in together_groups(names, st.steps["probe"], settings)
              if not st.done(together_key(label, n))]
    if groups:
        batches = [[(a, b, n) for a, b in members] for _, members in groups]
        # Each group in a simulation of its own (``throughput_tests``): c1's five paths out of
        # three-sites.toml, 20 connections over a 2 Mbit/s uplink, kept it full for 4 s after
        # their test, and a group after them in the same simulation had its ACKs wait there
        # (its loaded round trips 250-450 ms, 115-155 ms alone).
        records = throughput_tests(truth, batches, settings.duration_s, settle_s, cc=settings.cc)
        for (label, members), recs in zip(groups, records):
            st.steps[together_key(label, n)] = {"members": [list(m) for m in members], "records": recs}
        st.save()
    return conclude(names, st, settings, out, context)
