"""NSDI'09 Figure 7 (§4.4-4.5): a real distributed application — a BitTorrent swarm of
aria2c clients (Debian's ``aria2``) with opentracker (Debian's ``opentracker``) — run over
the ground truth, over the path model measured from it, and over the link-emulator
baseline, and each node's time to download the file in each.

    sudo python bench/measure/figure7.py [--ground-truth examples/groundtruth/swarm.toml]
        [--hosts a1,a2,a3,b1,b2,b3,c1,c2,c3] [--seed a1] [--size 16MB] [--flows 1,4]
        [--duration 5s] [--timeout 120] [--envs truth,model,link] [--json OUT]

What it does:

1. measures the application hosts' paths with the *simulated* measurement
   (``measure_simulated``: the ground truth with its cross traffic on the simulator's clock,
   seconds instead of the emulated measurement's many minutes; same analysis, same model),
   and builds the link baseline from that model with ``grade.link_baseline`` (every path a
   link at the one-flow ABW, no reactivity, no shared queues), exactly as
   ``pathtwin measure validate GROUND_TRUTH MODEL`` does;
2. runs the swarm in three emulations, one after another: the ground truth with its own
   ``[[flow]]`` cross traffic as kernel TCP (``Emulation(workload=True)``, the traffic given
   ``SETTLE_S`` to settle first, as ``grade`` and ``measure --emulate`` do), the model, and
   the link baseline. In each, opentracker and the seeding aria2c run on ``--seed``, then
   every other host starts one aria2c leecher at the same instant (DHT, local peer discovery
   and peer exchange off: the tracker is the only way peers find each other); a leecher
   keeps seeding after it has the file, as in a swarm. A node's completion time is from
   that instant to aria2c's ``--on-bt-download-complete`` hook, stamped in the node;
3. checks each downloaded file's SHA-256 against the seed's, and prints per node the three
   times, model/truth and link/truth (and link/model, the paper's own comparison: link
   emulation 6 % slower than path emulation on average, 12 % at most).

Needs root, aria2c and opentracker (``apt-get install aria2 opentracker``). Debian's
opentracker runs with a whitelist (README.Debian): the torrent's info hash is written to one.
This is a measurement, not a test: it asserts nothing but that every node completed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TRACKER_PORT = 6969
#: BitTorrent's listening port of every aria2c (each host is its own namespace).
PEER_PORT = 6881
PIECE = 256 * 1024
#: The paper's Figure 7: link emulation against path emulation, per node.
PAPER = {"link_slower_mean": 0.06, "link_slower_max": 0.12}
ENVIRONMENTS = ("truth", "model", "link")
#: On request (``--envs truth,model,link,quiet``): the ground truth without its cross traffic,
#: to tell what the cross traffic costs from what the topology's sharing does.
EXTRA = ("quiet",)


# -- the torrent --------------------------------------------------------------------------
def bencode(x) -> bytes:
    if isinstance(x, int):
        return b"i%de" % x
    if isinstance(x, str):
        x = x.encode()
    if isinstance(x, bytes):
        return b"%d:%s" % (len(x), x)
    if isinstance(x, list):
        return b"l" + b"".join(map(bencode, x)) + b"e"
    if isinstance(x, dict):
        return b"d" + b"".join(bencode(k) + bencode(x[k]) for k in sorted(x)) + b"e"
    raise TypeError(type(x))


def make_torrent(data: Path, announce: str) -> tuple[bytes, str]:
    """A single-file torrent of ``data`` (``PIECE``-byte pieces) and its info hash (hex)."""
    blob = data.read_bytes()
    pieces = b"".join(hashlib.sha1(blob[i:i + PIECE]).digest() for i in range(0, len(blob), PIECE))
    info = {"name": data.name, "length": len(blob), "piece length": PIECE, "pieces": pieces}
    return bencode({"announce": announce, "info": info}), hashlib.sha1(bencode(info)).hexdigest()


HOOK = """#!/bin/sh
# aria2c --on-bt-download-complete: GID, number of files, the first file's path.
date +%s.%N > "$3.done"
"""


def aria2c(torrent: Path, dest: Path, seeding: bool) -> list[str]:
    args = ["aria2c", f"--dir={dest}", f"--listen-port={PEER_PORT}", "--enable-dht=false", "--enable-dht6=false",
            "--bt-enable-lpd=false", "--enable-peer-exchange=false", "--disable-ipv6=true",
            "--file-allocation=none", "--seed-ratio=0.0", "--summary-interval=0", "--console-log-level=warn",
            "--allow-overwrite=true", "--auto-file-renaming=false", f"--log={dest / 'aria2.log'}", "--log-level=notice"]
    if seeding:
        args += ["--bt-seed-unverified=true", "--check-integrity=false"]
    else:
        args += [f"--on-bt-download-complete={dest.parent / 'hook.sh'}"]
    return args + [str(torrent)]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_swarm(env: str, cfg: dict, hosts: list[str], seed: str, data: Path, work: Path, timeout_s: float,
              settle_s: float) -> dict:
    """One swarm in an emulation of ``cfg``: per leecher its completion time (s, None if it
    did not complete within ``timeout_s``) and whether its file's SHA-256 is the seed's."""
    from pathtwin.emulation import Emulation

    root = work / env
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    (root / "hook.sh").write_text(HOOK)
    (root / "hook.sh").chmod(0o755)
    leechers = [h for h in hosts if h != seed]
    digest = sha256(data)
    t_start = time.monotonic()
    with Emulation(cfg, workload=bool(cfg.get("flow")), tcp_info=False) as net:
        if cfg.get("flow"):
            time.sleep(settle_s)
        tracker_ip = net[seed].ipv4
        blob, info_hash = make_torrent(data, f"http://{tracker_ip}:{TRACKER_PORT}/announce")
        torrent = root / "file.torrent"
        torrent.write_bytes(blob)
        (root / "whitelist").write_text(info_hash + "\n")
        log = open(root / "opentracker.log", "w")
        net[seed].serve(["opentracker", "-i", tracker_ip, "-p", str(TRACKER_PORT), "-P", str(TRACKER_PORT),
                         "-w", "whitelist", "-d", str(root), "-u", "nobody"],
                        TRACKER_PORT, stdout=log, stderr=log, cwd=root)
        seed_dir = root / seed
        seed_dir.mkdir()
        os.link(data, seed_dir / data.name) if data.stat().st_dev == seed_dir.stat().st_dev else shutil.copy(data, seed_dir)
        net[seed].serve(aria2c(torrent, seed_dir, True), PEER_PORT, stdout=open(seed_dir / "out.txt", "w"),
                        stderr=open(seed_dir / "err.txt", "w"))
        time.sleep(1.0)  # its first announce reaches the tracker
        for h in leechers:
            (root / h).mkdir()
        net.lateness_window()  # the window starts with the swarm
        t0 = time.time()
        for h in leechers:
            d = root / h
            net[h].popen(aria2c(torrent, d, False), stdout=open(d / "out.txt", "w"), stderr=open(d / "err.txt", "w"))
        done: dict[str, float] = {}
        deadline = time.monotonic() + timeout_s
        while len(done) < len(leechers) and time.monotonic() < deadline:
            for h in leechers:
                stamp = root / h / (data.name + ".done")
                if h not in done and stamp.exists():
                    text = stamp.read_text().strip()
                    if text:
                        done[h] = float(text) - t0
            time.sleep(0.1)
        late = net.lateness_window()["release"]
        wall = time.monotonic() - t_start
    nodes = {}
    for h in leechers:
        f = root / h / data.name
        nodes[h] = {"completion_s": done.get(h), "intact": f.exists() and h in done and sha256(f) == digest}
    # The emulator's release lateness over the swarm: large values mean the machine, not the
    # network, set the pace.
    return {"nodes": nodes, "wall_s": wall, "release_lateness_ns": late}


def inbound_rate_bps(env: str, cfg: dict, node: str, sources: list[str]) -> float:
    """The most an environment can deliver into ``node`` from ``sources`` (bit/s, IP level):
    in the ground truth its access link's downstream rate (every byte it receives crosses
    it); in the model the sum over its paths from ``sources`` of the largest ABW their
    reactivity tables give; in the link baseline the sum of its links' rates."""
    from pathtwin.config import parse_per_direction, parse_quantity

    if env in ("truth", "quiet"):
        links = [ln for ln in cfg["link"] if node in ln["between"]]
        if len(links) != 1:
            raise ValueError(f"{node}: not a host with one access link")
        ln = links[0]
        fwd, rev = parse_per_direction("rate", ln["rate"], "link.rate")
        return rev if ln["between"][0] == node else fwd
    total = 0.0
    for p in cfg["path"]:
        a, b = p["between"]
        if node not in (a, b) or ({a, b} - {node}).pop() not in sources:
            continue
        way = 1 if a == node else 0  # [a->b, b->a]: towards node
        if p.get("reactivity"):
            total += max(parse_quantity("rate", str(v), "reactivity") for v in p["reactivity"][way].values())
        else:
            total += parse_per_direction("rate", p["abw"], "path.abw")[way]
    return total


