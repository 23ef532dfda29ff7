"""`pathtwin trace ...`: analyze captures (Monkey See), diagnose probes (Monarch), and turn
the inferences into a paths topology for replay.

`pathtwin trace analyze` is the command benchmarked against tcptrace, and on a large capture
its start-up was most of its wall time: typer (with the pydantic it pulls in), pandas,
pyarrow and rich cost more than the analysis itself. So it is parsed with argparse
(``analyze_main``, which ``cli.main`` calls before importing typer), the engine writes the
Parquet tables itself (``pathtwin.trace_files.analyze_files``: ``_native.trace_analyze_files``
without the GIL; they read back as ``pathtwin.trace.analyze``'s frames did once written with
pyarrow; only ``--csv`` goes through pandas, to write exactly the CSV it always wrote), and
the summary is printed as plain text from the few rows the engine hands back. The typer
commands (``diagnose``, ``to-paths``, and ``analyze`` only listed, handing over) are declared
by ``register``, which imports typer; rich and pandas are imported when they run.

Each command prints a short readable summary; tables go to Parquet (or CSV with ``--csv``).
Large captures show their progress on stderr. Mistakes raise ``PathtwinError`` (one line,
exit status 2, handled by ``pathtwin.cli``).

(No ``from __future__ import annotations`` here: typer reads the annotations of the commands
``register`` defines, with typer and pathlib imported there; pathlib's import alone is 3-4 ms
of `trace analyze`'s start-up.)
"""

import argparse
import os
import sys

from ..errors import PathtwinError
from ..trace_files import analyze_files, check_capture, check_output, check_threads, missing
from ._light import Parser, text_table

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

HELP = "Per-connection path and endpoint parameters (Monkey See), and optionally the workload."

# Captures smaller than this finish before a progress line (or bar) would be worth drawing.
_PROGRESS_MIN_BYTES = 32 << 20


def analyze_parser() -> argparse.ArgumentParser:
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
    p.add_argument("--cross-traffic", metavar="PATH", dest="cross_traffic_out",
                   help="also write each connection direction's cross traffic over time, about a second a row (iBox; "
                        "`trace to-paths --cross-traffic` makes it the paths' ABW over time)")
    return p


def analyze_main(argv: list[str]) -> int:
    """Runs `pathtwin trace analyze ARGV`; user errors raise ``PathtwinError`` (``cli.main``
    prints them)."""
    args = analyze_parser().parse_args(argv)
    # Checked before the progress line looks at the capture (analyze_files checks them too).
    check_threads(args.threads)
    capture = check_capture(args.capture)
    check_output(args.output)
    check_output(args.exchanges_out)
    check_output(args.cross_traffic_out)
    with _Progress(capture) as progress:
        summary = analyze_files(capture, args.output, args.exchanges_out, args.server, progress, args.threads,
                                args.rows, csv=args.csv, cross_traffic_out=args.cross_traffic_out)
    print_summary(capture, summary, args.rows)
    if args.output is not None:
        print(f"wrote {args.output}")
    if args.exchanges_out is not None:
        print(f"wrote {args.exchanges_out}: {summary['exchanges']:,} exchanges")
    if args.cross_traffic_out is not None:
        print(f"wrote {args.cross_traffic_out}: {summary['cross_traffic_bins']:,} bins of cross traffic over time")
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


def print_summary(capture: str, summary: "Mapping[str, Any]", rows: int) -> None:
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


# -- the typer commands ------------------------------------------------------------------

# rich is imported when a command prints, not when `pathtwin` starts (every command would
# pay for it otherwise).
def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr)


def _table(**kw):
    from rich.table import Table

    return Table(**kw)


def _run_with_progress(capture: "Path", fn):
    """Calls ``fn(progress_callback)``, drawing a byte progress bar for large captures."""
    size = capture.stat().st_size if capture.exists() else 0
    if size < _PROGRESS_MIN_BYTES:
        return fn(None)
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=_console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(capture.name, total=size)
        return fn(lambda done: bar.update(task, completed=done))


