"""Applications on simulated connections: byte-exact bulk transfers, on/off sources and
request/response, checked against the configuration and simple equations."""

from __future__ import annotations

import pathtwin


def path(rate="10mbit", rtt="40ms", **flow) -> dict:
    return {
        "hosts": ["a", "b"],
        "run": {"duration": flow.pop("duration", "20s"), "sample_interval": "100ms"},
        "tcp": {"max_window": "4MiB"},
        "path": [{"between": ["a", "b"], "rtt": rtt, "abw": rate, "mode": "link", "queue": "100KB"}],
        "flow": [{"from": "a", "to": "b", **flow}],
    }


def test_sized_bulk_transfer_delivers_exactly_its_bytes():
    for size in (1, 1460, 1461, 1_000_000):
        res = pathtwin.simulate(path(app="bulk", bytes=f"{size}B"))
        f = res.flows.iloc[0]
        assert f.bytes_delivered == size, (size, f.bytes_delivered)
        assert f.completion_s > 0.040  # at least one RTT after the handshake


def test_large_bulk_transfer_completes_in_about_size_over_rate():
    res = pathtwin.simulate(path(app="bulk", bytes="5MB", duration="30s"))
    f = res.flows.iloc[0]
    # 5 MB of payload in 1460-byte segments of 1500 wire bytes at 10 Mbit/s, plus slow start.
    ideal = 5e6 * 1500 / 1460 * 8 / 10e6
    assert ideal < f.completion_s < ideal * 1.25, f.completion_s
    # Its goodput is over the time it took, not over the 30-s run it finished early in: the
    # path's payload rate less slow start's share (the bound above), not 5 MB / 30 s.
    assert f.goodput_bps == 5e6 * 8 / f.completion_s
    assert 10e6 * 1460 / 1500 / 1.25 < f.goodput_bps < 10e6 * 1460 / 1500, f.goodput_bps


def test_two_entries_between_the_same_hosts_label_their_connections_apart():
    cfg = path(app="bulk", bytes="100KB")
    cfg["flow"] = [dict(cfg["flow"][0], count=2), dict(cfg["flow"][0], count=2), dict(cfg["flow"][0], start="1s")]
    flows = pathtwin.simulate(cfg).flows
    # One row per connection, told apart by label, in file order.
    assert list(flows.label) == ["a->b#0", "a->b#1", "a->b#2", "a->b#3", "a->b#4"]
    assert list(zip(flows["entry"], flows["copy"])) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]


def test_onoff_source_sends_only_while_on():
    res = pathtwin.simulate(path(app="onoff", on="2s", off="2s", duration="20s"))
    fs = res.flow_series
    # Samples well inside off periods (after ≥ 1 RTT of draining) carry no new data.
    off = fs[((fs.time_s % 4) > 2.5) & ((fs.time_s % 4) < 3.9)]
    on = fs[((fs.time_s % 4) > 0.5) & ((fs.time_s % 4) < 1.9) & (fs.time_s > 1)]
    assert off.goodput_bps.max() == 0
    assert on.goodput_bps.mean() > 0.8 * 10e6 * 1460 / 1500
    # Half of the time on: about half of a bulk flow's bytes.
    bulk = pathtwin.simulate(path(app="bulk", duration="20s")).flows.iloc[0].bytes_delivered
    ratio = res.flows.iloc[0].bytes_delivered / bulk
    assert 0.4 < ratio < 0.6, ratio


def test_request_response_times_follow_rtt_delay_and_size():
    res = pathtwin.simulate(path(app="reqresp", request="500B", response="10KB", server_delay="50ms",
                                 think="100ms", requests=10, rtt="80ms"))
    f = res.flows.iloc[0]
    assert f.responses == 10
    # One RTT (request out, response back) plus the server delay: 10 KB fits in the initial
    # window of 10 segments, so no further round trip; serialization adds ~8 ms at 10 Mbit/s.
    assert 0.080 + 0.050 <= f.response_time_mean_s <= 0.080 + 0.050 + 0.015, f.response_time_mean_s
    assert f.bytes_delivered == 10 * (500 + 10_000)
