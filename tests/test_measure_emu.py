"""`pathtwin measure --emulate` against the router-level ground truth it measures
(examples/groundtruth/campus.toml, two-bottlenecks.toml), as a user runs it (root).

The expectations come from the ground truth, not from the tool:
- base RTT of a pair = twice the link delays on its route (the ground truth is a tree) plus
  each link's serialization of the probe and of its echo (92 and 64 IP bytes);
- ABW of a direction = the smallest rate on its route less the cross traffic that link
  direction carried *while the test ran* (per quarter second; within 15 % with several
  flows, an upper bound with one: see DELIVERED_TOLERANCE). The cross traffic is kernel TCP and
  backs off from the measurement's flows (the reactivity NSDI'09 §2.3 models), so "rate
  minus cross traffic" needs the cross traffic of that moment. The test reads it beside the
  measurement from the emulator's own per-route byte counters
  (``/run/pathtwin/RUN/stats.json``, refreshed every 250 ms), never from the tool's output;
- shared bottlenecks: from each source, the destinations whose routes cross a common link
  direction that the cross traffic loads (only congestion is visible to delay correlation).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, met_in_one_of, needs_root, require_emulator
from groundtruth_expect import Truth, expected_classes, written_queue_s
from pathtwin.config import parse_quantity
from pathtwin.measure.grade import GRADED_MODEL_STEP
from pathtwin.measure.model import toml

import pathtwin


GROUND_TRUTH = EXAMPLES / "groundtruth" / "campus.toml"
#: Ground truths measured, with the hosts and flow counts (kept small: every ordered pair
#: takes a 4-s test per flow count) and what the file's comments say about the source s.
#: two-bottlenecks is checked with four flows: its cross traffic is on more of the time, and
#: one flow with a 50-ms RTT left part of what the on/off flows gave back unused (5.2 of 7.4
#: and 6.8 of 8.2 Mbit/s in one run, 12 of 20 tests in another within 12 %): "rate less cross
#: traffic" is what TCP reaches with several flows, the reactivity the tables record.
CASES = {
    "campus": (GROUND_TRUTH, ["s", "d1", "d2", "d3"], [1, 4], {frozenset({"d1", "d2"})}),
    "two-bottlenecks": (EXAMPLES / "groundtruth" / "two-bottlenecks.toml", ["s", "d1", "d2", "d3", "d4"], [4],
                        {frozenset({"d1", "d2"}), frozenset({"d3", "d4"})}),
}
#: Each throughput test's length. The tool's default is 10 s; 8 s leaves 6 s after the
#: warm-up quarter. With 4 s, four flows' slow-start overshoot into the default 100-packet
#: queue was still being repaired inside the averaged window on the 64-ms paths (seen: 8.4 of
#: an idle 10 Mbit/s link, 7 % of the wire's bytes retransmissions).
TEST_DURATION_S = 8
#: Base RTT: the measured minimum may exceed the equation by the emulator's own handling
#: of a packet (tens to a few hundred µs on a 2-core VM, README), never undercut it.
RTT_EXCESS_MS = 0.5
#: ABW with several flows: measured within this fraction of the configured rate less the
#: cross traffic (the paper's own yardstick is 20 %; this VM's two cores are shared).
ABW_TOLERANCE = 0.15
#: ABW with one flow: "rate less cross traffic" is only an upper bound (within ABW_TOLERANCE).
#: One flow through a 40-packet queue that on/off cross traffic overflows in slow start may
#: lose a window and wait out a timeout: seen 3.2 of 10.3 Mbit/s on s->d1, where four flows
#: reached 15.2 of 15.2. What one flow gets is what the reactivity table records, not a
#: truth the ground truth fixes; so for one flow the test checks that the tool measured what
#: the flow got: within this fraction of the IP bytes the emulator delivered on that route in
#: the same window (its counters include retransmissions, which goodput does not; seen
#: 0.93-1.06 across 48 tests).
DELIVERED_TOLERANCE = 0.10


class Observer(threading.Thread):
    """Samples the emulator's per-route byte counters of the run that process ``pid`` started,
    with the wall time each new snapshot was first seen."""

    def __init__(self, pid: int, routes: list[tuple[str, str]]):
        super().__init__(daemon=True)
        self.pid, self.routes = pid, routes
        self.samples: list[tuple[float, dict[tuple[str, str], int]]] = []
        self.stop = threading.Event()

    def _run_dir(self) -> Path | None:
        for d in Path("/run/pathtwin").glob("*/state.json"):
            try:
                if json.loads(d.read_text()).get("pid") == self.pid:
                    return d.parent
            except (OSError, ValueError):
                pass
        return None

    def run(self) -> None:
        run_dir, last_t = None, None
        while not self.stop.is_set():
            if run_dir is None:
                run_dir = self._run_dir()
            else:
                try:
                    snap = json.loads((run_dir / "stats.json").read_text())
                except (OSError, ValueError):
                    snap = None
                if snap is not None and snap["t_s"] != last_t:
                    last_t = snap["t_s"]
                    got = {(r["src"], r["dst"]): r["bytes_out"] for r in snap["routes"]}
                    self.samples.append((time.time(), {k: got.get(k, 0) for k in self.routes}))
            time.sleep(0.02)

    def rates(self, route: tuple[str, str], edges: np.ndarray) -> np.ndarray:
        """Bit/s the route delivered between consecutive wall times ``edges`` (interpolated)."""
        t = np.array([s[0] for s in self.samples])
        b = np.array([s[1][route] for s in self.samples], dtype=float)
        assert len(t) > 2 and t[0] <= edges[0] and edges[-1] <= t[-1], "the emulator's counters do not cover the test"
        return np.diff(np.interp(edges, t, b)) * 8 / np.diff(edges)


def expected_abw(truth: Truth, obs: Observer, a: str, b: str, window_ns: list[int]) -> tuple[float, str]:
    """What a->b's route left free during the window: per quarter second (the counters'
    refresh), the smallest of its links' rates less the cross traffic they carried then,
    averaged over the window; and the link that was smallest most often. Per quarter second,
    not per window: on/off cross traffic leaves the uplink the bottleneck while off and the
    shared link while on, and the mean of a minimum is not the minimum of the means."""
    t0, t1 = window_ns[0] / 1e9, window_ns[1] / 1e9
    edges = np.linspace(t0, t1, max(2, round((t1 - t0) / 0.25) + 1))
    route = truth.route(a, b)
    cross = {h: np.zeros(len(edges) - 1) for h in route}
    for r in truth.cross_routes():
        bps = obs.rates(r, edges)
        for h in truth.route(*r):
            if h in cross:
                cross[h] += bps
    residual = np.array([truth.links[h][0] - cross[h] for h in route])  # links × intervals
    at = np.bincount(residual.argmin(axis=0), minlength=len(route)).argmax()
    return float(residual.min(axis=0).mean()), f"{route[at][0]}->{route[at][1]}"


def measure_command(path: Path, hosts: list[str], flow_counts: list[int], out: Path) -> list[str]:
    """The `pathtwin measure --emulate` these tests run: ``TEST_DURATION_S`` tests, 20-ms
    probes for 8 s, and NSDI'09's per-source measurement, which they grade against the truth;
    the tests of paths loaded together (cross-source classes, access links) are graded in the
    simulator (test_measure_sim.py), where they take seconds, not minutes."""
    return [sys.executable, "-m", "pathtwin.cli", "measure", "--emulate", str(path), "--hosts", ",".join(hosts),
            "--flows", ",".join(map(str, flow_counts)), "--duration", f"{TEST_DURATION_S}s", "--probe-interval", "20ms",
            "--probe-duration", "8s", "--no-together", "-o", str(out)]


def measure(case: str, out_dir: Path) -> tuple[Path, dict, Observer, str]:
    """`pathtwin measure --emulate` of CASES[case] as a user runs it, with the emulator's own
    per-route counters sampled beside it (``Observer``): the model, its record, the counters
    and the command's output."""
    path, hosts, flow_counts, _from_s = CASES[case]
    truth = Truth(path)
    out = out_dir / f"model-{time.monotonic_ns()}.toml"
    p = subprocess.Popen(measure_command(path, hosts, flow_counts, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    obs = Observer(p.pid, truth.cross_routes() + [(a, b) for a in hosts for b in hosts if a != b])
    obs.start()
    try:
        stdout, stderr = p.communicate(timeout=900)
    finally:
        obs.stop.set()
        obs.join()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, stderr[-2000:]
    record = json.loads(out.with_name(out.stem + ".measure.json").read_text())
    return out, record, obs, stdout


def first_then(first, again):
    """``run`` for ``met_in_one_of``: ``first()`` at the first attempt (on the measurement the
    module already made), ``again()`` (on a new one) at every later attempt, so that a retry
    never re-reads the measurement that missed."""
    attempts = iter([first])

    def run():
        return next(attempts, again)()

    return run


def model_of(model: Path, hosts: list[str], out: Path) -> Path:
    """The measured model ``model`` restricted to ``hosts``, written to ``out``: the paths
    between them and the shared classes of their sources, less the other destinations (a
    class left with one destination is none). Each path's values are what its own tests and
    probes measured, as a measurement of ``hosts`` alone would have; a class's ABW is its
    paths' (NSDI'09 §2.3), so it follows them."""
    cfg = tomllib.loads(model.read_text())
    keep = set(hosts)
    cfg["hosts"] = [h for h in cfg["hosts"] if h in keep]
    cfg["path"] = [p for p in cfg["path"] if set(p["between"]) <= keep]
    shared = []
    for c in cfg.get("shared", []):
        if "paths" in c:  # a class of (src, dst) paths: those between the hosts kept
            members = [pair for pair in c["paths"] if set(pair) <= keep]
            if len(members) >= 2:
                shared.append({**c, "paths": members})
        elif c["source"] in keep:
            dests = [d for d in c["destinations"] if d in keep]
            if len(dests) >= 2:
                shared.append({**c, "destinations": dests})
    cfg["shared"] = shared
    out.write_text(toml(cfg, [f"{model} restricted to {', '.join(hosts)}"]))
    return out


@pytest.fixture(scope="module")
def campus_measured(tmp_path_factory):
    """One `pathtwin measure --emulate` of campus (every ordered pair of s, d1, d2, d3 with 1
    and 4 flows), made once for the module: its own test checks it against the ground truth,
    and the graded test grades the model it wrote (on s, d1, d2) at its first attempt. Each
    of them used to measure it anew (228 s and 68 s of the serial phase)."""
    require_emulator()
    return measure("campus", tmp_path_factory.mktemp("campus-measured"))


def measurement_shortfalls(case: str, result) -> list[str]:
    """What a measurement of CASES[case] (``measure``) misses of its ground truth (module doc)."""
    path, hosts, flow_counts, _from_s = CASES[case]
    truth = Truth(path)
    out, record, obs, _stdout = result
    f, steps = record["findings"], record["steps"]
    missed = []
    lines = []
    for a in hosts:
        for b in hosts:
            if a == b:
                continue
            want = truth.rtt_ms(a, b)
            got = f["rtt"][f"{a}->{b}"]["rtt_min_ms"]
            lines.append(f"{a}->{b} rtt truth {want:.3f} measured {got:.3f}")
            if not 0 <= got - want <= RTT_EXCESS_MS:
                missed.append(f"{a}->{b}: base RTT {got:.3f} ms, truth {want:.3f} ms")
            for n in flow_counts:
                rec = steps[f"tput {a}->{b} {n}"]
                want_bps, at = expected_abw(truth, obs, a, b, rec["window_ns"])
                got_bps = rec["abw_bps"]
                delivered = float(obs.rates((a, b), np.array(rec["window_ns"]) / 1e9)[0])
                lines.append(f"{a}->{b} {n} flow(s): measured {got_bps / 1e6:.2f} Mbit/s, truth {want_bps / 1e6:.2f} at {at} "
                             f"({got_bps / want_bps:.3f}), the emulator delivered {delivered / 1e6:.2f} ({got_bps / delivered:.3f})")
                low = (1 - ABW_TOLERANCE) * want_bps if n > 1 else 0.0
                if not low <= got_bps <= (1 + ABW_TOLERANCE) * want_bps:
                    missed.append(f"{a}->{b} {n} flow(s): ABW {got_bps / 1e6:.2f} Mbit/s, truth {want_bps / 1e6:.2f} (at {at})")
                if n == 1 and abs(got_bps / delivered - 1) > DELIVERED_TOLERANCE:
                    missed.append(f"{a}->{b} 1 flow: measured {got_bps / 1e6:.2f} Mbit/s where the emulator delivered "
                                  f"{delivered / 1e6:.2f}")
    for s in hosts:
        dests = [d for d in hosts if d != s]
        want_c = expected_classes(truth, s, dests)
        got_c = {frozenset(c) for c in f["shared"][s]["classes"]}
        lines.append(f"from {s}: shared truth {sorted(map(sorted, want_c))} measured {sorted(map(sorted, got_c))}")
        if got_c != want_c:
            missed.append(f"from {s}: classes {sorted(map(sorted, got_c))}, truth {sorted(map(sorted, want_c))}")
    print("\n".join(lines))
    # The model is a topology the schema accepts, with those classes as [[shared]].
    cfg = tomllib.loads(out.read_text())
    assert sorted(cfg["hosts"]) == sorted(hosts) and len(cfg["path"]) == len(hosts) * (len(hosts) - 1) // 2
    got_shared = {(c.get("source"), frozenset(c.get("destinations", ()))) for c in cfg.get("shared", [])}
    want_shared = {(s, frozenset(c)) for s in hosts for c in f["shared"][s]["classes"]}
    if got_shared != want_shared:
        missed.append(f"model's [[shared]] {got_shared} != findings {want_shared}")
    return missed


@needs_root
@pytest.mark.parametrize("case", CASES)
def test_measure_emulated_ground_truth(case, tmp_path, no_namespace_left_behind, request):
    _path, hosts, _flow_counts, from_s = CASES[case]
    # The expectation's derivation agrees with what the file's comments say.
    assert expected_classes(Truth(CASES[case][0]), "s", [d for d in hosts if d != "s"]) == from_s
    again = lambda: measure(case, tmp_path)  # noqa: E731
    # campus is measured once for the module (``campus_measured``): a retry measures anew.
    run = first_then(lambda: request.getfixturevalue("campus_measured"), again) if case == "campus" else again
    met_in_one_of(2, run, lambda result: measurement_shortfalls(case, result))


@needs_root
def test_interrupted_measurement_resumes_and_its_twin_validates(tmp_path, no_namespace_left_behind):
    """Ctrl-C keeps every finished step in the state file; the same command measures only
    what is missing and writes the model; other settings are refused. Then `pathtwin measure
    validate` repeats the tests in the model's twin: each within NSDI'09 §4.5's 20 % of what
    was measured in the ground truth. The tests run ``--cc reno`` (seldom a machine's default):
    each records reno, and the twin repeats each with the controller its test recorded."""
    from conftest import interrupt_once_recorded

    out = tmp_path / "model.toml"
    state = tmp_path / "model.measure.json"
    # 4-s tests: with 2-s tests the twin's two-flow test of d3->s read 0.69-0.83 of the truth's
    # 8.0 Mbit/s in three runs, two of them outside 20 % (the averaged 1.5 s is still the flows' start: the twin
    # then started them on the paper's 100-Mbit/s capacity into a 1-MB queue, the truth on
    # d3's 8-Mbit/s uplink; a model's capacity is now the most its tests carried); with 4-s
    # tests every twin test was within 10 % in two runs (0.98-1.09).
    def command(flows: str) -> list[str]:
        return [sys.executable, "-m", "pathtwin.cli", "measure", "--emulate", str(GROUND_TRUTH), "--hosts", "s,d3",
                "--flows", flows, "--duration", "4s", "--probe-interval", "20ms", "--probe-duration", "3s", "--cc", "reno",
                "-o", str(out)]

    cmd = command("1,2")
    stopped = interrupt_once_recorded(cmd, state, 2)  # the probes and one throughput test
    stdout, stderr = stopped.stdout, stopped.stderr
    assert stopped.returncode == 130, stderr[-1000:]
    assert f"what was measured is kept in {state}" in stdout
    assert "Traceback" not in stderr
    kept = json.loads(state.read_text())["steps"]
    assert "probe" in kept and len(kept) >= 2 and not out.exists()

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-1000:]
    assert f"resuming from {state}" in again.stdout
    final = json.loads(state.read_text())
    assert set(final["steps"]) == {"probe", "tput s->d3 1", "tput s->d3 2", "tput d3->s 1", "tput d3->s 2"}
    for k, v in kept.items():  # measured once: the first run's records, untouched
        assert final["steps"][k] == v, k
    assert {v["cc"] for k, v in final["steps"].items() if k.startswith("tput ")} == {"reno"}
    assert "throughput tests' congestion control: reno (--cc reno)" in again.stdout
    cfg = tomllib.loads(out.read_text())
    assert [p_["between"] for p_ in cfg["path"]] == [["s", "d3"]]

    other = subprocess.run(command("1,4"), capture_output=True, text=True, timeout=120)
    assert other.returncode == 2 and "measured with other settings (flows)" in other.stderr

    val = subprocess.run([sys.executable, "-m", "pathtwin.cli", "measure", "validate", str(out), "-o", str(tmp_path / "v.json")],
                         capture_output=True, text=True, timeout=600)
    assert val.returncode == 0, val.stderr[-1000:]
    rows = json.loads((tmp_path / "v.json").read_text())["rows"]
    assert len(rows) == 4
    for r in rows:
        assert r["measured_bps"] == final["steps"][f"tput {r['pair']} {r['flows']}"]["abw_bps"]
        assert abs(r["twin_bps"] - r["measured_bps"]) <= 0.2 * r["measured_bps"], r
        assert r["cc"] == "reno", r
    assert "100 % of the tests within 20 %" in val.stdout


@needs_root
def test_the_model_is_graded_against_its_ground_truth_with_the_link_baseline_beside_it(campus_measured, tmp_path,
                                                                                      no_namespace_left_behind):
    """`pathtwin measure validate GROUND_TRUTH MODEL -o DIR` (NSDI'09 §4.5): the same
    experiments in the ground truth, the measured model and the link-emulator baseline.
    Expectations from the paper and from the file: each path alone with four flows, 80 % of
    the tests within 20 % (Figure 8); every pair at once (four flows each; in the truth the
    mean of three runs, at the phases of its on/off cross traffic they meet), the flows through
    the truth's shared bottleneck (s -> {d1, d2} over r1 -> r2) get no more than that link's rate in
    truth, the model within 20 % of the truth, and the link baseline, which gives each path
    its full ABW, more than the link's rate (Figure 9); shared classes and base RTTs as the
    file's routes give them.

    The first attempt grades the module's campus measurement (``campus_measured``, 8-s tests)
    on s, d1 and d2 (``model_of``); a retry measures those three anew, as before."""
    truth = Truth(GROUND_TRUTH)
    hosts = ["s", "d1", "d2"]
    bottleneck_bps = truth.links[("r1", "r2")][0]

    def grade(model: Path):
        out = tmp_path / f"val-{time.monotonic_ns()}"
        done = subprocess.run([sys.executable, "-m", "pathtwin.cli", "measure", "validate", str(GROUND_TRUTH), str(model),
                               "--flows", "4", "--duration", "5s", "-o", str(out)], capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        assert (out / "error_cdf_alone.png").stat().st_size > 0 and (out / "error_cdf_together.png").stat().st_size > 0
        rec = json.loads((out / "validation.json").read_text())
        # Every pair at once three times in the truth, whose on/off cross traffic each run
        # meets at another phase, once in the model and the baseline (no cross traffic); the
        # truth's result per pair is the mean of its runs.
        steps = json.loads((out / "validation.state.json").read_text())["steps"]
        runs = [steps[k] for k in ("truth together", "truth together 2", "truth together 3")]
        assert {k for k in steps if "together" in k} == {"truth together", "truth together 2", "truth together 3",
                                                           "model together", "link together"}
        pairs = [(a, b) for a in hosts for b in hosts if a != b]  # each run's order (the model's hosts)
        for c in (c for c in rec["cases"] if c["experiment"] == "together"):
            i = pairs.index((c["src"], c["dst"]))
            assert c["truth_bps"] == pytest.approx(sum(r[i] for r in runs) / 3), c
        return rec, done.stdout

    def measured_anew():
        # A retry measures anew: the model's ABW of a path is one test against on/off
        # cross traffic, and a test that fell in a quiet spell gives a model that no repeat of
        # the validation can save (one CI run: s->d1 measured 18 Mbit/s where the truth then
        # carried 11.6-12.2, in both validations of that one model). It measures as the first
        # attempt's model was (``measure_command``: 8-s tests, NSDI'09's per-source classes), so that
        # both attempts grade one kind of model. With the paths loaded together measured too,
        # the class out of s is what its together test got, and that test gets less than the
        # truth's every pair at once (three measurements: 12.8, 13.4 and 15.2 Mbit/s; the
        # truth's means of three runs 16.0 and 18.1), a model the simulator's tests grade
        # (test_measure_sim.py).
        model = tmp_path / f"model-{time.monotonic_ns()}.toml"
        measured = subprocess.run(measure_command(GROUND_TRUTH, hosts, [1, 4], model), capture_output=True, text=True, timeout=900)
        assert measured.returncode == 0, measured.stderr[-2000:]
        return grade(model)

    first = model_of(campus_measured[0], hosts, tmp_path / "campus-s-d1-d2.toml")
    run = first_then(lambda: grade(first), measured_anew)

    def shortfalls(result) -> list[str]:
        rec, _stdout = result
        missed = []
        alone = [c for c in rec["cases"] if c["experiment"] == "alone"]
        close = [c for c in alone if abs(c["model_bps"] - c["truth_bps"]) <= 0.2 * c["truth_bps"]]
        if len(close) < 0.8 * len(alone):
            missed.append(f"alone: {len(close)} of {len(alone)} within 20 %: {alone}")
        [b] = rec["shared_bottlenecks"]
        if not b["truth_bps"] <= 1.05 * bottleneck_bps < b["link_bps"]:
            missed.append(f"at the bottleneck: truth {b['truth_bps']:.0f}, link {b['link_bps']:.0f}, rate {bottleneck_bps:.0f}")
        if abs(b["model_bps"] - b["truth_bps"]) > 0.2 * b["truth_bps"]:
            missed.append(f"at the bottleneck: model {b['model_bps']:.0f} bit/s, truth {b['truth_bps']:.0f}")
        return missed

    rec, stdout = met_in_one_of(2, run, shortfalls)
    # Every experiment once per environment: 6 ordered pairs alone with 4 flows, and together.
    # Alone, every path carries its flows in every environment; together, a pair may get
    # next to nothing in a run (24 connections into d1's 15-Mbit/s uplink with on/off cross
    # traffic beside them): recorded, not required positive. (Runs before the sink counted a
    # test from its first byte read pairs whose handshakes had waited as 0: one read d1 -> s
    # as nothing while d1 -> d2's four flows took 14.3 of the uplink.)
    pairs = {(a, b) for a in hosts for b in hosts if a != b}
    for experiment in ("alone", "together"):
        got = [c for c in rec["cases"] if c["experiment"] == experiment]
        assert {(c["src"], c["dst"]) for c in got} == pairs and len(got) == len(pairs), experiment
        assert all(c[f"{env}_bps"] >= 0 for c in got for env in ("truth", "model", "link")), got
        if experiment == "alone":
            assert all(c[f"{env}_bps"] > 0 for c in got for env in ("truth", "model", "link")), got
    # The truth's classes are the ones the file's routes and cross traffic imply.
    for s in hosts:
        want = expected_classes(truth, s, [d for d in hosts if d != s])
        assert {frozenset(c) for c in rec["shared"]["truth_classes"][s]} == want, s
    assert rec["shared"]["precision"] == rec["shared"]["recall"] == 1.0, rec["shared"]
    [b] = rec["shared_bottlenecks"]
    assert (b["source"], sorted(b["destinations"])) == ("s", ["d1", "d2"])
    for r in rec["base_rtt"]:
        want = 2e3 * sum(truth.links[h][1] for h in truth.route(r["src"], r["dst"]))
        assert abs(r["truth_ms"] - want) < 1e-9, r
        assert 0 <= r["model_ms"] - want <= 2 * RTT_EXCESS_MS, r
    assert "shared bottlenecks: precision 1.00, recall 1.00" in stdout


@needs_root
def test_paths_loaded_together_find_the_access_links_in_the_emulator(tmp_path, no_namespace_left_behind):
    """The measurement's tests of paths loaded together (issue #25: each host's paths out and
    in at once) in the emulator, where they were checked by hand only: campus's d1, d2 and d3
    measured as a user runs it (four flows, 4-s tests). Expectations from the file's links,
    not from the tool: a group whose members' routes share a link direction (the host's own
    access link, or r1 -> r3 for every path into d3) that carries at most three quarters of
    what the members' routes allow one by one (the tool's threshold is 90 % of what they
    carried alone; the margin is for tests alone that fall short of their route's rate) is
    a ``[[shared]]`` class in the model, with an ABW at most 6 % above that link's rate:
    d1's, d2's and d3's uplinks (15, 25, 8 Mbit/s) and r1 -> r3 (10 Mbit/s) are such links.
    6 %: bytes that a receiver held out of order before the averaged window and releases in
    it when a recovery ends count as goodput there, up to a queue's worth (100 packets in the
    3 s averaged are 0.4 Mbit/s; seen +3.4 % on d1's uplink and +5.3 % into d3).

    Each such class keeps that link's queue in time (its packets at its capacity, from the
    kernel's smoothed RTTs the senders read): at least half its delay when full (kernel CUBIC's
    sawtooth drains it between losses further than the simulator's NewReno) and at most
    20 % above it plus the delay of any loaded queue every member's round trip crosses too,
    which their round trips cannot tell apart from it: d3's paths out cross r1 -> r2 (seen
    173 ms against 150 + 24), and so do the ACKs of d3's paths in, on their way back (seen
    133 and 144 ms against 120 + 24). 20 %: the estimate is the 90th percentile of eight
    connections' smoothed RTTs, which also hold delayed ACKs and the return path's
    serialization (seen +1 % and +2 % on d1's and d2's uplinks)."""
    truth = Truth(GROUND_TRUTH)
    hosts = ["d1", "d2", "d3"]
    out = tmp_path / "model.toml"
    r = subprocess.run([sys.executable, "-m", "pathtwin.cli", "measure", "--emulate", str(GROUND_TRUTH), "--hosts",
                        ",".join(hosts), "--flows", "4", "--duration", "4s", "--probe-interval", "20ms",
                        "--probe-duration", "3s", "-o", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    print(r.stdout)
    findings = json.loads(out.with_name(out.stem + ".measure.json").read_text())["findings"]
    groups = {g["label"]: g for g in findings["together"]}
    written = [c for c in tomllib.loads(out.read_text()).get("shared", []) if "paths" in c]

    def bottleneck(route: list[tuple[str, str]]) -> float:
        return min(truth.links[h][0] for h in route)

    clear = []
    for h in hosts:
        others = [d for d in hosts if d != h]
        for label, members in ((f"out {h}", [(h, d) for d in others]), (f"in {h}", [(d, h) for d in others])):
            routes = [truth.route(a, b) for a, b in members]
            common = set.intersection(*map(set, routes))
            shared_bps = min(truth.links[c][0] for c in common)
            if sum(map(bottleneck, routes)) < 4 / 3 * shared_bps:
                continue  # the members' own bottlenecks bind first: not a clear class
            clear.append(label)
            g = groups[label]
            assert g["class"] and g["abw_bps"] <= 1.06 * shared_bps, (label, shared_bps, g)
            [cls] = [c for c in written if {tuple(p) for p in c["paths"]} == set(members)]
            link = min(common, key=lambda c: truth.links[c][0])
            full = truth.full_queue_s(link)
            round_trips = [set(truth.route(a, b)) | set(truth.route(b, a)) for a, b in members]
            also = sum(truth.full_queue_s(c) for c in set.intersection(*round_trips) & truth.loaded() if c != link)
            delay = written_queue_s(cls)
            print(f"{label}: {g['abw_bps'] / 1e6:.2f} Mbit/s through {link} ({shared_bps / 1e6:.0f}), "
                  f"queue delay {delay * 1e3:.1f} ms, full {full * 1e3:.1f} ms (+ {also * 1e3:.1f} loaded)")
            assert 0.5 * full <= delay <= 1.2 * (full + also), (label, delay, full, also)
    assert sorted(clear) == ["in d3", "out d1", "out d2", "out d3"], clear


@needs_root
def test_an_interrupted_grading_resumes_with_what_it_measured(tmp_path, no_namespace_left_behind):
    """An emulated grading takes tens of minutes (two-bottlenecks.toml: about 45), and one
    failure at its end used to lose all of it. Ctrl-C keeps every experiment's result in
    DIR/validation.state.json; the same command measures only the rest, and validation.json
    holds the first run's results untouched."""
    from conftest import interrupt_once_recorded

    truth = tmp_path / "truth.toml"
    truth.write_text('hosts = ["a", "b"]\nrouters = []\n[[link]]\nbetween = ["a", "b"]\nrate = "10mbit"\ndelay = "5ms"\n')
    model = tmp_path / "model.toml"
    model.write_text('hosts = ["a", "b"]\n[[path]]\nbetween = ["a", "b"]\nrtt = "10ms"\nabw = "10mbit"\nwmax = "32768KiB"\n')
    out = tmp_path / "val"
    state = out / "validation.state.json"
    cmd = [sys.executable, "-m", "pathtwin.cli", "measure", "validate", str(truth), str(model), "--flows", "1",
           "--duration", "2s", "--no-together", "-o", str(out)]
    stopped = interrupt_once_recorded(cmd, state, 3)
    assert stopped.returncode == 130 and f"what was measured is kept in {state}" in stopped.stdout, stopped.stderr[-1000:]
    assert "Traceback" not in stopped.stderr
    kept = json.loads(state.read_text())["steps"]
    assert len(kept) >= 3 and not (out / "validation.json").exists()

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-1000:]
    assert f"resuming from {state}" in again.stdout
    final = json.loads(state.read_text())["steps"]
    assert set(final) == {f"{env} {pair} 1" for env in ("truth", "model", "link") for pair in ("a->b", "b->a")} | {GRADED_MODEL_STEP}
    for k, v in kept.items():  # measured once: the first run's results, untouched
        assert final[k] == v, k
    for c in json.loads((out / "validation.json").read_text())["cases"]:
        for env in ("truth", "model", "link"):
            assert c[f"{env}_bps"] == final[f"{env} {c['src']}->{c['dst']} 1"], (env, c)


@needs_root
def test_a_grading_asked_for_more_runs_measures_only_the_runs_it_lacks(tmp_path, no_namespace_left_behind):
    """``--runs``: where the truth has cross traffic (here an on/off flow a -> b), each path's
    experiment runs that many times, all paths once, then all again, and the truth's result is
    their mean; the model and its baseline (no cross traffic) run once. The same command with
    more runs resumes: it measures only the new runs, and the ones kept stay as measured; and
    another model graded in the same directory reuses the truth's runs, which do not depend
    on it."""
    truth = tmp_path / "truth.toml"
    truth.write_text('hosts = ["a", "b"]\nrouters = []\n[[link]]\nbetween = ["a", "b"]\nrate = "10mbit"\ndelay = "5ms"\n'
                     '[[flow]]\nfrom = "a"\nto = "b"\napp = "onoff"\non = "0.6s"\noff = "0.9s"\n')
    model = tmp_path / "model.toml"
    model.write_text('hosts = ["a", "b"]\n[[path]]\nbetween = ["a", "b"]\nrtt = "10ms"\nabw = "6mbit"\nwmax = "32768KiB"\n')
    out = tmp_path / "val"
    state = out / "validation.state.json"

    def grade(runs: int, model: Path = model) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "pathtwin.cli", "measure", "validate", str(truth), str(model),
                               "--flows", "1", "--duration", "2s", "--no-together", "--runs", str(runs), "-o", str(out)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        return done

    grade(2)
    kept = json.loads(state.read_text())["steps"]
    pairs = ("a->b", "b->a")
    assert set(kept) == ({f"truth {p} 1" for p in pairs} | {f"truth {p} 1 run 2" for p in pairs}
                         | {f"{env} {p} 1" for env in ("model", "link") for p in pairs} | {GRADED_MODEL_STEP})
    again = grade(3)
    assert f"resuming from {state}" in again.stdout
    final = json.loads(state.read_text())["steps"]
    assert set(final) - set(kept) == {f"truth {p} 1 run 3" for p in pairs}
    for k, v in kept.items():
        assert final[k] == v, k
    rec = json.loads((out / "validation.json").read_text())
    assert rec["runs"] == 3 and "alone_truth_run_within_10pct" in rec["summary"]
    for c in rec["cases"]:
        pair = f"{c['src']}->{c['dst']}"
        runs = [final[f"truth {pair} 1"], final[f"truth {pair} 1 run 2"], final[f"truth {pair} 1 run 3"]]
        assert c["truth_runs_bps"] == runs and c["truth_bps"] == pytest.approx(sum(runs) / 3), c
        assert c["model_bps"] == final[f"model {pair} 1"] and "model_runs_bps" not in c, c

    # Another model of the same truth: the truth's runs are kept, the model's and the
    # baseline's experiments run anew. The baseline is a link at the 1-flow ABW, which no
    # burst can pass faster: 2 Mbit/s carries a third of the first model's 6. (The path
    # model's 100-Mbit/s capacity lets a slow start's burst through above the ABW until its
    # queue fills, as a FIFO shared with constant-rate cross traffic does: in a 2-s test that
    # is most of the averaged window.)
    slower = tmp_path / "slower.toml"
    slower.write_text(model.read_text().replace('abw = "6mbit"', 'abw = "2mbit"'))
    grade(3, slower)
    regraded = json.loads(state.read_text())["steps"]
    assert {k: v for k, v in regraded.items() if k.startswith("truth ")} == {k: v for k, v in final.items() if k.startswith("truth ")}
    for c, before in zip(json.loads((out / "validation.json").read_text())["cases"], rec["cases"]):
        pair = f"{c['src']}->{c['dst']}"
        assert c["truth_runs_bps"] == before["truth_runs_bps"], c
        assert c["model_bps"] == regraded[f"model {pair} 1"] != final[f"model {pair} 1"], c
        assert c["link_bps"] < 0.5 * before["link_bps"], (c, before)
