"""`pathtwin measure --simulate` and `measure validate --engine sim`: the whole measurement
loop on the simulator's clock (issue #25), checked against what the ground truth itself
says (``groundtruth_expect``), as ``test_measure_emu.py`` checks the emulated loop:

- base RTT of a pair = the link delays on its route, twice, plus each link's serialization of
  the probe and of its echo: exact here, as the simulator adds no handling time of its own;
- ABW of a direction = the smallest rate on its route less the cross traffic that link
  carried while the test ran (per quarter second), the cross traffic read from the
  simulation's own per-flow series (the run the tool kept with ``keep``);
- shared bottlenecks: from each source, the destinations whose routes cross a common link
  direction the cross traffic loads;
- the same command twice writes the same model, byte for byte;
- graded in the simulator, the model meets NSDI'09 Figure 8's 80 % within 20 % and, where two
  paths share the truth's bottleneck, gets what the truth gets there within 20 % while the
  link baseline gets more (Figure 9);
- a test is not measured in the tail of the one before (each in a simulation of its own).
"""

from __future__ import annotations

import functools
import json
import tomllib

import numpy as np
import pandas as pd
import pytest
from conftest import EXAMPLES, run_cli, untimed
from groundtruth_expect import (Truth, access_limited, expected_classes, expected_path_classes, probe_wait_bound_ms,
                                written_queue_s)

from pathtwin.measure import Settings  # noqa: E402
from pathtwin.measure.simulated import measure_simulated  # noqa: E402

CAMPUS = EXAMPLES / "groundtruth" / "campus.toml"
HOSTS = ["s", "d1", "d2", "d3"]
SETTINGS = dict(flows=[1, 4], duration_s=8.0, probe_interval_s=0.02, probe_duration_s=8.0)
#: The findings round RTTs to 0.1 µs.
RTT_ROUNDING_MS = 0.0002
#: ABW with several flows within this fraction of the rate less the cross traffic (as the
#: emulated test); with one flow that is an upper bound only (a flow in slow start against
#: on/off traffic may lose a window).
ABW_TOLERANCE = 0.15


@functools.lru_cache(maxsize=None)
def kept_run(kept):
    """The kept simulation's flows, flow series and TCP defaults, read once for every test."""
    return (pd.read_parquet(kept / "flows.parquet"), pd.read_parquet(kept / "flow_series.parquet"),
            json.loads((kept / "run.json").read_text())["tcp_defaults"])


def quarter_second_residual(truth: Truth, kept, route: list[tuple[str, str]], window_s: tuple[float, float]) -> float:
    """What ``route`` left free in the window: per quarter second, the smallest of its links'
    rates less the IP rate of the cross traffic crossing that link then; their mean."""
    flows, series, tcp = kept_run(kept)
    to_ip = tcp["ip_bytes"] / tcp["payload"]
    edges = np.arange(window_s[0], window_s[1] + 1e-9, 0.25)
    cross = {h: np.zeros(len(edges) - 1) for h in route}
    for _, f in flows[flows.entry < len(truth.flows)].iterrows():
        src, dst = truth.data_ends(truth.flows[int(f.entry)])
        s = series[series.flow == f.flow]
        delivered = np.interp(edges, s.time_s.to_numpy(), s.delivered_bytes.to_numpy().astype(float))
        bps = np.diff(delivered) * 8 / 0.25 * to_ip
        for h in truth.route(src, dst):
            if h in cross:
                cross[h] += bps
    residual = np.array([truth.links[h][0] - cross[h] for h in route])
    return float(residual.min(axis=0).mean())


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    d = tmp_path_factory.mktemp("measure-sim")
    m = measure_simulated(CAMPUS, hosts=HOSTS, settings=Settings(**SETTINGS), out=d / "model.toml", keep=d / "sim")
    return m, d


def test_base_rtts_are_the_routes_delays_and_serialization(measured):
    """The simulator adds no handling time: the minimum is the equation's, except that every
    source's probes leave at once, back to back, so a probe may wait behind others of its
    round (``probe_wait_bound_ms``)."""
    m, _ = measured
    truth = Truth(CAMPUS)
    for a in HOSTS:
        for b in HOSTS:
            if a != b:
                got, want = m.findings["rtt"][f"{a}->{b}"]["rtt_min_ms"], truth.rtt_ms(a, b)
                wait = probe_wait_bound_ms(truth, HOSTS, a, b)
                assert -RTT_ROUNDING_MS <= got - want <= wait + RTT_ROUNDING_MS, f"{a}->{b}: {got} ms, truth {want:.4f}"


