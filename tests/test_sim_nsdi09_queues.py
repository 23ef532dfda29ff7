"""The simulator on NSDI'09's queue-size and capacity experiments (``nsdi09-bad-queue``,
``nsdi09-small-queue``, ``nsdi09-figure6``) and Figure 5's RTT spread: each against the
paper's number with a stated tolerance, or against the window equations of §2.2 (Eq. 1, the
RTT of full queues; Eq. 3, the RTT a window of w_max can fill at the ABW)."""

from __future__ import annotations

import pytest

from pathtwin.reproduce import get
from pathtwin.reproduce import nsdi09, nsdi09_queues as nq

#: Goodput carries 1460 of each 1500-byte packet's bytes (the default MSS).
PAYLOAD = 1460 / 1500


def window_limited_goodputs(abw, rtt_s, capacity, queue, wmax):
    """Both flows' goodput (bit/s) on a path with a flow each way, from §2.2's equations.

    Both flows see one RTT: the base RTT plus the time of each direction's standing queue
    at its capacity (Eq. 1). Of the two, the flow with the lower ABW (the paper's reverse)
    is the last to become window-limited (Eq. 3: at an RTT of w_max/ABW), so it keeps its
    queue as full as its window allows: the queue's time q_r/C_r, or what brings the RTT to
    w_max/ABW_r if that is less. The forward flow's own queue holds what its window has in
    flight beyond the pipe, which adds nothing when that flow is window-limited. Each flow
    then gets the lesser of its ABW's payload and w_max per RTT."""
    r = 0 if abw[0] < abw[1] else 1
    rtt = rtt_s + min(queue[r] * 8 / capacity[r], wmax * 8 / abw[r] - rtt_s)
    return tuple(min(a * PAYLOAD, wmax * 8 / rtt) for a in abw)


@pytest.fixture(scope="module")
def bad_queue():
    record = get("nsdi09-bad-queue")
    return record.run(record.request())  # 5 seeds, 60 s, as the paper's means of five runs


#: Where ours differs from the paper's Table 2 "Bad Queue Size" cells by more than 10 %,
#: and why: (row, direction) -> reason.
KNOWN_BAD_QUEUE = {
    (4, 0): "row 4's reverse flow is window-limited as well (w_max/ABW_r = 30.5 ms, less than the 4 + 31.2 ms "
            "its full 390 KB queue would make), so both flows share one RTT and one window cap and get the "
            "same rate, 16.6 Mbit/s, as the equation says; the paper's forward flow got 21.0 Mbit/s, 32 % "
            "more than its reverse on the same path, which one RTT and one w_max cannot give. Read as "
            "390 KB in all (195 KB each way), Table 2's other reading of its column, the queue is within "
            "what the reverse window fills and ours is 24.96 Mbit/s (seed 1), 3.6 % off the ABW, further "
            "from the paper's 18.8 %. The paper gives neither flow's RTT nor its hosts' windows, so the "
            "cause is not known",
}


def test_bad_queue_flows_are_window_limited_as_the_equations_say(bad_queue):
    for r in bad_queue:
        expected = window_limited_goodputs(r.abw, r.rtt_ms / 1e3, r.capacity, r.queue, r.max_window)
        for d in (0, 1):
            assert abs(r.achieved[d] - expected[d]) / expected[d] <= 0.10, (r.row, d, r.achieved, expected)
        # The paper's point: the forward flow, held at w_max / RTT, misses its ABW by far more
        # than Table 2's path-mode rows (<= 10.3 %).
        assert r.error(0) > 15.0, (r.row, r.achieved)


def test_bad_queue_beside_the_papers_cells(bad_queue):
    # Table 2 reports the means of five 60-second runs; its own path-mode rows miss the ABW
    # by up to 10 %: ours within 10 % of each of the paper's throughputs, except KNOWN.
    off = []
    for r in bad_queue:
        paper = nq.BAD_QUEUE_PAPER[r.row][0]
        for d in (0, 1):
            if abs(r.achieved[d] / 1e3 - paper[d]) / paper[d] > 0.10 and (r.row, d) not in KNOWN_BAD_QUEUE:
                off.append((r.row, d, r.achieved[d] / 1e3, paper[d]))
    assert not off, off
    for (row, d), reason in KNOWN_BAD_QUEUE.items():
        r = next(r for r in bad_queue if r.row == row)
        # Still a difference (else the entry is stale), and the one the reason explains.
        assert abs(r.achieved[d] / 1e3 - nq.BAD_QUEUE_PAPER[row][0][d]) / nq.BAD_QUEUE_PAPER[row][0][d] > 0.10, reason
    row4 = next(r for r in bad_queue if r.row == 4)
    assert abs(row4.achieved[0] - row4.achieved[1]) / row4.achieved[1] <= 0.02, row4.achieved


