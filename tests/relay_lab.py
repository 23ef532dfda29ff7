"""A path pathtwin did not make, for ground truths: client -- router -- server network
namespaces with kernel TCP at both ends, and at the router a TUN delay line (a small Python
process: fixed one-way delay each way, seeded random loss of downstream data packets,
counted exactly) then a `tbf` rate limit on its port towards the client (the last-mile
bottleneck Monkey assumes). This kernel has no netem, hence the delay line.

`run_relay_lab` runs `http_lab`'s server and client over it once, captures at the server
with tcpdump, and returns the capture with what the path and the server realised (packets
the delay line dropped, the server's printed delays). Shared by the trace-analysis ground
truth (test_trace_groundtruth) and the replay's (test_replay_kernel_truth).
"""

from __future__ import annotations

import itertools
import os
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import default_sigint
from http_lab import CLIENT, SERVER, wait_ready

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

#: The server's address (the client's is 10.77.1.2) and port.
SERVER_IP = "10.77.2.2"
PORT = 8080

#: UDP port of the datagram that marks the end of the workload in the capture (discard);
#: the trace analysis reads TCP only.
MARKER_PORT = 9

# Distinct namespace and device names for each lab of this process (device names have at
# most 15 characters: "rc" + pid + a counter fits).
_labs = itertools.count()


@dataclass
class LabRun:
    #: The server-side capture.
    capture: Path
    #: Downstream data packets the delay line dropped.
    dropped: int
    #: What the server printed after 'ready' (see http_lab.realised_delays).
    server_stdout: str
    #: The client-side capture, when asked for (``capture_client``).
    client_capture: Path | None = None


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True)


def ns(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", name, *args, check=check)


def _holds_marker(capture: Path) -> bool:
    """Whether the pcap (Ethernet link type, as tcpdump on a veth writes) holds the
    end-of-workload UDP datagram."""
    try:
        data = capture.read_bytes()
    except FileNotFoundError:
        return False
    at = 24  # global header
    while at + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, at + 8)[0]
        frame = data[at + 16:at + 16 + caplen]
        at += 16 + caplen
        if len(frame) >= 38 and frame[12:14] == b"\x08\x00" and frame[23] == 17:
            ihl = (frame[14] & 15) * 4
            if len(frame) >= 14 + ihl + 4 and struct.unpack_from(">H", frame, 14 + ihl + 2)[0] == MARKER_PORT:
                return True
    return False


