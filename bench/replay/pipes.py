"""Per-connection pipes at scale: 10 000 simultaneous connections, each on its own pipe,
and the delay the emulator adds to them (Monkey Do's Dummynet: ~4000 pipes, < 1 ms added).

One echo server, one client host holding N pipe addresses; every pipe has the same RTT and
rate, so a connection's echo round trip should be the pipe's RTT plus serialization. All N
connections are opened and kept open; each then sends a 64-byte probe every `--interval`
seconds (staggered) and times the echo. The same client and server also run over a plain
veth pair between two namespaces (no emulator, the same AnyIP address plan), the raw
baseline of the kernel and the two Python programs. Printed: the echo RTT quantiles on both,
the emulated RTT beyond the pipe's own (emulator and programs together) and the emulator's
own added delay, its release lateness.

    sudo python bench/replay/pipes.py --pipes 10000 --seconds 30
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import secrets
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ECHO = r"""
import asyncio, sys
async def handle(r, w):
    try:
        while True:
            w.write(await r.readexactly(64))
    except Exception:
        pass
    w.close()
async def main():
    s = await asyncio.start_server(handle, '0.0.0.0', int(sys.argv[1]), backlog=65535, reuse_address=True)
    print('ready', flush=True)
    async with s:
        await s.serve_forever()
asyncio.run(main())
"""

CLIENT = r"""
import asyncio, json, socket, sys, time, random
server, port, first, n, seconds, interval = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
import ipaddress
base = ipaddress.IPv4Address(first)
rtts, failures = [], 0
async def conn(i, start_gate):
    global failures
    try:
        r, w = await asyncio.open_connection(server, port, local_addr=(str(base + i), 0))
    except OSError:
        failures += 1
        return
    await start_gate.wait()
    t_end = time.monotonic() + seconds
    await asyncio.sleep(random.random() * interval)
    while time.monotonic() < t_end:
        t = time.monotonic()
        w.write(b'x' * 64)
        await r.readexactly(64)
        rtts.append(time.monotonic() - t)
        await asyncio.sleep(interval)
    w.close()
async def main():
    gate = asyncio.Event()
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(conn(i, gate)))
        if i % 200 == 199:
            await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    open_ = sum(1 for t in tasks if not t.done())
    gate.set()
    await asyncio.gather(*tasks)
    print(json.dumps({'open': open_, 'failures': failures, 'rtts': rtts}))
