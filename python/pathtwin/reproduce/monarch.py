"""An analog of Monarch's Figure 12 (``shared/papers/monarch-imc2006-sections4-5.txt`` §5):
NewReno, BIC and Vegas each transferring 500 kB from a well-connected sender to a DSL host,
with the congestion window and the RTT over the transfer in one figure.

The paper measured one real path (Germany → BTOpenWorld DSL) with Linux 2.6.16's
controllers through Monarch. Here the path is modelled: 44 ms base RTT (the paper's first RTT
sample), a 1 Mbit/s downstream and 256 kbit/s upstream DSL line (a 2006 BTOpenWorld product;
the paper does not give the rate) and a 40 KB downstream buffer, which lets the RTT climb
past 300 ms before a loss, as the paper's NewReno trace does. The simulator runs its NewReno,
its BIC with Linux 2.6's constants, and Vegas with Linux's α = 2, β = 4 (the paper's kernel).

In the emulator (``--engine emu``) the kernel's reno, cubic and bbr (what a current kernel
has) send the 500 kB as the paper measured them: through Monarch's proxy
(:func:`pathtwin.monarch.run`), each packet held while a probe of its size crosses the same
modelled path to the DSL host, whose answer releases it (engine ``emu-monarch``, with the
self-diagnosis's verdict; the target numbers its answers from one counter, as the paper's
hosts did). Beside each, the same controller sends straight over the path (``emu``): §4's
claim, that a Monarch flow behaves as real TCP, read off one path.

The paper's observations, which :func:`figure12` reports against: NewReno's RTT rises from
44 ms to well over 300 ms before it loses a packet; BIC ramps up faster after each loss, with
even higher delays and more losses; Vegas settles at about 100 ms without a single loss.
Registered as ``monarch-fig12`` (``registry``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..sim import simulate
from .registry import PaperValue, Progress, Reproduction, Request, register
from .text import print_table

#: The transfer of the paper's experiment.
TRANSFER = "500kB"
BASE_RTT_MS = 44.0
SAMPLE_INTERVAL_S = 0.02
SIM_CONTROLLERS = ("newreno", "bic", "vegas")
#: The kernel's controllers for the emulated half (what this machine's kernel offers).
EMU_CONTROLLERS = ("reno", "cubic", "bbr")


def config(cc: str, seed: int = 1) -> dict:
    """One 500 kB transfer over the modelled DSL path with controller ``cc``."""
    # Linux 2.6.16 recovered with SACK (and FACK) but had neither RACK nor tail loss probes
    # (Linux 4.18 / 4.10): without them, as the paper's kernel.
    tcp: dict = {"cc": cc, "max_window": "4MiB", "rcv_window": "4MiB", "rack": False, "tlp": False}
    if cc == "vegas":
        tcp["vegas"] = {"preset": "linux"}
    return {
        "name": f"monarch-fig12-{cc}",
        "hosts": ["server", "dsl"],
        "run": {"duration": "30s", "seed": seed, "sample_interval": f"{SAMPLE_INTERVAL_S * 1e3:g}ms"},
        "tcp": tcp,
        "path": [{"between": ["server", "dsl"], "rtt": f"{BASE_RTT_MS:g}ms", "abw": "1mbit/256kbit",
                  "queue": "40KB", "mode": "link"}],
        "flow": [{"from": "server", "to": "dsl", "bytes": TRANSFER, "label": cc}],
    }


@dataclass
class Transfer:
    cc: str
    #: "sim"; "emu", the kernel's TCP straight over the path; "emu-monarch", the kernel's TCP
    #: carried through Monarch's proxy by probes to the DSL host (the paper's measurement).
    engine: str
    completion_s: float
    received: int
    retransmits: int
    rtt_start_ms: float
    rtt_max_ms: float
    rtt_mean_ms: float
    series: Any               # the flow's time series (pandas DataFrame), time_s from its start
    #: Monarch's self-diagnosis of the flow (§4.3); "" where no proxy carried it.
    verdict: str = ""


def rtt_start_ms(series) -> float:
    """The flow's first RTT sample (its handshake's), as the paper's 44 ms reads Fig. 12."""
    rtt = series[series.srtt_ms > 0].srtt_ms
    return float(rtt.iloc[0]) if len(rtt) else float("nan")


def _transfer(cc: str, engine: str, completion_s: float, received: int, series, verdict: str = "") -> Transfer:
    """A transfer's row, its retransmissions and RTTs read from its own ``series``."""
    return Transfer(cc, engine, completion_s, received, int(series.retransmits.max()), rtt_start_ms(series),
                    float(series.srtt_ms.max()), float(series.srtt_ms.mean()), series, verdict)