def test_shared_classes_are_where_the_cross_traffic_queues(measured):
    m, _ = measured
    truth = Truth(CAMPUS)
    for s in HOSTS:
        want = expected_classes(truth, s, [d for d in HOSTS if d != s])
        got = {frozenset(c) for c in m.findings["shared"][s]["classes"]}
        assert got == want, f"from {s}: {got}, truth {want}"
    cfg = tomllib.loads(m.out.read_text())
    assert {(c["source"], frozenset(c["destinations"])) for c in cfg["shared"] if "source" in c} == \
        {(s, frozenset(c)) for s in HOSTS for c in m.findings["shared"][s]["classes"]}


def test_abw_is_the_route_rate_less_the_cross_traffic(measured):
    m, d = measured
    truth = Truth(CAMPUS)
    record = json.loads((d / "model.measure.json").read_text())
    lines, missed = [], []
    for a in HOSTS:
        for b in HOSTS:
            if a == b:
                continue
            for n in SETTINGS["flows"]:
                rec = record["steps"][f"tput {a}->{b} {n}"]
                window = (rec["window_ns"][0] / 1e9, rec["window_ns"][1] / 1e9)
                want = quarter_second_residual(truth, d / "sim" / "tests" / f"{a}->{b} x{n}", truth.route(a, b), window)
                got = rec["abw_bps"]
                lines.append(f"{a}->{b} x{n}: {got / 1e6:.2f} Mbit/s, truth {want / 1e6:.2f} ({got / want:.3f})")
                low = (1 - ABW_TOLERANCE) * want if n > 1 else 0.0
                if not low <= got <= (1 + ABW_TOLERANCE) * want:
                    missed.append(lines[-1])
    print("\n".join(lines))
    assert not missed, missed


