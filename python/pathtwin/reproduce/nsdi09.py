"""NSDI'09 ("Modeling and Emulation of Internet Paths") reproductions, from the topologies in
``examples/``.

``nsdi09-table2``: every row of NSDI'09 Table 2 in path mode and in link mode, over several
seeds, printed in the paper's layout (configured ABW, achieved throughput, error %).
``nsdi09-figure5``: one forward flow on the Harvard–WUSTL path; mean RTT in both modes.
"""

from __future__ import annotations

import copy
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..config import native_call, parse_quantity
from ..errors import PathtwinError
from ..sim import simulate

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def example_path(name: str) -> Path:
    path = EXAMPLES / f"{name}.toml"
    if not path.is_file():
        raise PathtwinError(f"example {name!r} not found at {path}")
    return path


def load_example(name: str) -> dict:
    """The example as a dict, validated by the Rust schema first (errors keep line numbers)."""
    from .. import _native

    path = example_path(name)
    text = path.read_text()
    native_call(_native.validate_config, text, "toml", str(path))
    return tomllib.loads(text)


def with_mode(cfg: dict, mode: str) -> dict:
    out = copy.deepcopy(cfg)
    for p in out.get("path", []):
        p["mode"] = mode
        if mode == "link":
            p.pop("capacity", None)
    return out


@dataclass
class Table2Row:
    index: int
    kind: str
    abw: tuple[float, float]
    rtt_ms: float
    queue: dict           # mode -> "q_f/q_r" as configured
    achieved: dict        # mode -> (forward_bps, reverse_bps) of goodput, mean over seeds
    # mode -> (forward_bps, reverse_bps) of IP datagrams the path carried in each direction
    # for the foreground traffic (data, ACKs of the opposite flow, headers, retransmissions:
    # everything the configured ABW limits), when measured.
    ip_achieved: Optional[dict] = None

    def error(self, mode: str, direction: int, ip: bool = False) -> float:
        """Percent error of the achieved rate against the configured ABW: goodput, as the
        paper measured with iperf (so a TCP/IP header share of ~3.5 % counts as error), or
        with ``ip`` the IP-level rate."""
        a = (self.ip_achieved if ip else self.achieved)[mode][direction]
        return abs(a - self.abw[direction]) / self.abw[direction] * 100.0


def table2(engine: str = "sim", seeds: int = 5, duration: str | None = None, out: Path | None = None,
           progress=None) -> list[Table2Row]:
    """Runs Table 2 in path and link mode; returns one row per path."""
    if engine != "sim":
        from ..emulation import reproduce_table2_emu  # the emulator's implementation

        return reproduce_table2_emu(seeds=seeds, duration=duration, out=out, progress=progress)
    base = load_example("nsdi09-table2")
    if duration:
        parse_quantity("time", duration, "--duration")  # named after the option in errors
        base.setdefault("run", {})["duration"] = duration
    kinds = ["measured"] * 4 + ["synthetic"] * 3
    sums: dict = {}
    queues: dict = {}
    for mode in ("link", "path"):
        for seed in range(1, seeds + 1):
            cfg = with_mode(base, mode)
            cfg["run"]["seed"] = seed
            res = simulate(cfg, out=(Path(out) / f"{mode}-seed{seed}") if out else None)
            flows = res.flows
            resolved = res.run["resolved_paths"]
            for i, p in enumerate(cfg["path"]):
                a, b = p["between"]
                fwd = flows[(flows.src == a) & (flows.dst == b)].goodput_bps.sum()
                rev = flows[(flows.src == b) & (flows.dst == a)].goodput_bps.sum()
                s = sums.setdefault((i, mode), [0.0, 0.0])
                s[0] += fwd
                s[1] += rev
                dirs = [r for r in resolved if r["path"] == i]
                queues[(i, mode)] = "/".join(_fmt_queue(r["queue"]) for r in dirs)
            if progress:
                progress(mode, seed)
    rows = []
    for i, p in enumerate(base["path"]):
        abw = p["abw"]
        f, r = (abw.split("/") + [abw])[:2] if isinstance(abw, str) else abw
        fwd = parse_quantity("rate", f, f"path[{i}].abw")
        rev = parse_quantity("rate", r, f"path[{i}].abw")
        rtt = parse_quantity("time", p["rtt"], f"path[{i}].rtt") * 1e3
        achieved = {m: (sums[(i, m)][0] / seeds, sums[(i, m)][1] / seeds) for m in ("link", "path")}
        rows.append(Table2Row(i + 1, kinds[i] if i < len(kinds) else "", (fwd, rev), rtt,
                              {m: queues[(i, m)] for m in ("link", "path")}, achieved))
    return rows