def figure12(out: Optional[Path] = None, emulate: bool = False) -> list[Transfer]:
    """Runs the three simulated transfers (and with ``emulate`` the kernel's reno, cubic and
    bbr over the same path in the emulator, each straight and through Monarch's proxy); with
    ``out``, keeps each run and draws them all in one figure."""
    transfers = []
    for cc in SIM_CONTROLLERS:
        res = simulate(config(cc), out=Path(out) / cc if out else None)
        f = res.flows.iloc[0]
        fs = res.flow_series
        fs = fs[fs.time_s <= float(f.completion_s)] if f.completion_s == f.completion_s else fs
        transfers.append(_transfer(cc, "sim", float(f.completion_s), int(f.bytes_delivered), fs))
    if emulate:
        for cc in EMU_CONTROLLERS:
            transfers.append(_emulated(cc, Path(out) / f"emu-{cc}" if out else None))
            transfers.append(_through_monarch(cc, Path(out) / f"emu-monarch-{cc}" if out else None))
    if out is not None:
        draw(transfers, Path(out) / "figure12.png")
    return transfers


def _emulated(cc: str, out: Optional[Path]) -> Transfer:
    """One 500 kB transfer with the kernel's ``cc`` straight over the same path, its cwnd and
    RTT from the sender's TCP_INFO series."""
    from ..config import parse_quantity
    from ..emulation import Emulation, bulk_transfer, since_flow_start

    cfg = config(cc)
    cfg.pop("flow")
    cfg.pop("tcp")  # the kernel's defaults; the simulator-only recovery switches do not apply
    size = int(parse_quantity("size", TRANSFER, "transfer"))
    with Emulation(cfg, out=out, cc=cc) as net:
        t = bulk_transfer(net, "server", "dsl", size, 5300, timeout=120)
    fs = net.flow_series()
    data = since_flow_start(fs[(fs.src == "server") & (fs.dst_port == 5300)], SAMPLE_INTERVAL_S)
    return _transfer(cc, "emu", t["end"] - t["connected"], int(t["received"]), data)


def target_path(cfg: dict) -> dict:
    """The modelled DSL path as Monarch's target path (``monarch.topology``): down is towards
    the DSL host, the probes' way, as the config's first rate is towards its second host."""
    p = cfg["path"][0]
    down, up = p["abw"].split("/")
    return {"rtt": p["rtt"], "down": down, "up": up, "queue": p["queue"]}


def _through_monarch(cc: str, out: Optional[Path]) -> Transfer:
    """The same transfer as the paper measured it: the kernel's ``cc`` sender's packets held
    by Monarch's proxy, each sent as a probe of its size to the DSL host across the path,
    whose answer releases it to the receiver."""
    import tempfile

    from .. import monarch
    from ..config import parse_quantity

    size = int(parse_quantity("size", TRANSFER, "transfer"))
    with tempfile.TemporaryDirectory(prefix="monarch-fig12-") as tmp:
        # The IDs of one counter, as the paper's hosts had: the kernel's RSTs carry ID 0,
        # which leaves the self-diagnosis nothing to read.
        r = monarch.run(target_path(config(cc)), out if out is not None else Path(tmp), cc=cc, nbytes=size,
                        target_ip_ids="sequential", sample_interval=f"{SAMPLE_INTERVAL_S * 1e3:g}ms")
    s = r.summary
    return _transfer(cc, "emu-monarch", s["duration_s"], int(s["received"]), r.series, s["verdict"])


