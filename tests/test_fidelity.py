"""The simulator as the kernel's twin: `[tcp] profile = "linux"` against the emulator's
kernel TCP on the fast subset of bench/fidelity's grid (`QUICK`: each controller, DropTail
and RED, loss and none, 10 to 200 ms, one and four flows), the same file in both engines
through `pathtwin.simulate` and `pathtwin.emulate`.

Tolerances are the issue's goals, applied to the subset: the median over seeds of each
cell's completion time within CELL_TOLERANCE (10 %) of the kernel's, and the median error
over the cells within MEDIAN_TOLERANCE (5 %). Measured 2026-11-26 (bench/fidelity/README.md):
the subset's errors were within 1.8 % each, median 0.2 % (the four Reno flows over RED,
whose kernel runs spread 8 % across the seeds, had been −6.8 % before PRR counted deliveries
once: the margin is for such cells; 2026-11-29, with the 200-ms cell at 5 Mbit/s, within
1.7 %, median 0.65 %; at 10 Mbit/s the kernel itself splits between 1.77 and 2.14 s across
seeds, README section 4); with the simulator's own TCP (`profile = "ns2"`) they were up to 29 %, median 11 %, which these bounds fail. The
kernel's spread across these seeds is below 1 % without loss; with loss both engines drop
the same packets for a seed as long as they send the same packets, so the per-seed spread,
large in both, mostly cancels. Without root only the profile's plumbing is checked (under
CI a missing privilege fails).
"""

from __future__ import annotations

import statistics

import pytest
from conftest import load_script, untimed

import pathtwin
from pathtwin.errors import PathtwinError  # noqa: E402





bench = load_script("bench/fidelity/run.py", "bench_fidelity_run")

SEEDS = (1, 2, 3)
CELL_TOLERANCE = 0.10
MEDIAN_TOLERANCE = 0.05


def slow_start_completion(size: int, mss: int, rate: float, rtt: float, growth: float, iw: int = 10) -> float:
    """A sized transfer's completion time from the connect on a clean path when slow start
    multiplies the window by `growth` every round trip: the handshake, every 1500-byte
    packet serialized, the last one's one-way delay, and the idle part of each round that
    cannot fill the pipe."""
    seg = 1500 * 8 / rate
    n = -(-size // mss)
    t = rtt + n * seg + rtt / 2
    window, sent = float(iw), 0
    while sent < n:
        burst = min(int(window), n - sent)
        sent += burst
        if sent == n or burst * seg >= rtt:
            # The last burst (or one that fills the pipe) is followed by no idle time.
            break
        t += rtt - burst * seg
        window *= growth
    return t


def test_the_linux_profile_matches_the_kernel_on_the_fast_subset(emulator, no_namespace_left_behind):
    results = bench.run_cells(bench.QUICK, list(SEEDS), "linux", cache_path=None, fresh=True, progress=False)
    errors = [abs(r.error()) for r in results]
    table = "\n".join(f"{r.cell.name}: kernel {r.median('emu', r.metric()):.4g}, sim {r.median('sim', r.metric()):.4g}, "
                      f"error {r.error() * 100:+.1f} %" for r in results)
    assert statistics.median(errors) <= MEDIAN_TOLERANCE, table
    assert all(e <= CELL_TOLERANCE for e in errors), table
    for r in results:
        assert all(m["complete"] and m["bytes"] == r.cell.flows * r.cell.size_bytes for m in r.emu + r.sim), r.cell.name


def test_the_linux_profile_sends_the_kernels_segments_and_acks():
    # 200 KB over the path. Linux: 1448 bytes of payload per 1500-byte packet
    # (timestamps), every segment acknowledged at once (quick-ACK mode, then the growing
    # receive window), so slow start doubles the window each round trip: 4 rounds of data,
    # as the kernel's (0.315 s in bench/fidelity). ns2: 1460 bytes, an ACK every second
    # segment, each growing the window by one segment: 1.5 times per round, 6 rounds. The
    # model ignores the handshake's and ACKs' serialization: 2 %.
    cell = bench.Cell(20, 60, 0.0, 1.0, "droptail", "200KB", "cubic", 1)
    linux = pathtwin.simulate(bench.config(cell, 1, profile="linux")).flows.iloc[0]
    ns2 = pathtwin.simulate(bench.config(cell, 1, profile=None)).flows.iloc[0]
    assert linux.bytes_sent == 200_000 and linux.retransmits == 0
    assert linux.segments_sent >= 200_000 // 1448 + 1 > 200_000 // 1460 + 1
    assert linux.completion_s == pytest.approx(slow_start_completion(200_000, 1448, 20e6, 0.060, 2.0), rel=0.02)
    # The same ACK segments besides the data, and the linux client's own ACK of the SYN-ACK
    # (ns2 rides it on the first data segment): the rest of the difference is the payload's.
    assert linux.segments_sent - ns2.segments_sent == 1 + -(-200_000 // 1448) - -(-200_000 // 1460)
    assert ns2.completion_s == pytest.approx(slow_start_completion(200_000, 1460, 20e6, 0.060, 1.5), rel=0.02)
    assert ns2.completion_s > linux.completion_s + 0.060, (ns2.completion_s, linux.completion_s)
    # Same file, same seed: the same run.
    again = pathtwin.simulate(bench.config(cell, 1, profile="linux")).flows.iloc[0]
    assert again.completion_s == linux.completion_s


def test_the_profile_is_checked_and_named_in_errors():
    cell = bench.Cell(20, 60, 0.0, 1.0, "droptail", "200KB", "cubic", 1)
    cfg = bench.config(cell, 1)
    cfg["tcp"]["profile"] = "freebsd"
    with pytest.raises(PathtwinError, match="profile"):
        pathtwin.simulate(cfg)


@untimed
def test_the_emulator_refuses_the_ns2_profile(emulator, no_namespace_left_behind):
    cell = bench.Cell(20, 60, 0.0, 1.0, "droptail", "10KB", "cubic", 1)
    with pytest.raises(PathtwinError, match=r'tcp\.profile: "ns2" is the simulator'):
        pathtwin.emulate(bench.config(cell, 1, profile="ns2"))


def test_compare_notes_a_simulation_with_the_ns2_profile_against_an_emulation(tmp_path):
    from pathtwin.compare import Run, _notes, sim_profiles

    assert sim_profiles({"config": {"tcp": {}}}) == {"ns2"}
    assert sim_profiles({"config": {"tcp": {"profile": "linux"}, "flow": [{"tcp": {}}]}}) == {"linux"}
    assert sim_profiles({"config": {"tcp": {"profile": "linux"}, "flow": [{"tcp": {"profile": "ns2"}}]}}) == {"linux", "ns2"}
    sim = Run(tmp_path / "sim", {"engine": "sim", "config": {"tcp": {}}}, None)
    emu = Run(tmp_path / "emu", {"engine": "emu", "config": {"tcp": {}}}, None)
    assert "profile = \"linux\"" in _notes(sim, emu)[0]
    linux = Run(tmp_path / "sim", {"engine": "sim", "config": {"tcp": {"profile": "linux"}}}, None)
    assert _notes(emu, linux) == [] and _notes(sim, sim) == []
