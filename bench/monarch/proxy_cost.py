"""What Monarch's proxy adds to a packet: 64-byte ping-pongs over the same emulated path
with and without it.

The sender exchanges small messages with the receiver (through the proxy: each message
becomes a probe to the target and is released to the receiver when the target's answer
comes back; the reply goes straight back) and with the target itself (plain TCP across
the same path). Both round trips cross the path once each way, so their difference is the
proxy's cost per packet (the paper: "negligible overhead"; the goal here: < 100 µs).
`tcp_info`'s minimum RTT is too coarse for this (it can come from millisecond timestamps).

    sudo python bench/monarch/proxy_cost.py --rounds 2000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np

from pathtwin import monarch
from pathtwin.emulation import Emulation

ECHO = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(1); print('ready', flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    b = c.recv(64)
    if not b:
        break
    c.sendall(b)
"""

PING = r"""
import json, socket, sys, time
addr, port, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection((addr, port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for i in range(rounds):
    t = time.perf_counter(); s.sendall(b'p' * 64)
    got = 0
    while got < 64:
        got += len(s.recv(64 - got))
    rtts.append(time.perf_counter() - t)
    time.sleep(0.002)
print(json.dumps(rtts[10:]))
"""


def pingpong(net, host: str, port: int, rounds: int) -> np.ndarray:
    srv = net[host].popen([sys.executable, "-c", ECHO, str(port)], stdout=subprocess.PIPE, text=True)
    if "ready" not in srv.stdout.readline():
        raise SystemExit(f"echo server in {host} did not start")
    done = net["sender"].run([sys.executable, "-c", PING, net[host].ipv4, str(port), str(rounds)], timeout=600)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-400:])
    return np.asarray(json.loads(done.stdout.strip().splitlines()[-1])) * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--rtt", default="1ms")
    ap.add_argument("--probe", default="tcp-ack")
    a = ap.parse_args(argv)
    topo = monarch.topology({"rtt": a.rtt, "down": "1gbit", "up": "1gbit"}, probe=a.probe)
    with Emulation(topo, tcp_info=False) as net:
        real = pingpong(net, "target", 5500, a.rounds)
        proxied = pingpong(net, "receiver", 5501, a.rounds)
        stats = net.stats()
    q = lambda v, p: float(np.quantile(v, p))  # noqa: E731
    print(f"{a.rounds} ping-pongs of 64 bytes over a {a.rtt}, 1 Gbit/s path ({a.probe} probes):")
    for name, v in (("plain TCP to the target", real), ("through Monarch's proxy", proxied)):
        print(f"  {name:26s} RTT p10 {q(v, 0.1):7.0f} µs  p50 {q(v, 0.5):7.0f} µs  p90 {q(v, 0.9):7.0f} µs")
    print(f"proxy cost per round trip: p10 {q(proxied, 0.1) - q(real, 0.1):+.0f} µs, p50 {q(proxied, 0.5) - q(real, 0.5):+.0f} µs "
          f"(goal < 100 µs); proxy {stats['monarch']['probes']} probes, {stats['monarch']['responses']} answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
