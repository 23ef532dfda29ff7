"""Emulator soak: a long run at 1 Gbit/s through one modelled path, with long and short
flows at once, watched minute by minute.

    sudo python bench/emu/soak.py [--minutes 60] [--rate 1gbit] [--rtt 20ms] [--long 4] [--short 8]

Hosts a and b share one path (capacity = ABW = --rate, --rtt, a --queue of 1 MB). Across it,
for the whole run:
  long flows   one iperf3 test from a to b with --long parallel streams;
  short flows  --short workers in a, each fetching from a server in b one response after
               another over a fresh connection, sizes log-uniform from 1 KB to 1 MB.
Every minute it prints and keeps: the path's delivered rate (both directions), release and
timer-wake lateness over that minute (p50/p99/p999/max, from the engine's histograms), this
process's resident memory (the engine runs in it), open file descriptors and threads, and
the short transfers completed. At the end: the lateness p99 of the last minute against the
first, memory and descriptor growth from the second minute to the last (the first holds
start-up), and whether the run left any namespace, link or state directory behind, and how
long writing the emulation's own result directory took (--result-dir, as a user's run writes
it; --no-result-dir keeps the tables in memory only) and the process's memory after it.
Results go to bench/out/emu/soak.json. This is a measurement, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from pathtwin.emulation import STATE_ROOT, Emulation
from pathtwin.errors import PathtwinError

OUT = Path(__file__).resolve().parents[1] / "out" / "emu"
PORT = 5300

# The short-flow server: one thread per connection reads "SIZE\n" and answers SIZE bytes.
SERVER = r"""
import socket, sys, threading
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1])))
s.listen(256)
print('ready', flush=True)
chunk = b'r' * 65536
def serve(c):
    try:
        f = c.makefile('rb')
        n = int(f.readline())
        while n > 0:
            n -= c.send(chunk[:min(n, len(chunk))])
    except (OSError, ValueError):
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# The short-flow client: WORKERS threads fetch until the deadline; prints a JSON summary.
CLIENT = r"""
import json, math, random, socket, sys, threading, time
addr, port, workers, until = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
done, failed, nbytes = [0], [0], [0]
lock = threading.Lock()
def work(seed):
    rng = random.Random(seed)
    while time.time() < until:
        size = int(math.exp(rng.uniform(math.log(1e3), math.log(1e6))))
        try:
            c = socket.create_connection((addr, port), timeout=30)
            c.sendall(b'%d\n' % size)
            got = 0
            while got < size:
                b = c.recv(65536)
                if not b:
                    break
                got += len(b)
            c.close()
            with lock:
                if got == size:
                    done[0] += 1
                    nbytes[0] += got
                else:
                    failed[0] += 1
        except OSError:
            with lock:
                failed[0] += 1
ts = [threading.Thread(target=work, args=(k,)) for k in range(workers)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(json.dumps({'completed': done[0], 'failed': failed[0], 'bytes': nbytes[0]}), flush=True)
"""


def topology(rate: str, rtt: str, queue: str) -> str:
    return f"""name = "soak"
hosts = ["a", "b"]
[run]
sample_interval = "1s"
[[path]]
between = ["a", "b"]
rtt = "{rtt}"
abw = "{rate}"
capacity = "{rate}"
# A queue for the rate, as bench/emu/run.py's 1 Gbit/s case: the bounds derived for the
# paper's 64-KB windows would give a few packets, and the kernel's windows are larger.
queue = "{queue}"
enforce_bounds = false
"""


def process_numbers() -> dict:
    """Resident memory (MB), open descriptors and threads of this process."""
    status = Path("/proc/self/status").read_text().splitlines()
    field = {ln.split(":")[0]: ln.split(":")[1].strip() for ln in status if ":" in ln}
    return {"rss_mb": int(field["VmRSS"].split()[0]) / 1024, "fds": len(os.listdir("/proc/self/fd")),
            "threads": int(field["Threads"])}


def steal_ms() -> float:
    """CPU time the hypervisor took from this VM so far (all CPUs, /proc/stat's steal), in ms:
    a release stall with steal time beside it is the machine's, not the loop's."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")


def leftovers(run_id: str) -> dict:
    """What of run ``run_id`` still exists after the run: namespaces, links, state."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return {"namespaces": [ln.split()[0] for ln in ns.splitlines() if run_id in ln],
            "links": [ln.split(":")[1].strip() for ln in links.splitlines() if run_id in ln],
            "state_dir": (STATE_ROOT / run_id).exists()}


