"""Trace-analysis benchmark: pathtwin, `tcptrace -lr` and `tshark -q -z conv,tcp` on the
same large capture in one run; prints packets per second and pathtwin's speed-up.

    python3 run.py [CAPTURE] [--packets 1200000]

Without CAPTURE, a synthetic capture is generated (gen_capture.py) into a temporary
directory. Each tool runs `--repeat` times (default 3); the best wall time counts, so
page-cache warm-up does not favour the tool that runs last. pathtwin runs twice: on one
thread, and with its default thread count (it splits a large capture's flows over the
processors; the peers use one). The CPU seconds column (user + system, all threads, of the
best run) shows what each tool costs whatever the processor count; the speed-ups are
against pathtwin's default run, by wall time. pathtwin needs the extension built in release
mode (`pip install -e .`).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def count_packets(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        f.read(24)
        rec = struct.Struct("<IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                return n
            f.seek(rec.unpack(h)[2], 1)
            n += 1


def cpu_seconds() -> float:
    """User + system time of this process (all threads) and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def best_time(fn, repeat: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the fastest of `repeat` runs."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        c = cpu_seconds()
        t = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t, cpu_seconds() - c))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description="pathtwin vs tcptrace vs tshark on one capture")
    ap.add_argument("capture", nargs="?")
    ap.add_argument("--packets", type=int, default=1_200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tmp = None
    if args.capture:
        capture = Path(args.capture)
    else:
        tmp = tempfile.TemporaryDirectory()
        capture = Path(tmp.name) / "bench.pcap"
        subprocess.run([sys.executable, str(Path(__file__).with_name("gen_capture.py")), str(capture), "--packets", str(args.packets)], check=True)
    packets = count_packets(capture)
    print(f"capture: {capture} ({packets:,} packets, {capture.stat().st_size / 1e6:.0f} MB)")

    from pathtwin import trace

    results = {}
    conns = {}

    def run_pathtwin(threads=None):
        df, _ = trace.analyze(capture, threads=threads)
        conns["pathtwin"] = len(df)

    results["pathtwin"] = best_time(run_pathtwin, args.repeat)
    results["pathtwin 1 thread"] = best_time(lambda: run_pathtwin(1), args.repeat)
    peers = {
        "tcptrace -lr": ["tcptrace", "-l", "-r", "-n", str(capture)],
        "tshark conv,tcp": ["tshark", "-n", "-q", "-r", str(capture), "-z", "conv,tcp"],
    }
    for name, cmd in peers.items():
        if shutil.which(cmd[0]) is None:
            print(f"{name}: not installed, skipped")
            continue
        results[name] = best_time(lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), args.repeat)

    print(f"{'tool':<20}{'seconds':>9}{'CPU s':>8}{'packets/s':>14}{'pathtwin speed-up':>20}")
    for name, (secs, cpu) in results.items():
        ratio = secs / results["pathtwin"][0]
        print(f"{name:<20}{secs:>9.3f}{cpu:>8.3f}{packets / secs:>14,.0f}{ratio:>19.1f}x")
    print(f"pathtwin connections: {conns['pathtwin']:,}")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