def _diagnose(captures: "list[Path]", output: "Path | None", csv: bool, follow: "float | None") -> None:
    """What `pathtwin trace diagnose` does (``register`` declares its arguments)."""
    import pandas as pd

    from .. import trace

    out = _console()
    if follow is not None:
        if len(captures) != 1 or not follow > 0:
            raise PathtwinError("--follow takes one capture and a positive interval in seconds")
        _follow(captures[0], follow, out)
    parts = []
    for capture in captures:
        flows, stats = _run_with_progress(capture, lambda cb, c=capture: trace.diagnose(c, progress=cb))
        out.print(f"[bold]{capture}[/]: {stats['frames']:,} frames, {len(flows):,} probe flows")
        if stats["bad_headers"]:
            out.print(f"[yellow]warning:[/] {stats['bad_headers']:,} undecodable frames skipped")
        parts.append(flows.assign(capture=str(capture)))
    flows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].drop(columns="capture")
    if output is not None:
        trace.write_table(flows, output, csv=csv)
    if len(flows):
        t = _table(title="flows")
        for col in ("local", "remote", "probe", "probes", "answers", "IP IDs", "lost down", "lost up", "unclass.", "reorder up", "verdict"):
            t.add_column(col)
        for _, r in flows.iterrows():
            t.add_row(
                r.local_ip, r.remote_ip, r.probe, str(r.probes), str(r.responses),
                "usable" if r.ipid_usable else "unusable",
                str(r.lost_downstream), str(r.lost_upstream), str(r.lost_unclassified),
                f"{r.reordered_upstream_harmful}+{r.reordered_upstream_minor}",
                r.verdict,
            )
        out.print(t)
    summary = trace.verdict_table(flows)
    t = _table(title="self-diagnosis (Monarch, Table 5 layout)")
    t.add_column("result")
    t.add_column("flows", justify="right")
    t.add_column("share", justify="right")
    for _, r in summary.iterrows():
        t.add_row(r.result, f"{r.flows:,}", _fmt(r.percent, " %"))
    out.print(t)
    if output is not None:
        out.print(f"wrote {output}")


def _follow(capture: "Path", every: float, out) -> None:
    """Re-reads a growing capture (tcpdump -U writes one record at a time) every `every`
    seconds and prints each probe flow's running diagnosis, until the file has not grown for
    three intervals. A capture cut inside a record is read up to its last whole one."""
    import time

    from .. import trace

    last_size, still = -1, 0
    while still < 3:
        size = capture.stat().st_size if capture.exists() else 0
        if size == last_size:
            still += 1
        else:
            still, last_size = 0, size
            if size > 24:
                flows, _ = trace.diagnose(capture)
                for _, r in flows.iterrows():
                    out.print(f"{time.strftime('%H:%M:%S')} {r.local_ip}->{r.remote_ip} {r.probe}: {r.probes} probes, "
                              f"{r.responses} answers, lost {r.lost_downstream} down / {r.lost_upstream} up, {r.verdict}", soft_wrap=True)
        time.sleep(every)


def _to_paths(conns: "Path", output: "Path", server_name: str, include_pruned: bool,
              cross_traffic: "Path | None" = None) -> None:
    """What `pathtwin trace to-paths` does (``register`` declares its arguments): the
    topology, and beside it every estimate with its kind and confidence (JSON)."""
    import json

    from .. import trace

    df = trace.read_table(conns)
    profile = trace.read_table(cross_traffic) if cross_traffic is not None else None
    topo = trace.to_paths(df, server_name=server_name, include_pruned=include_pruned, cross_traffic=profile)
    sidecar = trace.estimates_path(output)
    check_output(str(output))
    check_output(str(sidecar))
    text = trace.paths_toml(topo, source=str(conns), estimates=sidecar.name)
    # The one config schema lives in Rust; check the file against it before writing.
    from .. import _native

    try:
        _native.validate_config(text, "toml", str(output))
    except ValueError as e:
        raise PathtwinError(f"the inferred topology does not validate: {e}") from None
    for path, content in ((output, text), (sidecar, json.dumps({"source": str(conns), "topology": output.name,
                                                                 "paths": topo["estimates"]}, indent=1) + "\n")):
        try:
            path.write_text(content)
        except OSError as e:
            raise PathtwinError(f"{path}: cannot write ({e.strerror})") from None
    rows = []
    for est in topo["estimates"]:
        for d in trace.DIRECTIONS:
            x = est[d]
            q = x["queue"].get("written_bytes")
            rows.append((trace.direction_label(d, server_name, est["host"]), est["client"] if d == "s2c" else "",
                         f"{est['rtt']['value_ms']:.2f} ms" if d == "s2c" else "",
                         _estimate_cell(x["capacity"]), _estimate_cell(x["abw"]),
                         "-" if q is None else f"{q / 1e3:.1f} KB {x['queue']['kind']}",
                         f"{100 * x['loss']['value']:.2f} %" if x["loss"]["kind"] == "point" else "-"))
    print(f"{conns}: {len(topo['path'])} path(s)")
    print(text_table(("path", "client", "base RTT", "capacity", "ABW", "queue", "loss"), rows, left=2))
    print(f"wrote {output} and {sidecar} (every estimate: its kind, samples, spread and how it was made)")


