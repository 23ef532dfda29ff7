"""Queue disciplines as a user configures them: `qdisc = "red"` with its `red` table,
`qdisc = "prio"`, their errors, and RED's behaviour in both engines."""

from __future__ import annotations

import time

import pandas as pd
import pytest

import pathtwin
from conftest import needs_root, run_cli


def dumbbell(qdisc: dict, flows: int = 10, duration: str = "30s") -> dict:
    return {
        "hosts": ["a", "b"],
        "run": {"duration": duration, "sample_interval": "50ms"},
        "tcp": {"cc": "reno", "max_window": "1MiB", "rcv_window": "1MiB"},
        "link": [{"between": ["a", "b"], "rate": "10mbit", "delay": "20ms", "queue": "100p", **qdisc}],
        "flow": [{"from": "a", "to": "b", "count": flows}],
    }


RED = {"qdisc": "red", "red": {"min_th": "5p", "max_th": "15p", "max_p": 0.1, "w_q": 0.002}}


def test_red_keeps_its_average_between_the_thresholds_where_droptail_fills_the_buffer():
    """Ten Reno flows on 10 Mbit/s, 40 ms: DropTail lets the queue fill its 100 packets until
    it overflows; RED drops early so that its average stays in [min_th, 2·max_th) (below it
    nothing is dropped and the flows would grow it; above it every arrival is dropped), with
    the link still busy."""
    red = pathtwin.simulate(dumbbell(RED))
    tail = pathtwin.simulate(dumbbell({}))
    rq = red.queue_series[(red.queue_series.queue == "a->b") & (red.queue_series.time_s > 10)]
    tq = tail.queue_series[(tail.queue_series.queue == "a->b") & (tail.queue_series.time_s > 10)]
    assert 5 <= rq.avg_queue.mean() < 30, rq.avg_queue.describe()
    assert rq.packets.mean() < 0.5 * tq.packets.mean(), (rq.packets.mean(), tq.packets.mean())
    q = red.queues.set_index("queue").loc["a->b"]
    assert q.early_drops > 0 and q.early_drops > q.forced_drops, q
    assert q.utilization > 0.9
    assert tq.avg_queue.isna().all(), "DropTail keeps no average"


def test_strict_priority_with_one_band_is_fifo():
    """Every TCP packet is in the data band, so a strict-priority queue must behave exactly as
    DropTail of the same size: identical flows and time series."""
    prio = pathtwin.simulate(dumbbell({"qdisc": "prio"}, flows=3, duration="10s"))
    tail = pathtwin.simulate(dumbbell({}, flows=3, duration="10s"))
    pd.testing.assert_frame_equal(prio.flow_series, tail.flow_series)


@pytest.mark.parametrize("extra, key", [
    ({"qdisc": "red", "red": {"min_th": "5p"}}, "link[0].red.max_th"),
    ({"red": {"min_th": "5p", "max_th": "15p"}}, "link[0].red"),
    ({"qdisc": "red", "red": {"min_th": "15p", "max_th": "5p"}}, "link[0].red.max_th"),
    ({"qdisc": "red", "red": {"min_th": "5p", "max_th": "30KB"}}, "link[0].red.max_th"),
    ({"qdisc": "red", "red": {"min_th": "5p", "max_th": "15p", "max_p": 2}}, "link[0].red.max_p"),
    ({"qdisc": "red", "red": {"min_th": "5p", "max_th": "15p", "wq": 0.1}}, "link[0].red.wq"),
    ({"qdisc": "codel"}, "link[0].qdisc"),
    ({"qdisc": "rio", "rio": {"out": {"min_th": "15p", "max_th": "5p"}}}, "link[0].rio.out.max_th"),
    ({"qdisc": "rio", "rio": {"in": {"min_th": "50KB", "max_th": "490KB"}, "out": {"min_th": "5p", "max_th": "15p"}}},
     "link[0].rio.out.min_th"),
    ({"rio": {"coupled": False}}, "link[0].rio"),
    ({"qdisc": "frio", "frio": {"min_q": 4, "max_q": 3}}, "link[0].frio.max_q"),
    ({"qdisc": "rio", "frio": {"min_q": 2}}, "link[0].frio"),
])
def test_bad_qdisc_settings_are_one_line_errors_naming_the_key(tmp_path, extra, key):
    cfg = dumbbell({}, flows=1, duration="1s")
    cfg["link"][0].update(extra)
    scen = tmp_path / "s.toml"
    scen.write_text(_toml(cfg))
    r = run_cli("sim", scen, "-o", tmp_path / "out")
    assert r.returncode == 2 and key in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
    assert "Traceback" not in r.stderr


