"""Monarch to a host outside any emulation, as the paper used it: the sender and receiver in
pathtwin's namespaces, the probes leaving through this machine's own routing, and a target
whose own kernel answers them.

The target here is a namespace that pathtwin does not emulate: a plain veth pair from the
machine's namespace, kernel routing, and `tbf` shaping each way for an asymmetric access
link (4 Mbit/s towards the target, 1 Mbit/s back). The expectations are the paper's
(Haeberlen et al., IMC 2006, §4: a Monarch flow behaves like a real TCP flow on the same
path), checked against real kernel TCP over the same veth and shaping, and the rate cap
against the bytes the machine's side of the veth counted.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import needs_root, run_cli

from pathtwin.cli.monarch import parse_target

DOWN_BPS = 4_000_000
UP_BPS = 1_000_000
NBYTES = 400_000
_targets = itertools.count()


@dataclass
class Target:
    ns: str
    #: The machine's end of the veth (its transmit counter is what the target was sent).
    device: str
    address: str
    source: str


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True)


@pytest.fixture
def real_target():
    """A namespace reached over veth and the kernel's routes, `tbf`-shaped each way; removed
    after the test whatever happens (deleting the namespace deletes the veth pair)."""
    k = next(_targets)
    pid = os.getpid()
    ns, device, peer = f"ptrt{pid}-{k}", f"ptrt{pid}{k}m", f"ptrt{pid}{k}t"
    # 198.18.0.0/15 (RFC 2544, benchmarking): no one's network, so nothing else answers.
    net = f"198.19.{pid % 256}.{4 * (k % 64)}"
    base = net.rsplit(".", 1)[0]
    last = int(net.rsplit(".", 1)[1])
    source, address = f"{base}.{last + 1}", f"{base}.{last + 2}"
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", device, "type", "veth", "peer", "name", peer)
        sh("ip", "link", "set", peer, "netns", ns)
        sh("ip", "addr", "add", f"{source}/30", "dev", device)
        sh("ip", "link", "set", device, "up")
        sh("ip", "-n", ns, "addr", "add", f"{address}/30", "dev", peer)
        sh("ip", "-n", ns, "link", "set", peer, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        # A 30-KB buffer towards the target (about 60 ms at 4 Mbit/s), 20 KB back.
        sh("tc", "qdisc", "add", "dev", device, "root", "tbf", "rate", f"{DOWN_BPS}bit", "burst", "5kb", "limit", "30kb")
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", peer, "root", "tbf", "rate", f"{UP_BPS}bit",
           "burst", "3kb", "limit", "20kb")
        yield Target(ns, device, address, source)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", device], capture_output=True)
    assert ns not in os.listdir("/run/netns"), f"the target namespace {ns} is still there"


def tx_bytes(device: str) -> int:
    return int(Path(f"/sys/class/net/{device}/statistics/tx_bytes").read_text())


def sink_in(target: Target, port: int) -> subprocess.Popen:
    """`pathtwin monarch-sink` on the target, as its owner would run it there."""
    p = subprocess.Popen(["ip", "netns", "exec", target.ns, sys.executable, "-m", "pathtwin.cli", "monarch-sink", "--port",
                          str(port), "--once"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "listening" in p.stdout.readline(), p.stderr.read()
    return p


def monarch(target: Target, out: Path, *extra: str) -> dict:
    r = run_cli("monarch", target.address, "--allow-private", "--cc", "cubic", "--bytes", f"{NBYTES}B", "-o", out, *extra,
                timeout=300)
    assert r.returncode == 0, r.stderr
    return {"stdout": r.stdout, **json.loads((out / "monarch.json").read_text())}


def test_a_real_target_is_named_by_its_address_and_checked():
    assert parse_target("192.0.2.7") == "192.0.2.7"
    assert parse_target("example.org") == "example.org"


@pytest.mark.parametrize("target, flags, message", [
    ("10.1.2.3", [], "10.1.2.3 is private (RFC 1918)"),
    ("224.0.0.1", [], "224.0.0.1 is multicast"),
    ("127.0.0.1", [], "loopback"),
    ("255.255.255.255", ["--allow-private"], "not a host's address"),
    ("no-such-host.invalid", [], "the resolver found none"),
    ("192.0.2.7", ["--real-tcp", "--real-tcp-port", "0"], "--real-tcp-port: 0 is not a TCP port"),
    ("192.0.2.7", ["--target-sysctl", "net.ipv4.icmp_ratelimit=0"], "only for an emulated target"),
    ("rtt=40ms,down=4mbit,up=1mbit", ["--max-rate", "1mbit"], "for a real target"),
    ("8.8.8.8", ["--max-rate", "0bit"], "monarch.max_rate"),
    ("8.8.8.8", ["--max-rate", "fast"], "--max-rate"),
])
def test_what_a_real_target_mode_refuses(tmp_path, target, flags, message):
    """Each refusal is one line naming what is wrong, and a non-zero exit, before any probe
    leaves (private and multicast addresses only with --allow-private)."""
    r = run_cli("monarch", target, "-o", tmp_path / "out", *flags, timeout=60)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out" / "monarch.json").exists()


@needs_root
def test_monarch_to_a_host_outside_the_emulation_matches_real_tcp(tmp_path, real_target):
    """The probes leave from the machine's address on the veth and the target's kernel
    answers them (RSTs to ACKs on a closed port); the flow's throughput is real TCP's over
    the same path (`--real-tcp`: this machine to a `pathtwin monarch-sink` on the target)
    within the paper's agreement (20 %), and within the shaped rate."""
    sink = sink_in(real_target, 5402)
    before = tx_bytes(real_target.device)
    s = monarch(real_target, tmp_path / "monarch", "--real-tcp", "--real-tcp-port", "5402")
    sent_to_target = tx_bytes(real_target.device) - before - NBYTES  # less the reference transfer's data
    received = json.loads(sink.communicate(timeout=30)[0].strip().splitlines()[-1])
    assert received["bytes"] == NBYTES and received["peer"] == real_target.source, received
    p = s["proxy"]
    assert s["received"] == NBYTES, s
    assert p["source"] == real_target.source and s["target"] == real_target.address, p
    # Every byte the sender sent crossed the veth as a probe of its size: at least the data.
    assert sent_to_target >= NBYTES, sent_to_target
    # A probe per data segment (1448 bytes each) and per handshake packet; the shaper drops
    # some when the flow overfills its buffer, as it drops real TCP's.
    assert p["probes"] > NBYTES / 1448 and p["responses"] >= 0.9 * p["probes"], p
    assert p["capped"] == 0 and p["send_failures"] == 0, p
    tcp = s["real_tcp"]
    assert s["throughput_bps"] <= DOWN_BPS and tcp["throughput_bps"] <= DOWN_BPS, s
    assert abs(s["throughput_bps"] - tcp["throughput_bps"]) <= 0.2 * tcp["throughput_bps"], (s["throughput_bps"], tcp)
    assert s["ratio_to_real_tcp"] == s["throughput_bps"] / tcp["throughput_bps"] and "Monarch/TCP" in s["stdout"]


