"""`pathtwin measure`'s parts that need no emulation: shared-congestion clustering on
synthetic one-way-delay series whose sharing the test itself builds (numpy), the wavelet
denoising against the signal it was given, the throughput arithmetic on made-up byte
counts, the model written through the schema, the resume file's refusal of other settings,
and the command line's refusals (one line, exit status 2, no traceback).

The measurement against an emulated ground truth is tests/test_measure_emu.py.
"""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pytest
from conftest import EXAMPLES, run_cli

import pathtwin
from pathtwin.errors import PathtwinError  # noqa: E402
from pathtwin.measure import model, shared  # noqa: E402
from pathtwin.measure.session import Settings, parse_flows  # noqa: E402
from pathtwin.measure.state import State, state_path  # noqa: E402
from pathtwin.measure.throughput import drain_s, sender_loaded_rtt_ms, summarize  # noqa: E402

GROUND_TRUTH = EXAMPLES / "groundtruth" / "campus.toml"


def queue_delay(rng: np.random.Generator, n: int, load: float = 0.35, scale_s: float = 8e-3) -> np.ndarray:
    """A bottleneck's queueing delay sampled once per probing round: Lindley's recursion,
    bursts of work arriving in half the rounds (exponential, mean ``load`` × ``scale_s`` per
    round) and ``scale_s`` served per round; a congested queue that empties now and then.
    Its memory is short against the rounds (consecutive samples correlate about 0.6; the
    emulated ground truth's at 20 ms rounds: 0.68), as a queue's is against ~99 ms probing."""
    q = np.zeros(n)
    work = rng.exponential(2 * load * scale_s, n) * rng.integers(0, 2, n)
    for i in range(1, n):
        q[i] = max(0.0, q[i - 1] + work[i] - scale_s)
    return q


def synthetic(rng: np.random.Generator, n: int, sharing: dict[str, int | None]) -> dict[str, np.ndarray]:
    """One source's delay series towards each destination: destination d crosses
    bottleneck ``sharing[d]`` (``None``: no congested queue), plus a fixed propagation delay,
    a clock offset (as between real hosts) and its own jitter (the uncongested links)."""
    queues = {b: queue_delay(rng, n) for b in {v for v in sharing.values() if v is not None}}
    out = {}
    for d, b in sharing.items():
        base = rng.uniform(0.005, 0.08) + rng.uniform(-5.0, 5.0)  # propagation + clock offset
        jitter = rng.normal(0, 0.05e-3, n)
        out[d] = base + jitter + (queues[b] if b is not None else 0.0)
    return out


def classes_of(sharing: dict[str, int | None]) -> set[frozenset[str]]:
    by: dict[int, set[str]] = {}
    for d, b in sharing.items():
        if b is not None:
            by.setdefault(b, set()).add(d)
    return {frozenset(s) for s in by.values() if len(s) >= 2}


def test_clustering_finds_the_configured_sharing():
    # Two congested bottlenecks (d1, d2, d3 behind one; d4, d5 behind another), one
    # destination alone behind its own congested queue, one with no congestion at all; 300
    # rounds (15 s at 50 ms). DCW is a statistical test: two independent queues correlate
    # above 0.5 now and then by chance, so the expectation is a rate over 100 draws, not
    # every draw (Kim et al. report accuracy the same way); here 1-2 draws in 200 miss.
    sharing = {"d1": 0, "d2": 0, "d3": 0, "d4": 1, "d5": 1, "d6": 2, "d7": None}
    right, disagree = 0, 0
    for seed in range(100):
        c = shared.cluster(synthetic(np.random.default_rng(seed), 300, sharing))
        right += {frozenset(k) for k in c.classes} == classes_of(sharing)
        disagree += bool(c.disagreements)
        # Rubenstein's test cannot decide about a path without congestion, and says so.
        assert all(("d7" in p) for p in c.undecided), c.undecided
    assert right >= 97, f"{right} of 100 draws clustered as configured"
    # Rubenstein's test, beside it, decides the same nearly always.
    assert disagree <= 3, f"the two tests disagreed in {disagree} of 100 draws"


def test_clustering_is_blind_to_clock_offsets():
    rng = np.random.default_rng(7)
    sharing = {"a": 0, "b": 0, "c": 1}
    series = synthetic(rng, 300, sharing)
    moved = {k: v + 1234.5 * (i + 1) for i, (k, v) in enumerate(series.items())}
    assert shared.cluster(series).classes == shared.cluster(moved).classes == [["a", "b"]]


def test_quiet_paths_are_not_shared_even_when_their_jitter_correlates():
    # A sender stalling now and then delays every probe of a round alike: correlated, but
    # no queue; the interdecile rule must keep them apart.
    rng = np.random.default_rng(3)
    n = 200
    stall = np.zeros(n)
    stall[rng.integers(0, n, 3)] = 5e-3
    series = {d: 0.02 * (i + 1) + stall + rng.normal(0, 0.02e-3, n) for i, d in enumerate(["a", "b"])}
    c = shared.cluster(series)
    assert c.classes == []
    assert c.pairs[0].rho > 0.5  # they do correlate: only the rule keeps them apart


