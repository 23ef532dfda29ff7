"""Clock skew between measured machines (issue #25): one-way delays between real hosts carry
the clocks' offset and their skew. The offset is a constant that correlation does not see; the
skew is a ramp (50 ppm over a 15-s series: 0.75 ms) that makes a quiet path look congested and
two paths whose receivers drift alike look shared. Between different machines (their boot ids
differ) `pathtwin measure` removes it first (Moon, Skelly and Towsley, INFOCOM 1999).

Expectations: the estimator against ramps put in by hand; the shared classes against the
ground truth's routes (`groundtruth_expect`), on a simulated measurement whose one-way delays
are given the clocks of three other machines."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLES
from groundtruth_expect import Truth, expected_classes


from pathtwin.measure import shared  # noqa: E402
from pathtwin.measure.probes import ProbeSeries  # noqa: E402
from pathtwin.measure.session import Settings, analyse, one_way_delays  # noqa: E402
from pathtwin.measure.simulated import measure_simulated  # noqa: E402

CAMPUS = EXAMPLES / "groundtruth" / "campus.toml"
HOSTS = ["s", "d1", "d2", "d3"]
#: Each destination's clock against the source's (ppm): crystal oscillators are within about
#: ±100 ppm; d1 and d2 (which share the source's bottleneck) drift apart, d3 (which shares it
#: with no one) drifts as d1.
SKEWS_PPM = {"d1": 60.0, "d2": -45.0, "d3": 60.0}


@pytest.mark.parametrize("ppm", [-100.0, -5.0, 0.0, 30.0, 100.0])
def test_the_lower_hull_finds_the_ramp_under_queueing(ppm):
    """A 15-s series at 99 ms: propagation, an offset, the ramp, and queueing that is zero
    for a third of the probes and bursts of up to tens of ms otherwise (more of it in the
    middle, as a congestion episode). Queueing only adds, so the lowest samples lie on the
    ramp, and the hull through them has its slope."""
    rng = np.random.default_rng(7)
    t = np.arange(152) * 0.099
    episode = 1.0 + 4.0 * np.exp(-((t - 7.5) / 2.0) ** 2)
    queue = np.where(rng.random(len(t)) < 1 / 3, 0.0, rng.exponential(2e-3, len(t)) * episode)
    d = 0.012 + 3.7 + ppm * 1e-6 * t + queue
    assert shared.skew(t, d) == pytest.approx(ppm * 1e-6, abs=1e-9)
    flat, b = shared.remove_skew(t, d)
    assert np.min(flat) == pytest.approx(0.012 + 3.7, abs=1e-9) and b == pytest.approx(ppm * 1e-6, abs=1e-9)


@pytest.fixture(scope="module")
def campus_steps(tmp_path_factory):
    d = tmp_path_factory.mktemp("skew")
    settings = Settings(flows=[1], duration_s=2.0)  # the default probe series: 15 s at 99 ms
    m = measure_simulated(CAMPUS, hosts=HOSTS, settings=settings, out=d / "model.toml")
    return json.loads(m.state.read_text())["steps"], settings, m.findings


def skewed(steps: dict, clocks: bool) -> dict:
    """``steps`` with every destination's receive stamps on a clock ``SKEWS_PPM`` off the
    source's; with ``clocks`` the series say their machines (each host its own)."""
    out = json.loads(json.dumps(steps))
    for src, by in out["probe"].items():
        for dst, ps in by.items():
            sent = np.asarray(ps["sent"], dtype=np.int64)
            ppm = SKEWS_PPM.get(dst, 0.0) - SKEWS_PPM.get(src, 0.0)
            rx = np.asarray(ps["remote_rx"], dtype=np.int64)
            ps["remote_rx"] = (rx + np.round(ppm * 1e-6 * (sent - sent[0])).astype(np.int64)).tolist()
            ps["src_clock"], ps["dst_clock"] = (f"machine-{src}", f"machine-{dst}") if clocks else (None, None)
    return out


def classes(findings: dict) -> dict[str, set[frozenset[str]]]:
    return {h: {frozenset(c) for c in findings["shared"][h]["classes"]} for h in HOSTS}


def test_between_machines_the_skew_is_removed_and_the_classes_are_the_truths(campus_steps):
    """From every source the classes are the ground truth's with the clocks' skew removed.
    Left in, it invents classes: from d1 and from d2, whose destinations' paths are quiet,
    the ramps alone correlate (measured: d1 [s, d2] and d2 [s, d1, d3] where the truth has
    none)."""
    steps, settings, unskewed = campus_steps
    truth = Truth(CAMPUS)
    want = {h: expected_classes(truth, h, [d for d in HOSTS if d != h]) for h in HOSTS}
    assert classes(unskewed) == want
    found = analyse(HOSTS, skewed(steps, clocks=True), [1], settings)
    assert classes(found) == want, found["shared"]
    for dst, ppm in SKEWS_PPM.items():
        assert found["shared"]["s"]["clock_skew_ppm"][dst] == pytest.approx(ppm, abs=1.0), found["shared"]["s"]
    left_in = analyse(HOSTS, skewed(steps, clocks=False), [1], settings)
    assert classes(left_in) != want


def test_without_knowing_the_machines_the_ramp_stays(campus_steps):
    """Series that do not say their machines (a host of this machine, an agent that did not
    say) are left as measured: the injected ramp then makes d3's quiet path look congested —
    what removing it is for."""
    steps, _settings, _ = campus_steps
    ps = ProbeSeries.from_json(skewed(steps, clocks=False)["probe"]["s"]["d3"])
    assert not ps.independent_clocks
    d, skew = one_way_delays(ps)
    assert skew == 0.0 and shared.spread(shared.denoise(d)) > shared.MIN_SPREAD_S
    ps = ProbeSeries.from_json(skewed(steps, clocks=True)["probe"]["s"]["d3"])
    assert shared.spread(shared.denoise(one_way_delays(ps)[0])) < shared.MIN_SPREAD_S
