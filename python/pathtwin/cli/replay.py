"""`pathtwin replay`: Monkey Do from the command line.

    pathtwin replay server.pcap --server 10.0.0.1:80 -o run/
    pathtwin replay run/db --set tcp.initial_window=10 -o what-if/

Builds the replay database of a capture (or takes one a previous run wrote), replays it in
the emulator (or, with ``--engine sim``, the simulator) with the server's TCP changed by
``--set``, and prints how the per-connection
response times compare with the source's: the paper's headline, its Figures 6-8 as a table
(per category of response time, bandwidth and RTT: connections, share within ±20 %, shares
under- and over-estimated) and Figure 9's two halves in time. The tables, the server capture
and the figures as PNGs are in the output directory.
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


#: How each breakdown is named in the printed table.
_CATEGORY_NAMES = {"response_time": "response time", "bandwidth": "bandwidth", "min_rtt": "min RTT"}


def _pct(x) -> str:
    return "    -" if x is None or x != x else f"{100 * x:5.1f}"


def category_lines(cats: dict) -> list[str]:
    """``summary["categories"]`` as a compact table: per category (Figs. 6-8) the number of
    replayed connections, the share within ±20 % and the shares the replay under- and
    over-estimated (negative and positive relative error), in %."""
    title = "relative error by category (Figs. 6-8), %"
    width = max([len(title)] + [len(f"{_CATEGORY_NAMES.get(k, k)} {b['label']}") for k, v in cats.items() if k != "total"
                                for b in v["bins"]])
    lines = [f"{title:<{width}}  {'conns':>6}  ±20 %  under   over",
             f"{'total':<{width}}  {cats['total']['connections']:>6}  {_pct(cats['total']['within_20pct'])}  "
             f"{_pct(cats['total']['under'])}  {_pct(cats['total']['over'])}"]
    for key, v in cats.items():
        if key == "total":
            continue
        for b in v["bins"]:
            name = f"{_CATEGORY_NAMES.get(key, key)} {b['label']}"
            lines.append(f"{name:<{width}}  {b['connections']:>6}  {_pct(b['within_20pct'])}  {_pct(b['under'])}  {_pct(b['over'])}")
    return lines


def halves_line(h: dict) -> str:
    """``summary["halves"]`` (Fig. 9) in one line."""
    def num(v, fmt):
        return "-" if v is None else format(v, fmt)

    def one(key):
        x = h[key]
        return (f"{key} KS {num(x['ks_distance'], '.3f')}, medians {num(x['first_median_ms'], '.1f')} / "
                f"{num(x['second_median_ms'], '.1f')} ms")
    return (f"two halves in time (Fig. 9; {h['first']:,} and {h['second']:,} connections, split at "
            f"{num(h['split_s'], '.1f')} s): {one('original')}; {one('replay')}")


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
        loss: str = typer.Option("trace", "--loss", help="trace: lose the data the capture shows lost (its retransmissions, less spurious ones); random: Bernoulli loss at each path's loss rate, for what-if paths"),
        keep_open: bool = typer.Option(False, "--keep-open", help="also replay connections still open when the capture ended"),
        exchanges: Optional[Path] = typer.Option(None, "--exchanges", help="exchange table of a conns.parquet source (pathtwin trace analyze --exchanges)"),
    ) -> None:
        """Replay a captured workload over per-connection emulated or simulated paths (Monkey Do)."""
        from rich.console import Console

        from .. import replay as rp

        if engine not in rp.ENGINES:
            raise PathtwinError(f"--engine {engine!r}: use {' or '.join(rp.ENGINES)}")
        from ..replay.workload import check_loss_model

        try:
            check_loss_model(loss)
        except PathtwinError as e:
            raise PathtwinError(f"--loss: {e}") from None
        if not source.exists():
            raise PathtwinError(f"{source}: no such capture or replay database")
        tcp = parse_settings(settings)
        console = Console()
        workload, source_exchanges = rp.load_source(source, server, keep_open=keep_open, exchanges_table=exchanges)
        console.print(f"{source}: {len(workload):,} connections to replay (captured at the {workload.vantage})"
                      + (f" ({', '.join(f'{n} skipped: {r}' for r, n in workload.skipped.items())})" if workload.skipped else ""))
        with console.status(f"replaying in the {'simulator' if engine == 'sim' else 'emulator'} ..."):
            result = rp.replay(workload, out, tcp=tcp, engine=engine, source_exchanges=source_exchanges, seed=seed, loss=loss)
        s = result.summary
        from ..replay.figures import write_figures

        plots = write_figures(result.table, out)
        console.print(f"replayed {s['replayed']:,} of {s['connections']:,} connections in {s['wall_s']:.0f} s"
                      + (f" with {', '.join(f'{k}={v}' for k, v in s['tcp'].items())}" if s["tcp"] else ""))
        if s["tcp_from_capture"]:
            console.print(f"from the capture: {', '.join(f'{k}={v}' for k, v in s['tcp_from_capture'].items())} "
                          f"(the traced server's largest first flight, in segments; --set tcp.initial_window=N to choose)")
        console.print(f"loss: {s['loss']}" + (f" ({100 * s['trace_loss_share']:.0f} % of the connections with the capture's own "
                      f"losses, the rest at random)" if s["loss"] == "trace" else ""), highlight=False)
        console.print(f"response time within ±20 %: {100 * s['within_20pct']:.1f} % (±10 %: {100 * s['within_10pct']:.1f} %), "
                      f"median error {100 * s['median_abs_error']:.1f} %")
        console.print(rp.ks_reading(s))
        for line in category_lines(s["categories"]):
            console.print(line, highlight=False, markup=False)
        console.print(halves_line(s["halves"]), highlight=False, markup=False, soft_wrap=True)
        console.print(f"wrote {out}/connections.parquet, {out}/summary.json, {', '.join(p.name for p in plots)}, "
                      f"capture {result.run.capture}")
        if s["interrupted"]:
            console.print(f"interrupted: compared the {s['replayed']:,} connections that had finished; the database "
                          f"in {out}/db replays the whole workload again", soft_wrap=True)
            raise KeyboardInterrupt