def figure7(ground_truth_path: str, hosts: list[str], seed: str, size: int, settings, timeout_s: float, work: Path,
            envs=ENVIRONMENTS, log=print) -> dict:
    """Measures ``hosts`` of the ground truth in the simulator, builds the link baseline,
    runs the swarm in each of ``envs`` and returns the record ``--json`` writes (rows per
    leecher: ``{env}_s``, ``{env}_intact``, ``{env}_bound_s``, the ratios; the summary)."""
    from pathtwin.measure.emulated import RUN_FOR, SETTLE_S, ground_truth
    from pathtwin.measure.grade import link_baseline
    from pathtwin.measure.simulated import measure_simulated

    work.mkdir(parents=True, exist_ok=True)
    # 1. The path model, measured in the simulator, and the link baseline from it.
    t = time.monotonic()
    model_path = work / "model.toml"
    for stale in (model_path, work / "model.measure.json"):
        stale.unlink(missing_ok=True)
    measure_simulated(ground_truth_path, hosts=hosts, settings=settings, out=model_path)
    measure_s = time.monotonic() - t
    log(f"measured {len(hosts)} hosts in the simulator in {measure_s:.1f} s -> {model_path}")
    model = ground_truth(model_path)
    configs = {"truth": ground_truth(ground_truth_path), "model": model, "link": link_baseline(model)}
    configs["quiet"] = {**configs["truth"], "flow": []}
    for cfg in configs.values():
        cfg["run"] = {**cfg.get("run", {}), "duration": RUN_FOR}

    # 2. The file and the swarm in each environment.
    data = work / "file.bin"
    data.write_bytes(os.urandom(size))
    results = {}
    for env in envs:
        t = time.monotonic()
        results[env] = run_swarm(env, configs[env], hosts, seed, data, work, timeout_s, SETTLE_S)
        times = [n["completion_s"] for n in results[env]["nodes"].values()]
        late = results[env]["release_lateness_ns"]
        log(f"{env}: {sum(x is not None for x in times)}/{len(times)} nodes complete, "
            f"wall {time.monotonic() - t:.1f} s, release lateness p99 {late.get('p99_ns', 0) / 1e3:.0f} us, "
            f"max {late.get('max_ns', 0) / 1e3:.0f} us")

    # 3. Per node.
    leechers = [h for h in hosts if h != seed]
    rows = []
    for h in leechers:
        row = {"node": h, **{f"{env}_s": results[env]["nodes"][h]["completion_s"] for env in envs},
               **{f"{env}_intact": results[env]["nodes"][h]["intact"] for env in envs},
               **{f"{env}_bound_s": size * 8 / inbound_rate_bps(env, configs[env], h, [o for o in hosts if o != h])
                  for env in envs}}
        for a, b in (("model", "truth"), ("link", "truth"), ("link", "model")):
            if a in envs and b in envs and row[f"{a}_s"] and row[f"{b}_s"]:
                row[f"{a}/{b}"] = row[f"{a}_s"] / row[f"{b}_s"]
        rows.append(row)
    summary = {}
    for key in ("model/truth", "link/truth", "link/model"):
        r = [row[key] for row in rows if key in row]
        if r:
            summary[key] = {"mean_diff": statistics.fmean(x - 1 for x in r),
                            "mean_abs_diff": statistics.fmean(abs(x - 1) for x in r),
                            "max_abs_diff": max(abs(x - 1) for x in r)}
    return {"ground_truth": str(ground_truth_path), "hosts": hosts, "seed": seed, "size_bytes": size,
            "application": "BitTorrent: aria2c (one seed, the others leeching), opentracker",
            "measurement": {"engine": "sim", **settings.record(), "wall_s": measure_s},
            "environments": list(envs), "rows": rows, "summary": summary, "paper": PAPER,
            "wall_s": {env: results[env]["wall_s"] for env in envs},
            "release_lateness_ns": {env: results[env]["release_lateness_ns"] for env in envs}}