def test_the_same_command_writes_the_same_model(tmp_path):
    texts = []
    for k in range(2):
        out = tmp_path / f"m{k}" / "model.toml"
        out.parent.mkdir()
        r = run_cli("measure", "--simulate", CAMPUS, "--hosts", "s,d1,d3", "--flows", "1,4", "--duration", "3s",
                    "--probe-interval", "50ms", "--probe-duration", "3s", "-o", out, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "s->d3" in r.stdout and "from s:" in r.stdout
        texts.append(out.read_text())
    assert texts[0] == texts[1]
    # A finished record is concluded again without simulating: same model.
    again = run_cli("measure", "--simulate", CAMPUS, "--hosts", "s,d1,d3", "--flows", "1,4", "--duration", "3s",
                    "--probe-interval", "50ms", "--probe-duration", "3s", "-o", tmp_path / "m0" / "model.toml", timeout=300)
    assert again.returncode == 0 and "resuming" in again.stdout
    assert (tmp_path / "m0" / "model.toml").read_text() == texts[0]


def test_graded_in_the_simulator_the_model_meets_figures_8_and_9(tmp_path):
    """Hosts s, d1, d2: two of the paths share the truth's 20 Mbit/s bottleneck (r1 -> r2)."""
    model = tmp_path / "model.toml"
    r = run_cli("measure", "--simulate", CAMPUS, "--hosts", "s,d1,d2", "--flows", "1,4", "--duration", "8s",
                "--probe-interval", "20ms", "--probe-duration", "8s", "-o", model, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = tmp_path / "val"
    r = run_cli("measure", "validate", CAMPUS, model, "--engine", "sim", "--flows", "1,4", "--duration", "8s", "-o", out,
                timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    print(r.stdout)
    rec = json.loads((out / "validation.json").read_text())
    assert rec["engine"] == "sim"
    alone = [c for c in rec["cases"] if c["experiment"] == "alone"]
    assert len(alone) == 12
    close = [c for c in alone if abs(c["model_error"]) <= 0.2]
    assert len(close) >= 0.8 * len(alone), alone
    [b] = rec["shared_bottlenecks"]
    assert b["source"] == "s" and b["destinations"] == ["d1", "d2"]
    assert b["truth_bps"] <= 20e6 * 1.03, b
    # 25 %: the model's access-link classes (s's uplink, d1's and d2's downlinks, each loaded
    # with every pair at once here) are what their own paths carried together, and TCP's
    # split among queues in series follows the round trips only roughly: with them this
    # bottleneck went from +14.5 % to +22.5 % while the mean per-path error of the same
    # experiment fell from 67 % to 23 % (below).
    assert abs(b["model_error"]) <= 0.25 and b["link_bps"] > 1.2 * b["truth_bps"], b
    together = [c for c in rec["cases"] if c["experiment"] == "together"]
    mean_error = {env: sum(abs(c[f"{env}_error"]) for c in together) / len(together) for env in ("model", "link")}
    assert mean_error["model"] < 0.5 * mean_error["link"], mean_error
    assert rec["shared"]["precision"] == 1.0 and rec["shared"]["recall"] == 1.0
    assert (out / "error_cdf_alone.png").stat().st_size > 0


def test_every_environment_runs_the_ground_truths_tcp(tmp_path):
    """The foreground's TCP is the experimenter's: a truth whose endpoints allow a 16-KiB flight
    is graded against a model (which records no [tcp]) and its link baseline running the same
    endpoints, so all three are window-limited at W / RTT, far below the path's ABW."""
    window_b, rtt_s = 16 * 1024, 0.050
    truth = tmp_path / "truth.toml"
    truth.write_text('hosts = ["a", "b"]\nrouters = []\n[run]\nduration = "30s"\n'
                     '[tcp]\nprofile = "linux"\ncc = "cubic"\nmax_window = "16KiB"\n'
                     '[[link]]\nbetween = ["a", "b"]\nrate = "50mbit"\ndelay = "25ms"\n')
    model = tmp_path / "model.toml"
    model.write_text('hosts = ["a", "b"]\n[[path]]\nbetween = ["a", "b"]\nrtt = "50ms"\nabw = "48mbit"\n'
                     'wmax = "32768KiB"\n')  # as `measure` writes it: the receivers' buffer
    out = tmp_path / "val"
    r = run_cli("measure", "validate", truth, model, "--engine", "sim", "--flows", "1", "--duration", "4s",
                "--no-together", "-o", out, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    window_limited_bps = window_b * 8 / rtt_s * 1500 / 1448  # IP level, as the records are
    for c in json.loads((out / "validation.json").read_text())["cases"]:
        for env in ("truth", "model", "link"):
            assert 0.7 * window_limited_bps <= c[f"{env}_bps"] <= 1.05 * window_limited_bps, (env, c)


def test_with_runs_the_truth_is_graded_by_its_mean_and_its_spread_is_reported(tmp_path):
    """``--runs 3``: each path's experiment three times in the truth, whose on/off cross
    traffic (campus: x1 -> x2 through r1 -> r2) each run meets at another phase; the grade is
    against their mean, the first run is the one a single-run grading makes (more runs add to
    it), the model (no cross traffic) runs once, and the summary's share of truth runs within
    10 % and 20 % of the mean of their case's other runs is that share of the runs listed."""
    model = tmp_path / "model.toml"
    model.write_text('hosts = ["s", "d1"]\n[[path]]\nbetween = ["s", "d1"]\nrtt = "30ms"\nabw = "12mbit"\n'
                     'wmax = "32768KiB"\n')
    recs = {}
    for runs in (1, 3):
        out = tmp_path / f"val{runs}"
        r = run_cli("measure", "validate", CAMPUS, model, "--engine", "sim", "--flows", "1,4", "--duration", "4s",
                    "--no-together", "--runs", str(runs), "-o", out, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        recs[runs] = json.loads((out / "validation.json").read_text())
        assert ("one run of the truth against the mean of its others" in r.stdout) == (runs > 1), r.stdout
    single = {(c["src"], c["dst"], c["flows"]): c for c in recs[1]["cases"]}
    assert recs[3]["runs"] == 3 and len(recs[3]["cases"]) == len(single) == 4
    leave_one_out = []
    for c in recs[3]["cases"]:
        got = c["truth_runs_bps"]
        assert len(got) == 3 and c["truth_bps"] == pytest.approx(sum(got) / 3), c
        assert got[0] == single[(c["src"], c["dst"], c["flows"])]["truth_bps"], c
        assert "model_runs_bps" not in c and c["model_bps"] == single[(c["src"], c["dst"], c["flows"])]["model_bps"], c
        assert c["model_error"] == pytest.approx((c["model_bps"] - c["truth_bps"]) / c["truth_bps"])
        leave_one_out += [abs(v - (sum(got) - v) / 2) / ((sum(got) - v) / 2) for v in got]
    # s -> d1 crosses the on/off traffic: its runs differ.
    assert any(len(set(c["truth_runs_bps"])) == 3 for c in recs[3]["cases"] if c["src"] == "s"), recs[3]["cases"]
    for bound in (10, 20):
        share = sum(e <= bound / 100 for e in leave_one_out) / len(leave_one_out)
        assert recs[3]["summary"][f"alone_truth_run_within_{bound}pct"] == pytest.approx(share)
    assert "alone_truth_run_within_10pct" not in recs[1]["summary"]


@pytest.mark.parametrize("runs", ["0", "11"])
def test_runs_out_of_range_are_refused(tmp_path, runs):
    model = tmp_path / "model.toml"
    model.write_text('hosts = ["s", "d1"]\n[[path]]\nbetween = ["s", "d1"]\nrtt = "30ms"\nabw = "12mbit"\n')
    r = run_cli("measure", "validate", CAMPUS, model, "--engine", "sim", "--runs", runs, "-o", tmp_path / "v", timeout=60)
    assert r.returncode == 2 and f"--runs: {runs} is not a number of runs between 1 and 10" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "v" / "validation.json").exists()


@pytest.mark.parametrize("args,message", [
    (["--simulate", "nowhere.toml"], "--simulate nowhere.toml: no such file"),
    (["--simulate", str(CAMPUS), "--emulate", str(CAMPUS)], "--emulate and --simulate: give one ground truth"),
    (["--simulate", str(CAMPUS), "--hosts", "s,zz"], "--hosts: no host 'zz'"),
])
def test_simulate_refusals(tmp_path, args, message):
    r = run_cli("measure", *args, "-o", tmp_path / "m.toml", timeout=60)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_ground_truth_with_probes_of_its_own_is_refused(tmp_path):
    text = CAMPUS.read_text() + '\n[[probe]]\nfrom = "s"\nto = "d1"\ninterval = "1s"\n'
    gt = tmp_path / "gt.toml"
    gt.write_text(text)
    r = run_cli("measure", "--simulate", gt, "--hosts", "s,d1", "-o", tmp_path / "m.toml", timeout=60)
    assert r.returncode == 2 and "[[probe]] entries of its own" in r.stderr, r.stderr


@untimed
def test_the_emulator_refuses_probe_series(emulator, no_namespace_left_behind):
    """Emulated hosts probe with real datagrams (`measure --emulate`); a `[[probe]]` there is a
    one-line error before any namespace exists."""
    import pathtwin
    from pathtwin.errors import PathtwinError

    cfg = {"hosts": ["a", "b"], "path": [{"between": ["a", "b"], "rtt": "10ms", "abw": "10mbit"}],
           "probe": [{"from": "a", "to": "b", "interval": "100ms"}], "run": {"duration": "1s"}}
    with pytest.raises(PathtwinError, match=r"^probe: \[\[probe\]\] series are the simulator's"):
        pathtwin.emulate(cfg)


THREE_SITES = EXAMPLES / "groundtruth" / "three-sites.toml"
THREE_SITES_HOSTS = ["a1", "a2", "b1", "b2", "c1", "c2"]


@pytest.fixture(scope="module")
def three_sites(tmp_path_factory):
    """three-sites.toml measured in the simulator (every host, flows 1 and 4, 8-s tests)."""
    d = tmp_path_factory.mktemp("three-sites")
    m = measure_simulated(THREE_SITES, settings=Settings(flows=[1, 4], duration_s=8.0, probe_interval_s=0.05,
                                                         probe_duration_s=10.0), out=d / "model.toml")
    return m, d / "model.toml"


def test_a_class_that_is_a_hosts_every_path_in_is_loaded_once_and_modelled_once(tmp_path):
    """a1, b1, c1 and c2 of three-sites: the paths into b1 from the other three are every path
    into b1 (its access group) and also the class the probes find through core1 -> core2.
    They are loaded together once and are one ``[[shared]]`` class of the model, a class
    because the probes found it; each of the model's classes has members of its own."""
    truth = Truth(THREE_SITES)
    hosts = ["a1", "b1", "c1", "c2"]
    into_b1 = {("a1", "b1"), ("c1", "b1"), ("c2", "b1")}
    assert all(("core1", "core2") in truth.route(a, b) for a, b in into_b1)  # a class of the truth's, through one link
    m = measure_simulated(THREE_SITES, hosts=hosts, settings=Settings(flows=[1, 4], duration_s=8.0, probe_interval_s=0.05,
                                                                      probe_duration_s=10.0), out=tmp_path / "model.toml")
    assert sorted(map(tuple, map(sorted, m.findings["shared_paths"]["classes"]))) == [("a1->b1", "c1->b1", "c2->b1"),
                                                                                      ("a1->c1", "a1->c2", "b1->c1", "b1->c2")]
    together = m.findings["together"]
    members = [frozenset(g["members"]) for g in together]
    assert len(members) == len(set(members)), [g["label"] for g in together]
    [b1] = [g for g in together if set(g["members"]) == {f"{a}->{b}" for a, b in into_b1}]
    assert b1["label"] == "in b1" and b1["class"], b1
    classes = [frozenset(map(tuple, c["paths"])) for c in m.config["shared"] if "paths" in c]
    assert len(classes) == len(set(classes)) and frozenset(into_b1) in classes, classes


def _pairs(classes) -> set[frozenset]:
    return {frozenset((p, q)) for c in classes for p in c for q in c if p < q}


def test_three_sites_at_scale(three_sites):
    """examples/groundtruth/three-sites.toml: six measured hosts at three sites, 30 ordered
    pairs, two loaded bottlenecks each shared by paths from several sources. Every source's
    classes are the truth's; every base RTT within the equation's bounds (graded:
    ``test_figure_9_...``)."""
    gt = THREE_SITES
    truth = Truth(gt)
    hosts = THREE_SITES_HOSTS
    m, model = three_sites
    assert sorted(m.config["hosts"]) == sorted(hosts), "the default hosts are those no [[flow]] uses"
    for s in hosts:
        dests = [d for d in hosts if d != s]
        want = expected_classes(truth, s, dests)
        assert {frozenset(c) for c in m.findings["shared"][s]["classes"]} == want, s
        for d in dests:
            got, eq = m.findings["rtt"][f"{s}->{d}"]["rtt_min_ms"], truth.rtt_ms(s, d)
            wait = probe_wait_bound_ms(truth, hosts, s, d)
            assert -RTT_ROUNDING_MS <= got - eq <= wait + RTT_ROUNDING_MS, (s, d, got, eq, wait)


def test_bottlenecks_shared_across_sources_are_found_at_three_sites(three_sites):
    """The delay correlation over every source's paths at once finds the truth's two loaded
    bottlenecks as classes of paths from several sources (core1 -> core2: a's and c's paths
    to b; core1 -> rc: a's and b's paths to c): precision and recall over same-class path
    pairs >= 0.9 (issue #25), against the classes the truth's links and cross traffic make
    (``expected_path_classes``). Each class is in the model with what its paths carried
    loaded together, which no more than the loaded link's rate allows."""
    m, model = three_sites
    truth = Truth(THREE_SITES)
    want = {c for c in expected_path_classes(truth, THREE_SITES_HOSTS) if len({a for a, _ in c}) >= 2}
    assert len(want) == 2, want
    got = [{tuple(p.split("->")) for p in c} for c in m.findings["shared_paths"]["classes"]]
    tp = _pairs(want) & _pairs(got)
    precision, recall = len(tp) / max(1, len(_pairs(got))), len(tp) / len(_pairs(want))
    print(f"precision {precision:.3f}, recall {recall:.3f}: {got}")
    assert precision >= 0.9 and recall >= 0.9, (got, want)
    cfg = tomllib.loads(model.read_text())
    written = {frozenset(tuple(p) for p in c["paths"]): c for c in cfg["shared"] if "paths" in c}
    for c in want:
        cls = next(v for k, v in written.items() if len(k & c) >= 0.9 * len(c))
        loaded = min(truth.links[h][0] for h in set.intersection(*(set(truth.route(a, b)) for a, b in c)) if h in truth.loaded())
        from pathtwin.config import parse_quantity
        assert parse_quantity("rate", cls["abw"], "abw") <= 1.03 * loaded, (cls, loaded)


def test_access_links_are_classes_of_a_hosts_paths(three_sites):
    """Loaded together, a host's paths out carry what its uplink carries: c1's and c2's DSL
    uplinks (2 Mbit/s) and b1's and b2's cable uplinks (10) hold every path out of them far
    below the sum of what each path carries alone, and the model holds them as classes whose
    ABW is at most that link's rate; a1's and a2's 100-Mbit/s links are not what binds."""
    m, model = three_sites
    truth = Truth(THREE_SITES)
    groups = {g["label"]: g for g in m.findings["together"]}
    for h in ("b1", "b2", "c1", "c2"):
        g = groups[f"out {h}"]
        link = access_limited(truth, THREE_SITES_HOSTS, h, out=True)
        assert g["class"] and g["abw_bps"] <= 1.03 * link and g["alone_sum_bps"] >= 2 * link, g
    cfg = tomllib.loads(model.read_text())
    classes = [{tuple(p) for p in c["paths"]} for c in cfg["shared"] if "paths" in c]
    assert {("c1", d) for d in THREE_SITES_HOSTS if d != "c1"} in classes


def test_an_access_class_keeps_its_uplinks_queue_in_time(three_sites):
    """Loaded together, a host's paths out wait in its uplink's queue, which their TCP keeps
    nearly full: the class's queue (full-size packets at its capacity) delays a packet as
    long as that queue when full, within 30 %
    below it (TCP's sawtooth; the estimate is the 90th percentile of the smoothed RTT) and
    10 % above (the return path's and the access link's serialization). From the truth's
    own links: c1's and c2's DSL uplinks 100 packets at 2 Mbit/s, 600 ms; b's cable uplinks
    at 10 Mbit/s, 120 ms; a's 100-Mbit/s links, 12 ms. Before, the class held the members'
    smallest queue, 1 MB at 100 Mbit/s: 80 ms for c's uplinks, whose ACKs of every flow into
    c then waited a seventh of what they wait in truth (Figure 9 below)."""
    m, model = three_sites
    truth = Truth(THREE_SITES)
    cfg = tomllib.loads(model.read_text())
    for h in THREE_SITES_HOSTS:
        members = {(h, d) for d in THREE_SITES_HOSTS if d != h}
        [cls] = [c for c in cfg["shared"] if "paths" in c and {tuple(p) for p in c["paths"]} == members]
        want = truth.full_queue_s(truth.route(h, members.pop()[1])[0])
        got = written_queue_s(cls)
        assert 0.7 * want <= got <= 1.1 * want, (h, got, want)


def test_in_the_model_a_hosts_paths_out_together_carry_what_its_uplink_carries(three_sites):
    """c1's four paths to a and b, four flows each, at once in the measured model: together
    they carry what c1's 2 Mbit/s uplink carries in the truth, within 10 %, and each alone
    with one flow too. At the paper's 100 Mbit/s capacity a queue before a 2 Mbit/s ABW
    fills only at what the flows offer beyond it, and until full serves them their share
    of the arrivals: the four carried 3.9 Mbit/s together through a class measured at 1.95,
    and one flow alone +10-15 % (``model``'s module doc)."""
    from pathtwin.measure.emulated import SETTLE_S, ground_truth
    from pathtwin.measure.simulated import throughput_tests

    _, model = three_sites
    uplink = access_limited(Truth(THREE_SITES), THREE_SITES_HOSTS, "c1", out=True)
    dests = ["a1", "a2", "b1", "b2"]
    cfg = ground_truth(model)
    [together, *alone] = throughput_tests(cfg, [[("c1", d, 4) for d in dests], *[[("c1", d, 1)] for d in dests]], 8.0,
                                          SETTLE_S, purpose="grade")
    carried = sum(r["abw_bps"] for r in together)
    print(f"together {carried / 1e6:.2f} Mbit/s, alone {[round(r['abw_bps'] / 1e6, 2) for [r] in alone]}, uplink {uplink / 1e6}")
    assert abs(carried - uplink) <= 0.1 * uplink, (carried, uplink)
    for [r] in alone:
        assert abs(r["abw_bps"] - uplink) <= 0.1 * uplink, (r["abw_bps"], uplink)


def test_figure_9_every_pair_at_once_through_bottlenecks_shared_across_sources(three_sites, tmp_path):
    """NSDI'09 Figures 8 and 9 at scale in the simulator: each path alone, then every ordered
    pair of three-sites.toml at once, four flows each (the mean of ``TOGETHER_RUNS``
    runs at staggered starts). Through each bottleneck that paths of several sources share,
    the model is closer to what the truth's flows achieved together than the link baseline
    (each path its one-flow ABW, nothing shared), which gets at least 1.5 times the truth
    there.

    core1 -> rc (a's and b's paths into c): with every pair at once the truth's flows there
    get a third of what the same paths carried loaded by themselves (7.1 of 19 Mbit/s),
    because they are ACK-clocked through c1's and c2's 2 Mbit/s uplinks, whose 100-packet
    queues (600 ms) c's own data to five destinations keeps full. The model holds the
    uplinks' queues (``test_an_access_class_keeps_its_uplinks_queue_in_time``)
    and comes within 75 % (−12 % measured with the uplinks' queues in packets, +46 % with
    them in bytes, +166 % with the class holding its members' smallest queue, 80 ms, and
    the link baseline +283 %).

    core1 -> core2 (a's and c's paths into b): within 60 % (+57 % measured; +58 % since each test
    of the measurement runs in a simulation of its own, at a start phase of its own; +47 %
    when every test followed the one before in one simulation, +43 % before the queue
    delays; the link baseline +174 %). One run at a single start held it within 25 %, but
    what the truth's flows there get follows the phase of the on/off cross traffic they
    meet: 13.4 to 20.2 Mbit/s with starts 0.4 s apart. It is still the model's largest
    Figure 9 error at three-sites (issue #25)."""
    _, model = three_sites
    out = tmp_path / "val"
    r = run_cli("measure", "validate", THREE_SITES, model, "--engine", "sim", "--flows", "4", "--duration", "8s",
                "-o", out, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    print(r.stdout)
    rec = json.loads((out / "validation.json").read_text())
    sm = rec["summary"]
    # Figure 8 (each path alone) as before the cross-source classes: NSDI'09's 80 % within
    # 20 %, and the model ahead of the link baseline, which sees neither reactivity nor capacity.
    assert sm["alone_model_within_20pct"] >= 0.8
    assert sm["alone_model_within_10pct"] > sm["alone_link_within_10pct"]
    rows = {frozenset(b["paths"]): b for b in rec["shared_bottlenecks"] if "paths" in b}
    assert len(rows) == 2, rec["shared_bottlenecks"]
    for b in rows.values():
        assert b["link_bps"] >= 1.5 * b["truth_bps"] and abs(b["model_error"]) < abs(b["link_error"]), b
    into_b = next(b for k, b in rows.items() if all(p.endswith(("->b1", "->b2")) for p in k))
    into_c = next(b for k, b in rows.items() if all(p.endswith(("->c1", "->c2")) for p in k))
    assert abs(into_b["model_error"]) <= 0.6, into_b
    assert abs(into_c["model_error"]) <= 0.75, into_c
    assert rec["shared_paths"]["precision"] >= 0.9 and rec["shared_paths"]["recall"] >= 0.9, rec["shared_paths"]
    # Per path, every pair at once: the model within 20 % more often than the baseline.
    assert sm["together_model_within_20pct"] > sm["together_link_within_20pct"]


def test_every_pair_at_once_the_acks_into_b_wait_in_bs_uplinks_as_long_as_in_the_truth(three_sites):
    """Every ordered pair of three-sites.toml at once, four flows each, in the truth and in
    the measured model: the flows from a1 and a2 into b1 and b2 see the truth's loaded round
    trip within 20 %. Their ACKs wait in b's 10-Mbit/s uplinks behind b's own data, in
    queues of 100 packets of which about half are ACKs. The model's uplink classes hold the
    measured delay as packets (``model.class_queue``): 143-156 ms against the truth's 137-138.
    Held as bytes (138 ms, 174 KB) they kept about twice the data ahead of the ACKs, and the
    flows saw 184-188 ms (with eight flows each the paths into b then carried 19.3 Mbit/s
    against the truth's 23.8)."""
    from pathtwin.measure.emulated import SETTLE_S, ground_truth
    from pathtwin.measure.simulated import throughput_tests

    _, model = three_sites
    hosts = THREE_SITES_HOSTS
    tests = [(s, d, 4) for s in hosts for d in hosts if s != d]
    rtt = {}
    for name, cfg in (("truth", ground_truth(THREE_SITES)), ("model", ground_truth(model))):
        [recs] = throughput_tests(cfg, [tests], 8.0, SETTLE_S, purpose="grade")
        rtt[name] = {(s, d): r["rtt_loaded_ms"] for (s, d, _), r in zip(tests, recs)}
    into_b = [(s, d) for s in ("a1", "a2") for d in ("b1", "b2")]
    print({k: (round(rtt["truth"][k]), round(rtt["model"][k])) for k in into_b})
    for k in into_b:
        assert abs(rtt["model"][k] / rtt["truth"][k] - 1) <= 0.2, (k, rtt["model"][k], rtt["truth"][k])


def test_no_together_measures_per_source_classes_only(tmp_path):
    """``--no-together`` leaves out the tests of paths loaded together: no class of paths in
    the model, and the per-source classes (campus: s's paths to d1 and d2 share the loaded
    bottleneck) as with them."""
    models = {}
    for flag in ("--together", "--no-together"):
        out = tmp_path / flag.strip("-") / "model.toml"
        out.parent.mkdir()
        r = run_cli("measure", "--simulate", CAMPUS, "--hosts", "s,d1,d2", "--flows", "1,4", "--duration", "3s",
                    "--probe-interval", "50ms", "--probe-duration", "3s", flag, "-o", out, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        models[flag] = tomllib.loads(out.read_text()).get("shared", [])
    assert any("paths" in c for c in models["--together"]), models["--together"]
    assert not any("paths" in c for c in models["--no-together"]), models["--no-together"]
    per_source = {flag: [c for c in m if "source" in c] for flag, m in models.items()}
    assert per_source["--together"] == per_source["--no-together"] != [], per_source


def test_a_test_after_a_heavy_one_reads_what_it_reads_alone():
    """c1's uplink (2 Mbit/s, no cross traffic on it): eight flows for 4 s leave about 1 MB
    written ahead (2 x 64 KB a connection), which drains 4.3-4.7 s after their stop; the live
    tool's next test waits until every connection has closed. A one-flow test listed after
    them measures the uplink's rate within 10 %, its own alone (in one simulation 1 s after
    them it measured 0.49 Mbit/s, behind their tail)."""
    from pathtwin.measure.emulated import SETTLE_S, ground_truth
    from pathtwin.measure.simulated import throughput_tests

    uplink = access_limited(Truth(THREE_SITES), THREE_SITES_HOSTS, "c1", out=True)
    [[eight], [one]] = throughput_tests(ground_truth(THREE_SITES), [[("c1", "a1", 8)], [("c1", "a2", 1)]], 4.0, SETTLE_S,
                                        purpose="drain")
    assert abs(eight["abw_bps"] - uplink) <= 0.1 * uplink, (eight["abw_bps"], uplink)
    assert abs(one["abw_bps"] - uplink) <= 0.1 * uplink, (one["abw_bps"], uplink)


def test_the_tests_run_the_congestion_control_asked_for_and_the_cross_traffic_its_own(tmp_path):
    """``--cc``: every throughput test's connections run it and its record says so; the
    ground truth's cross traffic keeps the controller its file gives (the simulation the tool
    kept: its ``flows`` table). Without ``--cc`` the tests run the truth's ``[tcp]``, as a
    live test runs its host's default. A controller the simulator lacks is refused before
    anything is simulated, naming the ones it has."""
    truth = tmp_path / "truth.toml"
    truth.write_text(CAMPUS.read_text().replace("[[link]]", '[tcp]\ncc = "vegas"\n\n[[link]]', 1))
    small = Settings(flows=[1, 2], duration_s=2.0, probe_interval_s=0.02, probe_duration_s=1.0, together=False)
    for cc, expected in (("cubic", "cubic"), (None, "vegas")):
        out = tmp_path / f"model-{cc}.toml"
        m = measure_simulated(truth, hosts=["s", "d1"], settings=Settings(**{**small.__dict__, "cc": cc}), out=out,
                              keep=tmp_path / f"kept-{cc}")
        record = json.loads(out.with_name(out.stem + ".measure.json").read_text())
        tests = {k: v for k, v in record["steps"].items() if k.startswith("tput ")}
        assert len(tests) == 4 and {v["cc"] for v in tests.values()} == {expected}, tests
        assert m.findings["cc"] == {"asked": cc, "ran": [expected]}
        assert f"throughput tests' congestion control: {expected}" in out.read_text()
        flows = pd.read_parquet(tmp_path / f"kept-{cc}" / "tests" / "s->d1 x2" / "flows.parquet")
        ran = flows.groupby(flows.label.astype(str).str.startswith("test "))["cc"].unique()
        assert list(ran[True]) == [expected] and list(ran[False]) == ["vegas"], ran
    r = run_cli("measure", "--simulate", truth, "--hosts", "s,d1", "--cc", "htcp", "-o", tmp_path / "m.toml", timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert 'pathtwin: error: --cc htcp: the simulator has no congestion control "htcp" (it has: ' in r.stderr, r.stderr
    assert not (tmp_path / "m.measure.json").exists()
    r = run_cli("measure", "validate", truth, tmp_path / "model-cubic.toml", "--engine", "sim", "--flows", "1",
                "--duration", "2s", "--no-together", "--cc", "cubic", "-o", tmp_path / "val", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((tmp_path / "val" / "validation.json").read_text())["cc"] == "cubic"
    assert "foreground congestion control: cubic (--cc)" in r.stdout
