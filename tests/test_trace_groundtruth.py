"""Ground truth for `pathtwin trace analyze`: real kernel TCP over a path with known
parameters, captured at the server, and agreement with tcptrace on the same capture.

The path: `relay_lab`'s client -- router -- server namespaces, the router's TUN delay line
(fixed one-way delay each way, seeded random loss of downstream data packets, counted
exactly) and `tbf` rate limit towards the client. The workload and the tolerance checks are
`http_lab`'s (an HTTP-like server: request, response delay, short header, query delay,
results, close).

Expectations come from the configuration (base RTT = 2 x one-way delay, bottleneck = tbf
rate, loss = packets the delay line dropped, delays = the server's sleeps) and from
tcptrace's own output; the issue's tolerances: RTT 5 %, bandwidth 15 %, loss 1 point,
delays 5 ms.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import needs_capture, needs_root
from http_lab import CONNECTIONS, check_recovered, realised_delays, server_args
from relay_lab import PORT, run_relay_lab

pytestmark = [
    needs_root,
    needs_capture,
]

ONE_WAY_S = 0.020
RATE_BPS = 8_000_000
LOSS = 0.02
SEED = 7

@pytest.fixture(scope="module")
def lab_capture(tmp_path_factory):
    """Runs the experiment once; yields (capture path, packets dropped by the delay line,
    the server's realised delays)."""
    run = run_relay_lab(tmp_path_factory.mktemp("trace_lab"), one_way_s=ONE_WAY_S, rate_bps=RATE_BPS, loss=LOSS,
                        seed=SEED, server_argv=server_args(PORT), connections=CONNECTIONS)
    return run.capture, run.dropped, realised_delays(run.server_stdout)


def test_recovers_configured_path(lab_capture):
    from pathtwin import trace

    capture, dropped, delays = lab_capture
    conns, _ = trace.analyze(capture)
    check_recovered(conns, rtt_ms=2000 * ONE_WAY_S, rate_bps=RATE_BPS, loss=dropped / conns["data_packets_s2c"].sum(),
                    delays_ms=delays)


# tcptrace -l -r prints, per connection, "a->b" / "b->a" columns of "name: value" pairs.
_PAIR = re.compile(r"^\s*(.+?):\s+(\S+)(?: \S+)?\s+(.+?):\s+(\S+)")


def tcptrace_connections(capture: Path) -> list[dict]:
    out = subprocess.run(["tcptrace", "-l", "-r", "-n", str(capture)], capture_output=True, text=True, check=True).stdout
    conns = []
    for block in re.split(r"^TCP connection \d+:", out, flags=re.M)[1:]:
        fields: dict[str, tuple[str, str]] = {}
        # Hosts are lettered across the whole run: a/b, then c/d, ...
        hosts = re.findall(r"^\s*host \w+:\s+(\S+)", block, flags=re.M)
        for line in block.splitlines():
            m = _PAIR.match(line)
            if m and m.group(1) == m.group(3):
                fields[m.group(1).strip()] = (m.group(2), m.group(4))
        if len(hosts) >= 2:
            conns.append({"a": hosts[0], "b": hosts[1], **fields})
    return conns


@pytest.mark.skipif(shutil.which("tcptrace") is None, reason="tcptrace not installed")
def test_agrees_with_tcptrace(lab_capture):
    from pathtwin import trace

    capture, _, _ = lab_capture
    ours, _ = trace.analyze(capture)
    theirs = tcptrace_connections(capture)
    assert len(theirs) == len(ours)
    by_endpoint = {r["a"]: r for r in theirs}
    for _, r in ours.iterrows():
        t = by_endpoint[f"{r.client_ip}:{r.client_port}"]
        assert (int(t["total packets"][0]), int(t["total packets"][1])) == (r.packets_c2s, r.packets_s2c)
        assert (int(t["actual data bytes"][0]), int(t["actual data bytes"][1])) == (r.bytes_c2s, r.bytes_s2c)
        assert (int(t["unique bytes sent"][0]), int(t["unique bytes sent"][1])) == (r.unique_bytes_c2s, r.unique_bytes_s2c)
        assert int(t["rexmt data pkts"][1]) == r.retrans_packets_s2c
        # RTT from the 3-way handshake, b->a: SYN-ACK to the client's ACK (ms, 1 decimal).
        assert abs(float(t["RTT from 3WHS"][1]) - r.handshake_rtt_ms) <= 0.1