def _fmt_queue(q: str) -> str:
    """ "140175B" -> "140,175"; packet counts keep their unit."""
    return f"{int(q[:-1]):,}" if q.endswith("B") and q[:-1].isdigit() else q


def print_table2(rows: list[Table2Row], console=None, title="NSDI'09 Table 2 (simulation)") -> None:
    """Prints rows in the paper's layout: per row the configured ABW and base RTT, then for
    each emulator the queue, achieved throughput and error in both directions."""
    from rich.console import Console
    from rich.table import Table

    ip = all(r.ip_achieved for r in rows)
    console = console or Console(width=max(Console().width, 132 + 44 * ip))
    t = Table(title=title)
    cols = ["Row", "Type", "ABW fwd/rev (Kbps)", "Base RTT (ms)", "Emulator", "Queue (B)",
            "Tput fwd/rev (Kbps)", "Error fwd/rev (%)"]
    if ip:
        cols += ["IP tput fwd/rev (Kbps)", "IP error fwd/rev (%)"]
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for r in rows:
        for mode in ("link", "path"):
            a = r.achieved[mode]
            first = mode == "link"
            cells = [
                str(r.index) if first else "", r.kind if first else "",
                f"{r.abw[0]/1e3:,.0f} / {r.abw[1]/1e3:,.0f}" if first else "",
                f"{r.rtt_ms:g}" if first else "", mode, r.queue[mode],
                f"{a[0]/1e3:,.0f} / {a[1]/1e3:,.0f}", f"{r.error(mode, 0):.1f} / {r.error(mode, 1):.1f}",
            ]
            if ip:
                b = r.ip_achieved[mode]
                cells += [f"{b[0]/1e3:,.0f} / {b[1]/1e3:,.0f}", f"{r.error(mode, 0, ip=True):.1f} / {r.error(mode, 1, ip=True):.1f}"]
            t.add_row(*cells, end_section=not first)
    console.print(t)
    worst = max(max(r.error("path", 0), r.error("path", 1)) for r in rows)
    line = f"path mode: worst goodput error {worst:.1f} % (paper: within ~10 %)"
    if ip:
        line += f", worst IP-level error {max(max(r.error('path', 0, True), r.error('path', 1, True)) for r in rows):.1f} %"
    console.print(line + f"; link mode: worst forward error {max(r.error('link', 0) for r in rows):.1f} % (paper: up to 66 %)")


@dataclass
class Figure5:
    mean_rtt_ms: dict     # mode -> mean RTT
    goodput_bps: dict     # mode -> forward goodput
    base_rtt_ms: float


def figure5(seed: int = 1, out: Path | None = None, duration: str | None = None) -> Figure5:
    base = load_example("nsdi09-figure5")
    base["run"]["seed"] = seed
    if duration:
        parse_quantity("time", duration, "--duration")  # named after the option in errors
        base["run"]["duration"] = duration
    rtts, goodputs = {}, {}
    for mode in ("path", "link"):
        res = simulate(with_mode(base, mode), out=(Path(out) / mode) if out else None)
        f = res.flows.iloc[0]
        rtts[mode] = float(f.rtt_mean_ms)
        goodputs[mode] = float(f.goodput_bps)
    return Figure5(rtts, goodputs, parse_quantity("time", base["path"][0]["rtt"], "path[0].rtt") * 1e3)