def run_relay_lab(out: Path, *, one_way_s: float, rate_bps: float, loss: float, seed: int, server_argv: list[str],
                  connections: int, server_cc: str | None = None, up_rate_bps: float | None = None,
                  programs: tuple[str, str] = (SERVER, CLIENT), client_argv: list[str] | None = None,
                  capture_client: bool = False, server_initcwnd: int | None = None,
                  queue_bytes: int = 200_000) -> LabRun:
    """Builds the path, runs http_lab's SERVER (argv `server_argv`, its port `PORT`) and
    CLIENT (`connections` requests, one after another) over it, captured at the server into
    `out`/server.pcap; tears every namespace and process down, also on failure. `server_cc`
    is the server's congestion control (else its namespace's default, the machine's).

    Optionally: `up_rate_bps`, a second `tbf` on the router's port towards the server (the
    client's upstream bottleneck); `programs`, another (server, client) pair of scripts, the
    client's argv `client_argv` (default: server address, port, `connections`); and
    `capture_client`, a second tcpdump at the client's port into `out`/client.pcap;
    `server_initcwnd`, the server's initial window in segments (its route's `initcwnd`; the
    kernel's default is 10, a CDN's is often larger); `queue_bytes`, the `tbf` queues'
    limit."""
    tag = f"{os.getpid()}{next(_labs)}"
    cli, rtr, srv = f"ptc{tag}", f"ptr{tag}", f"pts{tag}"
    out.mkdir(parents=True, exist_ok=True)
    capture = out / "server.pcap"
    client_capture = out / "client.pcap"
    count_file = out / "dropped"
    procs: list[subprocess.Popen] = []
    try:
        for n in (cli, rtr, srv):
            sh("ip", "netns", "add", n)
            ns(n, "ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", f"c{tag}", "netns", cli, "type", "veth", "peer", "name", f"rc{tag}", "netns", rtr)
        sh("ip", "link", "add", f"s{tag}", "netns", srv, "type", "veth", "peer", "name", f"rs{tag}", "netns", rtr)
        ns(cli, "ip", "addr", "add", "10.77.1.2/24", "dev", f"c{tag}")
        ns(srv, "ip", "addr", "add", f"{SERVER_IP}/24", "dev", f"s{tag}")
        ns(rtr, "ip", "addr", "add", "10.77.1.1/24", "dev", f"rc{tag}")
        ns(rtr, "ip", "addr", "add", "10.77.2.1/24", "dev", f"rs{tag}")
        # One MSS per packet on the wire, so the capture shows what the path carries.
        ns(srv, "ip", "link", "set", f"s{tag}", "gso_max_segs", "1")
        ns(cli, "ip", "link", "set", f"c{tag}", "gso_max_segs", "1")
        for n, dev in ((cli, f"c{tag}"), (srv, f"s{tag}"), (rtr, f"rc{tag}"), (rtr, f"rs{tag}")):
            ns(n, "ip", "link", "set", dev, "up")
        ns(cli, "ip", "route", "add", "default", "via", "10.77.1.1")
        ns(srv, "ip", "route", "add", "default", "via", "10.77.2.1",
           *(("initcwnd", str(server_initcwnd)) if server_initcwnd is not None else ()))
        if server_cc is not None:
            ns(srv, "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={server_cc}")
        ns(rtr, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        ns(rtr, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0")
        ns(rtr, "sysctl", "-qw", "net.ipv4.conf.default.rp_filter=0")
        delay = subprocess.Popen(
            ["ip", "netns", "exec", rtr, sys.executable, "-c", DELAY_LINE, f"dl{tag}", str(one_way_s), str(loss), str(seed),
             str(count_file), "10.77.1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        procs.append(delay)
        wait_ready(delay)
        ns(rtr, "sysctl", "-qw", f"net.ipv4.conf.dl{tag}.rp_filter=0")
        ns(rtr, "ip", "link", "set", f"dl{tag}", "up")
        for dev in (f"rc{tag}", f"rs{tag}"):
            ns(rtr, "ip", "rule", "add", "iif", dev, "lookup", "100")
        ns(rtr, "ip", "route", "add", "default", "dev", f"dl{tag}", "table", "100")
        ns(rtr, "tc", "qdisc", "add", "dev", f"rc{tag}", "root", "tbf", "rate", f"{rate_bps:.0f}bit", "burst", "3000",
           "limit", str(queue_bytes))
        if up_rate_bps is not None:
            ns(rtr, "tc", "qdisc", "add", "dev", f"rs{tag}", "root", "tbf", "rate", f"{up_rate_bps:.0f}bit", "burst",
               "3000", "limit", str(queue_bytes))

        dumps = []
        for where, dev, path in ((srv, f"s{tag}", capture), (cli, f"c{tag}", client_capture))[:2 if capture_client else 1]:
            dump = subprocess.Popen(
                ["ip", "netns", "exec", where, "tcpdump", "-i", dev, "-s", "256", "-U", "-w", str(path),
                 f"tcp or (udp and dst port {MARKER_PORT})"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
            )
            procs.append(dump)
            dumps.append(dump)
            deadline = time.time() + 10
            while "listening" not in (dump.stderr.readline() or "") and time.time() < deadline:
                pass
        server = subprocess.Popen(
            ["ip", "netns", "exec", srv, sys.executable, "-c", programs[0], *server_argv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        procs.append(server)
        wait_ready(server)
        ns(cli, sys.executable, "-c", programs[1],
           *(client_argv if client_argv is not None else [SERVER_IP, str(PORT), str(connections)]))
        server.wait(timeout=30)
        server_stdout = server.stdout.read()
        # The client has exited, 0.2 s after its last FIN left: every packet of the workload
        # has crossed the server's port. tcpdump may still be behind (on a busy machine a
        # capture was seen to stop in the middle of the last response), and it writes in
        # order: once a marker sent now is in the file, everything before it is.
        marked = [(srv, "10.77.2.1", capture)] + ([(cli, "10.77.1.1", client_capture)] if capture_client else [])
        for where, gateway, path in marked:
            ns(where, sys.executable, "-c",
               f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'end', ('{gateway}', {MARKER_PORT}))")
            deadline = time.monotonic() + 10
            while not _holds_marker(path):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{path}: the end-of-workload marker never reached the capture")
                time.sleep(0.05)
        for dump in dumps:
            dump.send_signal(signal.SIGINT)
            dump.wait(timeout=10)
        delay.send_signal(signal.SIGTERM)
        delay.wait(timeout=10)
        return LabRun(capture, int(count_file.read_text()), server_stdout, client_capture if capture_client else None)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for n in (cli, rtr, srv):
            sh("ip", "netns", "del", n, check=False)
