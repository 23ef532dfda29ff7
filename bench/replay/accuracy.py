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

``--replay-engines`` replays the one database the recording yields in several engines in
one run — ``emu``, ``sim`` (the simulated replay's default profile, ``"linux"``),
``sim-ns2``, ``sim-linux`` — and prints their shares side by side (overall, with and without random
loss, long responses and short, long lossy ones), with each one's difference in points
from the first; ``--long-lossy-share`` adds long lossy responses to the workload (that
share of connections with a first response of at least 50 segments on a path with 0.5-2 %
downstream loss, `synthetic`'s ``long_lossy_share``); ``--cc`` names the server's
congestion control in the recording and every replay (the emulated hosts otherwise run the
machine's default, which the simulator does not know). ``--loss`` names the replays' loss
models (``trace``, the default: each connection loses the data the recording's capture shows
it lost; ``random``: Bernoulli loss at the analysed rate; ``trace,random``: both, each
engine replaying the one database with each, columns ``ENGINE-MODEL``).

    sudo python bench/replay/accuracy.py --connections 2000 --duration 200 --out bench/out/replay
    python bench/replay/accuracy.py --engine sim --out bench/out/replay-sim
    sudo python bench/replay/accuracy.py --connections 300 --duration 60 --long-lossy-share 0.3 --cc cubic \\
        --replay-engines emu,sim-ns2,sim-linux --out bench/out/replay-engines
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import pandas as pd
from pathlib import Path


from pathtwin import trace
from pathtwin.replay import CATEGORIES, LOSS_MODELS, Workload, breakdown, replay, run_emulated, run_simulated, synthetic
from pathtwin.replay.workload import LONG_SEGMENTS

#: The paper's headline: connections whose replayed response time is within ±20 % (Fig. 6).
PAPER_WITHIN_20PCT = 0.86


#: Replay engines by name: the engine and the simulated TCP's profile (None: the default).
REPLAY_ENGINES = {"emu": ("emu", None), "sim": ("sim", None), "sim-ns2": ("sim", "ns2"), "sim-linux": ("sim", "linux")}
#: A long response's bytes: LONG_SEGMENTS segments of Linux's 1448-byte payload.
LONG_BYTES = LONG_SEGMENTS * 1448


def _share(e: pd.Series) -> float:
    return float((e <= 0.2).mean()) if len(e) else float("nan")


def groups(table: pd.DataFrame) -> dict:
    """The share within ±20 % (and the count, the median bias) of one replay's comparison
    table over all connections and by group: the truth's path lossy or not, the connection's
    longest response long (≥ LONG_SEGMENTS segments) or not, and long on a lossy path."""
    both = table.dropna(subset=["rel_error"])
    e = both["rel_error"].abs()
    lossy, long = both["true_loss"] > 0, both["long"]
    sel = {"all": both.index == both.index, "lossless": ~lossy, "lossy": lossy, "short": ~long, "long": long,
           "long lossy": long & lossy}
    return {k: {"n": int(m.sum()), "within_20pct": _share(e[m]),
                "median_bias": float(both["rel_error"][m].median()) if m.sum() else float("nan")} for k, m in sel.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--duration", type=float, default=200.0, help="seconds over which connections start")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replay-seed", type=int, default=None, help="seed of the replays' paths (default: --seed)")
    ap.add_argument("--lossy-share", type=float, default=0.3, help="share of paths with random downstream loss")
    ap.add_argument("--long-lossy-share", type=float, default=0.0,
                    help=f"share of connections made long (>= {LONG_SEGMENTS} segments) on a path with 0.5-2 %% loss")
    ap.add_argument("--cc", default=None, help="the server's congestion control, recording and replays (e.g. cubic)")
    ap.add_argument("--out", type=Path, default=Path("bench/out/replay"))
    ap.add_argument("--no-naive", action="store_true", help="skip the replay through one average path")
    ap.add_argument("--engine", choices=("emu", "sim"), default="emu", help="engine of the recording (and, by default, of the replay)")
    ap.add_argument("--replay-engines", default=None,
                    help=f"comma-separated replays of the same database, of {', '.join(REPLAY_ENGINES)} (default: --engine)")
    ap.add_argument("--loss", default="trace", help=f"comma-separated loss models of the replays, of {', '.join(LOSS_MODELS)}")
    a = ap.parse_args(argv)
    losses = a.loss.split(",")
    if any(m not in LOSS_MODELS for m in losses):
        ap.error(f"--loss: {a.loss}: each of {', '.join(LOSS_MODELS)}")
    engine_names = (a.replay_engines or a.engine).split(",")
    engines = [e if len(losses) == 1 else f"{e}-{m}" for e in engine_names for m in losses]
    loss_of = {e if len(losses) == 1 else f"{e}-{m}": m for e in engine_names for m in losses}
    engine_of = {e if len(losses) == 1 else f"{e}-{m}": e for e in engine_names for m in losses}
    bad = [e for e in engine_names if e not in REPLAY_ENGINES]
    if bad:
        ap.error(f"--replay-engines: {', '.join(bad)}: not one of {', '.join(REPLAY_ENGINES)}")
    replay_seed = a.seed if a.replay_seed is None else a.replay_seed
    a.out.mkdir(parents=True, exist_ok=True)
    truth, classes = synthetic(a.connections, seed=a.seed, duration_s=a.duration, lossy_share=a.lossy_share,
                               long_lossy_share=a.long_lossy_share)
    truth.save(a.out / "truth")
    server_tcp = {"cc": a.cc} if a.cc else {}
    t0 = time.time()
    record = run_simulated if a.engine == "sim" else run_emulated
    original = record(truth, a.out / "original", tcp=server_tcp or None, seed=a.seed)
    t_record = time.time() - t0
    conns, exchanges, _ = trace.workload(original.capture)
    db = Workload.from_analysis(conns, exchanges)
    longest = db.exchanges.groupby("conn")["response_bytes"].max()
    print(f"ground truth: {a.connections} connections over {a.duration:.0f} s, recorded ({a.engine}"
          f"{', cc ' + a.cc if a.cc else ''}) in {t_record:.1f} s; "
          f"{len(db)} replayable ({', '.join(f'{n} {r}' for r, n in db.skipped.items()) or 'none skipped'})")

    results: dict = {}
    for name in engines:
        engine, profile = REPLAY_ENGINES[engine_of[name]]
        tcp = dict(server_tcp, **({"profile": profile} if profile else {}))
        out = a.out / ("replay" if len(engines) == 1 else f"replay-{name}")
        t0 = time.time()
        result = replay(db, out, tcp=tcp or None, source_exchanges=exchanges, engine=engine, seed=replay_seed, loss=loss_of[name])
        t_replay = time.time() - t0
        table = result.table
        truth_conn = db.source_slots(original.addresses)
        table["client_class"] = truth_conn.map(classes).to_numpy()
        table["true_loss"] = truth_conn.map(truth.conns["down_loss"]).to_numpy()
        table["long"] = (table["conn"].map(longest).fillna(0) >= LONG_BYTES).to_numpy()
        table.to_parquet(a.out / ("connections.parquet" if len(engines) == 1 else f"connections-{name}.parquet"), index=False)
        s = result.summary
        print(f"\n== replay in {name} ({engine}{', profile ' + profile if profile else ''}, {loss_of[name]} loss; "
              f"{100 * s['trace_loss_share']:.0f} % of connections with trace offsets), {t_replay:.1f} s: "
              f"within ±20 %: {100 * s['within_20pct']:.1f} % (paper {100 * PAPER_WITHIN_20PCT:.0f} %), "
              f"±10 %: {100 * s['within_10pct']:.1f} %, median |error| {100 * s['median_abs_error']:.1f} %, "
              f"median bias {100 * s['median_bias']:+.1f} %, KS distance {s['ks_distance']:.3f}")
        both = table.dropna(subset=["rel_error"]).copy()
        both["abs"] = both["rel_error"].abs()
        by_class = both.groupby("client_class").agg(connections=("abs", "size"), within_20pct=("abs", lambda e: float((e <= 0.2).mean())),
                                                    median_abs_error=("abs", "median"))
        by_loss = both.groupby(both["true_loss"] > 0).agg(connections=("abs", "size"), within_20pct=("abs", lambda e: float((e <= 0.2).mean())))
        by_loss.index = ["no random loss", "random loss"][: len(by_loss)] if len(by_loss) == 2 else by_loss.index
        # Figs. 6-8 in the bins `pathtwin replay` prints (pathtwin.replay.CATEGORIES).
        figs = {c.title: breakdown(table, c.column, c.edges, c.labels) for c in CATEGORIES}
        figs.update({"by client class": by_class, "by true path loss": by_loss})
        if len(engines) == 1:
            for fname, df in figs.items():
                print(f"\n{fname}\n{df.round(3).to_string()}")
        results[name] = {**s, "engine": engine, "profile": profile, "tcp": tcp, "replay_s": t_replay, "groups": groups(table),
                         "breakdowns": {k: json.loads(v.to_json()) for k, v in figs.items()}}

    first = engines[0]
    if len(engines) > 1 or a.long_lossy_share > 0:
        # Side by side: each engine's share within ±20 % by group, and its difference in
        # points from the first engine's.
        rows = {}
        for g in results[first]["groups"]:
            row = {"n": results[first]["groups"][g]["n"]}
            for name in engines:
                row[name] = 100 * results[name]["groups"][g]["within_20pct"]
                if name != first:
                    row[f"{name} − {first}"] = row[name] - row[first]
            rows[g] = row
        side = pd.DataFrame(rows).T
        print(f"\nwithin ±20 % (%), by group; long: ≥ {LONG_SEGMENTS} segments; lossy: the truth's path had random loss\n"
              f"{side.round(1).to_string()}")
        bias = pd.DataFrame({name: {g: 100 * v["median_bias"] for g, v in results[name]["groups"].items()} for name in engines})
        print(f"\nmedian bias (%), replayed/original − 1\n{bias.round(1).to_string()}")
    else:
        side = None

    naive = None
    s = results[first]
    engine, profile = REPLAY_ENGINES[engine_of[first]]
    if not a.no_naive:
        # What per-connection paths buy: the same database through one average path.
        avg = db.conns.assign(rtt_ms=db.conns["rtt_ms"].mean(), down_bps=db.conns["down_bps"].median(),
                              up_bps=db.conns["up_bps"].median(), down_loss=db.conns["down_loss"].mean())
        naive = replay(Workload(avg, db.exchanges, port=db.port), a.out / "naive", source_exchanges=exchanges,
                       tcp=s["tcp"] or None, engine=engine, seed=replay_seed, loss="random").summary
        print(f"\none average path for every connection ({first}; RTT {avg['rtt_ms'].iloc[0]:.0f} ms, "
              f"{avg['down_bps'].iloc[0] / 1e6:.2f} Mbit/s, loss {100 * avg['down_loss'].iloc[0]:.2f} %): "
              f"within ±20 % {100 * naive['within_20pct']:.1f} %, KS distance {naive['ks_distance']:.3f} "
              f"(per-connection pipes: {100 * s['within_20pct']:.1f} %, {s['ks_distance']:.3f})")
    (a.out / "summary.json").write_text(json.dumps({
        **s, "record_engine": a.engine, "cc": a.cc, "connections_drawn": a.connections, "duration_s": a.duration,
        "long_lossy_share": a.long_lossy_share, "paper_within_20pct": PAPER_WITHIN_20PCT, "record_s": t_record,
        "naive": naive, "engines": results, "side_by_side": json.loads(side.to_json(orient="index")) if side is not None else None},
        indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
