"""NSDI'09 ("Modeling and Emulation of Internet Paths") reproductions, from the example
topologies shipped in the package (``pathtwin/examples/``, found with ``importlib.resources``).

``nsdi09-table2``: every row of NSDI'09 Table 2 in path mode and in link mode, over several
seeds, printed in the paper's layout (configured ABW, achieved throughput, error %).
``nsdi09-figure5``: one forward flow on the Harvard–WUSTL path; mean RTT and its standard
deviation in both modes.
Both run in the simulator or, with the kernel's TCP and iperf3, in the emulator; both are
registered (``registry``) with the paper's numbers.
"""

from __future__ import annotations

import copy
import json
import shutil
import statistics
import subprocess
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ..config import native_call, parse_per_direction, parse_quantity
from ..errors import PathtwinError
from ..sim import simulate

from .registry import PaperValue, Progress, Reproduction, Request, register
from .text import print_table

if TYPE_CHECKING:
    from ..emulation import Emulation


def example_path(name: str) -> Path:
    """The example topology ``name`` shipped in the package (``pathtwin/examples/NAME.toml``,
    there in an installed wheel too)."""
    path = resources.files("pathtwin") / "examples" / f"{name}.toml"
    if not path.is_file():
        raise PathtwinError(f"example {name!r} not found at {path}")
    return Path(str(path))


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
        achieved = self.ip_achieved if ip else self.achieved
        assert achieved is not None, "no IP-level rates were measured"
        a = achieved[mode][direction]
        return abs(a - self.abw[direction]) / self.abw[direction] * 100.0


def table2(engine: str = "sim", seeds: int = 5, duration: str | None = None, out: Path | None = None,
           progress=None) -> list[Table2Row]:
    """Runs Table 2 in path and link mode; returns one row per path."""
    if engine != "sim":
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
        fwd, rev = parse_per_direction("rate", p["abw"], f"path[{i}].abw")
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
    from rich.table import Table

    ip = all(r.ip_achieved for r in rows)
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
                assert r.ip_achieved is not None  # `ip`: every row has them
                b = r.ip_achieved[mode]
                cells += [f"{b[0]/1e3:,.0f} / {b[1]/1e3:,.0f}", f"{r.error(mode, 0, ip=True):.1f} / {r.error(mode, 1, ip=True):.1f}"]
            t.add_row(*cells, end_section=not first)
    console = print_table(t, console)
    worst = max(max(r.error("path", 0), r.error("path", 1)) for r in rows)
    line = f"path mode: worst goodput error {worst:.1f} % (paper: within ~10 %)"
    if ip:
        line += f", worst IP-level error {max(max(r.error('path', 0, True), r.error('path', 1, True)) for r in rows):.1f} %"
    console.print(line + f"; link mode: worst forward error {max(r.error('link', 0) for r in rows):.1f} % (paper: up to 66 %)")


#: The paper's mean RTTs of Figure 5's 30-second flow (ms): link emulation and path emulation.
FIGURE5_LINK_RTT_MS = 629.0
FIGURE5_PATH_RTT_MS = 53.2
#: The RTT's standard deviation (ms) inside the path emulator and on the real path (§4.2).
FIGURE5_PATH_RTT_STD_MS = 3.0
FIGURE5_REAL_RTT_STD_MS = 5.1
#: How often the flow's RTT is sampled for its standard deviation, in both engines (s): the
#: smoothed RTT (the simulator's ``srtt_ms``, the kernel's ``tcpi_rtt`` as iperf3 reports
#: it per interval); neither engine keeps each ACK's RTT sample (the kernel exposes none).
FIGURE5_RTT_SAMPLE_S = 0.1


@dataclass
class Figure5:
    mean_rtt_ms: dict     # mode -> mean RTT
    goodput_bps: dict     # mode -> forward goodput
    base_rtt_ms: float
    # mode -> standard deviation of the smoothed RTT sampled every FIGURE5_RTT_SAMPLE_S
    rtt_std_ms: dict
    # Emulated: mode -> the emulator's release lateness over the run ({"p99_ms", "max_ms"}),
    # so that an RTT off its mark tells the machine's delay (late releases) from the model's.
    release_lateness_ms: Optional[dict] = None


