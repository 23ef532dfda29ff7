"""Trace analysis of a capture larger than memory should be: peak resident memory of
`pathtwin trace analyze` and `pathtwin trace diagnose` on a multi-gigabyte capture, with
`tcptrace -n -lr` on the same file beside it.

    python3 big.py [--gb 10] [--capture PATH] [--keep] [--no-tcptrace]
    python3 big.py --diagnose-probes [--gb 10] [--probe-flows 1] [--capture PATH] [--keep]

The capture is generated with gen_capture.py (headers only, 96-byte snap length, many
concurrent HTTP-like connections) unless --capture names one; it is deleted afterwards
unless --keep. Each tool runs once as a child process; its peak resident set size comes
from wait4(2) (ru_maxrss). The goal is pathtwin's peak under 1 GB whatever the capture size:
a memory-mapped capture's pages count as resident while mapped, so the analysis hands back
the pages every reader has passed (`MappedCapture::release_before`).

With --diagnose-probes the capture is pure Monarch probes instead (gen_probes.py: tcp-ack
probes and RSTs, --probe-flows flows sharing the size; 1 % lost each way, some reordered)
and only `pathtwin trace diagnose` runs: its memory must not follow the number of probes
(each flow keeps a bounded window, `monarch.rs`).

This is a benchmark, not a test: it prints the numbers and exits 0 either way.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Bytes per generated packet record (16-byte record header + 96-byte snap, minus the
#: frames shorter than the snap length): measured on gen_capture.py's output.
BYTES_PER_PACKET = 97.6
#: Bytes per probe in gen_probes.py's output: a 70-byte probe record and, for 98.5 % of
#: probes, a 70-byte response record.
BYTES_PER_PROBE = 139.0
GOAL_RSS_BYTES = 1 << 30


def run_measured(cmd: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS bytes, exit status) of one child process."""
    # stderr goes to a file, not a pipe: a tool that writes more than a pipe holds would
    # block before exiting while we wait for it.
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        if rc != 0:
            err.seek(0)
            lines = err.read().decode(errors="replace").strip().splitlines()
            print(f"  {cmd[0]} failed ({rc}): {lines[-1] if lines else ''}", file=sys.stderr)
    return wall, usage.ru_maxrss * 1024, rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=10.0, help="size of the generated capture in GB (default 10)")
    ap.add_argument("--capture", type=Path, help="use this capture instead of generating one")
    ap.add_argument("--keep", action="store_true", help="keep the generated capture")
    ap.add_argument("--no-tcptrace", action="store_true")
    ap.add_argument("--diagnose-probes", action="store_true",
                    help="a pure-probe capture (gen_probes.py); run only pathtwin trace diagnose")
    ap.add_argument("--probe-flows", type=int, default=1, help="probe flows with --diagnose-probes (default 1)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pathtwin-bigtrace-"))
    capture = args.capture
    if capture is None and args.diagnose_probes:
        capture = tmp / "probes.pcap"
        probes = max(1, int(args.gb * 1e9 / BYTES_PER_PROBE / args.probe_flows))
        print(f"generating {args.gb:g} GB ({args.probe_flows:,} flows of {probes:,} probes) into {capture} ...", flush=True)
        subprocess.run([sys.executable, str(HERE / "gen_probes.py"), str(capture), "--flows", str(args.probe_flows),
                        "--probes", str(probes)], check=True)
    elif capture is None:
        capture = tmp / "big.pcap"
        packets = int(args.gb * 1e9 / BYTES_PER_PACKET)
        print(f"generating {args.gb:g} GB ({packets:,} packets) into {capture} ...", flush=True)
        subprocess.run([sys.executable, str(HERE / "gen_capture.py"), str(capture), "--packets", str(packets),
                        "--concurrent", "2000"], check=True)
    size = capture.stat().st_size
    pathtwin = [sys.executable, "-m", "pathtwin.cli"]
    rows = []
    runs = [("pathtwin trace analyze", pathtwin + ["trace", "analyze", str(capture), "-o", str(tmp / "conns.parquet")]),
            ("pathtwin trace diagnose", pathtwin + ["trace", "diagnose", str(capture)])]
    if args.diagnose_probes:
        runs = runs[1:]
    elif not args.no_tcptrace and shutil.which("tcptrace"):
        runs.append(("tcptrace -n -lr", ["tcptrace", "-n", "-lr", str(capture)]))
    try:
        for name, cmd in runs:
            print(f"running {name} ...", flush=True)
            wall, rss, rc = run_measured(cmd)
            rows.append((name, wall, rss, rc))
    finally:
        if args.capture is None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif args.capture is None:
            print(f"capture kept: {capture}")

    print(f"\ncapture: {size / 1e9:.2f} GB; {os.cpu_count()} CPUs")
    print(f"{'tool':26} {'wall s':>8} {'peak RSS MB':>12} {'RSS / capture':>14}  goal (pathtwin < 1 GB)")
    print("-" * 84)
    for name, wall, rss, rc in rows:
        goal = "" if not name.startswith("pathtwin") else ("met" if rss < GOAL_RSS_BYTES and rc == 0 else "MISSED")
        print(f"{name:26} {wall:8.1f} {rss / 1e6:12.0f} {rss / size:14.3f}  {goal}{'' if rc == 0 else f' (exit {rc})'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
