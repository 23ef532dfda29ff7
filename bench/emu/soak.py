"""Emulator soak: a long run at 1 Gbit/s through one modelled path, with long and short
flows at once, watched minute by minute.

    sudo python bench/emu/soak.py [--minutes 60] [--rate 1gbit] [--rtt 20ms] [--long 4] [--short 8] [--json]

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
it; --no-result-dir keeps the tables in memory only), the process's memory after it, and its
peak memory during the run and while the results were built (the high-water mark is reset
when the traffic ends, so the second is the results' own); the tables' rows are counted from
their files' footers, not read back.

The run is held to the goals of a soak (issue #29): no release later than 50 ms in the whole
run, resident memory growing under 0.5 MB a minute (the least-squares slope over the minutes
after the first, which holds start-up), and nothing left behind; the report says of each
whether it was met. Results go to bench/out/emu/soak.json, and its figure (rate, lateness and
memory against time) to soak.png beside it; with --json the report is also printed on
standard output and the minute-by-minute lines go to standard error. This is a measurement,
not a test: it asserts nothing.
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
#: The soak's goals (issue #29): the latest release, and memory growth per minute.
MAX_RELEASE_MS = 50.0
MAX_RSS_SLOPE_MB_PER_MIN = 0.5

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


def reset_peak_rss() -> bool:
    """Resets this process's resident-memory high-water mark (VmHWM, Linux >= 4.0), so that
    ``peak_rss_mb()`` afterwards is the peak of what came since; False if the kernel refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """This process's resident-memory high-water mark (VmHWM) in MB."""
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(ln.split()[1]) for ln in status if ln.startswith("VmHWM:")) / 1024


def table_rows(net: Emulation, name: str) -> int:
    """Rows of result table ``name``: from its Parquet file's footer where the native side
    wrote it (reading the table back would be a peak of the soak's own making), else in memory."""
    if net.results is not None and name in net.results["written"]:
        import pyarrow.parquet as pq

        return pq.ParquetFile(Path(net.out) / f"{name}.parquet").metadata.num_rows
    return len(net.table(name))


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


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys against xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0


def goals(minutes: list[dict], left: dict) -> dict:
    """The soak's goals, each with what was measured and whether it was met."""
    latest_ms = max(m["release"]["max_ns"] for m in minutes) / 1e6
    later = minutes[1:]
    rss_slope = slope([m["minute"] for m in later], [m["rss_mb"] for m in later]) if len(later) >= 2 else None
    fd_slope = slope([m["minute"] for m in later], [m["fds"] for m in later]) if len(later) >= 2 else None
    nothing_left = not (left["namespaces"] or left["links"] or left["state_dir"])
    return {
        "latest_release_ms": {"measured": latest_ms, "goal": MAX_RELEASE_MS, "met": latest_ms <= MAX_RELEASE_MS},
        "rss_slope_mb_per_min": {"measured": rss_slope, "goal": MAX_RSS_SLOPE_MB_PER_MIN,
                                 "met": rss_slope is not None and rss_slope < MAX_RSS_SLOPE_MB_PER_MIN},
        "fd_slope_per_min": {"measured": fd_slope},
        "nothing_left_behind": {"measured": left, "met": nothing_left},
    }


