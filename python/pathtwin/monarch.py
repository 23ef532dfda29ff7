"""Monarch: emulate a TCP transfer to a remote host with probes (Haeberlen et al., IMC 2006).

    result = pathtwin.monarch.run({"rtt": "60ms", "down": "4mbit", "up": "1mbit"}, probe="tcp-ack",
                                  cc="cubic", nbytes=500_000, out="run/")
    print(result.summary["throughput_bps"], result.summary["verdict"])

A real kernel TCP sender and receiver run in their own namespaces; the emulator's proxy
(``pathtwin_emu::monarch``) holds each packet the sender sends and sends a probe of its size
to the target instead; the target's answer releases the packet to the receiver, whose ACKs
go straight back. The target is a namespace host whose own kernel answers the probes (RST,
ICMP port unreachable, echo and timestamp replies) across an emulated path with its own
delay, rates, queue and loss per direction — the mode in which the truth is known, for
validation. The proxy records probes and answers as it sends and receives them; that capture
is what the self-diagnosis (``pathtwin.trace.diagnose``) reads.

A target may also be a real host, as in the paper: ``run("192.0.2.7", ...)`` (an address or
a name). The sender and receiver stay in their namespaces; the probes leave through this
machine's own routing from its own address, with raw sockets, and the host's kernel answers
(``pathtwin_emu::real_target``). That needs root (CAP_NET_RAW, and CAP_NET_ADMIN for the
namespaces) and a firewall that lets the probes out and their answers in. Addresses that are
not on the Internet (private, loopback, link-local, multicast, ...) are refused unless
``allow_private``; what the target is sent is capped at ``max_rate`` (20 Mbit/s by default),
past which the proxy drops the sender's packets, and the summary says so.

``real_tcp=True`` also runs the same transfer as a real TCP flow from the sender to the
target, for the paper's §4 comparison, in an emulation of its own with the same seed: the
path's random loss decides on its n-th packet as it did on the Monarch flow's n-th probe,
so both meet one realization of the path (in one emulation, one after the other, the TCP
flow met the loss generator where the Monarch flow had left it: on two lossy paths that
read as Monarch at 1.46x and 1.66x TCP where paired realizations give 1.00).

``runs`` repeats that over several realizations (seeds ``seed``, ``seed + 1``, ...) and
reports the distribution of Monarch's throughput and of its ratio to real TCP's.
"""

from __future__ import annotations

import ipaddress
import json
import math
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pandas as pd

from .errors import PathtwinError

PROBES = ("tcp-ack", "udp", "icmp-echo", "icmp-timestamp")
PORT = 5400
#: How often the senders' ``tcp_info`` is sampled: the config's default.
SAMPLE_INTERVAL = "100ms"

def topology(path: dict, probe: str = "tcp-ack", target_ip_ids: str = "kernel", seed: int = 1,
             sample_interval: str = SAMPLE_INTERVAL) -> dict:
    """Hosts ``sender``, ``receiver``, ``target``; the path between sender and target
    (``rtt``, ``down`` and ``up`` rates — down is towards the target, the probes' way —
    ``loss_down``/``loss_up``, ``reorder_down``/``reorder_up`` (shares held back
    ``reorder_delay``, 5 ms by default), ``queue``) in link mode; Monarch's proxy between
    them; the senders' ``tcp_info`` sampled every ``sample_interval``."""
    if probe not in PROBES:
        raise PathtwinError(f"probe {probe!r}: use one of {', '.join(PROBES)}")
    keys = ("rtt", "down", "up", "loss_down", "loss_up", "reorder_down", "reorder_up", "reorder_delay", "queue")
    unknown = set(path) - set(keys)
    if unknown:
        raise PathtwinError(f"target path: unknown key {sorted(unknown)[0]!r} ({', '.join(keys)})")
    for key in ("rtt", "down", "up"):
        if key not in path:
            raise PathtwinError(f"target path: missing {key!r}")
    p = {"between": ["sender", "target"], "rtt": path["rtt"], "mode": "link", "abw": [path["down"], path["up"]],
         "loss": [path.get("loss_down", 0.0), path.get("loss_up", 0.0)]}
    if path.get("queue") is not None:
        p["queue"] = path["queue"]
    if path.get("reorder_down") or path.get("reorder_up"):
        p["reorder"] = [path.get("reorder_down", 0.0), path.get("reorder_up", 0.0)]
    if path.get("reorder_delay") is not None:
        p["reorder_delay"] = path["reorder_delay"]
    return {"hosts": ["sender", "receiver", "target"], "path": [p], "run": {"seed": seed, "sample_interval": sample_interval},
            "monarch": {"sender": "sender", "receiver": "receiver", "target": "target", "probe": probe,
                        "target_ip_ids": target_ip_ids}}


