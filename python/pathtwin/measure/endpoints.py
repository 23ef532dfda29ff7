"""The small programs a measurement runs inside the measured hosts: a UDP echo server, a
UDP prober, a TCP sink and a TCP sender. Standard library only, run as a script
(``python endpoints.py echo|probe|sink|send ...``) so that a host needs nothing but a Python
interpreter (an emulated host shares this file system; on a real host the agent runs the copy
installed with it, ``agent``). Each prints ``ready`` when it listens and one JSON line with
its result.

Time stamps are ``CLOCK_REALTIME`` nanoseconds. Received datagrams are stamped by the kernel
(``SO_TIMESTAMPNS``), not when Python gets round to reading them, so a busy interpreter adds
no delay to a one-way delay. Between network namespaces of one machine both ends read the
same clock, so receiver time minus sender time *is* the one-way delay; between real hosts it
is the delay plus an unknown clock offset, which the uses of one-way delays here (minimum and
correlation of a series) do not depend on.

Not here: what the numbers mean (``probes``, ``throughput``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import select
import selectors
import signal
import socket
import struct
import sys
import time

#: A probe: magic, round, destination index, sender's time (ns); padded to PROBE_BYTES.
PROBE = struct.Struct("!IIIq")
#: An echo: the probe, then the echo server's kernel receive time and its send time (ns).
ECHO = struct.Struct("!IIIqqq")
MAGIC = 0x70747731  # "ptw1"
#: Bytes of a probe datagram's payload: light (the series must not load the path).
PROBE_BYTES = 64
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # <asm-generic/socket.h>
IP_MTU = 14  # <linux/in.h>; not exported by Python's socket module
#: A capped sender's token bucket: the rate's worth of this many seconds, at least
#: CAP_BURST bytes (all flows together).
CAP_BUCKET_S = 0.02
CAP_BURST = 65536
#: How long a sink whose every accepted connection has ended waits for one it has not yet
#: accepted (s): the sender closes all its connections at its end, those still in their
#: handshake too, so none comes later than one already completed in the accept queue.
SINK_LINGER_S = 1.0
#: How long after the test's end (its ``duration`` from its first byte) a sink keeps
#: reading connections that have not ended (s). What a test wrote ahead drains through the
#: paths after its end, and the next test waits for it; but a connection starved into
#: retransmission backoff (every pair of two-bottlenecks.toml at once: d3 -> d2) can take
#: minutes to deliver its last bytes. Past this the sink reports what it has; its exit
#: closes the connections, which ends their retransmissions.
SINK_DRAIN_LIMIT_S = 25.0
#: Offset of ``tcpi_bytes_received`` in Linux's ``struct tcp_info``.
TCPI_BYTES_RECEIVED = 128
#: Offset of ``tcpi_rtt`` (the smoothed RTT, µs; Linux 2.6+) in ``struct tcp_info``.
TCPI_RTT = 68
#: Most a scheduled probe round leaves after its time, as a share of the interval (``probe``).
ROUND_JITTER = 0.25
#: How often the sender reads its connections' smoothed RTTs (s), as the sink its counts.
RTT_EVERY_S = 0.05
#: How long the sender waits for all its connections' handshakes before it starts with those
#: established (s; the others join when they are). A test's SYNs cross paths that other
#: tests' flows may keep full: one SYN of eight flows from d3 to d1 in two-bottlenecks.toml,
#: loaded together with the class of its bottleneck, was not answered within the 10 s the
#: sender used to allow, and with every pair of it at once (160 connections) three of eight
#: were not in 25 s. Linux sends a SYN again 1, 3, 7 and 15 s after the first: 25 s waits
#: for an answer to the fifth, and stays inside the time an agent lets a program outlive its
#: duration (``agent.GRACE_S``).
CONNECT_TIMEOUT_S = 25.0


def _stamp_socket(s: socket.socket) -> None:
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def _recv_stamped(s: socket.socket) -> tuple[bytes, int, tuple]:
    """One datagram, the kernel's receive time (ns; the clock now if it gave none) and the sender."""
    data, anc, _flags, addr = s.recvmsg(2048, socket.CMSG_SPACE(16))
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
            sec, nsec = struct.unpack("qq", payload[:16])
            return data, sec * 1_000_000_000 + nsec, addr
    return data, time.time_ns(), addr


