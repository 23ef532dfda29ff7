"""`pathtwin trace ...`: analyze captures (Monkey See), diagnose probes (Monarch), and turn
the inferences into a paths topology for replay.

Each command prints a short readable summary; tables go to Parquet (or CSV with ``--csv``).
``analyze`` itself lives in ``trace_analyze_cli``, which runs without typer.
Large captures show a progress bar on stderr. Mistakes raise ``PathtwinError`` (one line,
exit status 2, handled by ``pathtwin.cli``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import List, Optional

import typer
from . import trace_analyze_cli
from .errors import PathtwinError


class _LazyTrace:
    """`pathtwin.trace` imported on first use: it pulls in pandas, which would otherwise
    cost every `pathtwin` command ~0.4 s of start-up."""

    def __getattr__(self, name):
        from . import trace

        return getattr(trace, name)


tr = _LazyTrace()


# rich is imported when a command prints, not when `pathtwin` starts (every command would
# pay for it otherwise).
def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr)


def _table(**kw):
    from rich.table import Table

    return Table(**kw)

app = typer.Typer(help="Analyze packet captures (Monkey See) and diagnose probes (Monarch).", no_args_is_help=True,
                  rich_markup_mode=None)

# Captures smaller than this finish before a bar would be worth drawing.
_PROGRESS_MIN_BYTES = 32 << 20


def _run_with_progress(capture: Path, fn):
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


def _fmt(x, unit="", digits=1):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}{unit}"


# `pathtwin trace analyze` runs in ``trace_analyze_cli`` (argparse, no typer, pandas or
# pyarrow: ``cli.main`` sends it there first); this entry only lists it in `pathtwin trace
# --help` and serves callers of the typer app itself.
@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, add_help_option=False,
             help=trace_analyze_cli.HELP + " (pathtwin trace analyze --help: its options)")
def analyze(ctx: typer.Context):
    raise typer.Exit(trace_analyze_cli.main(list(ctx.args)))


@app.command()
def diagnose(
    captures: List[Path] = typer.Argument(..., help="pcap or pcapng files taken at the Monarch host (one per run, or one for many)"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="write one row per flow (Parquet, or CSV with --csv)"),
    csv: bool = typer.Option(False, "--csv", help="write CSV instead of Parquet"),
    follow: Optional[float] = typer.Option(None, "--follow", help="live: diagnose a capture still being written every SECONDS until it stops growing"),
) -> None:
    """Monarch's self-diagnosis of probe flows: IP-ID usability, upstream vs downstream loss,
    reordering; over several captures (runs), one Table 5 for all their flows."""
    import pandas as pd

    out = _console()
    if follow is not None:
        if len(captures) != 1 or not follow > 0:
            raise PathtwinError("--follow takes one capture and a positive interval in seconds")
        _follow(captures[0], follow, out)
    parts = []
    for capture in captures:
        flows, stats = _run_with_progress(capture, lambda cb, c=capture: tr.diagnose(c, progress=cb))
        out.print(f"[bold]{capture}[/]: {stats['frames']:,} frames, {len(flows):,} probe flows")
        if stats["bad_headers"]:
            out.print(f"[yellow]warning:[/] {stats['bad_headers']:,} undecodable frames skipped")
        parts.append(flows.assign(capture=str(capture)))
    flows = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].drop(columns="capture")
    if output is not None:
        tr.write_table(flows, output, csv=csv)
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
    summary = tr.verdict_table(flows)
    t = _table(title="self-diagnosis (Monarch, Table 5 layout)")
    t.add_column("result")
    t.add_column("flows", justify="right")
    t.add_column("share", justify="right")
    for _, r in summary.iterrows():
        t.add_row(r.result, f"{r.flows:,}", _fmt(r.percent, " %"))
    out.print(t)
    if output is not None:
        out.print(f"wrote {output}")


def _follow(capture: Path, every: float, out) -> None:
    """Re-reads a growing capture (tcpdump -U writes one record at a time) every `every`
    seconds and prints each probe flow's running diagnosis, until the file has not grown for
    three intervals. A capture cut inside a record is read up to its last whole one."""
    import time

    last_size, still = -1, 0
    while still < 3:
        size = capture.stat().st_size if capture.exists() else 0
        if size == last_size:
            still += 1
        else:
            still, last_size = 0, size
            if size > 24:
                flows, _ = tr.diagnose(capture)
                for _, r in flows.iterrows():
                    out.print(f"{time.strftime('%H:%M:%S')} {r.local_ip}->{r.remote_ip} {r.probe}: {r.probes} probes, "
                              f"{r.responses} answers, lost {r.lost_downstream} down / {r.lost_upstream} up, {r.verdict}", soft_wrap=True)
        time.sleep(every)


@app.command("to-paths")
def to_paths(
    conns: Path = typer.Argument(..., help="table written by `pathtwin trace analyze -o`"),
    output: Path = typer.Option(..., "-o", "--output", help="paths topology to write (TOML)"),
    server_name: str = typer.Option("server", "--server-name", help="host name of the server in the topology"),
    include_pruned: bool = typer.Option(False, "--include-pruned", help="also use connections Monkey would prune"),
) -> None:
    """Turn per-connection inferences into a paths topology for `pathtwin sim` / `pathtwin emu`."""
    df = tr.read_table(conns)
    topo = tr.to_paths(df, server_name=server_name, include_pruned=include_pruned)
    text = tr.paths_toml(topo, source=str(conns))
    # The one config schema lives in Rust; check the file against it before writing.
    from . import _native
    from .errors import PathtwinError

    validate = getattr(_native, "validate_config", None)
    if validate is not None:
        try:
            validate(text, "toml", str(output))
        except ValueError as e:
            raise PathtwinError(f"the inferred topology does not validate: {e}") from None
    output.write_text(text)
    _console().print(f"wrote {output}: {len(topo['path'])} path(s) from {conns}")