def print_table(record: dict) -> None:
    envs = record["environments"]
    print(f"\nper-node download time of {record['size_bytes'] / 1e6:g} MB (seed and tracker on {record['seed']})")
    print(f"{'node':>5} " + " ".join(f"{env + ' s':>8}" for env in envs) + "  model/truth  link/truth  link/model")
    for row in record["rows"]:
        cells = " ".join(f"{row[f'{env}_s']:8.2f}" if row[f"{env}_s"] is not None else f"{'-':>8}" for env in envs)
        ratios = "".join(f"{row[k]:12.3f}" if k in row else f"{'-':>12}" for k in ("model/truth", "link/truth", "link/model"))
        bad = [env for env in envs if row[f"{env}_s"] is not None and not row[f"{env}_intact"]]
        print(f"{row['node']:>5} {cells} {ratios}" + (f"  CORRUPT in {','.join(bad)}" if bad else ""))
    for key, s in record["summary"].items():
        print(f"{key}: mean {s['mean_diff'] * 100:+.1f} % (mean |diff| {s['mean_abs_diff'] * 100:.1f} %), "
              f"max |diff| {s['max_abs_diff'] * 100:.1f} %")
    print(f"paper (link against path emulation): +{PAPER['link_slower_mean'] * 100:.0f} % on average, "
          f"{PAPER['link_slower_max'] * 100:.0f} % at most")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ground-truth", default=str(REPO / "examples/groundtruth/swarm.toml"))
    ap.add_argument("--hosts", default="a1,a2,a3,b1,b2,b3,c1,c2,c3", help="the swarm's nodes (measured and run)")
    ap.add_argument("--seed", default="a1", help="the node that seeds the file and runs the tracker")
    ap.add_argument("--size", default="16MB", help="the file's size (MB = 10^6 bytes)")
    ap.add_argument("--flows", default="1,4", help="the measurement's flow counts")
    ap.add_argument("--duration", default="5s", help="each throughput test's length in the measurement")
    ap.add_argument("--probe-duration", default="8s")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a swarm may take")
    ap.add_argument("--envs", default=",".join(ENVIRONMENTS),
                    help="of truth, model, link and quiet (the truth without its cross traffic)")
    ap.add_argument("--work", default=None, help="working directory (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)

    from pathtwin.config import parse_quantity
    from pathtwin.emulation import require_root
    from pathtwin.measure import Settings
    from pathtwin.measure.session import parse_flows

    require_root()
    for tool in ("aria2c", "opentracker"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (apt-get install aria2 opentracker)")
    hosts = [h.strip() for h in args.hosts.split(",")]
    if args.seed not in hosts:
        sys.exit(f"--seed {args.seed} is not one of --hosts")
    envs = [e.strip() for e in args.envs.split(",")]
    if set(envs) - set(ENVIRONMENTS + EXTRA):
        sys.exit(f"--envs: {','.join(sorted(set(envs) - set(ENVIRONMENTS + EXTRA)))} is not one of "
                 f"{','.join(ENVIRONMENTS + EXTRA)}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="figure7-"))
    settings = Settings(flows=parse_flows(args.flows), duration_s=parse_quantity("time", args.duration, "--duration"),
                        probe_duration_s=parse_quantity("time", args.probe_duration, "--probe-duration"))
    size = int(parse_quantity("size", args.size, "--size"))
    t = time.monotonic()
    record = figure7(args.ground_truth, hosts, args.seed, size, settings, args.timeout, work, envs,
                     log=lambda m: print(m, flush=True))
    record["total_wall_s"] = time.monotonic() - t
    print_table(record)
    print(f"total wall time {record['total_wall_s']:.0f} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(record, indent=1))
        print(f"wrote {args.json}")
    bad = [(env, r["node"]) for env in envs for r in record["rows"] if r[f"{env}_s"] is None or not r[f"{env}_intact"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