def echo(port: int, bind: str = "0.0.0.0") -> int:
    """Answers every probe with the probe, its kernel receive time and the send time."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((bind, port))
    _stamp_socket(s)
    print("ready", flush=True)
    while True:
        data, rx, addr = _recv_stamped(s)
        if len(data) < PROBE.size:
            continue
        magic, rnd, dest, sent = PROBE.unpack_from(data)
        if magic != MAGIC:
            continue
        s.sendto(ECHO.pack(magic, rnd, dest, sent, rx, time.time_ns()), addr)


def probe(port: int, interval: float, duration: float, dests: list[str], start_at: int | None = None) -> int:
    """Every ``interval`` seconds for ``duration``, one probe to each destination back to back
    (the order of ``dests``), the echoes collected until a second after the last round; the
    first round at ``start_at`` (``CLOCK_REALTIME`` ns; at once if none or past), so that the
    series of several sources started one after another send their rounds together. A
    scheduled round leaves up to ``ROUND_JITTER`` of an interval after its time, at random:
    sources whose rounds left at the same instant woke their probers and echo servers at once
    in every round (four programs on a 2-core machine: agents in an emulation measured
    minimum RTTs 0.5-0.7 ms above the path's), and the minimum then had no round without the
    crowd; a quarter interval keeps round r of every source together for the correlation.
    The schedule holds even for a program that starts after ``start_at`` or stalls: a round
    whose time passed by an interval or more is skipped, not sent late, so round r is the
    same time slot in every source's series (on a loaded 2-core machine campus's fourth
    prober started 0.4-0.7 s, four to seven rounds, after ``start_at``; sent at once, its
    round r left with the others' round r + 7, and the cross-source class went unseen or
    was found only by chaining). Result: per destination, the lists ``round``, ``sent``,
    ``remote_rx``, ``remote_tx`` (the echo's send time), ``back`` (ns; rounds skipped or
    without an echo are missing), ``rounds``
    (the rounds of the schedule up to the last sent) and ``skipped``."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _stamp_socket(s)
    s.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(s, selectors.EVENT_READ)
    got: list[dict[str, list[int]]] = [{"round": [], "sent": [], "remote_rx": [], "remote_tx": [], "back": []}
                                       for _ in dests]
    rounds = max(1, int(duration / interval))
    pad = b"\0" * (PROBE_BYTES - PROBE.size)
    print("ready", flush=True)
    start = time.monotonic() + ((start_at - time.time_ns()) / 1e9 if start_at is not None else 0.0)
    jitter = [random.uniform(0, ROUND_JITTER * interval) if start_at is not None else 0.0 for _ in range(rounds)]
    next_round, sent_rounds, skipped = 0, 0, 0
    end = start + rounds * interval + 1.0
    while True:
        now = time.monotonic()
        if start_at is not None:
            while next_round < rounds and now >= start + (next_round + 1) * interval:
                next_round += 1  # its slot is over: sent now it would line up with the next round
                skipped += 1
        if next_round < rounds and now >= start + next_round * interval + jitter[next_round]:
            for i, d in enumerate(dests):
                try:
                    s.sendto(PROBE.pack(MAGIC, next_round, i, time.time_ns()) + pad, (d, port))
                except (BlockingIOError, OSError):
                    pass  # a full socket buffer or an unreachable host is a lost probe
            next_round += 1
            sent_rounds = next_round
            continue
        if now >= end:
            break
        wake = start + next_round * interval + jitter[next_round] if next_round < rounds else end
        for _key, _ev in sel.select(timeout=max(0.0, wake - now)):
            while True:
                try:
                    data, back, _addr = _recv_stamped(s)
                except BlockingIOError:
                    break
                if len(data) < ECHO.size:
                    continue
                magic, rnd, dest, sent, rx, tx = ECHO.unpack_from(data)
                if magic != MAGIC or dest >= len(dests):
                    continue
                g = got[dest]
                g["round"].append(rnd)
                g["sent"].append(sent)
                g["remote_rx"].append(rx)
                g["remote_tx"].append(tx)
                g["back"].append(back)
    print(json.dumps({"rounds": sent_rounds, "skipped": skipped, "interval": interval, "dests": dests, "series": got}),
          flush=True)
    return 0


def _tcp_info_field(c: socket.socket, offset: int, fmt: str) -> int | None:
    """One field of the kernel's ``struct tcp_info`` for this connection, or None where the
    kernel keeps none (an older kernel's shorter struct, or no TCP_INFO)."""
    size = struct.calcsize(fmt)
    try:
        info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    except OSError:
        return None
    return struct.unpack_from(fmt, info, offset)[0] if len(info) >= offset + size else None


def _bytes_received(c: socket.socket) -> int | None:
    """The kernel's count of bytes this connection received (``tcpi_bytes_received``, Linux
    4.1+), or None where the kernel keeps none."""
    return _tcp_info_field(c, TCPI_BYTES_RECEIVED, "Q")


