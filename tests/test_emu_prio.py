"""Strict priority in the emulator: `qdisc = "prio"` serves packets by the band their DSCP
asks for (EF and network control first), so real traffic a host marks with `IP_TOS` skips a
queue that kernel TCP keeps full — the router support Monaco's out-of-band packets assume."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import pytest

# A UDP echo server and a prober that sends 40 probes with a given TOS byte and prints the
# round-trip times in milliseconds, one per line.
ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 7007))
while True:
    data, peer = s.recvfrom(64)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, data[0])
    s.sendto(data, peer)
"""
PROBE = """
import socket, sys, time
tos = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
s.settimeout(2.0)
for i in range(40):
    t0 = time.monotonic()
    s.sendto(bytes([tos]) + i.to_bytes(4, "big"), (sys.argv[2], 7007))
    try:
        s.recvfrom(64)
        print((time.monotonic() - t0) * 1e3)
    except socket.timeout:
        pass
    time.sleep(0.05)
"""

EF_TOS = 46 << 2


@pytest.mark.skipif(os.geteuid() != 0, reason="the emulator needs root")
def test_expedited_forwarding_skips_a_full_queue_in_the_emulator(tmp_path):
    """Four iperf3 flows keep a 100-packet queue on 10 Mbit/s full (about 120 ms of waiting).
    Probes marked EF wait only behind the packet being sent; unmarked probes wait in the
    queue with the data."""
    from pathtwin.emulation import Emulation

    cfg = {
        "hosts": ["a", "b"],
        "run": {"duration": "30s"},
        "tcp": {"cc": "reno"},
        "link": [{"between": ["a", "b"], "rate": "10mbit", "delay": "10ms", "queue": "100p", "qdisc": "prio"}],
    }
    with Emulation(cfg, out=tmp_path / "emu") as net:
        net["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        net["b"].popen([sys.executable, "-c", ECHO], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        load = net["a"].popen(["iperf3", "-c", "b", "-t", "12", "-P", "4"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        time.sleep(3)
        rtts = {}
        for name, tos in (("ef", EF_TOS), ("best-effort", 0)):
            out = net["a"].run([sys.executable, "-c", PROBE, str(tos), "b"], capture_output=True, text=True,
                               check=True, timeout=30).stdout
            rtts[name] = [float(x) for x in out.split()]
        load.wait(timeout=30)
    ef, be = statistics.median(rtts["ef"]), statistics.median(rtts["best-effort"])
    # Base RTT 20 ms; one 1500-byte packet ahead at 10 Mbit/s is 1.2 ms.
    assert len(rtts["ef"]) >= 30 and ef < 20 + 8, rtts["ef"]
    assert be > 20 + 60, rtts["best-effort"]
