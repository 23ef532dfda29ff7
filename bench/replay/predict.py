"""Predictive replay (Monkey See, Monkey Do, §5.3, Fig. 10): does replaying a capture on a
changed server predict what that server would really have done?

One ground-truth workload (`pathtwin.replay.synthetic`) is recorded in the emulator several
times, each against a differently configured server: initcwnd 1, 3 and 10; CUBIC and BBR.
The initcwnd-1 capture's replay database is then replayed on an initcwnd-3 and an
initcwnd-10 server, and the CUBIC capture's on a BBR server. Each prediction is compared with
the recording of the real change: the two-sample KS distance between the response-time
distributions (the paper's measure), and per connection the share within ±20 %. Beside it,
the baseline a replay that cannot react to the server offers — the source capture itself,
which is what tcpreplay re-sends — and how far that is from the truth. CDFs go to
`--out/predict.png`.

    sudo python bench/replay/predict.py --connections 600 --duration 60
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from pathtwin import trace
from pathtwin.replay import Workload, ks_distance, replay, response_times_by_slot, run_emulated, synthetic

#: (name, source server, changed server) of each what-if.
WHAT_IFS = [
    ("initcwnd 1 -> 3", {"initial_window": 1}, {"initial_window": 3}),
    ("initcwnd 1 -> 10", {"initial_window": 1}, {"initial_window": 10}),
    ("cubic -> bbr", {"cc": "cubic"}, {"cc": "bbr"}),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=600)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bench/out/replay-predict"))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    truth, _ = synthetic(a.connections, seed=a.seed, duration_s=a.duration)
    recordings: dict[str, tuple] = {}

    def recording(tcp: dict):
        key = json.dumps(tcp, sort_keys=True)
        if key not in recordings:
            name = "-".join(f"{k}{v}" for k, v in tcp.items())
            run = run_emulated(truth, a.out / f"record-{name}", tcp=tcp)
            conns, exchanges, _ = trace.workload(run.capture)
            recordings[key] = (run, conns, exchanges, response_times_by_slot(conns, exchanges, run.addresses))
        return recordings[key]

    rows, curves = [], []
    for name, source_tcp, changed_tcp in WHAT_IFS:
        src_run, src_conns, src_ex, src_rt = recording(source_tcp)
        _, _, _, real_rt = recording(changed_tcp)
        db = Workload.from_analysis(src_conns, src_ex)
        res = replay(db, a.out / f"replay-{name.replace(' ', '').replace('>', '')}", tcp=changed_tcp, source_exchanges=src_ex)
        truth_idx = db.source_slots(src_run.addresses)
        predicted = pd.Series(res.table["replay_ms"].to_numpy(), index=truth_idx.to_numpy()).dropna()
        # Distributions over the same connections: those the database kept (Monkey See
        # prunes, e.g., connections too short for an ACK pair), found in all three runs.
        paired = pd.concat([predicted.rename("predicted"), real_rt.rename("real"), src_rt.rename("source")], axis=1).dropna()
        within = lambda x: float(((x - paired["real"]).abs() <= 0.2 * paired["real"]).mean())  # noqa: E731
        rows.append({
            "what-if": name,
            "connections": len(paired),
            "KS(prediction, real)": ks_distance(paired["predicted"], paired["real"]),
            "KS(source, real)": ks_distance(paired["source"], paired["real"]),
            "paired within ±20 %: prediction": within(paired["predicted"]),
            "paired within ±20 %: source": within(paired["source"]),
            "median real ms": float(paired["real"].median()),
            "median predicted ms": float(paired["predicted"].median()),
            "median source ms": float(paired["source"].median()),
        })
        curves.append((name, paired["source"], paired["real"], paired["predicted"]))
    table = pd.DataFrame(rows)
    table.to_csv(a.out / "predict.csv", index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    _plot(curves, a.out / "predict.png")
    print(f"wrote {a.out}/predict.csv and {a.out}/predict.png")
    return 0


def _plot(curves, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
    for ax, (name, src, real, pred) in zip(axes[0], curves):
        for series, label, style in ((src, "source (= tcpreplay)", ":"), (real, "real change", "-"), (pred, "replay prediction", "--")):
            v = np.sort(series.to_numpy())
            ax.step(v, np.arange(1, len(v) + 1) / max(len(v), 1), style, where="post", label=label)
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("response time (ms)")
        ax.set_ylabel("CDF of connections")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