def _srtt_us(c: socket.socket) -> int | None:
    """The kernel's smoothed RTT of this connection (µs), or None where it keeps none or has
    no sample yet (0)."""
    return _tcp_info_field(c, TCPI_RTT, "I") or None


def sink(port: int, flows: int, every: float, bind: str = "0.0.0.0", duration: float | None = None,
         drain_limit: float = SINK_DRAIN_LIMIT_S) -> int:
    """Accepts ``flows`` connections (fewer if the sender ended without the others: their
    handshakes never completed, ``SINK_LINGER_S``) and reads them to their end. Result: every ``every``
    seconds from the first accept, the time (ns) and each connection's bytes received so far
    (``samples``), and the test's start as the sink sees it (``t0``, ns): the first byte's
    arrival. The sender starts once every handshake has completed (``CONNECT_TIMEOUT_S``),
    which one SYN lost behind full queues delays by 1, 3, 7 or 15 s: from the first accept,
    such a test's averaged window would hold the wait, not the flows (pairs that read 0 with
    every pair of two-bottlenecks.toml at once). The counts are the kernel's (``kernel``:
    true), taken with the time they are read at: a sink that is late to read (a busy machine)
    shifts no bytes between samples, as counting what ``recv`` returns would. With the test's
    ``duration``, it stops reading ``drain_limit`` seconds after the test's end (from ``t0``;
    without a byte, from the latest the sender may start)."""
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((bind, port))
    ls.listen(flows + 4)
    print("ready", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    conns: list[socket.socket | None] = []
    read: list[int] = []  # bytes recv() returned, per connection
    last: list[int] = []  # the newest count per connection
    kernel = True
    samples: list[tuple[int, list[int]]] = []
    t0 = 0
    accepted, open_ = 0, 0
    started: float | None = None  # when the first byte came (monotonic)

    def sample() -> None:
        nonlocal kernel
        for i, c in enumerate(conns):
            if c is not None:
                k = _bytes_received(c)
                if k is None:
                    kernel = False
                last[i] = k if kernel and k is not None else read[i]
        samples.append((time.time_ns(), list(last)))

    next_sample = 0.0
    all_ended_at: float | None = None  # since when every accepted connection has ended
    first_accept = 0.0
    while accepted < flows or open_ > 0:
        now = time.monotonic()
        base = started if started is not None else first_accept + CONNECT_TIMEOUT_S
        if duration is not None and accepted and now - base >= duration + drain_limit:
            break
        if accepted and open_ == 0:
            # The sender has ended (it closes its connections only then) with fewer
            # connections than asked for: the rest never completed their handshakes.
            all_ended_at = now if all_ended_at is None else all_ended_at
            if now - all_ended_at >= SINK_LINGER_S:
                break
        else:
            all_ended_at = None
        if accepted and now >= next_sample:
            sample()
            next_sample = now + every
        for key, _ev in sel.select(timeout=every if accepted else 1.0):
            if key.data is None:
                c, _ = ls.accept()
                c.setblocking(False)
                if accepted == 0:
                    t0 = time.time_ns()  # until a byte comes
                    first_accept = time.monotonic()
                sel.register(c, selectors.EVENT_READ, accepted)
                conns.append(c)
                read.append(0)
                last.append(0)
                accepted += 1
                open_ += 1
                if accepted == flows:
                    sel.unregister(ls)
                    ls.close()
                continue
            k = key.data
            try:
                b = key.fileobj.recv(262144)  # type: ignore[union-attr]
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                b = b""
            read[k] += len(b)
            if b and started is None:
                t0, started = time.time_ns(), time.monotonic()
            if not b:
                sample()  # its final count, while the socket still exists
                sel.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                conns[k] = None
                open_ -= 1
    sample()
    print(json.dumps({"t0": t0, "samples": samples, "kernel": kernel, "rmem_max": _rmem_max()}), flush=True)
    return 0


def _rmem_max() -> int | None:
    """The largest receive buffer this host's TCP autotunes to (its network namespace's
    ``tcp_rmem`` maximum): what bounds a flow's window towards it."""
    try:
        with open("/proc/sys/net/ipv4/tcp_rmem") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return None


def _await_connected(socks: list[socket.socket], where: str) -> set[int]:
    """Waits until every non-blocking ``connect`` of ``socks`` has completed, at most
    ``CONNECT_TIMEOUT_S``, and returns the indices of those still connecting then (the
    sender lets them join when they complete). Raises ``TimeoutError`` if none
    completed, or the ``OSError`` of one that failed. The handshakes run at once, so that one
    SYN lost does not hold back the others (and the test's start) by a retransmission
    timeout."""
    sel = selectors.DefaultSelector()
    for i, c in enumerate(socks):
        sel.register(c, selectors.EVENT_WRITE, i)
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                if len(sel.get_map()) == len(socks):
                    raise TimeoutError(f"none of {len(socks)} connection(s) to {where} established in "
                                       f"{CONNECT_TIMEOUT_S:g} s")
                return {key.data for key in sel.get_map().values()}
            for key, _ev in sel.select(timeout=left):
                _raise_if_failed(key.fileobj, where)  # type: ignore[arg-type]
                sel.unregister(key.fileobj)
        return set()
    finally:
        sel.close()


def _raise_if_failed(c: socket.socket, where: str) -> None:
    """A connecting socket turned writable: connected, or the ``OSError`` of its failed
    handshake (refused, unreachable) is raised."""
    err = c.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, f"connecting to {where}: {os.strerror(err)}")


