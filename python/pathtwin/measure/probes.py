"""The probe series: from each source, one light UDP probe to every destination back to back
every ``interval`` for ``duration``, echoed by a server on each host. One series gives both
what a path model needs from probes:

- the base RTT of a pair: the minimum round trip of the series (NSDI'09 §3.3: "simple ping
  packets, sent frequently over long periods"; the smallest saw no queue), less the time each
  echo waited in the echo server (its send time less its probe's kernel receive time, both
  read from the destination's clock): that wait is the host's scheduling, not the path;
- the one-way delays towards each destination (echo server's kernel receive time minus the
  probe's send time) that shared-congestion detection correlates (``shared``; ALGORITHMS.md
  §7's "UDP probes to both destinations back to back every ~99 ms").

All sources probe at once: the probes are 64-byte datagrams (a few kbit/s per path), and a
source's rounds go to its destinations back to back as DCW needs. Between emulated hosts the
sender's and the receiver's clocks are one clock (network namespaces share
``CLOCK_REALTIME``), so one-way delays are absolute; between real hosts they carry an unknown
offset, which the minimum RTT does not use and correlation does not see.

Not here: the programs (``endpoints``), the clustering (``shared``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from ..errors import PathtwinError
from . import hosts as hostmod
from .hosts import Host, Program


@dataclass
class ProbeSeries:
    """One source's probes to one destination: per answered round its send, remote receive
    and return times (ns), and how many rounds were sent."""

    src: str
    dst: str
    rounds: int
    interval_s: float
    round: np.ndarray
    sent: np.ndarray
    remote_rx: np.ndarray
    back: np.ndarray
    #: Which clock stamped ``sent`` and which ``remote_rx`` (the machines' boot ids; equal
    #: between namespaces of one machine, None when a host did not say).
    src_clock: Optional[str] = None
    dst_clock: Optional[str] = None
    #: Rounds of ``rounds`` the prober skipped because their time had passed (a late start
    #: or a stall, ``endpoints.probe``): not sent, so not lost.
    skipped: int = 0
    #: Per answered round, when the echo server sent its echo (ns, the destination's clock);
    #: None where no server waited (a simulated echo leaves as its probe arrives) or a
    #: record from before it was kept.
    remote_tx: Optional[np.ndarray] = None

    @property
    def independent_clocks(self) -> bool:
        """Whether the two ends' clocks are known to be different machines' (one-way delays
        then carry the clocks' offset and skew)."""
        return self.src_clock is not None and self.dst_clock is not None and self.src_clock != self.dst_clock

    @property
    def turnaround_s(self) -> np.ndarray:
        """How long each echo waited in the echo server, from its probe's kernel receive to
        its send (s; 0 where not known): a process's wake-up, which on a busy 2-core
        machine left agents in an emulation with minimum RTTs up to 0.75 ms above the
        path's while it was counted in."""
        if self.remote_tx is None:
            return np.zeros(len(self.round))
        return np.maximum(self.remote_tx - self.remote_rx, 0) / 1e9

    @property
    def rtt_s(self) -> np.ndarray:
        """Round trips on the path (s): return less send, less the echo's wait in its server."""
        return (self.back - self.sent) / 1e9 - self.turnaround_s

    @property
    def one_way_s(self) -> np.ndarray:
        """Forward one-way delays (s): exact between emulated hosts, offset by the clocks'
        difference between real ones."""
        return (self.remote_rx - self.sent) / 1e9

    def summary(self) -> dict:
        """Base RTT (the minimum) with what says how far to trust it: samples and losses,
        the 5th percentile and median (how much queueing the series saw above the minimum)."""
        n = len(self.round)
        if n == 0:
            return {"samples": 0, "lost": self.rounds - self.skipped, "rtt_min_ms": None}
        rtt = self.rtt_s * 1e3
        return {"samples": n, "lost": self.rounds - self.skipped - n, "rtt_min_ms": round(float(rtt.min()), 4),
                "rtt_p5_ms": round(float(np.percentile(rtt, 5)), 4), "rtt_median_ms": round(float(np.median(rtt)), 4)}

    def to_json(self) -> dict:
        return {"src": self.src, "dst": self.dst, "rounds": self.rounds, "interval_s": self.interval_s,
                "round": self.round.tolist(), "sent": self.sent.tolist(), "remote_rx": self.remote_rx.tolist(),
                "back": self.back.tolist(), "src_clock": self.src_clock, "dst_clock": self.dst_clock,
                "skipped": self.skipped, "remote_tx": None if self.remote_tx is None else self.remote_tx.tolist()}

    @classmethod
    def from_json(cls, d: dict) -> "ProbeSeries":
        arr = lambda k: np.asarray(d[k], dtype=np.int64)  # noqa: E731
        return cls(d["src"], d["dst"], int(d["rounds"]), float(d["interval_s"]), arr("round"), arr("sent"),
                   arr("remote_rx"), arr("back"), d.get("src_clock"), d.get("dst_clock"), int(d.get("skipped", 0)),
                   arr("remote_tx") if d.get("remote_tx") is not None else None)


    @classmethod
    def from_prober(cls, src: str, dst: str, res: dict, g: dict, src_clock: Optional[str] = None,
                    dst_clock: Optional[str] = None) -> "ProbeSeries":
        """One destination's series ``g`` of a prober's result ``res`` (``endpoints.probe``)."""
        arr = lambda k: np.asarray(g[k], dtype=np.int64)  # noqa: E731
        return cls(src, dst, int(res["rounds"]), float(res["interval"]), arr("round"), arr("sent"), arr("remote_rx"),
                   arr("back"), src_clock, dst_clock, int(res.get("skipped", 0)), arr("remote_tx") if "remote_tx" in g else None)


class EchoServers:
    """An echo server on each host for the duration of a ``with`` block; ``serve_s`` is how
    long the block may take at most (a real host's agent stops its server then)."""

    def __init__(self, hosts: Sequence[Host], port: int, serve_s: float):
        self.hosts = list(hosts)
        self.port = port
        self.serve_s = serve_s
        self._procs: list[Program] = []

    def __enter__(self) -> "EchoServers":
        try:
            for h in self.hosts:
                self._procs.append(hostmod.operate(h, "echo", port=self.port, duration=self.serve_s))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for p in self._procs:
            p.stop()
        self._procs.clear()


#: How far ahead of now, per source, the probe series are told to start together (s): long
#: enough for each source's program to start (an emulated host's 0.06-0.16 s; a real host's
#: agent one round trip and a process start more).
START_LEAD_S = 0.3


def probe_all(sources: Sequence[Host], dests: dict[str, Sequence[Host]], port: int,
              interval_s: float, duration_s: float,
              on_done: Optional[Callable[[str], None]] = None) -> dict[str, dict[str, ProbeSeries]]:
    """Runs every source's probe series at once (echo servers must be running on the
    destinations); returns ``{source: {destination: ProbeSeries}}``. ``on_done(source)`` is
    called as each source's series ends.

    The series start one after another (a program launched in each host), so each is told
    when to send its first round, ``START_LEAD_S`` per source ahead: round r of every source
    then leaves together, which the correlation of paths of different sources needs
    (``session.cross_source_classes``). Unscheduled, campus's four sources in the emulator
    started 0.16-0.37 s apart at a 0.1-s interval, and the class that s's and d3's paths to
    d1 and d2 make through r1 -> r2 was not found. A program that starts after ``start_at``
    anyway (a loaded machine: 0.4-0.7 s late) skips the rounds whose time passed rather than
    shifting its series (``endpoints.probe``)."""
    procs = []
    start_at = time.time_ns() + int(START_LEAD_S * len(sources) * 1e9)
    try:
        for s in sources:
            addrs = [d.ip for d in dests[s.name]]
            procs.append((s, hostmod.operate(s, "probe", port=port, interval=interval_s, duration=duration_s,
                                             dests=addrs, start_at=start_at)))
        out: dict[str, dict[str, ProbeSeries]] = {}
        for s, p in procs:
            res = p.result("the probe series", timeout=duration_s + START_LEAD_S * len(sources) + 30)
            names = [d.name for d in dests[s.name]]
            by_name = {d.name: d for d in dests[s.name]}
            out[s.name] = {}
            for name, g in zip(names, res["series"]):
                out[s.name][name] = ProbeSeries.from_prober(s.name, name, res, g, hostmod.clock(s), hostmod.clock(by_name[name]))
            if on_done is not None:
                on_done(s.name)
        return out
    finally:
        for _s, p in procs:
            p.stop()


def check_probe_settings(interval_s: float, duration_s: float) -> None:
    """A series DCW can use: positive times and at least 25 rounds (ALGORITHMS.md §7)."""
    if not (interval_s > 0 and math.isfinite(interval_s)):
        raise PathtwinError(f"--probe-interval: must be positive, not {interval_s:g} s")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise PathtwinError(f"--probe-duration: must be positive, not {duration_s:g} s")
    if duration_s / interval_s < 25:
        raise PathtwinError(f"--probe-duration {duration_s:g} s at --probe-interval {interval_s * 1e3:g} ms gives "
                            f"{int(duration_s / interval_s)} probes per path; shared-bottleneck detection needs at least 25")