def draw(transfers: list[Transfer], path: Path) -> Path:
    """Figure 12's layout: one panel per transfer, RTT (ms) and cwnd (KB) over time; one
    column per engine, so that a controller straight over the path and through the proxy
    sit side by side."""
    from ..plot import _pyplot

    plt = _pyplot()
    engines = list(dict.fromkeys(t.engine for t in transfers))
    columns = [[t for t in transfers if t.engine == e] for e in engines]
    rows = max(len(c) for c in columns)
    fig, axes = plt.subplots(rows, len(columns), figsize=(7 * len(columns), 2.6 * rows), sharex=True, squeeze=False)
    for j, column in enumerate(columns):
        for i in range(rows):
            if i < len(column):
                _panel(axes[i][j], column[i])
            else:
                axes[i][j].set_visible(False)
        axes[len(column) - 1][j].set_xlabel("time (s)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _panel(ax, t: Transfer) -> None:
    s = t.series
    ax.plot(s.time_s, s.srtt_ms, color="tab:blue", lw=1, label="RTT (ms)")
    ax.set_ylabel("RTT (ms)", color="tab:blue")
    ax2 = ax.twinx()
    ax2.plot(s.time_s, s.cwnd_bytes / 1000, color="tab:red", lw=1, label="cwnd (KB)")
    ax2.set_ylabel("cwnd (KB)", color="tab:red")
    verdict = f", {t.verdict}" if t.verdict else ""
    ax.set_title(f"{t.cc} ({t.engine}): {t.retransmits} retransmissions, done in {t.completion_s:.1f} s{verdict}",
                 fontsize=10)


def print_figure12(transfers: list[Transfer], console=None) -> None:
    from rich.table import Table

    t = Table(title="Monarch Fig. 12 analog — 500 kB to a DSL host (paper: NewReno RTT 44 → >300 ms before a loss; "
                    "BIC higher RTTs and more losses; Vegas ≈ 100 ms, no loss); emu-monarch: through Monarch's proxy")
    for col in ("cc", "engine", "completion (s)", "retransmissions", "RTT start (ms)", "RTT mean (ms)", "RTT max (ms)",
                "self-diagnosis"):
        t.add_column(col, justify="right", no_wrap=True)
    for x in transfers:
        t.add_row(x.cc, x.engine, f"{x.completion_s:.2f}", str(x.retransmits), f"{x.rtt_start_ms:.0f}",
                  f"{x.rtt_mean_ms:.0f}", f"{x.rtt_max_ms:.0f}", x.verdict or "–")
    print_table(t, console)


# --- the registry's record -------------------------------------------------------------------

def _run(request: Request, progress: Progress | None) -> list[Transfer]:
    """``figure12``, with the kernel's controllers too in the emulator (straight and through
    Monarch's proxy)."""
    return figure12(out=request.out, emulate=request.engine == "emu")


def _print(transfers: list[Transfer], request: Request) -> None:
    print_figure12(transfers)
    if request.out is not None:
        print(f"figure: {Path(request.out) / 'figure12.png'}")


def _ours(transfers: list[Transfer]) -> dict[str, float | str]:
    """Our simulated transfers' numbers for the paper's observations (``paper``)."""
    sim = {t.cc: t for t in transfers if t.engine == "sim"}
    ours: dict[str, float | str] = {}
    if "newreno" in sim:
        s = sim["newreno"].series
        # The JSON's rtt_start_ms, by the same rule.
        ours["NewReno RTT at the start of the transfer"] = sim["newreno"].rtt_start_ms
        before = s[s.retransmits == 0].srtt_ms
        ours["NewReno RTT before its first loss"] = float(before.max()) if len(before) else float("nan")
        if "bic" in sim:
            b, n = sim["bic"], sim["newreno"]
            ours["BIC against NewReno"] = (f"RTT max {b.rtt_max_ms:.0f} vs {n.rtt_max_ms:.0f} ms, "
                                           f"{b.retransmits} vs {n.retransmits} retransmissions")
    if "vegas" in sim:
        ours["Vegas steady RTT"] = sim["vegas"].rtt_mean_ms
        ours["Vegas losses"] = sim["vegas"].retransmits
    return ours


register(Reproduction(
    name="monarch-fig12",
    description="Monarch Figure 12 analog: 500 kB to a DSL host with NewReno, BIC and Vegas (and the kernel's in the emulator, "
                "straight and through Monarch's proxy)",
    engines=("sim", "emu"),
    options=(),
    paper=(
        PaperValue("NewReno RTT at the start of the transfer", BASE_RTT_MS, "ms", "Monarch (IMC 2006) §5.1, Figure 12(a)"),
        PaperValue("NewReno RTT before its first loss", "well over 300", "ms", "Monarch (IMC 2006) §5.1, Figure 12(a)"),
        PaperValue("BIC against NewReno", "higher RTTs and more losses", "", "Monarch (IMC 2006) §5.1, Figure 12(b)"),
        PaperValue("Vegas steady RTT", "about 100", "ms", "Monarch (IMC 2006) §5.1, Figure 12(c)"),
        PaperValue("Vegas losses", 0, "packets", "Monarch (IMC 2006) §5.1, Figure 12(c)"),
    ),
    runner=_run,
    print_text=_print,
    to_json=lambda transfers: [{k: v for k, v in vars(t).items() if k != "series"} for t in transfers],
    ours=_ours,
))
