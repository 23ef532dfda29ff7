"""Strict priority in the emulator: `qdisc = "prio"` serves packets by the band their DSCP
asks for (EF and network control first), so real traffic a host marks with `IP_TOS` skips a
queue that kernel TCP keeps full — the router support Monaco's out-of-band packets assume."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


from conftest import needs_root

# A UDP echo server that answers with the probe's TOS, and a prober that alternates probes
# with the TOS bytes given, so both kinds see the same load, and prints "TOS RTT-ms" lines.
ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 7007))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(64)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, data[0])
    s.sendto(data, peer)
"""
PROBE = """
import socket, sys, time
host, toses = sys.argv[1], [int(t) for t in sys.argv[2:]]
socks = {}
for tos in toses:
    socks[tos] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    socks[tos].setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    socks[tos].settimeout(2.0)
for i in range(30):
    for tos, s in socks.items():
        t0 = time.monotonic()
        s.sendto(bytes([tos]) + i.to_bytes(4, "big"), (host, 7007))
        try:
            s.recvfrom(64)
            print(tos, (time.monotonic() - t0) * 1e3)
        except socket.timeout:
            pass
        time.sleep(0.02)
"""

EF_TOS = 46 << 2


@needs_root
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
        net["b"].serve(["iperf3", "-s", "-1"], 5201)
        echo = net["b"].popen([sys.executable, "-c", ECHO], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert echo.stdout.readline().strip() == "ready"
        load = net["a"].popen(["iperf3", "-c", "b", "-t", "40", "-P", "4"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        try:
            time.sleep(3)
            out = net["a"].run([sys.executable, "-c", PROBE, "b", str(EF_TOS), "0"], capture_output=True, text=True,
                               check=True, timeout=60).stdout
            still_loaded = load.poll() is None
        finally:
            load.terminate()
            load.wait(timeout=10)
    assert still_loaded, "the load ended before the probes did"
    rtts = {EF_TOS: [], 0: []}
    for line in out.splitlines():
        tos, ms = line.split()
        rtts[int(tos)].append(float(ms))
    ef, be = statistics.median(rtts[EF_TOS]), statistics.median(rtts[0])
    print(f"EF median {ef:.1f} ms, best effort {be:.1f} ms")
    # Base RTT 20 ms; one 1500-byte packet ahead at 10 Mbit/s is 1.2 ms.
    assert len(rtts[EF_TOS]) >= 25 and ef < 20 + 8, rtts[EF_TOS]
    assert be > 20 + 60, rtts[0]
