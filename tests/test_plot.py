"""Plots from result directories: a simulated and an emulated run of the same path drawn
together (`pathtwin plot RUN1 RUN2`), and the per-flow summary behind the throughput-delay
scatter, checked against the simulator's own per-flow table. The emulated half needs root
and iperf3."""

from __future__ import annotations

import shutil

import pytest

from conftest import needs_root, run_cli

import pathtwin
from pathtwin.plot import flow_summary, plot_runs  # noqa: E402
from pathtwin.results import read_result_dir  # noqa: E402

PATH = """
hosts = ["a", "b"]
[run]
duration = "6s"
sample_interval = "100ms"
[[path]]
between = ["a", "b"]
rtt = "40ms"
abw = "10mbit"
"""
SIM_FLOWS = """
[[flow]]
from = "a"
to = "b"
cc = "reno"
[[flow]]
from = "b"
to = "a"
cc = "newreno"
"""


def simulated(tmp_path):
    scen = tmp_path / "sim.toml"
    scen.write_text(PATH + SIM_FLOWS)
    r = run_cli("sim", scen, "-o", tmp_path / "sim")
    assert r.returncode == 0, r.stderr
    return tmp_path / "sim"


def emulated(tmp_path):
    from pathtwin.emulation import Emulation

    with Emulation(PATH, out=tmp_path / "emu", cc="cubic") as net:
        net["b"].serve(["iperf3", "-s", "-1"], 5201)
        net["a"].run(["iperf3", "-c", "b", "-t", "2"], timeout=40)
    return tmp_path / "emu"


