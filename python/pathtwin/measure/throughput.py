"""Available bandwidth of a path direction as the throughput of N parallel TCP flows, the
reactivity table's entries (NSDI'09 §3.3 and §4.5: iperf with one to eight or ten flows).

N connections from the source to a sink on the destination send as fast as the kernel's
TCP lets them for ``duration``; the sink reads each connection's count of received bytes from
the kernel (``tcp_info``) every 50 ms with the time, which gives the bytes per quarter second.
The first quarter of the run (slow start, and the cross traffic's first reaction) is left
out; the rest gives the mean, and its quarter-second samples the spread. The model's ABW is
an IP-level rate (placeholders take C − ABW of the wire), so goodput is scaled by the
packet size over the payload per packet, as the sender's socket reports them (path MTU and
``TCP_MAXSEG``: 1500/1448 with timestamps).

Not here: the programs (``endpoints``).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from . import hosts as hostmod
from .hosts import Host

#: The rate samples' period (s), and how often the sink reads its counters.
BUCKET_S = 0.25
SAMPLE_S = 0.05
#: Share of a run left out at its start.
WARMUP_SHARE = 0.25
#: The percentile of a test's smoothed RTTs (the senders' estimates over the averaged window)
#: taken as its loaded round trip. TCP keeps a drop-tail bottleneck nearly full, and the
#: estimate's lower samples are from after a loss or a timeout, when the queue had drained
#: or the estimate restarted from the next samples: four flows each on c1's five paths out
#: (three-sites.toml, a 2 Mbit/s uplink whose 100 packets hold 600 ms; the queue's median
#: over the test 576 ms) had medians 190-585 ms and 90th percentiles 500-670 ms, less base
#: RTTs of 30-115 ms.
LOADED_RTT_PERCENTILE = 90


def parallel_flows(src: Host, dst: Host, flows: int, duration_s: float, port: int, cc: Optional[str] = None) -> dict:
    """Runs ``flows`` parallel TCP flows from ``src`` to ``dst`` for ``duration_s`` with
    congestion control ``cc`` (None: ``src``'s default); returns the throughput record (rates
    in bit/s): ``abw_bps`` (IP level, what a model's ABW is), ``goodput_bps``, per flow
    ``flow_goodput_bps``, and its confidence: ``samples`` (quarter-second samples used),
    ``std_bps`` and ``cv`` of the aggregate's samples; ``cc`` the congestion control the
    sender's kernel ran (None from an agent older than that report)."""
    sink = hostmod.operate(dst, "sink", port=port, flows=flows, every=SAMPLE_S, duration=duration_s)
    # Only when asked for: an agent refuses a parameter it does not know, and one older than
    # ``cc`` can still measure with its host's default.
    chosen = {"cc": cc} if cc is not None else {}
    try:
        sender = hostmod.operate(src, "send", ready=False, addr=dst.ip, port=port, flows=flows, duration=duration_s,
                                 **chosen)
        try:
            sent = sender.result(f"the sender of {flows} flow(s) to {dst.name}", timeout=duration_s + 60)
        finally:
            sender.stop()
        got = sink.result(f"the sink of {flows} flow(s) from {src.name}", timeout=60)
    finally:
        sink.stop()
    rec = summarize(buckets(got["samples"], got["t0"], BUCKET_S, flows), BUCKET_S, duration_s, sent["mss"], sent["mtu"],
                    flows, t0_ns=got["t0"])
    rec["rtt_loaded_ms"] = sender_loaded_rtt_ms(sent.get("rtt", []), duration_s)
    rec["drain_s"] = drain_s(got["samples"], got["t0"], duration_s)
    rec["receiver_rmem_max"] = got.get("rmem_max")
    rec["kernel_counts"] = bool(got.get("kernel"))
    rec["cc"] = sent.get("cc")
    if sent.get("ended_early"):  # reset by the sink, or a late handshake it refused
        rec["ended_early"] = len(sent["ended_early"])
    if sent.get("max_rate") is not None:  # a real host's agent paced the flows at its --max-rate
        rec["rate_cap_bps"] = sent["max_rate"]
    return rec


def loaded_rtt_ms(srtt_ms: np.ndarray) -> Optional[float]:
    """The round trip a test's connections had with the queues they loaded full: the
    ``LOADED_RTT_PERCENTILE``-th percentile of their smoothed RTTs over the averaged window
    (ms; NaN where a connection had no estimate); None if none had one."""
    w = srtt_ms[np.isfinite(srtt_ms)]
    return float(np.percentile(w, LOADED_RTT_PERCENTILE)) if w.size else None


def sender_loaded_rtt_ms(samples: list, duration_s: float) -> Optional[float]:
    """``loaded_rtt_ms`` from the sender's ``(s since its start, [smoothed RTT µs or None per
    connection])`` samples (``endpoints.send``) in the averaged window, which the sender's
    own clock places: after the warm-up share of the test, before its end. None from a
    sender that reports none (an agent older than these samples)."""
    lo = duration_s * WARMUP_SHARE
    ms = [r / 1e3 for t, rs in samples if lo <= t <= duration_s for r in rs if r]
    return loaded_rtt_ms(np.array(ms, dtype=float))


def drain_s(samples: list, t0_ns: int, duration_s: float) -> float:
    """How long after the test's end (``duration_s`` from its start, the sink's first byte) its
    connections still delivered bytes: the sink's last sample whose count grew. The sender
    stops writing at its end, but what its socket buffers hold is still sent, and the sink
    reads to the end, so a test returns only once its own data has left the paths' queues
    and the next test starts on drained paths (campus in the emulator: four flows on each of
    d3's paths out through its 8-Mbit/s uplink took 11.7-15.1 s for a 4-s test, and a d3->s
    test right after read 8.001, 8.002 and 7.999 Mbit/s, against 7.999, 8.000 and 7.877
    ten seconds later). 0 when the counts stopped growing by then."""
    last, prev = t0_ns, None
    for t, counts in samples:
        total = sum(counts)
        if prev is not None and total > prev:
            last = t
        prev = total
    return max(0.0, (last - t0_ns) / 1e9 - duration_s)


def buckets(samples: list, t0_ns: int, bucket_s: float, flows: int) -> list[list[int]]:
    """Bytes each connection received per ``bucket_s`` from ``t0_ns``, from the sink's
    ``(time ns, [bytes so far per connection])`` samples, linearly interpolated between them."""
    if not samples:
        return [[] for _ in range(flows)]
    t = np.array([s[0] for s in samples], dtype=float)
    n = max(len(s[1]) for s in samples)
    cum = np.array([list(s[1]) + [0] * (n - len(s[1])) for s in samples], dtype=float)
    edges = t0_ns + np.arange(0, math.floor((t[-1] - t0_ns) / (bucket_s * 1e9)) + 1) * bucket_s * 1e9
    return [np.diff(np.interp(edges, t, cum[:, i])).round().astype(int).tolist() for i in range(n)]


def summarize(per_flow: list[list[int]], bucket_s: float, duration_s: float, mss: int, mtu: int, flows: int,
              t0_ns: int = 0) -> dict:
    """The throughput record from the sink's per-flow byte counts per bucket (see
    ``parallel_flows``; ``t0_ns`` the test's start, the sink's first byte); separated out so that it can be
    checked on made-up counts."""
    first = math.ceil(duration_s * WARMUP_SHARE / bucket_s)
    last = max(first + 1, math.floor(duration_s / bucket_s))  # the bucket the sender stopped in is partial
    width = max([len(r) for r in per_flow] + [last])
    m = np.zeros((len(per_flow), width))
    for i, r in enumerate(per_flow):
        m[i, :len(r)] = r
    window = m[:, first:last] * 8 / bucket_s
    agg = window.sum(axis=0)
    goodput = float(agg.mean()) if agg.size else 0.0
    scale = mtu / mss if mss > 0 else 1.0
    return {
        "flows": flows,
        "connected": len(per_flow),
        "goodput_bps": goodput,
        "abw_bps": goodput * scale,
        "flow_goodput_bps": [float(x) for x in window.mean(axis=1)] if agg.size else [],
        "samples": int(agg.size),
        "std_bps": float(agg.std(ddof=1)) if agg.size > 1 else 0.0,
        "cv": float(agg.std(ddof=1) / goodput) if agg.size > 1 and goodput > 0 else 0.0,
        "mss": mss,
        "mtu": mtu,
        "duration_s": duration_s,
        # When the averaged window was (the sink's clock, ns): for comparing with what else
        # the path carried meanwhile.
        "window_ns": [t0_ns + int(first * bucket_s * 1e9), t0_ns + int(last * bucket_s * 1e9)],
    }


def parallel_pairs(pairs: list[tuple[Host, Host]], flows: int, duration_s: float, port: int,
                   cc: Optional[str] = None) -> list[dict]:
    """``parallel_flows`` on every pair at once (pair k's sink on ``port + k``): what paths
    loaded together achieve, as a shared bottleneck's ABW is measured (NSDI'09 Figure 9's
    experiment). Returns the records in the pairs' order; a test's failure is raised in the
    caller's thread once every test has ended."""
    import threading

    results: dict[int, dict] = {}
    errors: list[BaseException] = []

    def one(k: int, a: Host, b: Host) -> None:
        try:
            results[k] = parallel_flows(a, b, flows, duration_s, port + k, cc)
        except BaseException as e:  # noqa: BLE001 — re-raised below, in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=one, args=(k, a, b)) for k, (a, b) in enumerate(pairs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [results[k] for k in range(len(pairs))]