def real_topology(address: str, probe: str = "tcp-ack", seed: int = 1, allow_private: bool = False,
                  max_rate: Optional[str] = None, sample_interval: str = SAMPLE_INTERVAL) -> dict:
    """Hosts ``sender`` and ``receiver``; Monarch's proxy between them probes the real host
    at ``address`` (an IPv4 address) through this machine's own stack; the sender's
    ``tcp_info`` sampled every ``sample_interval``."""
    if probe not in PROBES:
        raise PathtwinError(f"probe {probe!r}: use one of {', '.join(PROBES)}")
    monarch = {"sender": "sender", "receiver": "receiver", "target": address, "probe": probe,
               "allow_private": allow_private}
    if max_rate is not None:
        monarch["max_rate"] = max_rate
    return {"hosts": ["sender", "receiver"], "run": {"seed": seed, "sample_interval": sample_interval}, "monarch": monarch}


def resolve_target(name: str) -> str:
    """A real target's IPv4 address: ``name`` itself, or what the resolver gives for it."""
    try:
        return str(ipaddress.IPv4Address(name))
    except ValueError:
        pass
    try:
        return str(socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0])
    except (socket.gaierror, IndexError, UnicodeError) as e:
        raise PathtwinError(f"target {name!r}: not an IPv4 address, and the resolver found none ({e})") from None


@dataclass
class MonarchResult:
    summary: dict
    #: The sender socket's ``tcp_info`` over time (``cwnd_bytes``, ``srtt_ms``,
    #: ``retransmits``, ...), ``time_s`` from the flow's start (``emulation/``'s
    #: ``flow_series`` keeps the emulation's clock).
    series: pd.DataFrame
    #: The self-diagnosis of the probe flow (one row).
    diagnosis: pd.DataFrame
    capture: Path
    out: Path


#: Unanswered probes beyond the path's own drops, as a share of all probes, above which the
#: target is taken to be rate-limiting its answers.
THROTTLE_SHARE = 0.05


def _warnings(s: dict) -> list[str]:
    """What the user must know to read this flow: answers the target held back, and probes
    that cannot stand for a packet's size."""
    out = []
    probes = s["proxy"]["probes"]
    if s["dropped_downstream"] is None:
        # A real path: what it dropped is only the diagnosis's estimate.
        held_back = s["unanswered_probes"] - s["lost_downstream"] - s["lost_upstream"] - s["lost_unclassified"]
    else:
        held_back = s["unanswered_probes"] - s["dropped_downstream"] - s["dropped_upstream"]
    if s["proxy"].get("capped"):
        out.append(f"{s['proxy']['capped']} of the sender's packets were dropped at the rate cap on what the target is sent "
                   f"({s['max_rate'] or '20mbit'}): the flow measured the cap, not the path — raise it with --max-rate if the "
                   f"target's owner agrees")
    if s["proxy"].get("send_failures"):
        out.append(f"the kernel refused {s['proxy']['send_failures']} probes (no route, or larger than the route's MTU)")
    if probes and held_back > THROTTLE_SHARE * probes:
        out.append(f"{held_back} of {probes} probes went unanswered though the path delivered them: the target rate-limits its "
                   f"answers (Linux: net.ipv4.icmp_ratelimit and icmp_msgs_per_sec limit ICMP errors such as port unreachable); "
                   f"the flow measures the limit, not the path — use tcp-ack or icmp-echo probes, or lift the limit on a target "
                   f"you control (target_sysctls / --target-sysctl)")
    if s["probe"] == "icmp-timestamp":
        out.append("icmp-timestamp probes are 40 bytes whatever packet they stand for: the path's rate and queue are not "
                   "exercised, only its delay and loss")
    return out