def test_small_queue_one_flow_nears_its_abw_the_reverse_of_two_gets_a_fraction():
    record = get("nsdi09-small-queue")
    r = record.run(record.request(seeds=1))  # no random loss on the path: every seed is alike
    # "Close to the target 409 Kbps": as Figure 5's test, 85 % of the ABW in goodput (the
    # TCP/IP headers are 2.7 % of it).
    assert r.one_way >= 0.85 * r.abw[0], r
    # "Only ... around 200 Kbps" of 4,530: within a quarter of the paper's 200.
    assert abs(r.two_way[1] / 1e3 - nq.SMALL_QUEUE_REVERSE_KBPS) / nq.SMALL_QUEUE_REVERSE_KBPS <= 0.25, r
    assert r.two_way[1] <= 0.10 * r.abw[1], r


@pytest.fixture(scope="module")
def figure6():
    record = get("nsdi09-figure6")
    return record.run(record.request())  # 3 seeds, 60 s


def test_figure6_queue_is_within_eq4_at_every_capacity(figure6):
    f = figure6
    wmax = 65535  # the example's [tcp] max_window
    for c in f.capacities:
        # Eq. 4: q_f + q_r <= C (w_max / ABW_f - RTT_base), the forward being the higher ABW.
        assert sum(f.queue) <= c / 8 * (wmax * 8 / max(f.abw) - f.rtt_ms / 1e3) + 2, (c, f.queue)
    # ... and at the smallest capacity it is that bound's equal split (the largest such queue).
    c0 = f.capacities[0]
    assert sum(f.queue) >= c0 / 8 * (wmax * 8 / max(f.abw) - f.rtt_ms / 1e3) - 2, f.queue


def test_figure6_error_peaks_near_the_abw_and_is_flat_well_above(figure6):
    f = figure6
    errors = [f.error(k) for k in range(len(f.capacities))]
    # The paper: "error peaks when capacity is very near available bandwidth": the largest
    # error is at one of the two capacities within 10 % of the ABW, 5 points above 100 Mbit/s'.
    near = [k for k, c in enumerate(f.capacities) if c <= 1.1 * f.abw[0]]
    assert max(range(len(errors)), key=errors.__getitem__) in near, errors
    assert errors[near[0]] >= errors[-1] + 5.0, errors
    # "Outside of that range, changing the capacity has very little effect": from 25 Mbit/s
    # (almost four times the ABW) up, the errors lie within 2.5 points of each other, and
    # within Table 2's path-mode 10 %.
    far = [errors[k] for k, c in enumerate(f.capacities) if c >= 25e6]
    assert max(far) - min(far) <= 2.5 and max(far) <= 10.0, errors


def test_figure5_path_mode_rtt_spread_is_bounded_by_its_queue_and_below_the_papers():
    f5 = nsdi09.figure5()
    # The RTT in path mode varies only by the queue's time at C = 100 Mbit/s: no sample is
    # more than 32 KB / C = 2.6 ms from another, so neither is the standard deviation.
    assert f5.rtt_std_ms["path"] <= 32e3 * 8 / 100e6 * 1e3, f5
    # Link mode: the 32 KB queue at 409 kbit/s is 0.63 s, filled and drained by the flow.
    assert f5.rtt_std_ms["link"] >= 10 * f5.rtt_std_ms["path"], f5
    # KNOWN: ours is below the paper's 3.0 ms (5.1 ms on the real path). The simulator's
    # delays are exact; the paper's emulator added its Dummynet's timer granularity (1 ms
    # ticks) and its hosts' scheduling to every RTT, which the model does not have; and
    # ours is of the smoothed RTT (the engines keep no per-ACK sample).
    assert f5.rtt_std_ms["path"] < nsdi09.FIGURE5_PATH_RTT_STD_MS, f5


@pytest.mark.parametrize("name", ["nsdi09-bad-queue", "nsdi09-small-queue", "nsdi09-figure6"])
def test_a_bad_duration_is_a_one_line_error(cli, name):
    for duration, message in (("1s", "must be longer than 1 s"), ("soon", "--duration")):
        r = cli("reproduce", name, "--duration", duration)
        assert r.returncode == 2, (name, duration, r.stdout, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr
