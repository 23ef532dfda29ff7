"""Ground truth for `pathtwin trace analyze`: real kernel TCP over a path with known
parameters, captured at the server, and agreement with tcptrace on the same capture.

The path: client -- router -- server, each a network namespace. The router sends every
packet through a TUN delay line (a small Python process: fixed one-way delay each way, and
seeded random loss of downstream data packets, counted exactly), then a `tbf` rate limit on
its port towards the client (the last-mile bottleneck Monkey assumes). This kernel has no
netem, hence the delay line. The workload and the tolerance checks are `http_lab`'s (an
HTTP-like server: request, response delay, short header, query delay, results, close).

Expectations come from the configuration (base RTT = 2 x one-way delay, bottleneck = tbf
rate, loss = packets the delay line dropped, delays = the server's sleeps) and from
tcptrace's own output; the issue's tolerances: RTT 5 %, bandwidth 15 %, loss 1 point,
delays 5 ms.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import default_sigint, needs_root
from http_lab import CLIENT, CONNECTIONS, SERVER, check_recovered, realised_delays, server_args, wait_ready

pytestmark = [
    needs_root,
    pytest.mark.skipif(shutil.which("tcpdump") is None or not os.path.exists("/dev/net/tun"),
                       reason="needs tcpdump and /dev/net/tun"),
]

ONE_WAY_S = 0.020
RATE_BPS = 8_000_000
LOSS = 0.02
SEED = 7

DELAY_LINE = r"""
import fcntl, heapq, os, random, select, signal, struct, sys, time
tun_name, one_way, loss, seed, count_file, down_prefix = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], bytes(map(int, sys.argv[6].split('.')))
fd = os.open('/dev/net/tun', os.O_RDWR)
fcntl.ioctl(fd, 0x400454ca, struct.pack('16sH', tun_name.encode(), 0x0001 | 0x1000))  # TUNSETIFF, IFF_TUN|IFF_NO_PI
rng = random.Random(seed)
dropped = 0
def stop(*_):
    with open(count_file, 'w') as f:
        f.write(str(dropped))
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print('ready', flush=True)
queue, n = [], 0
while True:
    timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else 1.0
    r, _, _ = select.select([fd], [], [], timeout)
    if r:
        pkt = os.read(fd, 65536)
        if len(pkt) >= 20 and pkt[0] >> 4 == 4:
            downstream = pkt[16:19] == down_prefix
            ihl = (pkt[0] & 15) * 4
            total = int.from_bytes(pkt[2:4], 'big')
            tcp_payload = total - ihl - ((pkt[ihl + 12] >> 4) * 4) if pkt[9] == 6 and len(pkt) > ihl + 12 else 0
            if downstream and tcp_payload > 0 and rng.random() < loss:
                dropped += 1
                continue
            n += 1
            heapq.heappush(queue, (time.monotonic() + one_way, n, pkt))
    now = time.monotonic()
    while queue and queue[0][0] <= now:
        os.write(fd, heapq.heappop(queue)[2])
"""

def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def ns(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", name, *args, check=check)


@pytest.fixture(scope="module")
def lab_capture(tmp_path_factory):
    """Runs the experiment once; yields (capture path, packets dropped by the delay line)."""
    tag = str(os.getpid())
    cli, rtr, srv = f"ptc{tag}", f"ptr{tag}", f"pts{tag}"
    out = tmp_path_factory.mktemp("trace_lab")
    capture = out / "server.pcap"
    count_file = out / "dropped"
    procs: list[subprocess.Popen] = []
    try:
        for n in (cli, rtr, srv):
            sh("ip", "netns", "add", n)
            ns(n, "ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", f"c{tag}", "netns", cli, "type", "veth", "peer", "name", f"rc{tag}", "netns", rtr)
        sh("ip", "link", "add", f"s{tag}", "netns", srv, "type", "veth", "peer", "name", f"rs{tag}", "netns", rtr)
        ns(cli, "ip", "addr", "add", "10.77.1.2/24", "dev", f"c{tag}")
        ns(srv, "ip", "addr", "add", "10.77.2.2/24", "dev", f"s{tag}")
        ns(rtr, "ip", "addr", "add", "10.77.1.1/24", "dev", f"rc{tag}")
        ns(rtr, "ip", "addr", "add", "10.77.2.1/24", "dev", f"rs{tag}")
        # One MSS per packet on the wire, so the capture shows what the path carries.
        ns(srv, "ip", "link", "set", f"s{tag}", "gso_max_segs", "1")
        ns(cli, "ip", "link", "set", f"c{tag}", "gso_max_segs", "1")
        for n, dev in ((cli, f"c{tag}"), (srv, f"s{tag}"), (rtr, f"rc{tag}"), (rtr, f"rs{tag}")):
            ns(n, "ip", "link", "set", dev, "up")
        ns(cli, "ip", "route", "add", "default", "via", "10.77.1.1")
        ns(srv, "ip", "route", "add", "default", "via", "10.77.2.1")
        ns(rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        ns(rtr, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0")
        ns(rtr, "sysctl", "-qw", "net.ipv4.conf.default.rp_filter=0")
        delay = subprocess.Popen(
            ["ip", "netns", "exec", rtr, sys.executable, "-c", DELAY_LINE, f"dl{tag}", str(ONE_WAY_S), str(LOSS), str(SEED), str(count_file), "10.77.1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        procs.append(delay)
        wait_ready(delay)
        ns(rtr, "sysctl", "-qw", f"net.ipv4.conf.dl{tag}.rp_filter=0")
        ns(rtr, "ip", "link", "set", f"dl{tag}", "up")
        for dev in (f"rc{tag}", f"rs{tag}"):
            ns(rtr, "ip", "rule", "add", "iif", dev, "lookup", "100")
        ns(rtr, "ip", "route", "add", "default", "dev", f"dl{tag}", "table", "100")
        ns(rtr, "tc", "qdisc", "add", "dev", f"rc{tag}", "root", "tbf", "rate", f"{RATE_BPS}bit", "burst", "3000", "limit", "200000")

        dump = subprocess.Popen(
            ["ip", "netns", "exec", srv, "tcpdump", "-i", f"s{tag}", "-s", "256", "-U", "-w", str(capture), "tcp"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
        )
        procs.append(dump)
        deadline = time.time() + 10
        while "listening" not in (dump.stderr.readline() or "") and time.time() < deadline:
            pass
        server = subprocess.Popen(
            ["ip", "netns", "exec", srv, sys.executable, "-c", SERVER, *server_args(8080)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        procs.append(server)
        wait_ready(server)
        ns(cli, sys.executable, "-c", CLIENT, "10.77.2.2", "8080", str(CONNECTIONS))
        server.wait(timeout=30)
        delays = realised_delays(server.stdout.read())
        time.sleep(0.5)
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
        delay.send_signal(signal.SIGTERM)
        delay.wait(timeout=10)
        dropped = int(count_file.read_text())
        yield capture, dropped, delays
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for n in (cli, rtr, srv):
            sh("ip", "netns", "del", n, check=False)


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