def _congestion_control(c: socket.socket) -> str:
    """The congestion control the kernel runs on ``c`` (``TCP_CONGESTION``)."""
    return c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()


def _use_congestion_control(c: socket.socket, cc: str) -> None:
    """Sets ``c``'s congestion control before it connects; a one-line exit naming what the
    host offers if its kernel refuses it."""
    try:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    except OSError as e:
        try:
            with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
                offered = f.read().strip()
        except OSError:
            offered = "unknown"
        raise SystemExit(f"congestion control {cc!r}: this host's kernel refuses it ({e.strerror}; "
                         f"available: {offered})") from None


def send(addr: str, port: int, flows: int, duration: float, max_rate: float | None = None,
         cc: str | None = None) -> int:
    """Opens ``flows`` connections at once and keeps them all sending for ``duration``
    seconds. Result: bytes each wrote, the segment payload (``mss``) and the path MTU, which
    turn goodput into the IP-level rate a path model's ABW is, and every ``RTT_EVERY_S`` the
    time since the start (s) and each connection's smoothed RTT (µs, null before its first
    sample: ``rtt``), the round trip the flows had with the queues they loaded (the sender's
    clock only: between real hosts it has no offset to the sink's). ``max_rate`` (bit/s, all flows
    together; an agent's ``--max-rate``) caps each flow at its share by the kernel's pacing,
    set before the connection opens so that not even slow start exceeds it. ``cc`` is the
    flows' congestion control (``TCP_CONGESTION``; None: the host's default); the result's
    ``cc`` is the one the kernel ran, read back from a connected socket."""
    socks = []
    for _ in range(flows):
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if cc is not None:
            _use_congestion_control(c, cc)
        if max_rate is not None:
            per_flow = max(1, min(2**31 - 1, int(max_rate / 8 / flows)))  # bytes/s in a C int
            c.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, per_flow)
        c.setblocking(False)
        c.connect_ex((addr, port))  # EINPROGRESS: all handshakes at once (_await_connected)
        socks.append(c)
    where = f"{addr}:{port}"
    # Connections still in their handshake after CONNECT_TIMEOUT_S (SYNs lost behind every
    # pair of a ground truth loaded at once) join the test when they complete, as a late
    # flow of an application would; one that never does delivers nothing.
    pending = _await_connected(socks, where)

    ended: set[int] = set()  # connections the sink reset, or whose late handshake failed

    def drop(i: int) -> None:
        """Connection ``i`` ends here: what it delivered is the sink's to count, and a sink
        that stopped reading (its drain limit) or refused a late handshake fails no test."""
        ended.add(i)
        sel.unregister(socks[i])

    def joined(i: int) -> bool:
        """Whether connection ``i``, writable now, just completed its handshake (it sends
        from the next pass on) or failed it (``drop``): either way nothing to write now."""
        if i not in pending:
            return False
        pending.discard(i)
        try:
            _raise_if_failed(socks[i], where)
        except OSError:
            drop(i)
        return True

    first = next(c for i, c in enumerate(socks) if i not in pending)
    mss = first.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    ran = _congestion_control(first)
    try:
        mtu = first.getsockopt(socket.IPPROTO_IP, IP_MTU)
    except OSError:
        mtu = 1500
    sel = selectors.DefaultSelector()
    for i, c in enumerate(socks):
        sel.register(c, selectors.EVENT_WRITE, i)
    chunk = b"m" * 262144
    wrote = [0] * flows
    start = time.monotonic()
    end = start + duration
    rtts: list[tuple[float, list[int | None]]] = []
    next_rtt = start
    if max_rate is not None:
        share = max_rate / 8 / flows  # bytes/s of each flow
        bucket = max(CAP_BURST, max_rate / 8 * CAP_BUCKET_S) / flows
        least = min(bucket, 16384.0)  # no smaller write (CPU), unless the bucket is smaller
        tokens = [bucket] * flows
        last = start
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_rtt:
            rtts.append((round(now - start, 4), [_srtt_us(c) for c in socks]))
            next_rtt = now + RTT_EVERY_S
        if max_rate is None:
            for key, _ev in sel.select(timeout=RTT_EVERY_S):
                if joined(key.data):
                    continue
                try:
                    wrote[key.data] += key.fileobj.send(chunk)  # type: ignore[union-attr]
                except (BlockingIOError, InterruptedError):
                    pass
                except (ConnectionResetError, BrokenPipeError):
                    drop(key.data)
            continue
        # Capped: each flow's writes are metered by a token bucket filled at its share of
        # the rate and holding at most its share of CAP_BUCKET_S of it (at least CAP_BURST
        # bytes), so that the flows together exceed the rate over no window by more than a
        # bucket, even after a stall (credit does not pile up). The kernel's pacing alone is
        # smooth but not a bound: it lets a connection's first ten segments out unpaced
        # (640 KB over loopback). A bucket per flow, not one for all: the first writable flow
        # would take it all into its socket buffer, where its pacing (its share) holds it,
        # and the test would get 1/flows of the rate.
        now = time.monotonic()
        for i in range(flows):
            tokens[i] = min(bucket, tokens[i] + share * (now - last))
        last = now
        want = [socks[i] for i in range(flows) if tokens[i] >= least and i not in ended]
        if not want:
            time.sleep(min(0.002, max(0.0, end - now)))
            continue
        _r, writable, _x = select.select([], want, [], min(RTT_EVERY_S, max(0.0, end - now)))
        for c in writable:
            i = socks.index(c)
            if joined(i):
                continue
            try:
                n = c.send(chunk[:int(tokens[i])])
            except (BlockingIOError, InterruptedError):
                continue
            except (ConnectionResetError, BrokenPipeError):
                drop(i)
                continue
            wrote[i] += n
            tokens[i] -= n
    for c in socks:
        c.close()
    out = {"wrote": wrote, "mss": mss, "mtu": mtu, "rtt": rtts, "cc": ran, "ended_early": sorted(ended)}
    if max_rate is not None:
        out["max_rate"] = max_rate
    print(json.dumps(out), flush=True)
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="endpoints.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--port", type=int, required=True)
    e.add_argument("--bind", default="0.0.0.0")
    pr = sub.add_parser("probe")
    pr.add_argument("--port", type=int, required=True)
    pr.add_argument("--interval", type=float, required=True)
    pr.add_argument("--duration", type=float, required=True)
    pr.add_argument("--start-at", type=int, default=None)
    pr.add_argument("dests", nargs="+")
    sk = sub.add_parser("sink")
    sk.add_argument("--port", type=int, required=True)
    sk.add_argument("--flows", type=int, required=True)
    sk.add_argument("--every", type=float, default=0.05)
    sk.add_argument("--bind", default="0.0.0.0")
    sk.add_argument("--duration", type=float, default=None)
    sk.add_argument("--drain-limit", type=float, default=SINK_DRAIN_LIMIT_S)
    sd = sub.add_parser("send")
    sd.add_argument("--port", type=int, required=True)
    sd.add_argument("--flows", type=int, required=True)
    sd.add_argument("--duration", type=float, required=True)
    sd.add_argument("--max-rate", type=float, default=None)
    sd.add_argument("--cc", default=None)
    sd.add_argument("addr")
    a = p.parse_args(argv)
    if a.cmd == "echo":
        return echo(a.port, a.bind)
    if a.cmd == "probe":
        return probe(a.port, a.interval, a.duration, a.dests, a.start_at)
    if a.cmd == "sink":
        return sink(a.port, a.flows, a.every, a.bind, a.duration, a.drain_limit)
    return send(a.addr, a.port, a.flows, a.duration, a.max_rate, a.cc)


if __name__ == "__main__":
    # A program a real host's agent started ends at its deadline even if the agent is
    # killed outright (SIGALRM's default action ends the process); emulated hosts set none.
    _lifetime = os.environ.get("PATHTWIN_ENDPOINT_LIFETIME_S")
    if _lifetime:
        signal.alarm(max(1, math.ceil(float(_lifetime))))
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