@needs_root
def test_without_a_sink_the_monarch_flow_is_kept_and_the_reference_is_a_one_line_error(tmp_path, real_target):
    r = run_cli("monarch", real_target.address, "--allow-private", "--bytes", "100kB", "--real-tcp", "--real-tcp-port", "5403",
                "-o", tmp_path / "out", timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "monarch-sink --port 5403" in lines[0], r.stderr
    kept = json.loads((tmp_path / "out" / "monarch.json").read_text())
    assert kept["received"] == 100_000 and "real_tcp" not in kept


@needs_root
def test_the_rate_cap_bounds_what_a_real_target_is_sent(tmp_path, real_target):
    """With --max-rate below the path's rate, the veth carries no more than the cap (its
    rate over the transfer plus one 100-ms burst), the proxy counts what it dropped, and
    the command warns that the flow measured the cap."""
    cap_bps = 1_000_000
    before = tx_bytes(real_target.device)
    s = monarch(real_target, tmp_path / "capped", "--max-rate", f"{cap_bps}bit")
    sent_to_target = tx_bytes(real_target.device) - before
    assert s["received"] == NBYTES, s
    assert s["proxy"]["capped"] > 0, s["proxy"]
    assert any("rate cap" in w for w in s["warnings"]), s["warnings"]
    assert "rate cap" in s["stdout"]
    # The whole run, from the emulation's start to the end of the transfer, bounds how long
    # the bucket filled; the transfer alone is a tighter and still safe bound plus 1 s.
    allowed = cap_bps / 8 * (s["duration_s"] + 1.0) + cap_bps / 8 * 0.1
    assert sent_to_target <= allowed, (sent_to_target, allowed)
    assert s["throughput_bps"] <= cap_bps, s["throughput_bps"]


@needs_root
def test_a_target_that_answers_nothing_is_told_in_seconds(tmp_path, real_target):
    """A target whose link is down answers no probe: the command says so in one line, after
    the sender's four SYNs (15 s), not the kernel's two minutes."""
    sh("ip", "-n", real_target.ns, "link", "set", "lo", "down")
    sh("ip", "-n", real_target.ns, "link", "set", f"{real_target.device[:-1]}t", "down")
    r = run_cli("monarch", real_target.address, "--allow-private", "-o", tmp_path / "out", timeout=60)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "none of" in lines[0] and "was answered" in lines[0], r.stderr