def figure5(seed: int = 1, out: Path | None = None, duration: str | None = None) -> Figure5:
    base = load_example("nsdi09-figure5")
    base["run"]["seed"] = seed
    base["run"]["sample_interval"] = f"{FIGURE5_RTT_SAMPLE_S * 1e3:g}ms"
    if duration:
        parse_quantity("time", duration, "--duration")  # named after the option in errors
        base["run"]["duration"] = duration
    rtts, goodputs, stds = {}, {}, {}
    for mode in ("path", "link"):
        res = simulate(with_mode(base, mode), out=(Path(out) / mode) if out else None)
        f = res.flows.iloc[0]
        rtts[mode] = float(f.rtt_mean_ms)
        goodputs[mode] = float(f.goodput_bps)
        stds[mode] = float(res.flow_series.srtt_ms.std())
    return Figure5(rtts, goodputs, parse_quantity("time", base["path"][0]["rtt"], "path[0].rtt") * 1e3, stds)


# -- the same with the kernel's TCP, in the emulator ---------------------------------------

def _iperf_pair(net: Emulation, a: str, b: str, seconds: float, window: Optional[str], port: int = 5201):
    """Starts iperf3 flows a->b and b->a at once; returns the clients' Popen objects."""
    for h in (a, b):
        net[h].serve(["iperf3", "-s", "-1", "-p", str(port)], port)
    extra = ["-w", window] if window else []
    return [net[src].popen(["iperf3", "-c", dst, "-p", str(port), "-t", f"{seconds:g}", "-J", *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for src, dst in ((a, b), (b, a))]


def iperf_result(p: subprocess.Popen, what: str) -> dict:
    """iperf3 client ``p``'s JSON report once it ends; a failure is a one-line error naming
    ``what`` (also used by ``nsdi09_queues``)."""
    out, err = p.communicate()
    try:
        d = json.loads(out)
    except json.JSONDecodeError:
        raise PathtwinError(f"iperf3 {what} failed: {(err or out).strip().splitlines()[-1:] or 'no output'}") from None
    if "error" in d:
        raise PathtwinError(f"iperf3 {what}: {d['error']}")
    return d


def _iperf_ip_rate(flows, src: str, dst: str, port: int = 5201) -> float:
    """IP-level rate (bit/s) of all foreground traffic the emulated path delivered from host
    ``src`` to ``dst`` during the iperf3 test from ``src``: its data and control packets and
    the ACKs of the test running the other way, which share the direction's ABW; headers and
    retransmissions included. Timed over the data connection (the TCP flow to ``port`` with
    the most bytes), first packet to last. ``flows`` is the emulation's ``packet_flows``."""
    route = flows[(flows.route_src == src) & (flows.route_dst == dst)]
    data = route[(route.proto == 6) & (route.dst_port == port)]
    if data.empty:
        raise PathtwinError(f"no iperf3 traffic from {src} to {dst} crossed the emulator")
    d = data.loc[data.bytes_out.idxmax()]
    span = (d.last_ns - d.first_ns) * 1e-9
    return float(route.bytes_out.sum()) * 8 / span if span > 0 else 0.0


def reproduce_table2_emu(seeds: int = 1, duration=None, out=None, progress=None, rows: Optional[Sequence[int]] = None,
                         modes: Sequence[str] = ("link", "path"), cc: str = "cubic", offload: bool = True):
    """NSDI'09 Table 2 with the kernel's TCP: for each row, iperf3 flows in both directions at
    once, all rows side by side in one emulation, once per mode (and seed, for symmetry with
    the simulator; the kernel's TCP is the randomness here). ``rows`` picks rows (1-based).

    The paper's hosts had w_max = 64 KB; iperf3's ``-w`` sets the socket buffers so that the
    kernel's window is capped the same way (``[tcp] max_window`` of the example). The hosts
    run the kernel's ``cc`` (CUBIC, the usual Linux default, unless asked otherwise), not the
    example's NewReno, which is the simulator's choice. ``offload`` as in ``Emulation``.
    """
    from ..emulation import Emulation, require_root

    require_root()
    if shutil.which("iperf3") is None:
        raise PathtwinError("the emulated Table 2 needs iperf3 (apt-get install iperf3)")
    base = load_example("nsdi09-table2")
    if duration:
        seconds = parse_quantity("time", str(duration), "--duration")
    else:
        seconds = parse_quantity("time", base["run"]["duration"], "run.duration")  # the paper's 60 s
    if seconds <= 1.0:
        raise PathtwinError(f"duration {duration}: must be longer than 1 s")
    wmax = base.get("tcp", {}).get("max_window")
    window = str(int(parse_quantity("size", wmax, "tcp.max_window"))) if wmax else None
    kinds = ["measured"] * 4 + ["synthetic"] * 3
    picked = list(rows) if rows else list(range(1, len(base["path"]) + 1))
    for r in picked:
        if not 1 <= r <= len(base["path"]):
            raise PathtwinError(f"row {r}: Table 2 has rows 1-{len(base['path'])}")
    cfg0 = dict(base)
    cfg0["path"] = [base["path"][r - 1] for r in picked]
    cfg0["hosts"] = [h for p in cfg0["path"] for h in p["between"]]
    cfg0.pop("flow", None)
    sums: dict = {}
    ip_sums: dict = {}
    queues: dict = {}
    for mode in modes:
        for seed in range(1, seeds + 1):
            cfg = with_mode(cfg0, mode)
            cfg.setdefault("run", {})["seed"] = seed
            target = Path(out) / f"emu-{mode}-seed{seed}" if out else None
            with Emulation(cfg, out=target, cc=cc, offload=offload) as net:
                clients = []
                for k, p in enumerate(cfg["path"]):
                    a, b = p["between"]
                    clients.append(_iperf_pair(net, a, b, seconds, window, port=5201))
                got = [[iperf_result(c, f"row {picked[k]}")["end"]["sum_received"]["bits_per_second"] for c in pair]
                       for k, pair in enumerate(clients)]
            results = net.results
            assert results is not None  # the emulation has stopped
            resolved = results["run"]["resolved_paths"]
            flows = net.table("packet_flows")
            for k, p in enumerate(cfg["path"]):
                a, b = p["between"]
                s = sums.setdefault((k, mode), [0.0, 0.0])
                s[0] += got[k][0]
                s[1] += got[k][1]
                ip = ip_sums.setdefault((k, mode), [0.0, 0.0])
                ip[0] += _iperf_ip_rate(flows, a, b)
                ip[1] += _iperf_ip_rate(flows, b, a)
                queues[(k, mode)] = "/".join(r["queue"] for r in resolved if r["path"] == k)
            if progress:
                progress(mode, seed)
    out_rows = []
    for k, r in enumerate(picked):
        p = cfg0["path"][k]
        abw = parse_per_direction("rate", p["abw"], "path.abw")
        achieved = {m: (sums[(k, m)][0] / seeds, sums[(k, m)][1] / seeds) for m in modes}
        ip_achieved = {m: (ip_sums[(k, m)][0] / seeds, ip_sums[(k, m)][1] / seeds) for m in modes}
        out_rows.append(Table2Row(r, kinds[r - 1] if r - 1 < len(kinds) else "", abw,
                                  parse_quantity("time", p["rtt"], "path.rtt") * 1e3, {m: queues[(k, m)] for m in modes}, achieved,
                                  ip_achieved))
    return out_rows


def reproduce_figure5_emu(duration: float = 30.0, out=None):
    """NSDI'09 Figure 5 with the kernel's TCP: one forward iperf3 flow on the Harvard–WUSTL
    path for ``duration`` seconds in each mode; returns a ``Figure5`` with the mean
    RTT per mode from the sender's TCP_INFO (as iperf3 reports it), the standard deviation of
    that smoothed RTT over iperf3's 100-ms intervals, and the goodputs."""
    from ..emulation import Emulation, require_root

    require_root()
    base = load_example("nsdi09-figure5")
    base.pop("flow", None)
    a, b = base["path"][0]["between"]
    wmax = base.get("tcp", {}).get("max_window")
    extra = ["-w", str(int(parse_quantity("size", wmax, "tcp.max_window")))] if wmax else []
    rtt, goodput, lateness, std = {}, {}, {}, {}
    for mode in ("path", "link"):
        cfg = with_mode(base, mode)
        with Emulation(cfg, out=Path(out) / f"emu-{mode}" if out else None) as net:
            net[b].serve(["iperf3", "-s", "-1"], 5201)
            c = net[a].popen(["iperf3", "-c", b, "-t", f"{duration:g}", "-i", f"{FIGURE5_RTT_SAMPLE_S:g}", "-J", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            d = iperf_result(c, f"{mode} mode")
            late = net.lateness_window()["release"]
        rtt[mode] = d["end"]["streams"][0]["sender"]["mean_rtt"] / 1e3
        samples = [i["streams"][0]["rtt"] / 1e3 for i in d["intervals"] if "rtt" in i["streams"][0]]
        std[mode] = statistics.stdev(samples) if len(samples) > 1 else float("nan")
        goodput[mode] = d["end"]["sum_received"]["bits_per_second"]
        lateness[mode] = {"p99_ms": late["p99_ns"] / 1e6, "max_ms": late["max_ns"] / 1e6}
    return Figure5(rtt, goodput, parse_quantity("time", base["path"][0]["rtt"], "path[0].rtt") * 1e3, std, lateness)


# -- the registry's records ----------------------------------------------------------------

#: Table 2's ABW errors (%) per row, as the paper measured them with iperf: mode -> (forward,
#: reverse). Rows 1-4 are measured paths, 5-7 synthetic.
TABLE2_ERRORS = {
    1: {"link": (8.0, 7.2), "path": (2.1, 1.8)},
    2: {"link": (31.7, 8.4), "path": (5.8, 4.6)},
    3: {"link": (50.6, 8.5), "path": (4.1, 5.0)},
    4: {"link": (20.4, 12.5), "path": (10.2, 9.1)},
    5: {"link": (22.0, 22.4), "path": (6.3, 7.2)},
    6: {"link": (21.5, 21.6), "path": (6.5, 6.6)},
    7: {"link": (66.5, 9.8), "path": (8.5, 10.3)},
}


def _run_table2(request: Request, progress: Progress | None) -> list[Table2Row]:
    """``table2`` as ``request`` asks, saying when each mode and seed is done."""
    assert request.seeds is not None  # the record's default fills it

    def done(mode: str, seed: int) -> None:
        if progress is not None:
            progress(f"  {mode} mode, seed {seed} done")

    return table2(engine=request.engine, seeds=request.seeds, duration=request.duration, out=request.out,
                  progress=done if progress is not None else None)


def _print_table2(rows: list[Table2Row], request: Request) -> None:
    seeds = request.seeds or 0
    print_table2(rows, title=f"NSDI'09 Table 2 ({'simulation' if request.engine == 'sim' else 'emulation'}, "
                             f"{seeds} seed{'s' if seeds > 1 else ''})")


def _table2_json(rows: list[Table2Row]) -> list[dict]:
    modes = ("link", "path")
    return [{"row": r.index, "abw": r.abw, "rtt_ms": r.rtt_ms, "queue": r.queue,
             "achieved": r.achieved, "error": {m: [r.error(m, 0), r.error(m, 1)] for m in modes},
             **({"ip_achieved": r.ip_achieved,
                 "ip_error": {m: [r.error(m, 0, True), r.error(m, 1, True)] for m in modes}}
                if r.ip_achieved else {})} for r in rows]


def _table2_ours(rows: list[Table2Row]) -> dict[str, float]:
    """Our goodput error for each of the paper's Table 2 cells (``paper``'s quantities)."""
    return {f"ABW error, row {r.index}, {mode} mode, {way}": r.error(mode, d)
            for r in rows for mode in r.achieved for d, way in enumerate(("forward", "reverse"))}


def _run_figure5(request: Request, progress: Progress | None) -> Figure5:
    """``figure5``, or ``reproduce_figure5_emu`` in the emulator, as ``request`` asks."""
    if request.engine == "emu":
        return reproduce_figure5_emu(out=request.out, **({"duration": parse_quantity("time", request.duration, "--duration")}
                                                          if request.duration else {}))
    return figure5(out=request.out, duration=request.duration)


def _print_figure5(f5: Figure5, request: Request) -> None:
    print(f"NSDI'09 Figure 5 ({request.engine}): base RTT {f5.base_rtt_ms:g} ms")
    for m in ("path", "link"):
        print(f"  {m:4} mode: mean RTT {f5.mean_rtt_ms[m]:8.1f} ms, std dev {f5.rtt_std_ms[m]:6.1f} ms, "
              f"goodput {f5.goodput_bps[m]/1e3:7.1f} kbit/s")
    print(f"  link/path RTT ratio: {f5.mean_rtt_ms['link']/f5.mean_rtt_ms['path']:.1f}x "
          f"(paper: {FIGURE5_LINK_RTT_MS:g} ms vs {FIGURE5_PATH_RTT_MS:g} ms)")
    print(f"  path-mode RTT std dev: {f5.rtt_std_ms['path']:.1f} ms (paper: {FIGURE5_PATH_RTT_STD_MS:g} ms in the path "
          f"emulator, {FIGURE5_REAL_RTT_STD_MS:g} ms on the real path; ours is of the smoothed RTT every "
          f"{FIGURE5_RTT_SAMPLE_S * 1e3:g} ms)")


register(Reproduction(
    name="nsdi09-table2",
    description="NSDI'09 Table 2: two-way TCP throughput on seven paths, path emulation against a link emulator",
    engines=("sim", "emu"),
    options=("seeds", "duration"),
    defaults={"seeds": 5},
    paper=tuple(PaperValue(f"ABW error, row {row}, {mode} mode, {way}", errors[mode][d], "%", "NSDI'09 §4.1, Table 2")
                for row, errors in TABLE2_ERRORS.items() for mode in ("link", "path")
                for d, way in enumerate(("forward", "reverse"))),
    runner=_run_table2,
    print_text=_print_table2,
    to_json=_table2_json,
    ours=_table2_ours,
    # The cells are errors in percent: judged in percentage points. Five points is the
    # spread of the paper's own path-mode errors (1.8-10.3 %).
    tolerance_abs=5.0,
))

register(Reproduction(
    name="nsdi09-figure5",
    description="NSDI'09 Figure 5: one flow's RTT on the Harvard-WUSTL path, path mode against link mode",
    engines=("sim", "emu"),
    options=("duration",),
    paper=(
        PaperValue("mean RTT, link emulation", FIGURE5_LINK_RTT_MS, "ms", "NSDI'09 §4.2, Figure 5(b)"),
        PaperValue("mean RTT, path emulation", FIGURE5_PATH_RTT_MS, "ms", "NSDI'09 §4.2, Figure 5(c)"),
        PaperValue("RTT standard deviation, path emulation", FIGURE5_PATH_RTT_STD_MS, "ms", "NSDI'09 §4.2, Figure 5(c)"),
    ),
    runner=_run_figure5,
    print_text=_print_figure5,
    to_json=vars,
    ours=lambda f5: {"mean RTT, link emulation": f5.mean_rtt_ms["link"], "mean RTT, path emulation": f5.mean_rtt_ms["path"],
                     "RTT standard deviation, path emulation": f5.rtt_std_ms["path"]},
))
