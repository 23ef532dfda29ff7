"""Emulator benchmark against its peers, side by side in one run, reported as ratios.

Cases (each: iperf3 throughput at MTU 1500, idle UDP echo RTT p50/p99 from kernel receive stamps, release lateness):
  veth       two namespaces joined by a raw veth pair: the kernel's own floor
  unlimited  pathtwin, one path with zero delay and a 100 Gbit/s queue (≈ no model cost)
  unlimited-no-offload  the same with TUN offload off: one system call per MTU-sized packet
  1g-1ms     pathtwin, 1 Gbit/s capacity and ABW, 1 ms RTT
  1g-1ms-spin  the same, the loop waking 30 µs early and polling through to each deadline
  rattan     Rattan 0.1.1 (`cargo install rattan`), isolated mode, left linked straight to right
  rattan-1g-1ms  Rattan, each way a 1 Gbit/s Bw cell (1 MB DropTail) then a 0.5 ms Delay cell
The Rattan rows are skipped if no `rattan` binary is on PATH; the table ends with pathtwin ÷ Rattan ratios.
Every case runs twice: with idle CPUs polling (what pathtwin asks for while it runs; the pass
holds the same request for veth and Rattan) and with the default idle policy (CPUs halt).

With --repeat N each pass runs N times, its cases one after another each time, so that the
machine's drift (a raw veth pair alone reads 11-20 Gbit/s from one run to the next on the
2-core VM) falls on every case alike; the table then gives each case's median, and its
ratio to veth as the median of the ratios within each repetition, with their range.

Run as root:  python bench/emu/run.py [--seconds 5] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from pathtwin.emulation import Emulation

# The idle RTT: a UDP echo every 10 ms, 300 times. The client's arrival time is the kernel's
# receive stamp (SO_TIMESTAMPNS) and the server subtracts how long it held each echo (from its
# kernel's stamp to its send), so an RTT is what the network, the emulator included, took:
# the two processes' own wake-ups, which vary from run to run more than the emulator's share,
# are not in it.
STAMP = ("import socket,struct,sys,time,json\nTS=35\ndef rx(s):\n d,anc,_,a=s.recvmsg(64,socket.CMSG_SPACE(16))\n"
         " sec,ns=struct.unpack('qq',[c for c in anc if c[0]==socket.SOL_SOCKET and c[1]==TS][0][2][:16])\n"
         " return d,a,sec*10**9+ns\n")
ECHO_SERVER = (STAMP + "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET,TS,1)\n"
               "s.bind(('0.0.0.0',7007))\nprint('ready',flush=True)\nwhile True:\n d,a,t=rx(s)\n"
               " s.sendto(d[:4]+struct.pack('q',time.time_ns()-t),a)\n")
ECHO_CLIENT = (STAMP + "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.setsockopt(socket.SOL_SOCKET,TS,1)\n"
               "s.settimeout(1)\nout=[]\nfor i in range(int(sys.argv[2])):\n t=time.time_ns()\n"
               " s.sendto(i.to_bytes(4,'big'),(sys.argv[1],7007))\n try:\n  d,_,r=rx(s)\n"
               "  if int.from_bytes(d[:4],'big')==i: out.append((r-t-struct.unpack('q',d[4:12])[0])/1e3)\n"
               " except socket.timeout: pass\n time.sleep(0.01)\nprint(json.dumps(out))\n")


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


def pathtwin_case(topo: str, seconds: float, polling_idle: bool, spin_us: float = 0.0, offload: bool = True) -> dict:
    with Emulation(topo, cpu_latency_qos=polling_idle, spin_us=spin_us, offload=offload) as net:
        r = measure(lambda h, argv, **kw: net[h].popen(argv, **kw), net["b"].ipv4, seconds)
        lat = net.stats()["lateness"]
    r.update(lateness_p50_us=lat["p50_ns"] / 1e3, lateness_p99_us=lat["p99_ns"] / 1e3, lateness_max_us=lat["max_ns"] / 1e3)
    return r


RATTAN_TOML = """[env]
mode = "Isolated"
[resource]
cpu = [1]
{cells}[links]
{links}
[commands]
left = ["sh", "-c", "echo $RATTAN_ID $RATTAN_BASE > {ready}.tmp && mv {ready}.tmp {ready} && exec sleep infinity"]
right = ["sleep", "infinity"]
"""
RATTAN_CELLS = "".join(f'[cells.{d}_bw]\ntype = "Bw"\nbandwidth = "1Gbps"\nqueue = "DropTail"\nqueue_config = {{ byte_limit = 1000000 }}\n'
                       f'[cells.{d}_delay]\ntype = "Delay"\ndelay = "500us"\n' for d in ("up", "down"))
RATTAN_LINKS = {"rattan": 'left = "right"\nright = "left"',
                "rattan-1g-1ms": 'left = "up_bw"\nup_bw = "up_delay"\nup_delay = "right"\n'
                                 'right = "down_bw"\ndown_bw = "down_delay"\ndown_delay = "left"'}


def rattan_case(kind: str, seconds: float) -> dict:
    """Rattan in isolated mode (ns-left/ns-rattan/ns-right-<id>, AF_PACKET on veths), measured from ns-left to ns-right.

    kind is a key of RATTAN_LINKS. `cpu = [1]` is Rattan's default, one tokio worker, like pathtwin's one
    thread (two workers lift rattan-1g-1ms from ≈0.6 to ≈0.95 Gbit/s on the 2-core VM). Each side runs
    `sleep infinity`; measure() enters the named netns with `ip netns exec`. Teardown kills everything in the
    two end namespaces, so Rattan sees both tasks exit and removes its namespaces and veths itself; SIGINT,
    SIGKILL and `ip netns del` are the fallbacks.
    """
    exe = shutil.which("rattan")
    if exe is None:
        return {"skipped": "no rattan binary on PATH (cargo install rattan)"}
    with tempfile.TemporaryDirectory(prefix="ptb-rattan-") as tmp:
        ready, log = f"{tmp}/ready", open(f"{tmp}/log", "w+")
        with open(f"{tmp}/rattan.toml", "w") as f:
            f.write(RATTAN_TOML.format(cells=RATTAN_CELLS if kind != "rattan" else "", links=RATTAN_LINKS[kind], ready=ready))
        proc = subprocess.Popen([exe, "run", "-c", f"{tmp}/rattan.toml"], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "RUST_LOG": "error", "NO_COLOR": "1"})
        rid = ""
        try:
            deadline = time.monotonic() + 30
            while not os.path.exists(ready):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"rattan did not come up (exit {proc.returncode}): {log.read()[-2000:]}")
                time.sleep(0.05)
            with open(ready) as f:
                rid, base = f.read().split()
            ns_of = {"a": f"ns-left-{rid}", "b": f"ns-right-{rid}"}
            return measure(lambda h, argv, **kw: subprocess.Popen(["ip", "netns", "exec", ns_of[h], *argv], **kw), base, seconds)
        finally:
            _rattan_stop(proc, rid)
            log.close()


def _rattan_stop(proc: subprocess.Popen, rid: str) -> None:
    """Stop a Rattan instance and whatever runs in its namespaces; delete anything it leaves behind."""
    names = [f"ns-{side}-{rid}" for side in ("left", "right", "rattan")] if rid else []
    for ns in names[:2]:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in (int(p) for p in pids if int(p) != proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for sig, wait in ((None, 15), (signal.SIGINT, 10), (signal.SIGKILL, 5))[0 if rid else 1:]:
        with contextlib.suppress(ProcessLookupError):
            if sig is not None:
                os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait)
            break
    for ns in names:
        if os.path.exists(f"/run/netns/{ns}"):
            subprocess.run(["ip", "netns", "del", ns])


TOPO = 'hosts = ["a", "b"]\n[[path]]\nbetween = ["a", "b"]\nrtt = "{rtt}"\nabw = "{rate}"\ncapacity = "{rate}"\nqueue = "{queue}"\nenforce_bounds = false\n'


@contextlib.contextmanager
def idle_policy(polling: bool):
    """Holds a zero-latency PM QoS request (idle CPUs poll instead of halting) for the whole
    pass when ``polling``, so that veth and Rattan run under the same idle policy that
    pathtwin sets for itself by default; every case of a pass is then compared like for like."""
    if not polling:
        yield
        return
    fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
    try:
        os.write(fd, (0).to_bytes(4, sys.byteorder))
        yield
    finally:
        os.close(fd)


def run_pass(seconds: float, polling: bool) -> dict:
    with idle_policy(polling):
        results = {"veth": veth_case(seconds)}
        results["unlimited"] = pathtwin_case(TOPO.format(rtt="0ms", rate="100gbit", queue="4MB"), seconds, polling)
        results["unlimited-no-offload"] = pathtwin_case(TOPO.format(rtt="0ms", rate="100gbit", queue="4MB"), seconds, polling,
                                                        offload=False)
        results["1g-1ms"] = pathtwin_case(TOPO.format(rtt="1ms", rate="1gbit", queue="1MB"), seconds, polling)
        results["1g-1ms-spin"] = pathtwin_case(TOPO.format(rtt="1ms", rate="1gbit", queue="1MB"), seconds, polling, spin_us=30)
        for kind in RATTAN_LINKS:
            results[kind] = rattan_case(kind, seconds)
    return results


def median_pass(reps: list[dict]) -> dict:
    """Each case's median over the repetitions of a pass, with its ratio to veth as the median
    (and range) of the ratios within each repetition."""
    out: dict = {}
    for name in reps[0]:
        runs = [r[name] for r in reps]
        if any("skipped" in r for r in runs):
            out[name] = next(r for r in runs if "skipped" in r)
            continue
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        ratios = [r[name]["gbps"] / r["veth"]["gbps"] for r in reps]
        added = [r[name]["rtt_p50_us"] - r["veth"]["rtt_p50_us"] for r in reps]
        med.update(x_veth=statistics.median(ratios), x_veth_range=[min(ratios), max(ratios)],
                   added_us=statistics.median(added), added_us_range=[min(added), max(added)], runs=runs)
        out[name] = med
    return out


def print_pass(title: str, results: dict) -> None:
    base = results["veth"]
    print(f"\n{title}")
    print(f"{'case':<21} {'Gbit/s':>8} {'x veth':>7} {'RTT p50 µs':>11} {'+added':>7} {'RTT p99 µs':>11} {'late p50/p99/max µs':>22}")
    for name, r in results.items():
        if "skipped" in r:
            print(f"{name:<21} skipped: {r['skipped']}")
            continue
        late = "/".join(f"{r[k]:.0f}" for k in ("lateness_p50_us", "lateness_p99_us", "lateness_max_us")) if "lateness_p50_us" in r else "-"
        x_veth = r.get("x_veth", r["gbps"] / base["gbps"])
        added = r.get("added_us", r["rtt_p50_us"] - base["rtt_p50_us"])
        print(f"{name:<21} {r['gbps']:8.2f} {x_veth:7.2f} {r['rtt_p50_us']:11.0f} "
              f"{added:7.0f} {r['rtt_p99_us']:11.0f} {late:>22}"
              + (f"   x veth {r['x_veth_range'][0]:.2f}-{r['x_veth_range'][1]:.2f}, added {r['added_us_range'][0]:.0f}-"
                 f"{r['added_us_range'][1]:.0f} µs" if "x_veth_range" in r else ""))
    for pt, rt in (("unlimited", "rattan"), ("1g-1ms", "rattan-1g-1ms")):
        p, r = results[pt], results[rt]
        if "skipped" not in r:
            added = lambda x: x["rtt_p50_us"] - base["rtt_p50_us"]  # noqa: E731
            print(f"{pt} ÷ {rt}: Gbit/s {p['gbps'] / r['gbps']:.2f}x, RTT p50 {p['rtt_p50_us'] / r['rtt_p50_us']:.2f}x "
                  f"(added {added(p):.0f} vs {added(r):.0f} µs), RTT p99 {p['rtt_p99_us'] / r['rtt_p99_us']:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--idle", choices=("polling", "default", "both"), default="both",
                    help="CPU idle policy for a pass: polling (pathtwin's default, /dev/cpu_dma_latency = 0 held "
                         "for every case), default (CPUs halt when idle), or both passes")
    ap.add_argument("--repeat", type=int, default=1, help="run each pass this many times and report medians")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error(f"--repeat must be at least 1, not {a.repeat}")
    passes = {"polling": True, "default": False}
    out = {}
    for name, polling in passes.items():
        if a.idle in (name, "both"):
            reps = [run_pass(a.seconds, polling) for _ in range(a.repeat)]
            out[name] = reps[0] if a.repeat == 1 else median_pass(reps)
            title = f"idle CPUs: {name}" + (" (cpu_dma_latency = 0)" if polling else " (halt)")
            print_pass(title + (f", median of {a.repeat} runs" if a.repeat > 1 else ""), out[name])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
