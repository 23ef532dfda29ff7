"""Passive calibration's closed loop (bench/calibrate/passive.py, issue #25), in the emulator:
a kernel TCP transfer over a path whose ABW steps 12 → 4 → 9 Mbit/s is captured at the
server, `trace.cross_traffic` + `to_paths` turn the capture into a model, and the same
transfer runs over the model (with the ABW profile and with the constant ABW alone). The
checks hold the model against what the truth was configured with, not against earlier
outputs: the ABW of each configured step, the queue, and that the profile's rerun follows
the truth's per-second goodput better than the constant ABW's does.

One case, three emulations of about 8 s each: ~30 s. The queue is also checked in the
simulator's loop (a second), whose captures carry the window-scale option as the kernel's
do."""

from __future__ import annotations

import pytest

from conftest import load_script, needs_capture, needs_root

passive = load_script("bench/calibrate/passive.py", "bench_calibrate_passive")

#: The case: ABW 12 Mbit/s, 4 from 3 s, 9 from 6 s, over 20 Mbit/s, 40 ms, 150 KB queue, 8 MB.
NAME, STEPS, CAPACITY, RTT, RESPONSE = passive.CASES[0]

# Thresholds, from the emulated runs of this case on a 2-core machine shared with other
# emulations (2026-11-27):
# - ABW of each configured step: the profile's was off by at most 0.64 Mbit/s
#   (the 4 Mbit/s step read as 3.36; otherwise 0.03-0.15), the bins' own stated error up to
#   1.7 Mbit/s; a quarter of the configured ABW (3, 1 and 2.25 Mbit/s) holds that with room
#   and still fails the constant ABW (8.2-8.5 Mbit/s: 3.5 Mbit/s off the first step).
ABW_TOLERANCE = 0.25
# - Where in each step: a change shows in the profile from the start of a bin (about 1.1 s)
#   with a standing queue, the first after it or the next: the 4 Mbit/s step from 3 s was
#   written from 3.44, 3.45, 3.54, 4.40 and 4.46 s, the 9 Mbit/s step from 6 s from
#   6.49-6.67 s. So each step is read 1.6 s after its configured start (one bin late, with
#   room, and 1.4 s before the next step); a profile a bin later still (steps moved 1.2 s
#   later in `trace._abw_steps`, tried: 4 Mbit/s from 4.65 s) fails.
LAG = 1.6
# - Queue: the kernel's captures carry window scaling, so the analysis sees the whole
#   window and the largest queueing delay measures the truth's 150 KB: 141-180 KB was
#   written in seven runs (the emulator's release jitter adds to the largest delay); ±30 %.
#   The simulator's captures carry the option too (`pathtwin-sim/src/pcap.rs`); before
#   they did, w_max read 65 535 B there, Eq. 4 capped the queue at 54 KB and the measured
#   151 KB was dropped.
QUEUE_TOLERANCE = 0.30
# - Per-second goodput's median relative error: profile 3.2-5.4 % (13 % once, in a run whose
#   model captures missed the handshake, before START), constant 30-31 % (it misses every
#   step by the step's distance from the mean): the profile's must be below 20 % and below
#   the constant's. The KS distance of 7-8 per-second samples moves in steps of an eighth:
#   the profile's was 0.14-0.42, the constant's 0.50 in every run; the profile's must not
#   be above it.
PROFILE_GOODPUT_ERROR = 0.20


@pytest.fixture(scope="module")
def row(tmp_path_factory):
    work = tmp_path_factory.mktemp("passive_emu")
    return passive.run_case(NAME, STEPS, CAPACITY, RTT, RESPONSE, 1, work, engine="emu")


@pytest.fixture(scope="module")
def sim_row(tmp_path_factory):
    work = tmp_path_factory.mktemp("passive_sim")
    return passive.run_case(NAME, STEPS, CAPACITY, RTT, RESPONSE, 1, work, engine="sim")


@needs_root
@needs_capture
def test_the_profile_follows_each_configured_abw_step(row):
    path = row["profile"]["path"]
    assert row["profile"]["steps"] >= len(STEPS), path
    for start, mbit in STEPS:
        at = start + LAG
        got = passive.abw_at(path, at) / 1e6
        assert abs(got - mbit) <= ABW_TOLERANCE * mbit, (at, got, mbit, path["abw_steps"])


def assert_the_model_queue_is_the_truths(row, engine: str) -> None:
    configured = passive.truth_config(STEPS, CAPACITY, RTT, RESPONSE, 1, engine)["path"][0]["queue"]
    truth = passive.parse_quantity("size", configured, "queue")
    queue = row["profile"]["path"]["queue"]
    written = passive.parse_quantity("size", queue[0] if isinstance(queue, list) else queue, "queue")
    assert abs(written - truth) <= QUEUE_TOLERANCE * truth, (written, truth)


@needs_root
@needs_capture
def test_the_model_queue_is_the_truths(row):
    assert_the_model_queue_is_the_truths(row, "emu")


def test_from_the_simulators_capture_the_model_queue_is_the_truths(sim_row):
    assert_the_model_queue_is_the_truths(sim_row, "sim")


@needs_root
@needs_capture
def test_the_profile_rerun_follows_the_truth_better_than_the_constant_abw(row):
    profile, constant = row["profile"], row["constant"]
    assert profile["goodput_median_error"] < PROFILE_GOODPUT_ERROR, profile
    assert profile["goodput_median_error"] < constant["goodput_median_error"], (profile, constant)
    assert profile["goodput_ks"] <= constant["goodput_ks"], (profile, constant)
