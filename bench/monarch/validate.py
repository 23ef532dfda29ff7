"""Monarch validated the paper's way (Haeberlen et al., IMC 2006, §4), on paths whose truth
the emulator knows.

For each emulated broadband-like path (rates, RTTs, and loss downstream, upstream, both or
neither; four more that reorder one way or the other), a Monarch transfer and a real TCP
transfer of the same size and controller run on the same path, each in an emulation of its
own with the same seed (tcp-ack probes, the paper's main kind; the target's IP IDs stamped
from one counter, as the paper's hosts had them — Linux's own carry none on RSTs and jump
after every pause). Per pair: throughput, minimum and maximum RTT, queueing
delay (max - min smoothed RTT) and retransmission rate (Figs. 7-10), with the share of pairs
within 10 % and 20 %; the self-diagnosis against the losses the path really made on each
side (Fig. 11: upstream and downstream losses classified right; flows with upstream loss
flagged Inaccurate), the reordering it saw on each side; every probe type against the Linux target with its default ICMP rate
limits. The proxy's own cost per packet is `proxy_cost.py`'s.

    sudo python bench/monarch/validate.py --bytes 500000 --out bench/out/monarch
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import pandas as pd

from pathtwin import monarch, trace

#: (down, up, RTT) of broadband-like paths: DSL and cable tiers of the paper's traces.
PROFILES = [("1mbit", "256kbit", "30ms"), ("2mbit", "512kbit", "150ms"), ("4mbit", "1mbit", "60ms"),
            ("8mbit", "800kbit", "40ms"), ("10mbit", "1mbit", "20ms"), ("20mbit", "2mbit", "100ms")]
#: Where the loss is (downstream, upstream).
LOSSES = {"none": (0.0, 0.0), "down 1%": (0.01, 0.0), "up 1%": (0.0, 0.01), "both 1%": (0.01, 0.01)}


def within(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= tol * abs(b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=500_000)
    ap.add_argument("--cc", default="cubic")
    ap.add_argument("--probe", default="tcp-ack")
    ap.add_argument("--out", type=Path, default=Path("bench/out/monarch"))
    ap.add_argument("--paths", type=int, default=None, help="run only the first N paths")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    cases = [(p, loss, {}) for p, loss in itertools.product(PROFILES, LOSSES.items())]
    # Reordering one way or the other (2 % of packets held 5 ms) on two profiles.
    cases += [(PROFILES[i], (f"reorder {side}", (0.0, 0.0)), {f"reorder_{side}": 0.02}) for i in (2, 4) for side in ("down", "up")]
    for i, ((down, up, rtt), (loss_name, (ld, lu)), extra) in enumerate(cases[: a.paths]):
        path = {"rtt": rtt, "down": down, "up": up, "loss_down": ld, "loss_up": lu, **extra}
        # Linux's own IP IDs (zero on RSTs, a random step after every pause) leave the
        # diagnosis nothing to read: the target stamps one counter, as the paper's hosts did.
        # Each flow in an emulation of its own with the same seed: the path's loss treats the
        # n-th packet of either alike, so the pair meets the same path realization (run one
        # after the other in one emulation, the TCP flow met the loss generator where the
        # Monarch flow left it — the same later draws on every path, a bias of its own).
        s = monarch.run(path, a.out / f"path{i:02d}", probe=a.probe, cc=a.cc, nbytes=a.bytes,
                        target_ip_ids="sequential", seed=100 + i).summary
        t = monarch.run_tcp(path, a.out / f"path{i:02d}-tcp", cc=a.cc, nbytes=a.bytes, seed=100 + i)
        d = s
        rows.append({
            "path": i, "down": down, "up": up, "rtt": rtt, "loss": loss_name,
            "tput_monarch_mbps": s["throughput_bps"] / 1e6, "tput_tcp_mbps": t["throughput_bps"] / 1e6,
            "min_rtt_monarch": s["min_rtt_ms"], "min_rtt_tcp": t["min_rtt_ms"],
            "max_rtt_monarch": s["max_rtt_ms"], "max_rtt_tcp": t["max_rtt_ms"],
            "qdelay_monarch": s["max_rtt_ms"] - s["min_rtt_ms"], "qdelay_tcp": t["max_rtt_ms"] - t["min_rtt_ms"],
            "retx_monarch": s["retransmit_rate"], "retx_tcp": t["retransmit_rate"],
                        "verdict": d["verdict"], "dropped_down": d["dropped_downstream"], "dropped_up": d["dropped_upstream"],
            "found_down": d["lost_downstream"], "found_up": d["lost_upstream"], "unclassified": d["lost_unclassified"],
            "reordered_down": d["reordered_downstream"], "reordered_up": d["reordered_upstream"],
            "reordered_up_harmful": d["reordered_upstream_harmful"],
        })
        print(f"path {i:2d} {down:>7}/{up:<8} {rtt:>6} loss {loss_name:8}: Monarch {rows[-1]['tput_monarch_mbps']:.2f} vs "
              f"TCP {rows[-1]['tput_tcp_mbps']:.2f} Mbit/s; diagnosis {d['verdict']} (dropped {d['dropped_downstream']} down / "
              f"{d['dropped_upstream']} up, found {d['lost_downstream']} / {d['lost_upstream']})", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(a.out / "pairs.csv", index=False)
    metrics = {"throughput": ("tput_monarch_mbps", "tput_tcp_mbps"), "min RTT": ("min_rtt_monarch", "min_rtt_tcp"),
               "max RTT": ("max_rtt_monarch", "max_rtt_tcp"), "queueing delay": ("qdelay_monarch", "qdelay_tcp")}
    print(f"\n{len(df)} paths, {a.bytes:,} bytes, {a.cc}, {a.probe} probes: share of pairs within 10 % / 20 % of TCP")
    table = []
    for name, (m, t) in metrics.items():
        for subset, sel in (("all", df.index == df.index), ("no upstream loss", ~df["loss"].isin(["up 1%", "both 1%"]))):
            d = df[sel]
            table.append({"metric": name, "paths": subset, "n": len(d),
                          "within 10 %": float(d.apply(lambda r: within(r[m], r[t], 0.1), axis=1).mean()),
                          "within 20 %": float(d.apply(lambda r: within(r[m], r[t], 0.2), axis=1).mean())})
    print(pd.DataFrame(table).round(3).to_string(index=False))
    up = df["loss"].isin(["up 1%", "both 1%"])
    print(f"\nretransmission rate, mean: paths with upstream loss Monarch {df.loc[up, 'retx_monarch'].mean():.4f} vs TCP "
          f"{df.loc[up, 'retx_tcp'].mean():.4f}; without: Monarch {df.loc[~up, 'retx_monarch'].mean():.4f} vs TCP {df.loc[~up, 'retx_tcp'].mean():.4f}")
    dd, du = df["dropped_down"].sum(), df["dropped_up"].sum()
    right = df[["found_down", "dropped_down"]].min(axis=1).sum() + df[["found_up", "dropped_up"]].min(axis=1).sum()
    flagged = (df.loc[df["dropped_up"] > 0, "verdict"] == "Inaccurate").mean() if (df["dropped_up"] > 0).any() else float("nan")
    false_alarm = (df.loc[df["dropped_up"] == 0, "verdict"] == "Inaccurate").mean()
    print(f"self-diagnosis: {dd} probes lost downstream, {du} answers lost upstream; {right / max(dd + du, 1):.1%} classified "
          f"on the right side; flows with upstream loss flagged Inaccurate: {flagged:.1%}; without: {false_alarm:.1%}")
    reo = df[df["loss"].str.startswith("reorder")]
    if len(reo):
        print("\nreordering (2 % of packets held 5 ms one way): what the diagnosis saw")
        print(reo[["path", "down", "up", "rtt", "loss", "tput_monarch_mbps", "tput_tcp_mbps", "reordered_down", "reordered_up",
                   "reordered_up_harmful", "verdict"]].round(2).to_string(index=False))
    # Every probe type on one clean path, against the target's default ICMP rate limits.
    probes = []
    for kind in monarch.PROBES:
        s = monarch.run({"rtt": "40ms", "down": "4mbit", "up": "1mbit"}, a.out / f"probe-{kind}", probe=kind, cc=a.cc,
                        nbytes=min(a.bytes, 200_000)).summary
        probes.append({"probe": kind, "tput_mbps": s["throughput_bps"] / 1e6, "probes": s["proxy"]["probes"],
                       "unanswered": s["unanswered_probes"], "retransmits": s["retransmits"], "verdict": s["verdict"]})
    print("\nevery probe type, 4/1 Mbit/s, 40 ms, target with default sysctls:")
    print(pd.DataFrame(probes).round(3).to_string(index=False))
    # The paper's Table 5 layout over every Monarch flow of this run.
    verdicts = pd.DataFrame({"verdict": list(df["verdict"]) + [p["verdict"] for p in probes]})
    print("\nverdicts over all flows (Table 5 layout):")
    print(trace.verdict_table(verdicts).round(1).to_string(index=False))
    (a.out / "summary.json").write_text(json.dumps({"pairs": rows, "agreement": table, "probes": probes}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
