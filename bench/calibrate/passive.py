"""Passive calibration, closed loop (issue #25): a capture of a transfer over a known path
becomes a model (`trace to-paths`, with and without the cross traffic over time), the same
transfer runs again over the model, and its throughput and RTT are compared with the
capture's truth: median error of the per-second goodput, Kolmogorov–Smirnov distance of the
per-second goodput samples, the response's completion time, and the server's mean and
largest RTT as the two captures' analyses give them.

The ground truth is a path whose cross traffic steps over time, as iBox's traces show it,
in either engine (``--engine``): simulated (``sim``, the default), so that the loop runs in
seconds and its truth is exact; or emulated (``emu``, root), the transfer then kernel TCP
and the capture tcpdump's on the server's device. Either way the capture is the server's,
as a server operator would record it, and the model runs in the same engine as the truth.

    python bench/calibrate/passive.py [--engine sim|emu] [--out DIR] [--keep DIR]

The truths have no random loss, so a simulated run is deterministic: one seed says it all.
An emulated one is real time on a shared machine: run it more than once to see its spread.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import pathtwin
from pathtwin import trace
from pathtwin.config import parse_per_direction, parse_quantity

#: (name, ABW steps of the server→client direction as (from s, Mbit/s), capacity Mbit/s,
#: RTT ms, response bytes)
CASES = [
    ("steps 12/4/9", [(0, 12), (3, 4), (6, 9)], 20, 40, "8MB"),
    ("steps 6/15/3/10", [(0, 6), (2, 15), (5, 3), (8, 10)], 20, 60, "10MB"),
    ("constant 5", [(0, 5)], 20, 40, "4MB"),
]


#: The engines' TCP: the kernel's. The emulator runs it with its own defaults, its
#: congestion control named by `emulate(cc=...)`; the simulator its "linux" profile (the
#: kernel's defaults: window scaling, an autotuned window up to 32 MiB, SACK, RACK) with
#: cubic, so that both captures carry what the analysis reads the same way (before, the
#: simulator ran ns-2's TCP, whose SYNs carry no window scaling: its captures clamped every
#: window to 65 535 bytes, and the analysis took the transfers for window-limited).
TCP = {"sim": {"profile": "linux", "cc": "cubic"}, "emu": {"profile": "linux"}}
CC = "cubic"
#: When the transfer starts (s); the truth's ABW steps are said from the transfer's start
#: (`CASES`), as `to_paths` writes the model's (from the capture's first connection). It
#: started at 1 s while the emulator started its workload before tcpdump had opened the
#: server's device and a transfer from 0 s lost its handshake from the capture (the emulator
#: now holds its packets until the captures run); the measured numbers are with this start.
START = 1.0


def truth_config(steps, capacity, rtt, response, seed, engine: str = "sim") -> dict:
    path = {"between": ["server", "client"], "rtt": f"{rtt}ms", "capacity": f"{capacity}mbit",
            "abw": f"{steps[0][1]}mbit", "queue": "150KB", "enforce_bounds": False}
    if len(steps) > 1:
        path["abw_steps"] = {"a_to_b": [[f"{START + t}s", f"{r}mbit"] for t, r in steps[1:]]}
    return {"hosts": ["server", "client"], "run": {"duration": "30s", "seed": seed, "pcap": ["server"], "until_done": True},
            "tcp": dict(TCP[engine]), "path": [path],
            "flow": [{"from": "client", "to": "server", "app": "reqresp", "request": "300B", "response": response,
                      "requests": 1, "start": f"{START}s"}]}


def model_config(topo: dict, truth: dict, seed: int) -> dict:
    """The inferred paths with the truth's workload and run settings (captured at the server
    as the truth was); the ABW steps, said from the captured connection's start, moved to
    the transfer's."""
    paths = [dict(p, between=["server", "client"]) for p in topo["path"]]
    for p in paths:
        if "abw_steps" in p:
            p["abw_steps"] = {d: [[f"{START + parse_quantity('time', t, 'abw_steps'):.3f}s", r] for t, r in steps]
                              for d, steps in p["abw_steps"].items()}
    cfg = {"hosts": ["server", "client"], "run": {**truth["run"], "seed": seed + 1000}, "tcp": truth["tcp"],
           "path": paths, "flow": truth["flow"]}
    return cfg


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov–Smirnov distance: the largest gap between the empirical CDFs."""
    a, b = np.sort(a), np.sort(b)
    x = np.concatenate([a, b])
    return float(np.max(np.abs(np.searchsorted(a, x, side="right") / len(a) - np.searchsorted(b, x, side="right") / len(b))))


def run(engine: str, cfg: dict, out: Path):
    """Runs ``cfg``'s workload in ``engine``, its capture in ``out/pcap/server.pcap`` either
    way (the simulator captures the hosts of ``[run] pcap``; the emulator runs tcpdump there)."""
    if engine == "sim":
        return pathtwin.simulate(cfg, out=out)
    return pathtwin.emulate(cfg, out=out, pcap=out / "pcap", pcap_hosts=cfg["run"]["pcap"], cc=CC)


def per_second(result) -> np.ndarray:
    """The transfer's goodput in each whole second it was under way, from the bytes
    delivered to both ends by each second's end: the simulator's `flow_series` has one row
    per connection counting both ends' reads; the emulator's one per sending socket (the
    client's, for the request, and the server's, labelled " (server)", for the response),
    each at its own sample times, so every label's total is interpolated at the whole
    seconds and the labels are summed."""
    s, flow = result.flow_series, result.flows.iloc[0]
    start = float(flow["start_s"])
    edges = start + np.arange(0.0, np.floor(float(flow["response_time_mean_s"])) + 1.0)
    total = sum(np.interp(edges, g["time_s"].to_numpy(), g["delivered_bytes"].to_numpy().astype(float), left=0.0)
                for _, g in s.groupby("label", observed=True))
    return np.diff(total) * 8.0


def server_rtt(capture: Path) -> tuple[float, float]:
    """The server's mean and largest RTT over the transfer, from the capture's analysis."""
    conns, _ = trace.analyze(capture)
    if not conns["handshake_complete"].iloc[0]:
        raise RuntimeError(f"{capture}: the capture missed the handshake")
    return float(conns["rtt_mean_ms"].iloc[0]), float(conns["rtt_max_ms"].iloc[0])


def compare(truth, model, truth_dir: Path, model_dir: Path) -> dict:
    gt, gm = per_second(truth), per_second(model)
    (mean_t, max_t), (mean_m, max_m) = (server_rtt(d / "pcap" / "server.pcap") for d in (truth_dir, model_dir))
    n = min(len(gt), len(gm))
    rt = float(truth.flows["response_time_mean_s"].iloc[0])
    rm = float(model.flows["response_time_mean_s"].iloc[0])
    return {"goodput_median_error": float(np.median(np.abs(gm[:n] - gt[:n]) / gt[:n])),
            "goodput_ks": ks(gt, gm), "completion_error": (rm - rt) / rt,
            "rtt_mean_error": (mean_m - mean_t) / mean_t, "rtt_max_error": (max_m - max_t) / max_t}


def abw_at(path: dict, t: float) -> float:
    """The server→client ABW (bit/s) a model's path gives ``t`` s into the transfer (as
    `to_paths` writes it, from the captured connection's start): its constant ABW, or its
    last `[path.abw_steps]` step at or before ``t``."""
    abw = parse_per_direction("rate", path["abw"], "path.abw")[0]
    for at, rate in path.get("abw_steps", {}).get("a_to_b", []):
        if parse_quantity("time", at, "abw_steps") <= t:
            abw = parse_quantity("rate", rate, "abw_steps")
    return abw


def run_case(name, steps, capacity, rtt, response, seed, work: Path, engine: str = "sim") -> dict:
    truth_cfg = truth_config(steps, capacity, rtt, response, seed, engine)
    truth = run(engine, truth_cfg, work / "truth")
    conns, bins, _ = trace.cross_traffic(work / "truth" / "pcap" / "server.pcap")
    row: dict = {"case": name, "seed": seed, "engine": engine}
    for label, profile in (("profile", bins), ("constant", None)):
        topo = trace.to_paths(conns, server_name="server", cross_traffic=profile)
        topo["path"][0]["between"] = ["server", "client"]
        model = run(engine, model_config(topo, truth_cfg, seed), work / label)
        row[label] = compare(truth, model, work / "truth", work / label)
        row[label]["steps"] = len(topo["path"][0].get("abw_steps", {}).get("a_to_b", []))
        row[label]["path"] = topo["path"][0]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("sim", "emu"), default="sim",
                    help="the engine of the truth and its models (emu: kernel TCP, needs root)")
    ap.add_argument("--out", type=Path, help="write passive.json here")
    ap.add_argument("--keep", type=Path, help="keep every run (results, captures) under this directory")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, steps, capacity, rtt, response in CASES:
            work = (args.keep or Path(tmp)) / f"{len(rows)}"
            rows.append(run_case(name, steps, capacity, rtt, response, 1, work, args.engine))
    print(f"{'case':18} {'model':8} {'steps':>5} {'goodput med err':>15} {'goodput KS':>10} {'completion':>10} "
          f"{'RTT mean':>9} {'RTT max':>8}")
    for r in rows:
        for label in ("profile", "constant"):
            m = r[label]
            print(f"{r['case']:18} {label:8} {m['steps']:>5} {100 * m['goodput_median_error']:>14.1f}% "
                  f"{m['goodput_ks']:>10.2f} {100 * m['completion_error']:>+9.1f}% {100 * m['rtt_mean_error']:>+8.1f}% "
                  f"{100 * m['rtt_max_error']:>+7.1f}%")
    for label in ("profile", "constant"):
        med = np.median([r[label]["goodput_median_error"] for r in rows])
        ksg = np.median([r[label]["goodput_ks"] for r in rows])
        comp = np.median([abs(r[label]["completion_error"]) for r in rows])
        print(f"median over runs, {label:8}: goodput error {100 * med:.1f} %, goodput KS {ksg:.2f}, |completion error| {100 * comp:.1f} %")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "passive.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