asyncio.run(main())
"""


def run_pair(server_cmd, client_cmd) -> dict:
    srv = subprocess.Popen(server_cmd, stdout=subprocess.PIPE, text=True)
    try:
        if "ready" not in srv.stdout.readline():
            raise SystemExit("echo server did not start")
        out = subprocess.run(client_cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"client failed: {out.stderr[-500:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        srv.terminate()
        srv.wait(5)


def raw_veth(n: int, seconds: float, interval: float, port: int) -> dict:
    """The same programs over a plain veth pair: the kernel's and Python's own RTT."""
    tag = secrets.token_hex(2)
    a, b = f"ptraw-s-{tag}", f"ptraw-c-{tag}"
    ip = lambda *args: subprocess.run(["ip", *args], check=True)  # noqa: E731
    try:
        ip("netns", "add", a)
        ip("netns", "add", b)
        ip("link", "add", f"vs{tag}", "netns", a, "type", "veth", "peer", "name", f"vc{tag}", "netns", b)
        for ns, dev, addr in ((a, f"vs{tag}", "10.250.255.1/24"), (b, f"vc{tag}", "10.250.255.2/24")):
            ip("-n", ns, "addr", "add", addr, "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", b, "route", "add", "local", "10.251.0.0/16", "dev", "lo")
        ip("-n", a, "route", "add", "10.251.0.0/16", "via", "10.250.255.2")
        return run_pair(["ip", "netns", "exec", a, sys.executable, "-c", ECHO, str(port)],
                        ["ip", "netns", "exec", b, sys.executable, "-c", CLIENT, "10.250.255.1", str(port), "10.251.0.1", str(n),
                         str(seconds), str(interval)])
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def quantiles(rtts) -> dict:
    v = np.asarray(rtts) * 1e3
    return {q: float(np.quantile(v, p)) for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0))} if len(v) else {}


def main(argv=None) -> int:
    import pathtwin
    from pathtwin.config import parse_quantity

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipes", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between one connection's probes")
    ap.add_argument("--rtt-ms", type=float, default=20.0)
    ap.add_argument("--rate", default="10mbit")
    ap.add_argument("--out", type=Path, default=Path("bench/out/replay-pipes"))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    # Two descriptors per connection (client and server side, one process each) and slack.
    want = a.pipes + 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), max(hard, want)))
    port = 9000
    raw = raw_veth(a.pipes, a.seconds, a.interval, port)
    cfg = {"hosts": ["server", "clients"],
           "pipe": [{"between": ["server", "clients"], "rtt": f"{a.rtt_ms}ms", "rate": a.rate}] * a.pipes}
    t0 = time.monotonic()
    with pathtwin.Emulation(cfg, out=a.out / "emulation", tcp_info=False) as net:
        setup_s = time.monotonic() - t0
        s, c = net["server"], net["clients"]
        emu = run_pair(s.command([sys.executable, "-c", ECHO, str(port)]),
                       c.command([sys.executable, "-c", CLIENT, s.ip, str(port), c.pipe_address(0), str(a.pipes), str(a.seconds), str(a.interval)]))
        stats = net.stats()
    rate_bps = float(parse_quantity("rate", a.rate, "--rate"))
    # 64 bytes of payload + 52 of TCP/IP headers (timestamps) each way, at the pipe's rate.
    serialization_ms = 2 * (64 + 52) * 8 / rate_bps * 1e3
    qe, qr = quantiles(emu["rtts"]), quantiles(raw["rtts"])
    # Beyond the pipe's RTT and serialization: the emulator's delay plus the two Python
    # programs' own at this load (the raw-veth RTT shows theirs; quantiles do not subtract,
    # so both are printed). The emulator's alone is its release lateness.
    added = {k: qe[k] - a.rtt_ms - serialization_ms for k in qe}
    report = {
        "pipes": a.pipes, "open_connections": {"emulated": emu["open"], "raw_veth": raw["open"]},
        "connect_failures": {"emulated": emu["failures"], "raw_veth": raw["failures"]},
        "probes": {"emulated": len(emu["rtts"]), "raw_veth": len(raw["rtts"])},
        "echo_rtt_ms": {"emulated": qe, "raw_veth": qr}, "configured_rtt_ms": a.rtt_ms, "serialization_ms": serialization_ms,
        "added_delay_ms": added, "release_lateness_ns": stats["lateness"], "setup_s": setup_s,
    }
    (a.out / "pipes.json").write_text(json.dumps(report, indent=2))
    print(f"{a.pipes} pipes: {emu['open']} connections open at once on the emulator ({raw['open']} on raw veth), "
          f"emulator up in {setup_s:.1f} s")
    print(f"echo RTT ms   emulated: " + ", ".join(f"{k} {v:.2f}" for k, v in qe.items()))
    print(f"              raw veth: " + ", ".join(f"{k} {v:.2f}" for k, v in qr.items()))
    print(f"beyond the pipe ({a.rtt_ms} ms + {serialization_ms:.3f} ms serialization), emulator and programs together: "
          + ", ".join(f"{k} {v:+.3f} ms" for k, v in added.items()))
    lat = stats["lateness"]
    print(f"the emulator's own added delay (release lateness): p50 {lat['p50_ns'] / 1e3:.0f} µs, p99 {lat['p99_ns'] / 1e3:.0f} µs, "
          f"p99.9 {lat['p999_ns'] / 1e3:.0f} µs, max {lat['max_ns'] / 1e3:.0f} µs  (Dummynet in the paper: < 1 ms at ~4000 pipes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
