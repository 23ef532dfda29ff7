"""Plots from result directories: a simulated and an emulated run of the same path drawn
together (`pathtwin plot RUN1 RUN2`), and the per-flow summary behind the throughput-delay
scatter, checked against the simulator's own per-flow table. The emulated half needs root
and iperf3."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from conftest import run_cli

pathtwin = pytest.importorskip("pathtwin")
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
        net["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
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


@pytest.mark.skipif(os.geteuid() != 0, reason="the emulator needs root")
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