def test_a_chain_of_shared_pairs_is_one_class_only_when_every_pair_is_shared():
    # Across sources (``strict``) a class needs every two members shared. Path b crosses
    # two congested queues, a the first only and c the second only: a~b and b~c correlate,
    # a and c do not; DCW's transitive merge makes {a, b, c}, and the strict rule keeps
    # the more correlated of the two pairs that Rubenstein's test also shares. Unless a and
    # c share too (all behind one queue): then they are one class under either rule.
    chains = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        n = 150
        q1, q2 = queue_delay(rng, n), queue_delay(rng, n)
        jitter = lambda: rng.normal(0, 0.05e-3, n)  # noqa: E731
        series = {"a": q1 + jitter(), "b": q1 + q2 + jitter(), "c": q2 + jitter()}
        loose = shared.cluster(series)
        pair = {(p.a, p.b): p for p in loose.pairs}
        if not (pair["a", "b"].dcw_shared and pair["b", "c"].dcw_shared and not pair["a", "c"].dcw_shared):
            continue  # this draw's correlations make no chain
        chains += 1
        assert loose.classes == [["a", "b", "c"]]
        strict = shared.cluster(series, strict=True)
        both = [p for p in (pair["a", "b"], pair["b", "c"]) if p.rubenstein_shared is True]
        best = max(both, key=lambda p: p.rho) if both else None
        assert strict.classes == ([[best.a, best.b]] if best else []), (seed, strict.classes)
        assert {("a", "b"), ("b", "c")} - ({(best.a, best.b)} if best else set()) <= set(strict.unjoined)
        one = {k: q1 + jitter() for k in "abc"}
        assert shared.cluster(one, strict=True).classes == [["a", "b", "c"]]
    assert chains >= 5, f"only {chains} of 30 draws made a chain"


