"""`pathtwin trace to-paths` against ground truth: kernel TCP over emulated paths whose
capacity and available bandwidth differ, captured at the server, analysed and turned into a
paths topology as a user does it (`trace analyze`, then `trace to-paths`).

Two clients, each on its own path from the server:

- ``bulk``: capacity 20 Mbit/s down and 10 up, ABW 5 down and 3 up (placeholders at C − ABW
  in each direction), 40 ms. A bulk download, then a bulk upload: both network-limited, so
  each direction gets its own capacity (packet pairs) and ABW (rounds with a standing queue)
  — the asymmetry must come back as it is.
- ``limited``: capacity 20, ABW 5, 40 ms, 1 % random loss downstream. A download held by a
  small receive buffer (about 2 Mbit/s) and one paced by the application at 2 Mbit/s: below
  the ABW, neither keeps the queue standing, so neither yields an ABW point estimate — the
  path's ABW is a labelled lower bound and is written as the capacity.

Tolerances are the estimators' own (``crates/pathtwin-trace/src/direction.rs``). Capacity:
three standard errors plus the bias bound (jitter after the bottleneck locked to the flow,
from the largest pair deviation: the placeholders on the reverse path are periodic). ABW: its
error bound (the queue's backlog at capacity over the busy time). Queue: its delay (the
written bytes are that delay × the capacity estimate) within one packet time (the packet in
service, which the emulator's limit does not count), the delay's resolution (an ACK's wait
behind a reverse packet server to client, the client's 1-ms timestamp tick client to
server), and the emulator's largest release lateness (its ``timing`` table: the capture sees
a packet when it was released). Loss: three binomial standard errors of the rate the
emulator realised. The topology written must run: it is simulated for a second with a bulk
flow on each path. A check that misses on the capture is made again on a second one
(``met``), as the emulator's other checks against timing are.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
import os
import shutil
import subprocess
import sys
import threading
import tomllib

import pandas as pd
import pytest

from conftest import met_in_one_of, needs_root, run_cli

pytestmark = [
    needs_root,
    pytest.mark.skipif(shutil.which("tcpdump") is None or not os.path.exists("/dev/net/tun"),
                       reason="needs tcpdump and /dev/net/tun"),
]

PORT = 9000
TOPOLOGY = """
hosts = ["server", "bulk", "limited"]
[run]
seed = 7
[[path]]
between = ["server", "bulk"]
rtt = "40ms"
capacity = "20mbit/10mbit"
abw = "5mbit/3mbit"
[[path]]
between = ["server", "limited"]
rtt = "40ms"
capacity = "20mbit"
abw = "5mbit"
loss = "1%/0%"
"""
# (capacity, ABW) per direction of each path, server -> client first.
TRUTH = {"bulk": ((20e6, 5e6), (10e6, 3e6)), "limited": ((20e6, 5e6), (20e6, 5e6))}

# One thread per connection. The client asks "down BYTES RATE" (RATE bit/s paced by the
# application in 8-KB writes; 0: as fast as TCP goes) or "up BYTES".
SERVER = r"""
import socket, sys, threading, time
def serve(c):
    mode, n, rate = c.recv(100).decode().split()
    n, rate = int(n), float(rate)
    if mode == 'down':
        t0, sent = time.time(), 0
        while sent < n:
            chunk = min(8192 if rate > 0 else 1 << 20, n - sent)
            c.sendall(b'x' * chunk)
            sent += chunk
            if rate > 0:
                time.sleep(max(0.0, t0 + sent * 8 / rate - time.time()))
        c.shutdown(socket.SHUT_WR)
    while c.recv(65536):
        pass
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', int(sys.argv[1])))
s.listen(8)
print('ready', flush=True)
while True:
    threading.Thread(target=serve, args=(s.accept()[0],)).start()
"""

# argv: server, port, then transfers "down:BYTES:RATE:RCVBUF" or "up:BYTES", one after another.
CLIENT = r"""
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
for job in sys.argv[3:]:
    mode, n, *rest = job.split(':')
    rate, rcvbuf = (float(rest[0]), int(rest[1])) if rest else (0.0, 0)
    c = socket.socket()
    if rcvbuf:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    c.connect((host, port))
    c.sendall(f'{mode} {n} {rate}'.encode().ljust(100))
    if mode == 'up':
        c.sendall(b'y' * int(n))
        c.shutdown(socket.SHUT_WR)
    while c.recv(65536):
        pass
    c.close()
    time.sleep(0.2)
