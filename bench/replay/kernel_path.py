"""Replay on one lossy path in both engines: the setting of the outside check of issue #26.

Connections of 100-KB responses over 10/2 Mbit/s, 40 ms and 1 % downstream loss, the server
running CUBIC, recorded in the emulator (kernel TCP); the database that capture yields is
replayed in the emulator and in the simulator with its replay profile ("linux"), with
"ns2" and CUBIC, and with "ns2" as it was (Reno). Prints each replay's share within ±20 %
of the truth and, per connection, how far the simulated replay is from the emulated one.

    sudo python bench/replay/kernel_path.py --connections 200 --out bench/out/replay-kernel-path
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from pathtwin import trace
from pathtwin.replay import Workload, replay, run_emulated
from pathtwin.replay.workload import CONN_COLUMNS, EXCHANGE_COLUMNS

REPLAYS = (("emu", "emu", {"cc": "cubic"}), ("sim-linux", "sim", {"cc": "cubic"}),
           ("sim-ns2-cubic", "sim", {"cc": "cubic", "profile": "ns2"}), ("sim-ns2", "sim", {"profile": "ns2"}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bench/out/replay-kernel-path"))
    a = ap.parse_args(argv)
    n = a.connections
    rng = np.random.default_rng(a.seed)
    # About three connections at a time on their own pipes.
    starts = np.sort(rng.uniform(0, n * 0.3, n))
    conns = pd.DataFrame([{"conn": i, "start_s": float(starts[i]), "rtt_ms": 40.0, "down_bps": 10e6, "up_bps": 2e6, "down_loss": 0.01,
                           "up_loss": 0.0, "mss": 1460, "rwin_bytes": 65535, "quickack": True, "source_conn_id": i, "source_client": None}
                          for i in range(n)], columns=CONN_COLUMNS)
    xs = pd.DataFrame([{"conn": i, "exchange": 0, "request_bytes": 400, "response_bytes": 100_000, "header_bytes": -1,
                        "server_delay_s": 0.005, "query_delay_s": 0.0, "think_s": 0.0} for i in range(n)], columns=EXCHANGE_COLUMNS)
    original = run_emulated(Workload(conns, xs, port=80), a.out / "truth", tcp={"cc": "cubic"}, seed=a.seed)
    cs, ex, _ = trace.workload(original.capture)
    db = Workload.from_analysis(cs, ex)
    tables = {}
    for name, engine, tcp in REPLAYS:
        r = replay(db, a.out / name, tcp=tcp, engine=engine, source_exchanges=ex, seed=a.seed)
        tables[name] = r.table
        s = r.summary
        print(f"{name}: {s['replayed']} replayed, within ±20 % {100 * s['within_20pct']:.1f} %, "
              f"median bias {100 * s['median_bias']:+.1f} %", flush=True)
    e = tables["emu"]
    for name, _, _ in REPLAYS[1:]:
        r = tables[name]["replay_ms"] / e["replay_ms"] - 1
        print(f"{name} against emu, per connection: within ±20 % {100 * (r.abs() <= 0.2).mean():.1f} %, "
              f"median {100 * r.median():+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
