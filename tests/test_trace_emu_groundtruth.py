"""Ground truth for `pathtwin trace analyze` over the pathtwin emulator: the kernel's TCP
and the HTTP-like workload of `http_lab` on an emulated path with known base RTT,
bottleneck rate and downstream loss, captured at the server by the emulator's own
`pcap` option, must come back from the analysis within the trace-analysis issue's
tolerances (RTT 5 %, bandwidth 15 %, loss 1 point, delays 5 ms).

The path is in link mode (C = ABW), so the rate the ACK pairs measure is the configured
8 Mbit/s; its queue holds a whole response, so the only losses are the seeded random ones
on the server -> client direction. The loss truth is the emulator's own count: per flow it
reports packets that entered the network and packets it delivered, so the realised drop
rate of the server's packets is exact rather than the configured 2 % in expectation.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd

from conftest import needs_capture, needs_root, run_cli
from http_lab import CLIENT, CONNECTIONS, SERVER, check_recovered, realised_delays, server_args, wait_ready

pytestmark = [
    needs_root,
    needs_capture,
]

RTT_MS = 40
RATE_BPS = 8_000_000
LOSS = 0.02
PORT = 8080

TOPOLOGY = f"""
hosts = ["client", "server"]
[run]
seed = 7
[[path]]
between = ["client", "server"]
rtt = "{RTT_MS}ms"
abw = "{RATE_BPS // 1_000_000}mbit"
mode = "link"
queue = "300KB"
loss = "0%/{LOSS * 100:g}%"
"""


def test_trace_analysis_recovers_the_emulated_path(tmp_path):
    from pathtwin.emulation import Emulation

    net = Emulation(TOPOLOGY, out=tmp_path / "run", pcap=tmp_path / "pcap")
    with net:
        namespaces = [h.netns for h in net.hosts]
        server = net["server"].popen([sys.executable, "-c", SERVER, *server_args(PORT)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_ready(server)
        net["client"].run([sys.executable, "-c", CLIENT, net["server"].ip, str(PORT), str(CONNECTIONS)],
                          check=True, timeout=60)
        server.wait(timeout=30)
        delays = realised_delays(server.stdout.read())
        server_ip = net["server"].ip
    # Leaving the block removed the hosts, whatever happened inside it.
    assert not set(namespaces) & set(os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])

    conns_file = tmp_path / "conns.parquet"
    r = run_cli("trace", "analyze", tmp_path / "pcap" / "server.pcap", "--server", f"{server_ip}:{PORT}", "-o", conns_file)
    assert r.returncode == 0, r.stderr
    conns = pd.read_parquet(conns_file)

    flows = pd.read_parquet(tmp_path / "run" / "packet_flows.parquet")
    down = flows[(flows.route_src == "server") & (flows.src_port == PORT)]
    up = flows[(flows.route_dst == "server") & (flows.dst_port == PORT)]
    assert len(down) == len(up) == CONNECTIONS
    # The server's capture is complete: it holds every packet the server sent into the
    # network and every one the network delivered to it.
    by_port = conns.set_index("client_port")
    assert (by_port.loc[down.dst_port, "packets_s2c"].to_numpy() == down.packets_in.to_numpy()).all()
    assert (by_port.loc[up.src_port, "packets_c2s"].to_numpy() == up.packets_out.to_numpy()).all()
    assert pd.read_parquet(tmp_path / "run" / "queues.parquet").drops.sum() == 0
    dropped = down.packets_in.sum() - down.packets_out.sum()
    # Random loss does not look at the packet, so drops per packet sent is the realised rate
    # that lost data packets per data packet estimate.
    realised = dropped / down.packets_in.sum()
    assert abs(realised - LOSS) <= 0.01, f"the emulator dropped {realised:.4f} of the server's packets"
    check_recovered(conns, rtt_ms=RTT_MS, rate_bps=RATE_BPS, loss=realised, delays_ms=delays)