def test_rubenstein_vetoes_a_pair_across_sources():
    # A slow swing common to two paths but reaching them rounds apart (as two sources'
    # series a few rounds out of step, or one machine-wide slowdown seen at different
    # times): DCW's smoothed series correlate, while round by round each path follows its
    # own past better than the other path (Rubenstein: not shared). DCW alone makes them
    # a class; across sources the veto keeps them apart. In step, both tests share them.
    vetoed = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        n, lag = 160, 4
        swing = np.repeat(rng.integers(0, 2, n // 8 + 2), rng.integers(8, 16, n // 8 + 2))[:n + lag] * 0.02
        q = swing + queue_delay(rng, n + lag)
        lagged = {"a": q[lag:] + rng.normal(0, 0.05e-3, n), "b": q[:-lag] + rng.normal(0, 0.05e-3, n)}
        loose = shared.cluster(lagged)
        if not loose.pairs[0].dcw_shared:
            continue
        vetoed += 1
        assert loose.classes == [["a", "b"]]
        assert loose.pairs[0].rubenstein_shared is False
        strict = shared.cluster(lagged, strict=True)
        assert strict.classes == [] and strict.unjoined == [("a", "b")]
        in_step = {"a": q[lag:] + rng.normal(0, 0.05e-3, n), "b": q[lag:] + rng.normal(0, 0.05e-3, n)}
        assert shared.cluster(in_step, strict=True).classes == [["a", "b"]]
    assert vetoed >= 10, f"DCW shared only {vetoed} of 20 lagged pairs"


def test_across_sources_an_undecided_rubenstein_merges_nothing():
    # A queue that moves slower than the rounds (a 40-round moving average: consecutive
    # samples correlate 0.975), seen through jitter as large as it: cross- and auto-measure
    # both near 0.5, and Rubenstein's test cannot tell them apart. DCW, from the denoised
    # series, shares them: one source's class; across sources DCW's word alone is not
    # enough (the machine's own stalls correlate there), so no class.
    rng = np.random.default_rng(5)
    n = 150
    slow = np.convolve(rng.normal(0, 10e-3, n + 39), np.ones(40) / 40, mode="valid") + 0.01
    noise = float(np.std(slow))
    series = {"a": slow + rng.normal(0, noise, n), "b": slow + rng.normal(0, noise, n)}
    c = shared.cluster(series)
    assert c.pairs[0].rubenstein_shared is None and c.pairs[0].dcw_shared
    assert c.classes == [["a", "b"]]
    strict = shared.cluster(series, strict=True)
    assert strict.classes == [] and strict.unjoined == [("a", "b")]


def test_denoising_recovers_the_signal():
    # A smooth queue signal plus white noise: the denoised series is closer to the signal
    # than the noisy one (the point of DCW's step), and the parameters are §7's.
    rng = np.random.default_rng(1)
    n = 512
    t = np.arange(n)
    signal = 2e-3 * (1 + np.sin(2 * np.pi * t / 128))
    noisy = signal + rng.normal(0, 0.5e-3, n)
    clean = shared.denoise(noisy)
    assert len(clean) == n
    assert np.mean((clean - signal) ** 2) < 0.3 * np.mean((noisy - signal) ** 2)
    assert shared.dcw_level(150) == min(4, math.floor(math.log2(150) - math.log2(math.log(150))))
    assert shared.minimaxi(32) == 0.0
    assert shared.minimaxi(1024) == pytest.approx(0.3936 + 0.1829 * 10)


def test_too_few_samples_is_an_error():
    with pytest.raises(PathtwinError, match="at least 25"):
        shared.denoise(np.zeros(24))
    with pytest.raises(PathtwinError, match="at least 25"):
        shared.interpolate_lost(np.arange(10), np.zeros(10), 100)


def test_lost_samples_are_interpolated():
    rounds = np.array([0, 1, 3, 4] + list(range(5, 30)))
    values = rounds * 2.0
    x = shared.interpolate_lost(rounds, values, 30)
    assert x[2] == pytest.approx(4.0)  # round 2 was lost: halfway between its neighbours
    assert len(x) == 30


def test_throughput_from_byte_counts():
    # Two flows delivering 500 kB and 250 kB per quarter second: 24 Mbit/s of goodput;
    # the first quarter of the run and the last, partial, bucket are left out.
    per_flow = [[1] + [500_000] * 15 + [7], [1] + [250_000] * 15 + [3]]
    r = summarize(per_flow, 0.25, 4.0, mss=1448, mtu=1500, flows=2)
    assert r["goodput_bps"] == pytest.approx(24e6)
    assert r["abw_bps"] == pytest.approx(24e6 * 1500 / 1448)
    assert r["flow_goodput_bps"] == pytest.approx([16e6, 8e6])
    assert r["samples"] == 12 and r["std_bps"] == 0.0


def test_a_senders_loaded_round_trip_is_read_in_the_averaged_window():
    """The sender's smoothed RTTs (µs, per connection, ``None`` before a first sample) from
    the end of the warm-up share to the test's end, their 90th percentile: a 4-s test
    averages from 1 s; samples before, and after its end, are not the loaded queue's."""
    samples = [(0.5, [None, 900_000])]  # slow start's: left out
    samples += [(1.0 + 0.05 * k, [100_000 + 1_000 * k, 200_000]) for k in range(60)]  # 1.0-3.95 s
    samples += [(4.2, [5_000_000, 5_000_000])]  # after the test: left out
    want = np.percentile([100 + k for k in range(60)] + [200] * 60, 90)
    assert sender_loaded_rtt_ms(samples, 4.0) == pytest.approx(want)
    assert sender_loaded_rtt_ms([(2.0, [None, None])], 4.0) is None
    assert sender_loaded_rtt_ms([], 4.0) is None  # an agent from before the samples


def test_a_simulated_connection_without_any_estimate_counts_as_no_sample():
    """In the simulator the loaded round trip is read from ``flow_series``: a test's
    connection that never had an RTT estimate (its SYN lost again and again behind eight
    flows on a slow uplink) has no column there; it gives no sample and no error, and its
    delivered bytes count as none."""
    import pandas as pd

    from pathtwin.measure.simulated import by_time, connections_loaded_rtt_ms

    rows = [{"time_s": 0.1 * k, "flow": 1, "srtt_ms": 50.0 + k, "delivered_bytes": 1000 * k} for k in range(1, 40)]
    rows += [{"time_s": 0.1 * k, "flow": 2, "srtt_ms": float("nan"), "delivered_bytes": 0} for k in range(1, 40)]
    series = pd.DataFrame(rows)
    window_ns = [1_000_000_000, 3_000_000_000]
    want = np.percentile([50.0 + k for k in range(10, 31)], 90)
    assert connections_loaded_rtt_ms(by_time(series, "srtt_ms"), [1, 2], window_ns) == pytest.approx(want)
    assert connections_loaded_rtt_ms(by_time(series, "srtt_ms"), [2], window_ns) is None


def test_a_tests_drain_is_how_long_its_sink_still_received_after_its_end():
    # Counts grow 1 MB per 0.5 s until 4 s past the first accept, then by 100 kB per 0.5 s
    # (what the sender's buffers still held) until 6.5 s, then stay: 2.5 s past a 4-s test.
    t0 = 10**18
    samples = [(t0 + int(k * 0.5e9), [min(k, 8) * 1_000_000 + max(0, min(k, 13) - 8) * 100_000, 0]) for k in range(20)]
    assert drain_s(samples, t0, 4.0) == pytest.approx(2.5)
    assert drain_s(samples[:8], t0, 4.0) == 0.0  # ended with the test
    assert drain_s([], t0, 4.0) == 0.0


@contextlib.contextmanager
def loopback_prober():
    """``endpoints.py``'s echo server on a free loopback port, and a function that launches a
    probe series to it (interval 0.1 s, ``duration``, ``start_at``; no privileges)."""
    import socket
    import subprocess
    import sys

    from pathtwin.measure import endpoints

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prog = [sys.executable, endpoints.__file__]
    echo = subprocess.Popen([*prog, "echo", "--port", str(port), "--bind", "127.0.0.1"], stdout=subprocess.PIPE, text=True)

    def launch(duration: float, start_at: int) -> subprocess.Popen:
        return subprocess.Popen([*prog, "probe", "--port", str(port), "--interval", "0.1", "--duration", str(duration),
                                 "--start-at", str(start_at), "127.0.0.1"], stdout=subprocess.PIPE, text=True)

    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        yield launch
    finally:
        echo.kill()
        echo.wait()


def probe_result(p) -> dict:
    return json.loads(p.communicate(timeout=30)[0].splitlines()[-1])


@contextlib.contextmanager
def loopback_sink(flows: int, *args: str):
    """``endpoints.py``'s TCP sink of ``flows`` connections on a free loopback port, reading
    every 50 ms, with further ``args`` (no privileges); yields the port and the process once
    it listens, and kills it at the end whatever happened."""
    import socket
    import subprocess
    import sys

    from pathtwin.measure import endpoints

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = subprocess.Popen([sys.executable, endpoints.__file__, "sink", "--port", str(port), "--flows", str(flows),
                             "--every", "0.05", "--bind", "127.0.0.1", *args], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        yield port, sink
    finally:
        sink.kill()
        sink.wait()


def test_probe_series_started_apart_send_their_rounds_together():
    """Two sources' probe series launched 0.4 s apart with one ``start_at`` (as
    ``probes.probe_all`` schedules every source's) send round r together: within a quarter
    interval and a few milliseconds after ``start_at`` + r intervals (loopback, no privileges),
    where unscheduled the second would send each round 0.4 s (four intervals) late."""
    import time

    with loopback_prober() as launch:
        # 3 s ahead: the second series starts 0.4 s after the first, and a Python process's
        # start on a loaded 2-core machine took up to 0.7 s (it would then skip rounds).
        start_at = time.time_ns() + 3_000_000_000
        series = []
        for _ in range(2):
            series.append(launch(1, start_at))
            time.sleep(0.4)
        got = [probe_result(p)["series"][0] for p in series]
    for g in got:
        first = dict(zip(g["round"], g["sent"]))
        assert len(first) >= 8, g
        for r, sent in first.items():
            # Each round up to a quarter interval after its time (``endpoints.ROUND_JITTER``).
            assert -5_000_000 < sent - (start_at + r * 100_000_000) < 25_000_000 + 20_000_000, (r, sent - start_at)


def test_a_probe_series_started_late_keeps_the_schedule():
    """A prober launched after its ``start_at`` (a loaded machine: campus's fourth prober
    started 0.4-0.7 s late) skips the rounds whose time passed, so round r still leaves at
    ``start_at`` + r intervals, in step with the other sources' round r; sent at once, each
    of its rounds would leave 0.35 s (three and a half intervals) late."""
    import time

    with loopback_prober() as launch:
        start_at = time.time_ns() - 350_000_000
        res = probe_result(launch(3, start_at))
    g = res["series"][0]
    assert len(g["round"]) >= 8 and min(g["round"]) >= 3, g["round"]
    for r, sent in zip(g["round"], g["sent"]):
        # Within its own interval (a round later than that is skipped), the stamp read a
        # moment after the check; late on a loaded machine, but never in another's slot.
        assert -5_000_000 < sent - (start_at + r * 100_000_000) < 100_000_000 + 10_000_000, (r, sent - start_at)
    assert res["rounds"] == 30 and res["skipped"] >= 3, res


def test_the_base_rtt_leaves_out_the_echo_servers_wait():
    """An echo server that answers each probe 20 ms after its kernel received it (a busy
    host's scheduling, which on a loaded 2-core machine put agents' minimum RTTs up to
    0.75 ms above the path's): the series' base RTT is still loopback's, well under a
    millisecond, because the wait the echo reports (its send less its probe's receive, one
    clock) is not the path's. Counted in, every round trip would be over 20 ms."""
    import socket
    import subprocess
    import sys
    import threading
    import time

    from pathtwin.measure import endpoints
    from pathtwin.measure.probes import ProbeSeries

    wait_s = 0.020
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.2)
    endpoints._stamp_socket(server)
    stop = threading.Event()

    def slow_echo() -> None:
        while not stop.is_set():
            try:
                data, rx, addr = endpoints._recv_stamped(server)
            except TimeoutError:
                continue
            time.sleep(wait_s)
            magic, rnd, dest, sent = endpoints.PROBE.unpack_from(data)
            server.sendto(endpoints.ECHO.pack(magic, rnd, dest, sent, rx, time.time_ns()), addr)

    echo = threading.Thread(target=slow_echo, daemon=True)
    echo.start()
    try:
        p = subprocess.run([sys.executable, endpoints.__file__, "probe", "--port", str(server.getsockname()[1]),
                            "--interval", "0.05", "--duration", "1", "127.0.0.1"], capture_output=True, text=True, timeout=30)
    finally:
        stop.set()
        echo.join()
        server.close()
    res = json.loads(p.stdout.splitlines()[-1])
    series = ProbeSeries.from_prober("a", "b", res, res["series"][0])
    summary = series.summary()
    assert summary["samples"] >= 15, summary
    assert ((series.back - series.sent) / 1e9 >= wait_s).all()
    assert summary["rtt_min_ms"] < 1.0, summary


def test_model_through_the_schema():
    from pathtwin import _native

    rtt = {"a->b": {"rtt_min_ms": 30.2}, "b->a": {"rtt_min_ms": 30.1}, "a->c": {"rtt_min_ms": 50.0},
           "c->a": {"rtt_min_ms": 50.4}, "b->c": {"rtt_min_ms": 20.0}, "c->b": {"rtt_min_ms": 20.0}}
    rec = lambda bps: {"abw_bps": bps, "receiver_rmem_max": 6291456}  # noqa: E731
    tput = {k: {1: rec(10e6 + 1e3 * i), 4: rec(14e6 + 1e3 * i)} for i, k in enumerate(rtt)}
    cfg = model.build(["a", "b", "c"], rtt, tput, {"a": [["b", "c"]]})
    back = json.loads(_native.validate_config(model.toml(cfg, ["comment"]), "toml", ""))
    assert [p["between"] for p in back["path"]] == [["a", "b"], ["a", "c"], ["b", "c"]]
    assert back["path"][0]["rtt"] in ("30100us", "30.1ms")
    ab = back["path"][0]["reactivity"]
    assert [_native.parse_quantity("rate", ab[0][n]) for n in ("1", "4")] == [10e6, 14e6]
    assert [_native.parse_quantity("rate", ab[1][n]) for n in ("1", "4")] == [10e6 + 1e3, 14e6 + 1e3]
    assert back["shared"] == [{"source": "a", "destinations": ["b", "c"], "direction": "out"}]
    # NSDI'09 §2.3: the shared queue's ABW with equal flows on its paths is their mean.
    assert model.shared_abw(tput, "a", ["b", "c"]) == {"1": pytest.approx(10e6 + 1e3), "4": pytest.approx(14e6 + 1e3)}  # a->b +0, a->c +2 kbit/s


def test_a_directions_capacity_is_the_most_it_carried_and_its_queue_what_its_tests_waited():
    """Per direction the model writes as capacity the largest rate a test carried (the
    smallest capacity the measurement allows) and as queue the bytes that delay a packet by
    the largest round-trip increase its tests saw, at that capacity: delay x C / 8. A
    direction whose tests kept no loaded RTT gets the model's derivation; a measured queue
    below NSDI'09 Eq. 2's lower bound is raised to it."""
    from pathtwin import _native

    rtt = {"a->b": {"rtt_min_ms": 40.0}, "b->a": {"rtt_min_ms": 40.2}}
    rec = lambda bps, loaded: {"abw_bps": bps, "receiver_rmem_max": 4 << 20, "rtt_loaded_ms": loaded}  # noqa: E731
    tput = {"a->b": {1: rec(6e6, 90.0), 4: rec(8e6, 160.0)},  # up to 120 ms over the base
            "b->a": {1: rec(2e6, None), 4: rec(2e6, None)}}
    back = json.loads(_native.validate_config(model.toml(model.build(["a", "b"], rtt, tput, {}), []), "toml", ""))
    [path] = back["path"]
    assert [_native.parse_quantity("rate", c) for c in path["capacity"]] == [8e6, 2e6]
    bounds = _native.queue_bounds(6_000_000, 2_000_000, 0.040, 4 << 20, 8_000_000)
    want = 0.120 * 8e6 / 8
    assert bounds["lower"][0] < want
    assert _native.parse_quantity("queue", path["queue"][0]) == pytest.approx(want, abs=1)
    assert _native.parse_quantity("queue", path["queue"][1]) == pytest.approx(bounds["queue"][1], abs=1)

    tput["a->b"] = {1: rec(6e6, 41.0), 4: rec(8e6, 42.0)}  # 2 ms: less than Eq. 2 asks
    back = json.loads(_native.validate_config(model.toml(model.build(["a", "b"], rtt, tput, {}), []), "toml", ""))
    assert _native.parse_quantity("queue", back["path"][0]["queue"][0]) == bounds["lower"][0]

    # Raised to Eq. 2 at the RTT the model reads (written to the microsecond), not at the
    # measured one: 0.4 us less made the bound 3 B smaller and the queue refused.
    rtt = {"a->b": {"rtt_min_ms": 40.1996}, "b->a": {"rtt_min_ms": 40.3}}
    tput["a->b"] = {1: rec(60e6, 40.5), 4: rec(80e6, 40.6)}
    from pathtwin.sim import simulate

    cfg = model.build(["a", "b"], rtt, tput, {})
    simulate({**cfg, "run": {"duration": "1s"}})  # compiled: the queue meets the bounds it is checked against
    assert _native.parse_quantity("queue", cfg["path"][0]["queue"][0]) == \
        _native.queue_bounds(60_000_000, 2_000_000, 0.0402, 4 << 20, 80_000_000)["lower"][0]


def test_a_class_queue_delay_is_the_round_trip_increase_its_members_share():
    """Paths loaded together all wait in the queue they share, some in their own queues too:
    the class's queue delay is the smallest of their round-trip increases (loaded less
    base), written as the class's queue in full-size packets (``model`` says why packets)."""
    from pathtwin import _native
    from pathtwin.measure.session import shared_queue_delay_s

    rtt = {"a->b": {"rtt_min_ms": 30.0}, "c->b": {"rtt_min_ms": 20.0}}
    members = [("a", "b"), ("c", "b")]
    loaded = [{"rtt_loaded_ms": 630.0}, {"rtt_loaded_ms": 680.0}]  # +600 and +660 ms
    assert shared_queue_delay_s(members, loaded, rtt) == pytest.approx(0.6)
    # A test without a loaded round trip (a live test) leaves the class its default queue,
    # and so does an increase the probes would not tell from no congestion.
    assert shared_queue_delay_s(members, [loaded[0], {}], rtt) is None
    quiet = [{"rtt_loaded_ms": 30.0 + shared.MIN_SPREAD_S * 1e3 / 2}, {"rtt_loaded_ms": 680.0}]
    assert shared_queue_delay_s(members, quiet, rtt) is None

    # Written as the full-size packets that delay a packet that long at the class's
    # capacity (the most its members carried, 2 Mbit/s): a DSL uplink's 100 packets of
    # 1500 bytes; 50 of 3000 bytes on a path whose tests recorded that MTU.
    hosts = ["a", "b", "c"]
    for mtu, packets in ((None, 100), (3000, 50)):
        tput = {f"{x}->{y}": {4: {"abw_bps": 2e6, "receiver_rmem_max": 6291456, "mtu": mtu}} for x in hosts for y in hosts if x != y}
        probe = {k: {"rtt_min_ms": 30.0} for k in tput}
        cfg = model.build(hosts, probe, tput, {}, [(["a->b", "c->b"], 1.9e6, 0.6)])
        back = json.loads(_native.validate_config(model.toml(cfg, []), "toml", ""))
        [cls] = back["shared"]
        assert cls["queue"] == f"{packets}p" and "queue_delay" not in cls, cls


def test_state_resumes_only_the_same_settings(tmp_path):
    out = tmp_path / "model.toml"
    p = state_path(out)
    assert p == tmp_path / "model.measure.json"
    st = State.open(p, {"flows": [1, 2]})
    st.record("probe", {"x": 1})
    again = State.open(p, {"flows": [1, 2]})
    assert again.steps == {"probe": {"x": 1}} and again.resumed == 1
    with pytest.raises(PathtwinError, match="other settings \\(flows\\)"):
        State.open(p, {"flows": [1, 4]})


@pytest.mark.parametrize("text,message", [
    ("1,0", "--flows: 0 is not a positive number of flows"),
    ("1,x", "--flows: 'x' is not a number of flows"),
    ("2,2", "--flows: 2,2 names a flow count twice"),
    ("", "--flows: '' is not a number of flows"),
])
def test_bad_flow_lists_are_refused(text, message):
    with pytest.raises(PathtwinError, match="^" + message.replace("(", "\\(")):
        parse_flows(text)
    assert parse_flows("8,1,2") == [1, 2, 8]


@pytest.mark.parametrize("args,message", [
    (["--hosts", "s,nowhere"], "--hosts: no host 'nowhere'; the hosts are s, d1, d2, d3, x1, x2"),
    (["--hosts", "s"], "--hosts: a measurement needs at least two hosts, got 1"),
    (["--hosts", "s,s"], "--hosts: s,s names a host twice"),
    (["s", "d1", "--hosts", "s,d1"], "name the hosts either as arguments or with --hosts, not both"),
    (["--flows", "1,-2"], "--flows: -2 is not a positive number of flows"),
    (["--flows", "four"], "--flows: 'four' is not a number of flows"),
    (["--duration", "10"], "--duration: invalid time"),
    (["--duration", "0.5s"], "--duration: 0.5 s is too short"),
    (["--probe-interval", "1s", "--probe-duration", "10s"], "gives 10 probes per path"),
])
def test_cli_refusals(tmp_path, args, message):
    r = run_cli("measure", "--emulate", GROUND_TRUTH, *args, "-o", tmp_path / "m.toml")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("pathtwin: error: ") and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "m.toml").exists()


def test_cli_refusals_without_a_ground_truth(tmp_path):
    r = run_cli("measure", "a", "b", "-o", tmp_path / "m.toml")
    assert r.returncode == 2 and "needs `pathtwin measure agent`" in r.stderr
    r = run_cli("measure", "--emulate", tmp_path / "none.toml", "-o", tmp_path / "m.toml")
    assert r.returncode == 2 and r.stderr.strip() == f"pathtwin: error: --emulate {tmp_path / 'none.toml'}: no such file"
    bad = tmp_path / "bad.toml"
    bad.write_text('hosts = ["a", "b"]\n[[path]]\nbetween = ["a", "c"]\nrtt = "10ms"\nabw = "1mbit"\n')
    r = run_cli("measure", "--emulate", bad, "-o", tmp_path / "m.toml")
    assert r.returncode == 2 and "path[0].between[1]" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_settings_check_names_the_option():
    with pytest.raises(PathtwinError, match="--port"):
        Settings(port=80).check()


def test_bytes_per_bucket_from_counter_samples():
    # Counters read at uneven times (a sink late to read): 1 MB/s for one flow, 2 MB/s for
    # another that connected at 0.25 s; the buckets come out even.
    from pathtwin.measure.throughput import buckets

    t0 = 10**18
    times = [0.0, 0.07, 0.25, 0.31, 0.33, 0.74, 1.0]
    samples = [(t0 + int(x * 1e9), [int(1e6 * x), int(2e6 * max(0.0, x - 0.25))]) for x in times]
    b = buckets(samples, t0, 0.25, 2)
    assert b[0] == [250_000] * 4
    assert b[1] == [0, 500_000, 500_000, 500_000]


def test_validate_refusals(tmp_path):
    model = tmp_path / "m.toml"
    r = run_cli("measure", "validate", model)
    assert r.returncode == 2 and r.stderr.strip() == f"pathtwin: error: {model}: no such file"
    model.write_text('hosts = ["a", "b"]\n')
    r = run_cli("measure", "validate", model)
    assert r.returncode == 2 and "no measurement record beside" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "m.measure.json").write_text(json.dumps({"format": 1, "settings": {}, "steps": {}, "findings": {}}))
    r = run_cli("measure", "validate", model)
    assert r.returncode == 2 and "the measurement is not complete" in r.stderr


