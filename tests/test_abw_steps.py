"""``[path.abw_steps]``: a path direction's ABW over time (non-reactive cross traffic
replayed from a profile, as iBox's), in both engines. A bulk transfer that keeps the queue
standing must get each step's ABW from the step's time on — the expectation is the profile
itself — and the queues' time series must show it. The emulator case needs root; it creates
its hosts through the API, which removes them.
"""

from __future__ import annotations

import pytest
from conftest import needs_root

import pathtwin
from pathtwin.errors import PathtwinError  # noqa: E402


#: (from, ABW in Mbit/s) of the a→b direction; capacity 20 Mbit/s, `abw` 12 before the first.
STEPS = [(3.0, 4.0), (6.0, 9.0)]
DURATION = 9.0


def scenario() -> dict:
    path = {"between": ["a", "b"], "rtt": "30ms", "abw": "12mbit", "capacity": "20mbit",
            "queue": "120KB", "enforce_bounds": False,
            "abw_steps": {"a_to_b": [[f"{t:g}s", f"{r:g}mbit"] for t, r in STEPS]}}
    return {"hosts": ["a", "b"], "run": {"duration": f"{DURATION:g}s", "sample_interval": "100ms"},
            "tcp": {"cc": "cubic"}, "path": [path], "flow": [{"from": "a", "to": "b"}]}


def expected_abw(t: float) -> float:
    abw = 12.0
    for start, rate in STEPS:
        if t >= start:
            abw = rate
    return abw * 1e6


def check(result) -> None:
    q = result.queue_series
    q = q[q["queue"] == "a->b"]
    # The queue's ABW follows the profile at every sample.
    for t, abw in zip(q["time_s"], q["abw_bps"]):
        assert abw == pytest.approx(expected_abw(t - 1e-9)) or abw == pytest.approx(expected_abw(t)), (t, abw)
    # What the flow got in the last two seconds of each step (the first second lets the
    # window and the queue settle to the new rate), from its delivered bytes.
    f = result.flow_series
    for lo, hi in ((1.0, 3.0), (4.0, 6.0), (7.0, 9.0)):
        rows = f[(f["time_s"] > lo) & (f["time_s"] <= hi + 1e-9)]
        got = rows["goodput_bps"].mean()
        want = expected_abw(lo) * 1448 / 1500
        assert got == pytest.approx(want, rel=0.15), f"{lo}-{hi} s: goodput {got / 1e6:.2f} Mbit/s, the profile leaves {want / 1e6:.2f}"


def test_the_simulator_follows_the_profile():
    check(pathtwin.simulate(scenario()))


@needs_root
def test_the_emulator_follows_the_profile(no_namespace_left_behind):
    check(pathtwin.emulate(scenario()))


def test_a_step_above_the_capacity_is_a_one_line_error():
    cfg = scenario()
    cfg["path"][0]["abw_steps"]["a_to_b"][1][1] = "25mbit"
    with pytest.raises(PathtwinError) as e:
        pathtwin.simulate(cfg)
    assert "path[0].abw_steps.a_to_b[1]" in str(e.value) and "\n" not in str(e.value)
