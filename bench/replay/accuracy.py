"""Replay accuracy on a ground truth we generate (Monkey See, Monkey Do, §5.1, Figs. 6-8).

Draws a workload of HTTP-like connections from clients on modem, DSL, cable and fast paths
(`pathtwin.replay.synthetic`), records it in the emulator (each client on its own pipe, the
server's capture as the only output), analyses that capture, replays the database it
yields, and compares per-connection response times. Prints the share within ±20 % (the
paper: 86 %) overall and by client class, response time, bandwidth and RTT; then replays
the same database through one average path for every connection, to show what per-
connection pipes buy; writes the tables under --out. With ``--engine sim`` both the
recording and the replay run in the simulator (no root, seconds): that measures the
analysis and the replay's consistency with simulated TCP on both sides, not the simulator
against the kernel.

    sudo python bench/replay/accuracy.py --connections 2000 --duration 200 --out bench/out/replay
    python bench/replay/accuracy.py --engine sim --out bench/out/replay-sim
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


from pathtwin import trace
from pathtwin.replay import CATEGORIES, Workload, breakdown, replay, run_emulated, run_simulated, synthetic

#: The paper's headline: connections whose replayed response time is within ±20 % (Fig. 6).
PAPER_WITHIN_20PCT = 0.86


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--duration", type=float, default=200.0, help="seconds over which connections start")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lossy-share", type=float, default=0.3, help="share of paths with random downstream loss")
    ap.add_argument("--out", type=Path, default=Path("bench/out/replay"))
    ap.add_argument("--no-naive", action="store_true", help="skip the replay through one average path")
    ap.add_argument("--engine", choices=("emu", "sim"), default="emu", help="engine of the recording and of the replay")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    truth, classes = synthetic(a.connections, seed=a.seed, duration_s=a.duration, lossy_share=a.lossy_share)
    truth.save(a.out / "truth")
    t0 = time.time()
    record = run_simulated if a.engine == "sim" else run_emulated
    original = record(truth, a.out / "original", seed=a.seed)
    t_record = time.time() - t0
    conns, exchanges, _ = trace.workload(original.capture)
    db = Workload.from_analysis(conns, exchanges)
    t0 = time.time()
    result = replay(db, a.out / "replay", source_exchanges=exchanges, engine=a.engine, seed=a.seed)
    t_replay = time.time() - t0

    table = result.table
    truth_conn = db.source_slots(original.addresses)
    table["client_class"] = truth_conn.map(classes).to_numpy()
    table["true_loss"] = truth_conn.map(truth.conns["down_loss"]).to_numpy()
    table.to_parquet(a.out / "connections.parquet", index=False)
    s = result.summary
    print(f"ground truth: {a.connections} connections over {a.duration:.0f} s, recorded ({a.engine}) in {t_record:.1f} s; "
          f"{len(db)} replayable ({', '.join(f'{n} {r}' for r, n in db.skipped.items()) or 'none skipped'}), "
          f"replayed in {t_replay:.1f} s")
    print(f"within ±20 %: {100 * s['within_20pct']:.1f} % (paper {100 * PAPER_WITHIN_20PCT:.0f} %), "
          f"±10 %: {100 * s['within_10pct']:.1f} %, median |error| {100 * s['median_abs_error']:.1f} %, "
          f"KS distance {s['ks_distance']:.3f}")
    both = table.dropna(subset=["rel_error"]).copy()
    both["abs"] = both["rel_error"].abs()
    by_class = both.groupby("client_class").agg(connections=("abs", "size"), within_20pct=("abs", lambda e: float((e <= 0.2).mean())),
                                                median_abs_error=("abs", "median"))
    by_loss = both.groupby(both["true_loss"] > 0).agg(connections=("abs", "size"), within_20pct=("abs", lambda e: float((e <= 0.2).mean())))
    by_loss.index = ["no random loss", "random loss"][: len(by_loss)] if len(by_loss) == 2 else by_loss.index
    # Figs. 6-8 in the bins `pathtwin replay` prints (pathtwin.replay.CATEGORIES).
    figs = {c.title: breakdown(table, c.column, c.edges, c.labels) for c in CATEGORIES}
    figs.update({"by client class": by_class, "by true path loss": by_loss})
    for name, df in figs.items():
        print(f"\n{name}\n{df.round(3).to_string()}")
    naive = None
    if not a.no_naive:
        # What per-connection paths buy: the same database through one average path.
        avg = db.conns.assign(rtt_ms=db.conns["rtt_ms"].mean(), down_bps=db.conns["down_bps"].median(),
                              up_bps=db.conns["up_bps"].median(), down_loss=db.conns["down_loss"].mean())
        naive = replay(Workload(avg, db.exchanges, port=db.port), a.out / "naive", source_exchanges=exchanges,
                       engine=a.engine, seed=a.seed).summary
        print(f"\none average path for every connection (RTT {avg['rtt_ms'].iloc[0]:.0f} ms, "
              f"{avg['down_bps'].iloc[0] / 1e6:.2f} Mbit/s, loss {100 * avg['down_loss'].iloc[0]:.2f} %): "
              f"within ±20 % {100 * naive['within_20pct']:.1f} %, KS distance {naive['ks_distance']:.3f} "
              f"(per-connection pipes: {100 * s['within_20pct']:.1f} %, {s['ks_distance']:.3f})")
    (a.out / "summary.json").write_text(json.dumps({**s, "engine": a.engine, "paper_within_20pct": PAPER_WITHIN_20PCT, "record_s": t_record,
                                                   "replay_s": t_replay, "naive": naive, "breakdowns": {k: json.loads(v.to_json()) for k, v in figs.items()}},
                                                  indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