def test_default_ports_no_client_connection_can_hold():
    """A test's sink binds its port while the measured host's own connections come and go (an
    emulated ground truth's cross traffic opens thousands): a listening port inside the kernel's
    ephemeral range, or among the emulated workload's server ports, is one a client connection
    may hold, and the bind fails ("Address already in use", seen in CI). Every default port of
    a measurement lies outside both."""
    from pathtwin.measure import grade, remote

    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    workload = range(20000, 32768)  # the emulator's [[flow]] servers: BASE_PORT + entry, below 32768
    pairs = 12 * 11  # `validate` of a 12-host ground truth runs a sink per ordered pair at once
    used = [Settings().port, Settings().port + 1, remote.DEFAULT_PORT, *range(grade.PORT, grade.PORT + 1 + pairs)]
    clash = [p for p in used if low <= p <= high or p in workload]
    assert not clash, f"default measurement ports {clash} may be held by client connections"


def test_a_sink_ends_with_the_connections_whose_handshakes_completed():
    """Every pair of a ground truth at once can starve a handshake for good (three of eight
    connections from d3 to d1 in two-bottlenecks.toml's truth in 25 s): the sender then ends
    with the others, and the sink, asked for three connections, reports the two it accepted
    with every byte they carried instead of waiting for the third forever (loopback, no
    privileges)."""
    import socket

    with loopback_sink(3) as (port, sink):
        sent = [300_000, 500_000]
        conns = [socket.create_connection(("127.0.0.1", port)) for _ in sent]
        for c, n in zip(conns, sent):
            c.sendall(b"x" * n)
        for c in conns:
            c.close()
        out, _ = sink.communicate(timeout=20)
    got = json.loads(out.splitlines()[-1])
    # The kernel's count (tcpi_bytes_received) takes the FIN's sequence number as a byte too.
    assert sorted(n - 1 for n in got["samples"][-1][1]) == sorted(sent), got["samples"][-1]


