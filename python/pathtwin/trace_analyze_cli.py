"""`pathtwin trace analyze`: Monkey See over a capture, parsed without typer.

It is the command benchmarked against tcptrace, and on a large capture its start-up was
most of its wall time: typer (with the pydantic it pulls in), pandas, pyarrow and rich
cost more than the analysis itself. So, as ``sim_cli`` does, it parses its arguments with
argparse, lets the engine write the Parquet tables itself (``_native.trace_analyze_files``,
without the GIL; they read back as ``pathtwin.trace.analyze``'s frames did once written
with pyarrow), and prints its summary as plain text from the few rows the engine hands
back; the analysis is ``pathtwin.trace_files.analyze_files``, light too (only ``--csv``
goes through pandas, to write exactly the CSV it always wrote). ``cli.main`` hands ``trace analyze`` arguments here before
importing typer; ``pathtwin trace --help`` still lists the command.
"""

from __future__ import annotations

import argparse
import os
import sys

from .light_cli import Parser, text_table
from .trace_files import analyze_files, check_capture, check_output, check_threads, missing

HELP = "Per-connection path and endpoint parameters (Monkey See), and optionally the workload."

# Captures smaller than this finish before a progress line would be worth drawing.
_PROGRESS_MIN_BYTES = 32 << 20


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="pathtwin trace analyze", description=HELP)
    p.add_argument("capture", metavar="CAPTURE", help="pcap or pcapng file")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="write one row per connection (Parquet, or CSV with --csv)")
    p.add_argument("--server", metavar="IP[:PORT]", help="server as IP or IP:PORT; other traffic is ignored")
    p.add_argument("--csv", action="store_true", help="write CSV instead of Parquet")
    p.add_argument("--rows", type=int, default=20, help="connections listed in the summary (default: 20)")
    p.add_argument("--threads", type=int, help="threads for a large capture (default: by processors and size)")
    p.add_argument("--exchanges", metavar="PATH", dest="exchanges_out",
                   help="also write one row per request/response exchange, the replay's workload (Parquet, or CSV with --csv)")
    return p


def main(argv: list[str]) -> int:
    """Runs `pathtwin trace analyze ARGV`; user errors raise ``PathtwinError`` (``cli.main``
    prints them)."""
    args = parser().parse_args(argv)
    # Checked before the progress line looks at the capture (analyze_files checks them too).
    check_threads(args.threads)
    capture = check_capture(args.capture)
    check_output(args.output)
    check_output(args.exchanges_out)
    with _Progress(capture) as progress:
        summary = analyze_files(capture, args.output, args.exchanges_out, args.server, progress, args.threads,
                                args.rows, csv=args.csv)
    print_summary(capture, summary, args.rows)
    if args.output is not None:
        print(f"wrote {args.output}")
    if args.exchanges_out is not None:
        print(f"wrote {args.exchanges_out}: {summary['exchanges']:,} exchanges")
    return 0


class _Progress:
    """A byte count on stderr while a large capture is read, redrawn in place, erased at the
    end; only on a terminal (a log or a pipe gets nothing)."""

    def __init__(self, capture: str):
        self.name = os.path.basename(capture)
        self.size = os.stat(capture).st_size
        self.on = self.size >= _PROGRESS_MIN_BYTES and sys.stderr.isatty()
        self.width = 0
        self.line = ""

    def __enter__(self):
        return self if self.on else None

    def __call__(self, done: int) -> None:
        # Called about every megabyte: redrawn only when the percentage changes.
        line = f"{self.name}: {100 * done / self.size:3.0f} % of {self.size / 1e6:,.0f} MB"
        if line == self.line:
            return
        self.line = line
        self.width = max(self.width, len(line))
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()

    def __exit__(self, *exc) -> None:
        if self.on and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


def print_summary(capture: str, summary: dict, rows: int) -> None:
    """The capture's counts, warnings, why connections were pruned and the first ``rows``
    connections, as plain aligned columns."""
    stats, head = summary["stats"], summary["head"]
    n = summary["connections"]
    span = max(stats["last_s"] - stats["first_s"], 0.0)
    print(f"{capture}: {stats['frames']:,} frames over {span:.1f} s, {stats['tcp_packets']:,} TCP packets, "
          f"{n:,} connections ({summary['kept']:,} kept for replay)")
    if stats["bad_headers"]:
        print(f"warning: {stats['bad_headers']:,} undecodable frames skipped")
    if stats["truncated_tail"]:
        print("warning: the capture ends inside a record (last packet dropped)")
    if stats["snapped"]:
        print(f"warning: {stats['snapped']:,} segments cut by the snap length (headers used)")
    if not n:
        return
    if summary["pruned"]:
        print("pruned: " + ", ".join(f"{k} {reason}" for reason, k in summary["pruned"]))
    shown = len(head["conn_id"])
    if shown:
        table = [
            (f"{head['client_ip'][i]}:{head['client_port'][i]}", f"{head['server_ip'][i]}:{head['server_port'][i]}",
             str(head["termination"][i]), _fmt(head["min_rtt_ms"][i], " ms", 2), _rate(head["bottleneck_bps"][i]),
             _fmt(None if head["loss_rate"][i] is None else 100 * head["loss_rate"][i], " %", 2),
             "-" if head["delayed_ack"][i] is None else str(head["delayed_ack"][i]),
             _fmt(head["server_delay_ms"][i], " ms"), _fmt(head["query_delay_ms"][i], " ms"), f"{int(head['bytes_s2c'][i]):,}")
            for i in range(shown)
        ]
        print(text_table(("client", "server", "end", "min RTT", "bandwidth", "loss", "ACKs", "resp delay", "query delay",
                          "bytes s→c"), table, left=3))
    if n > shown:
        print(f"... {n - shown:,} more in the output table")


def _fmt(x, unit="", digits=1) -> str:
    if missing(x):
        return "-"
    return f"{x:.{digits}f}{unit}"


def _rate(bps) -> str:
    if missing(bps):
        return "-"
    for div, unit in ((1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s")):
        if bps >= div:
            return f"{bps / div:.2f} {unit}"
    return f"{bps:.0f} b/s"
