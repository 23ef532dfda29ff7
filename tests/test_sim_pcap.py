"""Simulator captures as ground truth for trace analysis: a path with known base RTT,
bottleneck rate, downstream loss and server delay is simulated with a pcap written at the
server (as ns-3's pcap tracing does), and `pathtwin trace analyze` must recover the
configuration (the trace-analysis issue's tolerances: RTT 5 %, bandwidth 15 %, loss 1 point,
delays 5 ms)."""

from __future__ import annotations

import shutil
import subprocess

import pandas as pd
import pytest

from conftest import run_cli

SCENARIO = """
hosts = ["client", "server"]
[run]
duration = "60s"
seed = {seed}
pcap = ["server"]
[[path]]
between = ["client", "server"]
rtt = "{rtt_ms}ms"
abw = "{rate_mbit}mbit"
mode = "link"
queue = "150KB"
loss = "0%/{loss_pct}%"
[[flow]]
from = "client"
to = "server"
app = "reqresp"
request = "300B"
response = "200KB"
server_delay = "{delay_ms}ms"
think = "200ms"
requests = 20
"""


@pytest.mark.parametrize("rtt_ms,rate_mbit,loss_pct,delay_ms,seed", [(60, 8, 2, 30, 1), (20, 3, 1, 80, 2)])
def test_trace_analysis_recovers_the_simulated_path(tmp_path, rtt_ms, rate_mbit, loss_pct, delay_ms, seed):
    scen = tmp_path / "gt.toml"
    scen.write_text(SCENARIO.format(rtt_ms=rtt_ms, rate_mbit=rate_mbit, loss_pct=loss_pct, delay_ms=delay_ms, seed=seed))
    out = tmp_path / "out"
    r = run_cli("sim", scen, "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    pcap = out / "pcap" / "server.pcap"
    assert pcap.stat().st_size > 10_000
    r = run_cli("trace", "analyze", pcap, "--server", "10.0.0.2:80", "-o", tmp_path / "conns.parquet")
    assert r.returncode == 0, r.stderr
    c = pd.read_parquet(tmp_path / "conns.parquet")
    assert len(c) == 1
    row = c.iloc[0]
    assert row.kept and row.termination == "fin", (row.termination, row.prune_reason)
    assert abs(row.min_rtt_ms - rtt_ms) <= 0.05 * rtt_ms, row.min_rtt_ms
    assert abs(row.bottleneck_bps - rate_mbit * 1e6) <= 0.15 * rate_mbit * 1e6, row.bottleneck_bps
    assert abs(row.loss_rate * 100 - loss_pct) <= 1.0, row.loss_rate
    assert abs(row.server_delay_ms - delay_ms) <= 5.0, row.server_delay_ms
    assert row.requests == 20


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is installed by scripts/setup.sh")
def test_simulator_capture_is_a_valid_pcap_that_tcpdump_reads(tmp_path):
    scen = tmp_path / "gt.toml"
    scen.write_text(SCENARIO.format(rtt_ms=40, rate_mbit=5, loss_pct=0, delay_ms=10, seed=1).replace('"60s"', '"5s"'))
    out = tmp_path / "out"
    assert run_cli("sim", scen, "-o", out, "-q").returncode == 0
    p = subprocess.run(["tcpdump", "-nr", str(out / "pcap" / "server.pcap")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "Flags [S]" in lines[0] and "mss 1460" in lines[0] and "sackOK" in lines[0]
    assert "Flags [S.]" in lines[1]
    # Server-side capture: the SYN arrives half an RTT (20 ms) after the client sent it.
    assert lines[0].startswith("00:00:00.020")


DIALUP = """
hosts = ["server", "clients"]
[run]
duration = "30s"
until_done = true
pcap = ["server"]
[tcp]
profile = "linux"
[[pipe]]
between = ["server", "clients"]
rtt = "100ms"
rate = "56kbit/33kbit"
[[flow]]
from = "clients"
to = "server"
app = "replay"
pipe = 0
exchanges = [[600, 20000, -1, 0.005, 0.0, 0.0]]
"""


def test_a_dial_up_clients_handshake_gives_the_paths_round_trip(tmp_path):
    """At the server, the handshake's round trip is the SYN-ACK's way down and the client's
    ACK's way up: the path's RTT plus a 60-byte SYN-ACK at the downlink's rate and a 52-byte
    pure ACK at the uplink's (Linux acknowledges a SYN-ACK alone, before the request). With
    the ACK riding on the 600-byte request, Monkey See read 150 ms more on this modem."""
    scen = tmp_path / "dialup.toml"
    scen.write_text(DIALUP)
    out = tmp_path / "out"
    r = run_cli("sim", scen, "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli("trace", "analyze", out / "pcap" / "server.pcap", "-o", tmp_path / "conns.parquet")
    assert r.returncode == 0, r.stderr
    row = pd.read_parquet(tmp_path / "conns.parquet").iloc[0]
    expected_ms = 100 + 60 * 8 / 56_000 * 1e3 + 52 * 8 / 33_000 * 1e3
    assert abs(row.min_rtt_ms - expected_ms) < 0.5, (row.min_rtt_ms, expected_ms)