def delivered_bytes(stats: dict) -> int:
    return sum(r["bytes_out"] for r in stats["routes"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="pathtwin emulator soak (minute-by-minute lateness, memory, descriptors)")
    ap.add_argument("--minutes", type=float, default=60.0, help="length of the run (default 60)")
    ap.add_argument("--rate", default="1gbit", help="the path's capacity and ABW (default 1gbit)")
    ap.add_argument("--rtt", default="20ms", help="the path's RTT (default 20ms)")
    ap.add_argument("--queue", default="1MB", help="the path's queue (default 1MB)")
    ap.add_argument("--long", type=int, default=4, help="parallel iperf3 streams a -> b (default 4)")
    ap.add_argument("--short", type=int, default=8, help="short-flow workers (default 8)")
    ap.add_argument("--interval", type=float, default=60.0, help="seconds between reports (default 60)")
    ap.add_argument("--no-tcp-info", action="store_true",
                    help="do not sample the hosts' tcp_info (the flow_series table; its samples go to a "
                         "temporary file during the run, not to memory)")
    ap.add_argument("--result-dir", type=Path, default=OUT / "soak-run",
                    help=f"the emulation's result directory (default {OUT / 'soak-run'})")
    ap.add_argument("--no-result-dir", action="store_true", help="write no result directory: results in memory only")
    ap.add_argument("--no-offload", action="store_true",
                    help="TUN offload off: the hosts' kernels hand over MTU-sized packets, one system call each")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/emu/soak: needs root (network namespaces)", file=sys.stderr)
        return 2
    for tool in ("iperf3", "ip"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            print(f"bench/emu/soak: {tool} missing", file=sys.stderr)
            return 2
    seconds = args.minutes * 60
    minutes = []
    try:
        with Emulation(topology(args.rate, args.rtt, args.queue), tcp_info=not args.no_tcp_info,
                       out=None if args.no_result_dir else args.result_dir,
                       offload=not args.no_offload) as net:
            run_id = net.run_id
            net["b"].popen(["iperf3", "-s", "-1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            server = net["b"].popen([sys.executable, "-c", SERVER, str(PORT)], stdout=subprocess.PIPE, text=True)
            if "ready" not in server.stdout.readline():
                raise PathtwinError("the short-flow server did not start")
            time.sleep(0.3)
            start = time.time()
            iperf = net["a"].popen(["iperf3", "-c", "b", "-t", f"{seconds:.0f}", "-P", str(args.long), "-J"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            client = net["a"].popen([sys.executable, "-c", CLIENT, net["b"].ipv4, str(PORT), str(args.short),
                                     str(start + seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            net.lateness_window()  # the windows start with the traffic
            last_bytes, last_t, last_steal = delivered_bytes(net.stats()), time.time(), steal_ms()
            print(f"{'minute':>6} {'Mbit/s':>8} {'p50 µs':>7} {'p99 µs':>7} {'p999 µs':>8} {'max µs':>8} "
                  f"{'wake p99':>8} {'steal ms':>8} {'RSS MB':>7} {'fds':>5} {'thr':>4}", flush=True)
            while time.time() - start < seconds:
                time.sleep(min(args.interval, max(0.0, start + seconds - time.time())))
                now = time.time()
                window, stats = net.lateness_window(), net.stats()
                got = delivered_bytes(stats)
                rel, wake = window["release"], window["timer_wake"]
                steal = steal_ms()
                row = {"minute": (now - start) / 60, "mbps": (got - last_bytes) * 8 / (now - last_t) / 1e6,
                       "release": rel, "timer_wake": wake, "steal_ms": steal - last_steal, **process_numbers()}
                last_bytes, last_t, last_steal = got, now, steal
                minutes.append(row)
                print(f"{row['minute']:6.1f} {row['mbps']:8.0f} {rel['p50_ns'] / 1e3:7.0f} {rel['p99_ns'] / 1e3:7.0f} "
                      f"{rel['p999_ns'] / 1e3:8.0f} {rel['max_ns'] / 1e3:8.0f} {wake['p99_ns'] / 1e3:8.0f} "
                      f"{row['steal_ms']:8.0f} {row['rss_mb']:7.1f} {row['fds']:5d} {row['threads']:4d}", flush=True)
            long_out, _ = iperf.communicate(timeout=120)
            short_out, _ = client.communicate(timeout=120)
            ending = time.time()
        results = net.results
        results_s = time.time() - ending
        after_results = process_numbers()
        left = leftovers(run_id)
    except PathtwinError as e:
        print(f"bench/emu/soak: {e}", file=sys.stderr)
        return 1
    long_bps = json.loads(long_out)["end"]["sum_received"]["bits_per_second"] if long_out.strip() else None
    short = json.loads(short_out.strip().splitlines()[-1]) if short_out.strip() else None
    report = {"args": vars(args), "minutes": minutes, "long_flows_bps": long_bps, "short_flows": short, "leftovers": left,
              "packet_flows_rows": len(net.table("packet_flows")), "flow_series_rows": len(net.flow_series()),
              "results_s": results_s, "rss_after_results_mb": after_results["rss_mb"],
              # The high-water mark of the whole process, results included.
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if len(minutes) >= 2:
        first, last, second = minutes[0], minutes[-1], minutes[1]
        report["p99_last_over_first"] = last["release"]["p99_ns"] / max(first["release"]["p99_ns"], 1)
        report["rss_growth_mb"] = last["rss_mb"] - second["rss_mb"]
        report["fd_growth"] = last["fds"] - second["fds"]
        print(f"\nrelease lateness p99: first interval {first['release']['p99_ns'] / 1e3:.0f} µs, last "
              f"{last['release']['p99_ns'] / 1e3:.0f} µs ({report['p99_last_over_first']:.2f}x)")
        print(f"memory: {second['rss_mb']:.1f} MB after the first interval, {last['rss_mb']:.1f} MB at the end "
              f"({report['rss_growth_mb']:+.1f} MB); descriptors {second['fds']} -> {last['fds']}")
    if long_bps is not None:
        print(f"long flows (iperf3, {args.long} streams): {long_bps / 1e6:.0f} Mbit/s")
    if short:
        print(f"short flows: {short['completed']:,} completed, {short['failed']} failed, {short['bytes'] / 1e9:.2f} GB")
    print(f"results: {report['flows_table_rows']:,} flows rows (one per direction of every 5-tuple, kept in "
          f"memory), {report['flow_series_rows']:,} tcp_info samples (spilled to a file during the run), built in "
          f"{report['results_s']:.1f} s after the run (resident memory then {report['rss_after_results_mb']:.0f} MB, "
          f"peak {report['peak_rss_mb']:.0f} MB)")
    print(f"left behind: namespaces {left['namespaces'] or 'none'}, links {left['links'] or 'none'}, "
          f"state directory {'yes' if left['state_dir'] else 'none'}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "soak.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"written: {OUT / 'soak.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