"""


@dataclass
class Lab:
    out: Path
    #: The emulator's resolved paths (run.json), its per-flow packet counts.
    resolved: list
    flows: pd.DataFrame
    server_ip: str
    #: Host name -> address.
    hosts: dict
    #: The emulator's release lateness, seconds: "p99" and "max".
    late_s: dict


def run_lab(out: Path) -> Lab:
    """Runs the transfers once, into ``out``."""
    from pathtwin.emulation import Emulation

    net = Emulation(TOPOLOGY, out=out / "run", pcap=out / "pcap", pcap_hosts=["server"])
    with net:
        server = net["server"].popen([sys.executable, "-c", SERVER, str(PORT)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert server.stdout is not None and "ready" in server.stdout.readline()
        jobs = {"bulk": ["down:1500000", "up:900000"],
                "limited": ["down:500000:0:16384", "down:400000:2000000:0"]}
        failed: list[str] = []

        def client(name: str) -> None:
            r = net[name].run([sys.executable, "-c", CLIENT, net["server"].ip, str(PORT), *jobs[name]], timeout=60,
                              capture_output=True, text=True)
            if r.returncode:
                failed.append(f"{name}: {r.stderr.strip()[-300:]}")

        threads = [threading.Thread(target=client, args=(n,)) for n in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        server.kill()
        server_ip = net["server"].ip
        hosts = {h.name: h.ip for h in net.hosts}
    assert not failed, failed
    run = json.loads((out / "run" / "run.json").read_text())
    flows = pd.read_parquet(out / "run" / "packet_flows.parquet")
    timing = pd.read_parquet(out / "run" / "timing.parquet").set_index("kind")
    late_s = {q: float(timing.loc["release", f"{q}_ns"]) / 1e9 for q in ("p99", "max")}
    return Lab(out, run["resolved_paths"], flows, server_ip, hosts, late_s)


def infer(lab: Lab):
    """`pathtwin trace analyze`, then `pathtwin trace to-paths`, as a user runs them."""
    out, server_ip = lab.out, lab.server_ip
    conns_file, paths_file = out / "conns.parquet", out / "paths.toml"
    r = run_cli("trace", "analyze", out / "pcap" / "server.pcap", "--server", f"{server_ip}:{PORT}", "-o", conns_file)
    assert r.returncode == 0, r.stderr
    r = run_cli("trace", "to-paths", conns_file, "-o", paths_file)
    assert r.returncode == 0, r.stderr
    estimates = json.loads((out / "paths.estimates.json").read_text())
    return pd.read_parquet(conns_file), paths_file, estimates


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """The lab's runs, each analysed, by attempt number: the first made for the first check
    that asks, a second only when a check missed on the first; both kept for the module."""
    made: list[tuple[Lab, tuple]] = []

    def attempt(k: int) -> tuple[Lab, tuple]:
        while len(made) <= k:
            lab = run_lab(tmp_path_factory.mktemp("paths_lab"))
            made.append((lab, infer(lab)))
        return made[k]

    return attempt


def met(captures, check) -> None:
    """``check(lab, inferred)``, its asserts as they are, on the first capture and, if it
    misses, on the second (``met_in_one_of``): the estimators read packet timing, and this
    VM's host now and then slows it for minutes (one CI run read the bulk path's downstream
    capacity as 42 Mbit/s, where 14 runs of the same commit read 16.6-24.7 and an ABW point
    each). Estimators that are wrong miss both."""
    attempts = itertools.count()

    def shortfalls(run: tuple) -> list[str]:
        try:
            check(*run)
        except AssertionError as e:
            return [str(e)]
        return []

    met_in_one_of(2, lambda: captures(next(attempts)), shortfalls)


def _path_of(estimates: dict, hosts: dict, name: str) -> dict:
    (est,) = [p for p in estimates["paths"] if p["client"] == hosts[name]]
    return est


def test_capacity_and_abw_come_back_apart_in_each_direction(captures):
    def check(lab: Lab, inferred: tuple) -> None:
        hosts = lab.hosts
        conns, _, estimates = inferred
        est = _path_of(estimates, hosts, "bulk")
        for d, (capacity, abw) in zip(("s2c", "c2s"), TRUTH["bulk"]):
            c, a = est[d]["capacity"], est[d]["abw"]
            assert c["kind"] == "point" and a["kind"] == "point", (d, c, a)
            # Capacity: three standard errors and the bias bound; ABW: its own error bound.
            assert c["bias_bps"] is not None and abs(c["value_bps"] - capacity) <= 3 * (c["se_bps"] or 0) + c["bias_bps"], (d, c)
            assert abs(a["value_bps"] - abw) <= a["error_bps"], (d, a)
            assert a["limits"].get("network") == 1, (d, a)
        # The asymmetry is kept: each direction's values are its own.
        assert est["s2c"]["capacity"]["written_bps"] != est["c2s"]["capacity"]["written_bps"]
        bulk = conns[conns.client_ip == hosts["bulk"]]
        assert sorted(bulk.limit_s2c) == ["network", "none"] and sorted(bulk.limit_c2s) == ["network", "none"]

    met(captures, check)


def test_limited_transfers_bound_the_abw_only(captures):
    def check(lab: Lab, inferred: tuple) -> None:
        hosts = lab.hosts
        conns, _, estimates = inferred
        limited = conns[conns.client_ip == hosts["limited"]]
        assert sorted(limited.limit_s2c) == ["application", "receiver window"], limited.limit_s2c.tolist()
        # No point estimate from either; each bounds ABW from below by no more than it got.
        assert limited.abw_s2c_bps.isna().all()
        assert (limited.abw_s2c_floor_bps <= limited.throughput_s2c_bps).all()
        assert (limited.throughput_s2c_bps < TRUTH["limited"][0][1]).all()
        a = _path_of(estimates, hosts, "limited")["s2c"]["abw"]
        assert a["kind"] == "lower bound" and a["limits"] == {"application": 1, "receiver window": 1}, a
        assert a["value_bps"] <= TRUTH["limited"][0][1]
        # Written as the capacity, and said so.
        assert a["written_bps"] == _path_of(estimates, hosts, "limited")["s2c"]["capacity"]["written_bps"]
        assert "written as the capacity" in a["how"]

    met(captures, check)


def test_queues_and_losses_per_direction(captures):
    def check(lab: Lab, inferred: tuple) -> None:
        resolved, flows, hosts, late_s = lab.resolved, lab.flows, lab.hosts, lab.late_s
        conns, _, estimates = inferred
        est = _path_of(estimates, hosts, "bulk")
        # The delays' resolution: server to client an ACK's wait behind a reverse packet (1500 B
        # at 10 Mbit/s), client to server the client's 1-ms timestamp tick.
        resolution_s = {"s2c": 1500 * 8 / TRUTH["bulk"][1][0], "c2s": 1e-3}
        for k, (d, (frm, to)) in enumerate((("s2c", ("server", "bulk")), ("c2s", ("bulk", "server")))):
            (truth,) = [r for r in resolved if (r["from"], r["to"]) == (frm, to)]
            q, capacity = est[d]["queue"], TRUTH["bulk"][k][0]
            assert q["kind"] == "point", q
            # The fullest queue's delay against the emulator's limit at its capacity.
            truth_s = int(truth["queue"].rstrip("B")) * 8 / capacity
            tol_s = 1500 * 8 / capacity + resolution_s[d] + late_s["max"]
            assert abs(q["delay_ms"] / 1e3 - truth_s) <= tol_s, (d, q, truth, late_s)
            assert q["written_bytes"] == q["measured_bytes"] == int(q["delay_ms"] / 1e3 * est[d]["capacity"]["value_bps"] / 8)
        # Random loss: 1 % down the limited path against what the emulator dropped; none up.
        port = {str(p) for p in conns[conns.client_ip == hosts["limited"]].client_port}
        down = flows[(flows.route_src == "server") & (flows.route_dst == "limited") & flows.dst_port.astype(str).isin(port)]
        realised = (down.packets_in - down.packets_out).sum() / down.packets_in.sum()
        loss = _path_of(estimates, hosts, "limited")["s2c"]["loss"]
        assert abs(loss["value"] - realised) <= 3 * math.sqrt(realised * (1 - realised) / loss["packets"]) + 1 / loss["packets"], (loss, realised)
        assert est["s2c"]["loss"]["value"] == 0 and est["c2s"]["loss"]["value"] == 0

    met(captures, check)


def test_the_topology_round_trips_and_runs(captures):
    from pathtwin import _native
    from pathtwin.sim import simulate

    # Only the written file's form is checked, on whichever capture it is.
    _, paths_file, estimates = captures(0)[1]
    text = paths_file.read_text()
    # Written by the schema's serialiser under the comment lines.
    body = text.split("\n\n", 1)[1]
    assert _native.config_toml(text, "toml", str(paths_file)) == body
    config = tomllib.loads(text)
    assert [p["between"] for p in config["path"]] == [["server", "c0"], ["server", "c1"]]
    by_client = {p["host"]: p for p in estimates["paths"]}
    for p in config["path"]:
        est = by_client[p["between"][1]]
        for key, what in (("capacity", "capacity"), ("abw", "abw")):
            written = [est[d][what]["written_bps"] for d in ("s2c", "c2s")]
            assert list(_native.parse_per_direction("rate", "/".join(p[key]))) == written
    # A second of simulation with a bulk download on each path.
    config["run"]["duration"] = "1s"
    config["flow"] = [{"from": p["between"][1], "to": "server", "app": "reqresp", "request": "100B",
                       "response": "10MB", "requests": 1} for p in config["path"]]
    result = simulate(config)
    assert result.run["complete"] and [r["capacity"] for r in result.run["resolved_paths"]][:2] == [
        config["path"][0]["capacity"][0], config["path"][0]["capacity"][1]]
    flows = result.flows
    assert len(flows) == 2 and (flows.filter(like="bytes").sum(axis=1) > 0).all(), flows