def _toml(cfg: dict) -> str:
    """A minimal TOML writer for the scenarios here (strings, numbers, booleans, inline tables)."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return f'"{v}"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"

    lines = [f"{k} = {value(v)}" for k, v in cfg.items() if not isinstance(v, (dict, list)) or k == "hosts"]
    for k, v in cfg.items():
        if isinstance(v, dict):
            lines += [f"[{k}]"] + [f"{kk} = {value(x)}" for kk, x in v.items()]
        elif isinstance(v, list) and k != "hosts":
            for entry in v:
                lines += [f"[[{k}]]"] + [f"{kk} = {value(x)}" for kk, x in entry.items()]
    return "\n".join(lines) + "\n"


@needs_root
def test_red_marks_the_kernels_ecn_packets_in_the_emulator(tmp_path):
    """The same RED runs in the emulator under real kernel TCP with ECN negotiated
    (`[tcp] ecn = true` sets the hosts' `net.ipv4.tcp_ecn`): RED marks CE instead of dropping
    early, the kernel's senders react, and the average queue stays between the thresholds."""
    from pathtwin.emulation import Emulation

    cfg = dumbbell({"qdisc": "red", "red": {"min_th": "5p", "max_th": "15p", "ecn": True}}, flows=1)
    cfg.pop("flow")
    cfg["tcp"] = {"cc": "reno", "ecn": True}
    with Emulation(cfg, out=tmp_path / "emu") as net:
        net["b"].serve(["iperf3", "-s", "-1"], 5201)
        net["a"].run(["iperf3", "-c", "b", "-t", "8", "-P", "4"], check=True, capture_output=True, timeout=60)
    q = pd.read_parquet(tmp_path / "emu" / "queues.parquet").set_index("queue").loc["a->b"]
    # Early decisions mostly mark; the few early drops hit packets the kernel sends without
    # ECT (retransmissions, pure ACKs, SYNs: RFC 3168 §6.1.5).
    assert q.ecn_marks > 20 and q.ecn_marks > 3 * q.early_drops, q
    qs = pd.read_parquet(tmp_path / "emu" / "queue_series.parquet")
    steady = qs[(qs.queue == "a->b") & (qs.time_s > 3)]
    assert 5 <= steady.avg_queue.mean() < 30, steady.avg_queue.describe()


@needs_root
def test_red_average_queue_agrees_between_simulator_and_emulator(tmp_path):
    """One RED model, two engines: four Reno flows through RED (5/15 packets) on 10 Mbit/s,
    40 ms. The kernel's TCP in the emulator and the simulated TCP keep RED's average queue
    within 15 % of each other."""
    from pathtwin.emulation import Emulation

    cfg = dumbbell({"qdisc": "red", "red": {"min_th": "5p", "max_th": "15p"}}, flows=4, duration="20s")
    cfg["tcp"] = {"cc": "reno"}
    sim = pathtwin.simulate(cfg).queue_series
    sim_avg = sim[(sim.queue == "a->b") & (sim.time_s > 5)].avg_queue.mean()
    cfg.pop("flow")
    with Emulation(cfg, out=tmp_path / "emu") as net:
        net["b"].serve(["iperf3", "-s", "-1"], 5201)
        net["a"].run(["iperf3", "-c", "b", "-t", "20", "-P", "4"], check=True, capture_output=True, timeout=90)
    qs = pd.read_parquet(tmp_path / "emu" / "queue_series.parquet")
    emu_avg = qs[(qs.queue == "a->b") & (qs.time_s > 5)].avg_queue.mean()
    assert abs(emu_avg - sim_avg) / sim_avg < 0.15, (sim_avg, emu_avg)


def test_red_with_ecn_marks_simulated_tcp_instead_of_dropping():
    """With `[tcp] ecn = true` the simulated endpoints negotiate ECN (RFC 3168): RED marks
    CE where it would have dropped early, the senders halve on the echo, and early drops and
    retransmissions all but vanish against the same run without ECN."""
    red = {"qdisc": "red", "red": {"min_th": "5p", "max_th": "15p", "ecn": True}}
    with_ecn = dumbbell(red, flows=4)
    with_ecn["tcp"]["ecn"] = True
    marked = pathtwin.simulate(with_ecn)
    dropped = pathtwin.simulate(dumbbell(red, flows=4))
    qm = marked.queues.set_index("queue").loc["a->b"]
    qd = dropped.queues.set_index("queue").loc["a->b"]
    assert qm.ecn_marks > 0 and qd.ecn_marks == 0
    assert marked.flows.ecn_reductions.sum() > 0 and dropped.flows.ecn_reductions.sum() == 0
    assert qm.early_drops < 0.1 * qd.early_drops, (qm.early_drops, qd.early_drops)
    assert marked.flows.retransmits.sum() < 0.2 * dropped.flows.retransmits.sum()


#: The thesis's "appropriate" RIO (papers/tcp-friendly-marker-thesis-ch3-4.txt), in bytes.
RIO_THESIS = {"qdisc": "rio", "rio": {"in": {"min_th": "50KB", "max_th": "490KB", "max_p": 0.005},
                                      "out": {"min_th": "10KB", "max_th": "200KB", "max_p": 0.25}, "w_q": 0.002}}


def test_rio_counts_arrivals_and_drops_per_class_and_unmarked_traffic_is_in():
    """Until markers exist every packet is unmarked, which RIO files as IN: the `queues`
    table's per-class columns show all arrivals and drops on the IN side, none on the OUT
    side, and FRIO (whose rules are for OUT packets) behaves exactly as RIO."""
    rio = pathtwin.simulate(dumbbell(RIO_THESIS, flows=6, duration="20s"))
    q = rio.queues.set_index("queue").loc["a->b"]
    assert q.qdisc == "rio"
    assert q.in_arrivals == q.arrivals and q.out_arrivals == 0, q
    assert q.in_drops == q.drops > 0 and q.out_drops == 0, q
    assert q.early_drops > 0, q
    frio = pathtwin.simulate(dumbbell({**RIO_THESIS, "qdisc": "frio", "frio": {"min_q": 2}}, flows=6, duration="20s"))
    assert (frio.queues.qdisc == "frio").all()
    cols = ["arrivals", "drops", "early_drops", "forced_drops", "in_arrivals", "in_drops"]
    pd.testing.assert_frame_equal(frio.queues[cols], rio.queues[cols])


def test_disciplines_without_classes_report_zero_per_class_counts():
    tail = pathtwin.simulate(dumbbell({}, flows=2, duration="5s")).queues
    for col in ("in_arrivals", "out_arrivals", "in_drops", "out_drops"):
        assert (tail[col] == 0).all(), tail


@needs_root
def test_rio_behind_a_token_bucket_marker_agrees_between_simulator_and_emulator(tmp_path):
    """RIO-C behind a continuous token bucket at the sending host (5 Mbit/s committed of a
    10 Mbit/s link): four Reno flows, simulated and under the kernel's TCP. The marker passes
    its committed rate as IN in both engines (within 10 % of 5 Mbit/s of IP bytes), the real
    datagrams carry the marks (the bottleneck counts OUT arrivals), OUT packets take the drops
    (RIO's OUT curve starts at 5 packets, the IN one at 15), and RIO's average queue agrees
    within 15 %."""
    from pathtwin.emulation import Emulation

    rio = {"qdisc": "rio", "rio": {"in": {"min_th": "15p", "max_th": "30p", "max_p": 0.02},
                                   "out": {"min_th": "5p", "max_th": "15p", "max_p": 0.2}}}
    cfg = dumbbell(rio, flows=4, duration="20s")
    cfg["tcp"] = {"cc": "reno", "max_window": "1MiB", "rcv_window": "1MiB"}
    cfg["marker"] = [{"at": "a", "kind": "token-bucket", "rate": "5mbit", "depth": "30KB"}]
    sim = pathtwin.simulate(cfg)
    sim_avg = sim.queue_series[(sim.queue_series.queue == "a->b") & (sim.queue_series.time_s > 5)].avg_queue.mean()
    sim_in_bps = float(sim.tables["markers"].in_bytes.iloc[0]) * 8 / 20
    cfg.pop("flow")
    with Emulation(cfg, out=tmp_path / "emu") as net:
        net["b"].serve(["iperf3", "-s", "-1"], 5201)
        t0 = time.monotonic()
        net["a"].run(["iperf3", "-c", "b", "-t", "20", "-P", "4"], check=True, capture_output=True, timeout=90)
        busy_s = time.monotonic() - t0
    markers = pd.read_parquet(tmp_path / "emu" / "markers.parquet")
    emu_in_bps = float(markers.in_bytes.iloc[0]) * 8 / busy_s
    for in_bps in (sim_in_bps, emu_in_bps):
        assert abs(in_bps - 5e6) < 0.1 * 5e6, (sim_in_bps, emu_in_bps)
    q = pd.read_parquet(tmp_path / "emu" / "queues.parquet").set_index("queue").loc["a->b"]
    assert q.out_arrivals > 1000 and q.out_drops > 5 * q.in_drops, q
    qs = pd.read_parquet(tmp_path / "emu" / "queue_series.parquet")
    emu_avg = qs[(qs.queue == "a->b") & (qs.time_s > 5)].avg_queue.mean()
    print(f"IN Mbit/s sim {sim_in_bps / 1e6:.2f} emu {emu_in_bps / 1e6:.2f}; RIO average sim {sim_avg:.2f} emu {emu_avg:.2f}")
    assert abs(emu_avg - sim_avg) / sim_avg < 0.15, (sim_avg, emu_avg)