def is_png(path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_flow_summary_of_a_simulated_run_agrees_with_its_flows_table(tmp_path):
    res = read_result_dir(simulated(tmp_path))
    summary = flow_summary(res).set_index("label")
    flows = res.flows.set_index("label")
    assert set(summary.index) == set(flows.index) == {"a->b", "b->a"}
    for label in summary.index:
        s, f = summary.loc[label], flows.loc[label]
        assert s.cc == f.cc
        # Bulk flows send to the end of the run: the series' throughput is the flows table's
        # goodput up to the last sample (within one interval of 6 s).
        assert abs(s.throughput_bps - f.goodput_bps) <= 0.05 * f.goodput_bps, (label, s.throughput_bps, f.goodput_bps)
        assert s.min_rtt_ms >= 40.0
        assert s.mean_rtt_ms >= s.min_rtt_ms
        assert s.queueing_delay_ms == pytest.approx(s.mean_rtt_ms - s.min_rtt_ms)


@needs_root
@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3")
def test_a_simulated_and_an_emulated_run_plot_together(tmp_path):
    sim, emu = simulated(tmp_path), emulated(tmp_path)
    written = plot_runs([sim, emu], tmp_path / "api")
    assert [p.name for p in written] == ["compare_cwnd_rtt.png", "compare_throughput_delay.png"]
    assert all(is_png(p) for p in written)

    r = run_cli("plot", sim, emu, "-o", tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    assert all(is_png(tmp_path / "cli" / n) for n in ("compare_cwnd_rtt.png", "compare_throughput_delay.png"))

    # One emulated run alone gets the standard set, queue occupancy included.
    r = run_cli("plot", emu)
    assert r.returncode == 0, r.stderr
    for name in ("throughput.png", "cwnd_rtt.png", "throughput_delay.png", "queues.png"):
        assert is_png(emu / name), name


def test_plot_of_a_directory_that_is_not_a_run_is_a_one_line_error(tmp_path):
    r = run_cli("plot", tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no run.json" in r.stderr


def drawn(ax) -> dict:
    """{label: (x, y)} of the lines an axes draws, read back from the figure objects."""
    import numpy as np

    return {line.get_label(): (np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float))
            for line in ax.get_lines()}


def test_each_run_figure_draws_its_tables_data(tmp_path):
    """What a figure shows is read back from its matplotlib objects and compared with the
    run's tables, and with what the configuration fixes: goodput lines average to the flows
    table's goodput, no RTT is drawn below the path's 40 ms, the scatter's points are the
    per-flow summary."""
    import numpy as np

    from pathtwin import plot

    res = read_result_dir(simulated(tmp_path))
    fs, flows, qs = res.flow_series, res.flows.set_index("label"), res.tables["queue_series"]

    lines = drawn(plot.throughput_figure(res).axes[0])
    assert set(lines) == set(flows.index) == {"a->b", "b->a"}
    for label, (x, y) in lines.items():
        g = fs[fs.label == label]
        assert np.array_equal(x, g.time_s) and np.allclose(y, g.goodput_bps / 1e6)
        # Bulk flows for the whole run: the drawn rate, averaged over the samples, is the
        # flows table's goodput (the first sample interval's slow start aside).
        assert np.mean(y) * 1e6 == pytest.approx(flows.loc[label, "goodput_bps"], rel=0.05), label

    cwnd_ax, rtt_ax = plot.cwnd_rtt_figure([res]).axes
    cwnd, rtt = drawn(cwnd_ax), drawn(rtt_ax)
    assert set(cwnd) == set(rtt) == set(flows.index)
    for label in flows.index:
        g = fs[fs.label == label]
        assert np.allclose(cwnd[label][1], g.cwnd_bytes / 1000)
        # No RTT sample before the first acknowledgement: a gap in the line, not a zero.
        assert np.allclose(rtt[label][1], g.srtt_ms, equal_nan=True)
        assert np.nanmin(rtt[label][1]) >= 40.0, label

    queues = drawn(plot.queue_figure(res).axes[0])
    assert queues, "no queue drawn"
    for name, (x, y) in queues.items():
        g = qs[qs.queue == name.removesuffix(" (placeholder)")]
        column = "placeholder_bytes" if name.endswith("(placeholder)") else "bytes"
        assert np.array_equal(x, g.time_s) and np.allclose(y, g[column] / 1000), name

    ax = plot.throughput_delay_figure([res]).axes[0]
    points = np.concatenate([c.get_offsets() for c in ax.collections])
    summary = flow_summary(res)
    expected = np.column_stack([summary.mean_rtt_ms, summary.throughput_bps / 1e6])
    assert np.allclose(np.sort(points, axis=0), np.sort(expected, axis=0)), (points, expected)
    for _, row in summary.iterrows():
        assert row.throughput_bps == pytest.approx(flows.loc[row.label, "goodput_bps"], rel=0.05)


def test_sweep_and_cdf_figures_draw_their_rows():
    """The sweep report's metric-against-axis lines average a point's seeds and keep the
    axis's order of appearance; a CDF steps through every finite sample to 1."""
    import numpy as np
    import pandas as pd

    from pathtwin import plot

    frame = pd.DataFrame({"rtt": ["80ms", "20ms", "80ms", "20ms", "80ms", "20ms"],
                          "cc": ["reno", "reno", "reno", "reno", "cubic", "cubic"],
                          "seed": [1, 1, 2, 2, 1, 1],
                          "goodput": [2.0, 8.0, 4.0, 6.0, 5.0, 9.0]})
    ax = plot.metric_against_axis_figure(frame, "rtt", "goodput", "Mbit/s", ["cc"]).axes[0]
    lines = drawn(ax)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["80ms", "20ms"]
    assert np.allclose(lines["cc=reno"][1], [3.0, 7.0]) and np.allclose(lines["cc=cubic"][1], [5.0, 9.0])

    samples = [3.0, 1.0, float("nan"), 2.0]
    (x, y), = drawn(plot.cdf_figure({"flows": samples}, "x", "t").axes[0]).values()
    assert np.array_equal(x, [1.0, 1.0, 2.0, 3.0]) and np.allclose(y, [0, 1 / 3, 2 / 3, 1])