def test_a_sender_starts_with_the_connections_established_and_lets_the_rest_join(monkeypatch, capsys):
    """A listener that accepts nothing and whose accept queue holds one connection (backlog
    0): the sender's other handshakes cannot complete. After ``CONNECT_TIMEOUT_S`` it sends
    on the one established for its duration instead of failing, and reports nothing
    written on the others."""
    import socket

    from pathtwin.measure import endpoints

    monkeypatch.setattr(endpoints, "CONNECT_TIMEOUT_S", 1.0)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as ls:
        ls.bind(("127.0.0.1", 0))
        ls.listen(0)
        assert endpoints.send("127.0.0.1", ls.getsockname()[1], flows=3, duration=0.5) == 0
    wrote = json.loads(capsys.readouterr().out.splitlines()[-1])["wrote"]
    assert len(wrote) == 3 and wrote.count(0) >= 1 and max(wrote) > 0, wrote


def test_a_sink_stops_reading_its_drain_limit_after_the_test():
    """A connection starved into retransmission backoff can take minutes to deliver its
    last bytes (every pair of two-bottlenecks.toml at once: a sink still reading 60 s after
    its test). Given its test's duration, a sink reports what it read ``--drain-limit``
    seconds after the test's end, even with a connection still open (loopback, no
    privileges)."""
    import socket

    with loopback_sink(1, "--duration", "0.5", "--drain-limit", "1") as (port, sink):
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.sendall(b"x" * 100_000)
            # The connection stays open meanwhile: without the limit the sink would read on
            # and the wait would time out.
            out, _ = sink.communicate(timeout=20)
    assert json.loads(out.splitlines()[-1])["samples"][-1][1] == [100_000]