def run_tcp(path: dict, out, cc: Optional[str] = None, nbytes: int = 500_000, seed: int = 1) -> dict:
    """A real TCP transfer from the sender to the target over ``path``, in an emulation of
    its own: with the seed of a :func:`run`, the path's loss decides on its n-th packet as it
    did on the Monarch flow's n-th probe — the same path realization for both."""
    from .emulation import Emulation, bulk_transfer
    from .results import read_result_dir

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with Emulation(topology(path, seed=seed), out=out / "emulation", cc=cc) as net:
        t = bulk_transfer(net, "sender", "target", nbytes, PORT + 1, cc)
    summary, _ = _flow_summary(read_result_dir(out / "emulation").tables["flow_series"], t, nbytes)
    return summary


#: Where ``sink`` listens by default, and a real target's TCP reference is sent.
SINK_PORT = 5401


def run_tcp_real(address: str, nbytes: int, cc: Optional[str] = None, port: int = SINK_PORT, timeout: float = 600) -> dict:
    """A real TCP transfer of ``nbytes`` from this machine (its own network stack, as the
    probes leave it) to a ``sink`` on the real target at ``address``: the paper's reference
    for a Monarch flow to a host one controls."""
    import subprocess
    import sys

    from .emulation import _SEND

    try:
        done = subprocess.run([sys.executable, "-c", _SEND, address, str(port), str(nbytes), cc or ""], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise PathtwinError(f"real TCP to {address}:{port}: not done in {timeout:g} s") from None
    if done.returncode != 0:
        why = (done.stderr or "").strip().splitlines()[-1:] or ["no reason given"]
        raise PathtwinError(f"real TCP to {address}:{port}: {why[0]} (is `pathtwin monarch-sink --port {port}` running there?)")
    t = json.loads(done.stdout.strip().splitlines()[-1])
    duration = t["end"] - t["connected"]
    return {"bytes": nbytes, "duration_s": duration, "throughput_bps": nbytes * 8 / duration if duration > 0 else float("nan"),
            "address": address, "port": port}


def sink(port: int = SINK_PORT, once: bool = False, out=None) -> None:
    """Receives TCP transfers on ``port`` (all addresses) and prints one JSON line per
    connection (peer, bytes, seconds): the receiving end a real target runs for
    ``run(..., real_tcp=True)``; one connection at a time, until Ctrl-C (or one, ``once``)."""
    import socket
    import sys

    out = out or sys.stdout
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind(("0.0.0.0", port))
    except OSError as e:
        raise PathtwinError(f"monarch-sink: cannot listen on port {port} ({e.strerror or e})") from None
    srv.listen(4)
    print(json.dumps({"listening": port}), file=out, flush=True)
    with srv:
        while True:
            c, peer = srv.accept()
            t0, n = time.time(), 0
            with c:
                while b := c.recv(1 << 16):
                    n += len(b)
            print(json.dumps({"peer": peer[0], "bytes": n, "seconds": round(time.time() - t0, 6)}), file=out, flush=True)
            if once:
                return


def _path_losses(stats: dict) -> dict:
    """Packets the path between sender and target has dropped so far, each way (those that
    entered its route and never left it)."""
    out = {"down": 0, "up": 0}
    for r in stats["routes"]:
        way = {("sender", "target"): "down", ("target", "sender"): "up"}.get((r["src"], r["dst"]))
        if way:
            out[way] += r["packets_in"] - r["packets_out"] - r["write_drops"]
    return out


def _flow_summary(series: pd.DataFrame, t: dict, nbytes: int) -> tuple[dict, pd.DataFrame]:
    f = series[(series["src"] == "sender") & (series["src_port"] == t["port"])] if len(series) else series
    duration = t["end"] - t["connected"]
    last = f.iloc[-1] if len(f) else None
    return {
        "bytes": nbytes, "received": t["received"], "duration_s": duration,
        "throughput_bps": nbytes * 8 / duration if duration > 0 else float("nan"),
        "min_rtt_ms": float(f["min_rtt_ms"].min()) if len(f) else float("nan"),
        "max_rtt_ms": float(f["srtt_ms"].max()) if len(f) else float("nan"),
        "mean_rtt_ms": float(f["srtt_ms"].mean()) if len(f) else float("nan"),
        "retransmits": int(last["retransmits"]) if last is not None else 0,
        "retransmit_rate": float(last["retransmits"]) / max(nbytes / float(last["mss"] or 1448), 1) if last is not None else 0.0,
    }, f


def run(path: dict | str, out, probe: str = "tcp-ack", cc: Optional[str] = None, nbytes: int = 500_000,
        real_tcp: bool = False, target_sysctls: Optional[dict] = None, target_ip_ids: str = "kernel",
        seed: int = 1, allow_private: bool = False, max_rate: Optional[str] = None,
        sample_interval: str = SAMPLE_INTERVAL, real_tcp_port: int = SINK_PORT) -> MonarchResult:
    """One Monarch transfer of ``nbytes`` to a target: an emulated one whose ``path`` is a dict
    (see :func:`topology`), or a real host when ``path`` is its address or name (see the
    module's doc; ``allow_private`` and ``max_rate`` apply to it). Then, with ``real_tcp``, the
    same transfer as real TCP to an emulated target. ``target_sysctls`` are set in an
    emulated target host (e.g. ``{"net.ipv4.icmp_ratelimit": 0}``); ``target_ip_ids`` is
    "kernel" (the target's own IDs; Linux's leave the diagnosis little to work with) or
    "sequential" (one counter over all an emulated target sends, as the paper's hosts had);
    ``seed`` seeds the path's random loss (:func:`run_tcp` with the same seed meets the same
    drops); ``sample_interval`` is how often the sender's ``tcp_info`` is sampled. To a real
    target, ``real_tcp`` sends the same bytes from this machine to a :func:`sink` it runs on
    ``real_tcp_port`` (:func:`run_tcp_real`)."""
    from . import trace
    from .config import parse_quantity
    from .emulation import Emulation, bulk_transfer, since_flow_start
    from .results import read_result_dir

    if nbytes <= 0:
        raise PathtwinError(f"bytes must be positive, not {nbytes}")
    real = isinstance(path, str)
    if isinstance(path, str):
        for given, what in ((target_sysctls, "settings in the target"), (target_ip_ids != "kernel", "sequential IP IDs")):
            if given:
                raise PathtwinError(f"target {path}: {what} is only for an emulated target: a real host is not ours to change")
        address = resolve_target(path)
        config = real_topology(address, probe, seed, allow_private, max_rate, sample_interval)
    else:
        config = topology(path, probe, target_ip_ids, seed, sample_interval)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    capture = out / "probes.pcap"
    interval_s = parse_quantity("time", sample_interval, "sample interval")
    with Emulation(config, out=out / "emulation", cc=cc, monarch_pcap=capture) as net:
        for key, value in (target_sysctls or {}).items():
            net["target"].run(["sysctl", "-q", "-w", f"{key}={value}"], check=True)
        if real:
            # A target that answers nothing is told in 15 s (SYN sent 4 times), not the
            # kernel's 127 s: the sender's namespace is ours to set.
            net["sender"].run(["sysctl", "-q", "-w", "net.ipv4.tcp_syn_retries=3"], check=True)
        before = _path_losses(net.stats())
        try:
            mon = bulk_transfer(net, "sender", "receiver", nbytes, PORT, cc)
        except PathtwinError:
            proxy = net.stats()["monarch"]
            if real and proxy["probes"] and not proxy["responses"]:
                raise PathtwinError(f"target {address}: none of {proxy['probes']} {probe} probes was answered (is the host up? "
                                    f"does a firewall drop the probes, or their answers on the way back?)") from None
            raise
        # The sender's last ACK may still be crossing the path as a probe.
        time.sleep(1.0)
        stats = net.stats()
        proxy = stats["monarch"]
        # The truth the diagnosis is judged by: what the path itself dropped each way (an
        # emulated target's only; a real path's drops are what the diagnosis estimates).
        truth = None if real else {k: v - before[k] for k, v in _path_losses(stats).items()}
    series = read_result_dir(out / "emulation").tables["flow_series"]
    summary, mseries = _flow_summary(series, mon, nbytes)
    diagnosis, _ = trace.diagnose(capture)
    row = diagnosis.iloc[0] if len(diagnosis) else None
    summary.update({
        "probe": probe, "cc": cc, "path": path, "proxy": proxy,
        "target": address if real else "emulated", "max_rate": max_rate if real else None,
        "unanswered_probes": proxy["probes"] - proxy["responses"],
        "verdict": str(row["verdict"]) if row is not None else "Indeterminate",
        "reason": str(row["reason"]) if row is not None else "no probe flow in the capture",
        "lost_downstream": int(row["lost_downstream"]) if row is not None else 0,
        "lost_upstream": int(row["lost_upstream"]) if row is not None else 0,
        "lost_unclassified": int(row["lost_unclassified"]) if row is not None else 0,
        "reordered_downstream": int(row["reordered_downstream"]) if row is not None else 0,
        "reordered_upstream": int(row["reordered_upstream_minor"] + row["reordered_upstream_harmful"]) if row is not None else 0,
        "reordered_upstream_harmful": int(row["reordered_upstream_harmful"]) if row is not None else 0,
        "dropped_downstream": truth["down"] if truth else None, "dropped_upstream": truth["up"] if truth else None,
    })
    summary["warnings"] = _warnings(summary)
    summary["seed"] = seed
    record = out / "monarch.json"
    if real_tcp:
        # The Monarch flow's record is kept whatever happens to the reference transfer.
        record.write_text(json.dumps(summary, indent=2, default=str))
        summary["real_tcp"] = (run_tcp(path, out / "real-tcp", cc=cc, nbytes=nbytes, seed=seed) if isinstance(path, dict)
                               else run_tcp_real(address, nbytes, cc, real_tcp_port))
        summary["ratio_to_real_tcp"] = summary["throughput_bps"] / summary["real_tcp"]["throughput_bps"]
    record.write_text(json.dumps(summary, indent=2, default=str))
    return MonarchResult(summary, since_flow_start(mseries, interval_s), diagnosis, capture, out)


@dataclass
class Runs:
    """Several realizations of one Monarch comparison (:func:`runs`)."""

    #: One row per realization: seed, throughputs, their ratio, verdict.
    rows: list[dict]
    #: Per measure (``throughput_bps``, and with real TCP ``tcp_throughput_bps`` and
    #: ``ratio``): min, quartiles, median, max and mean over the realizations.
    distribution: dict[str, dict[str, float]] = field(default_factory=dict)
    out: Path = Path(".")


def _quantiles(values: list[float]) -> dict[str, float]:
    import numpy as np

    xs = np.array([v for v in values if not math.isnan(v)])
    if not len(xs):
        return {}
    q1, median, q3 = (float(q) for q in np.percentile(xs, [25, 50, 75]))
    return {"n": len(xs), "min": float(xs.min()), "q1": q1, "median": median, "q3": q3, "max": float(xs.max()),
            "mean": float(xs.mean())}


def runs(path: dict | str, out, count: int, seed: int = 1, real_tcp: bool = True, **kwargs) -> Runs:
    """``count`` Monarch transfers over realizations ``seed`` .. ``seed + count - 1`` of
    ``path``, each in ``out/run-NN`` (with ``real_tcp``, each paired with real TCP on the same
    realization); the rows and their distribution are also in ``out/monarch-runs.json``.
    Other arguments as :func:`run`."""
    if count < 1:
        raise PathtwinError(f"--runs: {count} is not a positive number of runs")
    out = Path(out)
    rows: list[dict] = []
    measures = ["throughput_bps"] + (["tcp_throughput_bps", "ratio"] if real_tcp else [])

    def record(interrupted: bool) -> Runs:
        result = Runs(rows, {m: _quantiles([r[m] for r in rows]) for m in measures}, out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "monarch-runs.json").write_text(json.dumps({"path": path, "runs": count, "interrupted": interrupted,
                                                           "rows": rows, "distribution": result.distribution}, indent=2))
        return result

    try:
        for k in range(count):
            s = run(path, out / f"run-{k:02d}", real_tcp=real_tcp, seed=seed + k, **kwargs).summary
            row = {"run": k, "seed": seed + k, "throughput_bps": s["throughput_bps"], "retransmits": s["retransmits"],
                   "verdict": s["verdict"]}
            if real_tcp:
                row.update({"tcp_throughput_bps": s["real_tcp"]["throughput_bps"],
                            "tcp_retransmits": s["real_tcp"].get("retransmits"), "ratio": s["ratio_to_real_tcp"]})
            rows.append(row)
    except KeyboardInterrupt:
        # Ctrl-C keeps the realizations that finished, with their distribution.
        record(interrupted=True)
        raise
    return record(interrupted=False)