def _estimate_cell(e: dict) -> str:
    """A rate estimate in a table cell: value, its spread and what kind of estimate it is."""
    v = e.get("value_bps")
    if e["kind"] == "point":
        # A capacity's statistical and bias bounds add up; an ABW has its error bound.
        if "bias_bps" in e and e["bias_bps"] is None:
            return f"{_rate(v)} (bias unbounded)"
        spread = 3 * (e.get("se_bps") or 0.0) + e["bias_bps"] if "bias_bps" in e else e.get("error_bps")
        return f"{_rate(v)}" + (f" ± {_rate(spread)}" if spread else "")
    if e["kind"] == "lower bound":
        return f"≥ {_rate(v)}, wrote {_rate(e['written_bps'])}"
    return f"{e['kind']}: wrote {_rate(e['written_bps'])}"


def register(app) -> None:
    """Adds the `pathtwin trace` group: ``analyze`` (listed here, run by ``analyze_main``),
    ``diagnose`` and ``to-paths``."""
    from pathlib import Path
    from typing import List, Optional

    import typer

    group = typer.Typer(help="Analyze packet captures (Monkey See) and diagnose probes (Monarch).", no_args_is_help=True,
                        rich_markup_mode=None)

    @group.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, add_help_option=False,
                   help=HELP + " (pathtwin trace analyze --help: its options)")
    def analyze(ctx: typer.Context) -> None:
        raise typer.Exit(analyze_main(list(ctx.args)))

    @group.command("diagnose")
    def diagnose_cmd(
        captures: List[Path] = typer.Argument(..., help="pcap or pcapng files taken at the Monarch host (one per run, or one for many)"),
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="write one row per flow (Parquet, or CSV with --csv)"),
        csv: bool = typer.Option(False, "--csv", help="write CSV instead of Parquet"),
        follow: Optional[float] = typer.Option(None, "--follow", help="live: diagnose a capture still being written every SECONDS until it stops growing"),
    ) -> None:
        """Monarch's self-diagnosis of probe flows: IP-ID usability, upstream vs downstream loss,
        reordering; over several captures (runs), one Table 5 for all their flows."""
        _diagnose(captures, output, csv, follow)

    @group.command("to-paths")
    def to_paths_cmd(
        conns: Path = typer.Argument(..., help="table written by `pathtwin trace analyze -o`"),
        output: Path = typer.Option(..., "-o", "--output", help="paths topology to write (TOML)"),
        server_name: str = typer.Option("server", "--server-name", help="host name of the server in the topology"),
        include_pruned: bool = typer.Option(False, "--include-pruned", help="also use connections with an incomplete handshake, termination or sequence"),
        cross_traffic: Optional[Path] = typer.Option(None, "--cross-traffic", help="profile table of `trace analyze --cross-traffic`: write each path's ABW over time (abw_steps)"),
    ) -> None:
        """Turn per-connection inferences into a paths topology for `pathtwin sim` / `pathtwin emu`:
        per client and direction, capacity (packet pairs), ABW (network-limited transfers; else
        a bound, and ABW = capacity), queue and loss; beside it, PATHS.estimates.json says what
        each value is and how sure."""
        _to_paths(conns, output, server_name, include_pruned, cross_traffic)

    app.add_typer(group, name="trace")
