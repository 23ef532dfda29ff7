"""`pathtwin replay`: Monkey Do from the command line.

    pathtwin replay server.pcap --server 10.0.0.1:80 -o run/
    pathtwin replay run/db --set tcp.initial_window=10 -o what-if/

Builds the replay database of a capture (or takes one a previous run wrote), replays it in
the emulator (or, with ``--engine sim``, the simulator) with the server's TCP changed by
``--set``, and prints how the per-connection
response times compare with the source's; the tables, the server capture and a plot of the
CDFs are in the output directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import PathtwinError

#: Sections ``--set`` may change: the server's TCP is the what-if; the paths and the clients
#: are the trace's.
SETTABLE = ("tcp",)


def parse_settings(items: List[str]) -> dict:
    """``["tcp.initial_window=10", "tcp.cc=bbr"]`` -> ``{"initial_window": 10, "cc": "bbr"}``."""
    from ..config import parse_assignments

    form = "SECTION.KEY=VALUE (e.g. tcp.initial_window=10)"
    tcp: dict = {}
    for key, value in parse_assignments(items, "--set", form).items():
        section, dot, name = key.partition(".")
        if not dot or not name:
            raise PathtwinError(f"--set {key!r} is not {form}")
        if section not in SETTABLE:
            raise PathtwinError(f"--set {key!r}: only the server's TCP can change in a replay ({', '.join(s + '.*' for s in SETTABLE)})")
        tcp[name] = _value(value)
    return tcp


def _value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def plot_cdfs(table, path: Path) -> Path:
    """Response-time CDFs of source and replay, and the CDF of the relative error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    both = table.dropna(subset=["original_ms", "replay_ms"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for col, label in (("original_ms", "source"), ("replay_ms", "replay")):
        v = np.sort(both[col].to_numpy())
        a.step(v, np.arange(1, len(v) + 1) / max(len(v), 1), where="post", label=label)
    a.set_xscale("log")
    a.set_xlabel("response time (ms)")
    a.set_ylabel("CDF of connections")
    a.legend()
    e = np.sort(both["rel_error"].to_numpy())
    b.step(e, np.arange(1, len(e) + 1) / max(len(e), 1), where="post")
    b.axvspan(-0.2, 0.2, color="0.9")
    b.set_xlim(-1, 1)
    b.set_xlabel("relative error of the replayed response time")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def register(app: typer.Typer) -> None:
    """Adds `pathtwin replay`."""

    @app.command("replay")
    def replay_cmd(
        source: Path = typer.Argument(..., help="capture (pcap/pcapng), conns.parquet of pathtwin trace analyze (with --exchanges), or a replay database directory (a run's db/)"),
        out: Path = typer.Option(..., "-o", "--out", help="result directory"),
        server: Optional[str] = typer.Option(None, "--server", help="server as IP or IP:PORT (capture sources)"),
        settings: List[str] = typer.Option([], "--set", help="server TCP what-if, e.g. tcp.initial_window=10 or tcp.cc=bbr; repeatable"),
        engine: str = typer.Option("emu", "--engine", help="emu (real kernel TCP on both sides, needs root) or sim (simulated TCP, fast what-ifs)"),
        seed: int = typer.Option(1, "--seed", help="seed of the pipes' random loss (and the simulator's TCP)"),
        keep_open: bool = typer.Option(False, "--keep-open", help="also replay connections still open when the capture ended"),
        exchanges: Optional[Path] = typer.Option(None, "--exchanges", help="exchange table of a conns.parquet source (pathtwin trace analyze --exchanges)"),
    ) -> None:
        """Replay a captured workload over per-connection emulated or simulated paths (Monkey Do)."""
        from rich.console import Console

        from .. import replay as rp

        if engine not in rp.ENGINES:
            raise PathtwinError(f"--engine {engine!r}: use {' or '.join(rp.ENGINES)}")
        if not source.exists():
            raise PathtwinError(f"{source}: no such capture or replay database")
        tcp = parse_settings(settings)
        console = Console()
        workload, source_exchanges = rp.load_source(source, server, keep_open=keep_open, exchanges_table=exchanges)
        console.print(f"{source}: {len(workload):,} connections to replay (captured at the {workload.vantage})"
                      + (f" ({', '.join(f'{n} skipped: {r}' for r, n in workload.skipped.items())})" if workload.skipped else ""))
        with console.status(f"replaying in the {'simulator' if engine == 'sim' else 'emulator'} ..."):
            result = rp.replay(workload, out, tcp=tcp, engine=engine, source_exchanges=source_exchanges, seed=seed)
        s = result.summary
        plot = plot_cdfs(result.table, out / "response_times.png")
        console.print(f"replayed {s['replayed']:,} of {s['connections']:,} connections in {s['wall_s']:.0f} s"
                      + (f" with {', '.join(f'{k}={v}' for k, v in tcp.items())}" if tcp else ""))
        console.print(f"response time within ±20 %: {100 * s['within_20pct']:.1f} % (±10 %: {100 * s['within_10pct']:.1f} %), "
                      f"median error {100 * s['median_abs_error']:.1f} %")
        console.print(rp.ks_reading(s))
        console.print(f"wrote {out}/connections.parquet, {out}/summary.json, {plot}, capture {result.run.capture}")
        if s["interrupted"]:
            console.print(f"interrupted: compared the {s['replayed']:,} connections that had finished; the database "
                          f"in {out}/db replays the whole workload again", soft_wrap=True)
            raise KeyboardInterrupt