def test_a_sender_runs_the_congestion_control_asked_for_and_reports_the_one_it_ran():
    """``send --cc``: every connection runs it, as the kernel's socket dump (``ss -ti``)
    shows while they send, and the result names it; without ``--cc`` the result names the
    host's default (``net.ipv4.tcp_congestion_control``), so a measurement records which
    controller its reactivity tables are for. A controller the kernel lacks ends the sender
    with one line naming the ones it has (loopback, no privileges: reno is every kernel's, and
    always allowed)."""
    import subprocess
    import sys
    import time

    from pathtwin.measure import endpoints

    def run(flows: int, duration: float, *cc: str) -> tuple[dict, list[str]]:
        with loopback_sink(flows, "--duration", str(duration)) as (port, sink):
            send = subprocess.Popen([sys.executable, endpoints.__file__, "send", "--port", str(port), "--flows", str(flows),
                                     "--duration", str(duration), *cc, "127.0.0.1"], stdout=subprocess.PIPE, text=True)
            seen: list[str] = []
            while len(seen) < flows and send.poll() is None:  # until every connection is up (a loaded machine)
                time.sleep(0.05)
                # The senders' sockets (to the sink's port): the first word of each one's info line.
                dump = subprocess.run(["ss", "-tinH", "state", "established", f"dport = :{port}"], capture_output=True,
                                      text=True, check=True).stdout
                seen = [line.split()[0] for line in dump.splitlines() if line.startswith(("\t", " "))]
            out, _ = send.communicate(timeout=30)
            sink.communicate(timeout=30)
        return json.loads(out.splitlines()[-1]), seen

    got, seen = run(2, 2.0, "--cc", "reno")
    assert got["cc"] == "reno" and seen == ["reno", "reno"], (got["cc"], seen)
    default = open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
    got, seen = run(1, 2.0)
    assert got["cc"] == default and seen == [default], (got["cc"], seen, default)
    bad = subprocess.run([sys.executable, endpoints.__file__, "send", "--port", "9", "--flows", "1", "--duration", "1",
                          "--cc", "nosuchcc", "127.0.0.1"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert bad.stderr.startswith("congestion control 'nosuchcc': this host's kernel refuses it (") and "reno" in bad.stderr


def test_a_sinks_test_starts_with_its_first_byte_not_its_first_accept():
    """The sender starts once every handshake has completed, which a SYN lost behind full
    queues delays by seconds; the sink's test (``t0``, from which its averaged window is
    counted) starts with the first byte, so such a wait is not read as a test that carried
    nothing (loopback, no privileges: two connections that send only 1.5 s after connecting)."""
    import socket
    import time

    from pathtwin.measure.throughput import BUCKET_S, buckets, summarize

    with loopback_sink(2, "--duration", "1") as (port, sink):
        conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        accepted_by = time.time_ns()
        time.sleep(1.5)
        sent_from = time.time_ns()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # about 1 s of data, paced so that every bucket has some
            for c in conns:
                c.sendall(b"x" * 20000)
            time.sleep(0.005)
        for c in conns:
            c.close()
        out, _ = sink.communicate(timeout=30)
    got = json.loads(out.splitlines()[-1])
    # Within half a second of the first byte (a loaded machine may wake the sink late), not
    # at the accept 1.5 s before it.
    assert sent_from <= got["t0"] <= sent_from + 0.5e9, (got["t0"] - accepted_by) / 1e9
    rec = summarize(buckets(got["samples"], got["t0"], BUCKET_S, 2), BUCKET_S, 1.0, 1448, 1500, 2, t0_ns=got["t0"])
    assert rec["goodput_bps"] > 0 and min(rec["flow_goodput_bps"]) > 0, rec


def test_a_connection_the_sink_resets_ends_without_failing_the_test(capsys):
    """A sink that stops reading (its drain limit) closes connections with data unread, which
    the kernel answers with a reset: the sender ends that connection and keeps the test (what
    it delivered is the sink's to count), instead of failing a grading hours long (loopback,
    no privileges: a listener that resets one of two connections)."""
    import socket
    import threading

    from pathtwin.measure import endpoints

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as ls:
        ls.bind(("127.0.0.1", 0))
        ls.listen(2)
        stop = threading.Event()

        def serve() -> None:
            a, _ = ls.accept()
            b, _ = ls.accept()
            a.recv(1000)
            a.close()  # unread data: the kernel resets the connection
            b.settimeout(0.1)
            while not stop.is_set():
                try:
                    if not b.recv(262144):
                        break
                except TimeoutError:
                    pass
            b.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            assert endpoints.send("127.0.0.1", ls.getsockname()[1], flows=2, duration=1.0) == 0
        finally:
            stop.set()
            t.join(5)
    got = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert len(got["ended_early"]) == 1 and max(got["wrote"]) > 1_000_000, got["ended_early"]