def figure(report: dict, path: Path) -> None:
    """The run against time: delivered rate, release lateness (p50, p99, max) on a log scale
    with the goal's 50 ms, and resident memory with its fitted slope."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = report["minutes"]
    t = [m["minute"] for m in minutes]
    fig, (rate, late, mem) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    rate.plot(t, [m["mbps"] for m in minutes], marker=".")
    rate.set_ylabel("delivered Mbit/s")
    for key, label in (("p50_ns", "p50"), ("p99_ns", "p99"), ("max_ns", "max")):
        late.plot(t, [max(m["release"][key], 1) / 1e6 for m in minutes], marker=".", label=label)
    late.axhline(MAX_RELEASE_MS, color="red", linestyle="--", label="goal (50 ms)")
    late.set_yscale("log")
    late.set_ylabel("release lateness (ms)")
    late.legend(loc="upper left", fontsize="small")
    mem.plot(t, [m["rss_mb"] for m in minutes], marker=".", label="resident memory")
    mem.set_ylabel("MB")
    mem.set_xlabel("minute")
    s = report.get("goals", {}).get("rss_slope_mb_per_min", {}).get("measured")
    if s is not None:
        mem.set_title(f"memory slope {s:+.3f} MB/min after the first interval", fontsize="small")
    fig.suptitle(f"emulator soak: {report['args']['rate']}, {report['args']['long']} long + "
                 f"{report['args']['short']} short-flow workers, {len(minutes)} intervals")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
    ap.add_argument("--json", action="store_true",
                    help="print the report as JSON on standard output (the progress lines go to standard error)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"where soak.json and soak.png go (default {OUT})")
    args = ap.parse_args(argv)
    # With --json, standard output carries the report alone.
    say = (lambda *a, **k: print(*a, **k, file=sys.stderr)) if args.json else print
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
            net["b"].serve(["iperf3", "-s", "-1"], 5201)
            server = net["b"].serve([sys.executable, "-c", SERVER, str(PORT)], PORT)
            start = time.time()
            iperf = net["a"].popen(["iperf3", "-c", "b", "-t", f"{seconds:.0f}", "-P", str(args.long), "-J"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            client = net["a"].popen([sys.executable, "-c", CLIENT, net["b"].ipv4, str(PORT), str(args.short),
                                     str(start + seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            net.lateness_window()  # the windows start with the traffic
            last_bytes, last_t, last_steal = delivered_bytes(net.stats()), time.time(), steal_ms()
            say(f"{'minute':>6} {'Mbit/s':>8} {'p50 µs':>7} {'p99 µs':>7} {'p999 µs':>8} {'max µs':>8} "
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
                say(f"{row['minute']:6.1f} {row['mbps']:8.0f} {rel['p50_ns'] / 1e3:7.0f} {rel['p99_ns'] / 1e3:7.0f} "
                    f"{rel['p999_ns'] / 1e3:8.0f} {rel['max_ns'] / 1e3:8.0f} {wake['p99_ns'] / 1e3:8.0f} "
                    f"{row['steal_ms']:8.0f} {row['rss_mb']:7.1f} {row['fds']:5d} {row['threads']:4d}", flush=True)
            long_out, _ = iperf.communicate(timeout=120)
            short_out, _ = client.communicate(timeout=120)
            server.kill()
            # From here the high-water mark is that of building and writing the results.
            peak_during_run_mb = peak_rss_mb()
            peak_reset = reset_peak_rss()
            ending = time.time()
        results_s = time.time() - ending
        peak_results_mb = peak_rss_mb() if peak_reset else None
        after_results = process_numbers()
        left = leftovers(run_id)
    except PathtwinError as e:
        print(f"bench/emu/soak: {e}", file=sys.stderr)
        return 1
    if not minutes:
        print("bench/emu/soak: the run ended before its first interval; nothing to report", file=sys.stderr)
        return 1
    long_bps = json.loads(long_out)["end"]["sum_received"]["bits_per_second"] if long_out.strip() else None
    short = json.loads(short_out.strip().splitlines()[-1]) if short_out.strip() else None
    report = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "minutes": minutes, "long_flows_bps": long_bps, "short_flows": short, "leftovers": left,
              "packet_flows_rows": table_rows(net, "packet_flows"), "flow_series_rows": table_rows(net, "flow_series"),
              "queue_series_rows": table_rows(net, "queue_series"),
              "results_s": results_s, "rss_after_results_mb": after_results["rss_mb"],
              # The high-water marks: during the run, then while the results were built and
              # written (None if the kernel cannot reset the mark), and of the whole process.
              "peak_rss_run_mb": peak_during_run_mb, "peak_rss_results_mb": peak_results_mb,
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    report["goals"] = goals(minutes, left)
    first, last = minutes[0], minutes[-1]
    say(f"\nrelease lateness p99: first interval {first['release']['p99_ns'] / 1e3:.0f} µs, last "
        f"{last['release']['p99_ns'] / 1e3:.0f} µs")
    if long_bps is not None:
        say(f"long flows (iperf3, {args.long} streams): {long_bps / 1e6:.0f} Mbit/s")
    if short:
        say(f"short flows: {short['completed']:,} completed, {short['failed']} failed, {short['bytes'] / 1e9:.2f} GB")
    say(f"results: {report['packet_flows_rows']:,} packet_flows rows (finished records spilled to a file during the "
        f"run), {report['flow_series_rows']:,} tcp_info samples (likewise), built in {report['results_s']:.1f} s after "
        f"the run (resident memory then {report['rss_after_results_mb']:.0f} MB; peak {report['peak_rss_run_mb']:.0f} MB "
        f"during the run, {report['peak_rss_results_mb'] or float('nan'):.0f} MB building the results)")
    g = report["goals"]
    met = lambda goal: "met" if goal["met"] else "NOT met"
    rss = g["rss_slope_mb_per_min"]
    say(f"goal: no release later than {MAX_RELEASE_MS:.0f} ms: latest {g['latest_release_ms']['measured']:.1f} ms, "
        f"{met(g['latest_release_ms'])}")
    say(f"goal: memory slope under {MAX_RSS_SLOPE_MB_PER_MIN} MB/min: "
        + (f"{rss['measured']:+.3f} MB/min, {met(rss)}" if rss["measured"] is not None else "needs 3 intervals"))
    say(f"goal: nothing left behind: namespaces {left['namespaces'] or 'none'}, links {left['links'] or 'none'}, "
        f"state directory {'yes' if left['state_dir'] else 'none'}, {met(g['nothing_left_behind'])}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "soak.json").write_text(json.dumps(report, indent=2, default=str))
    figure(report, args.out / "soak.png")
    say(f"written: {args.out / 'soak.json'}, {args.out / 'soak.png'}")
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
