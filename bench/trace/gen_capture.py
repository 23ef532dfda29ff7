"""Writes a large synthetic server-side capture for the trace benchmark.

Many concurrent HTTP-like connections (handshake, request, a bulk response with a delayed
ACK every two segments, about 1 % of segments retransmitted, FIN both ways), Ethernet
framing, headers only (snap length 96, as `tcpdump -s 96` writes), microsecond pcap.

    python3 gen_capture.py OUT.pcap [--packets 1200000] [--concurrent 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import struct

ETH = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
SNAP = 96


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--packets", type=int, default=1_200_000)
    ap.add_argument("--concurrent", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    server = bytes([10, 1, 0, 1])
    header = struct.Struct("<IIII")
    ip = struct.Struct("!BBHHHBBH4s4s")
    tcp = struct.Struct("!HHIIBBHHH")
    written = 0
    t = 1_700_000_000.0

    with open(args.out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAP, 1))

        def emit(ts: float, src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int, plen: int) -> None:
            nonlocal written
            frame = ETH + ip.pack(0x45, 0, 40 + plen, written & 0xFFFF, 0x4000, 64, 6, 0, src, dst) + tcp.pack(
                sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 512, 0, 0
            )
            wire = len(frame) + plen
            cap = frame[:SNAP] if len(frame) >= SNAP else frame + b"x" * min(plen, SNAP - len(frame))
            f.write(header.pack(int(ts), int((ts % 1) * 1e6), len(cap), wire))
            f.write(cap)
            written += 1

        def connection(k: int):
            """Yields once per packet so that connections interleave."""
            client = bytes([10, 2 + (k >> 16) % 200, (k >> 8) & 255, k & 255])
            cport = 1024 + k % 60000
            cseq = rng.getrandbits(32)
            sseq = rng.getrandbits(32)
            segs = rng.randrange(20, 400)
            c = lambda fl, seq, ack, pl=0: emit(t, client, server, cport, 80, seq, ack, fl, pl)
            s = lambda fl, seq, ack, pl=0: emit(t, server, client, 80, cport, seq, ack, fl, pl)
            c(0x02, cseq, 0); yield
            s(0x12, sseq, cseq + 1); yield
            c(0x10, cseq + 1, sseq + 1); yield
            c(0x18, cseq + 1, sseq + 1, 300); yield
            for i in range(segs):
                seq = sseq + 1 + i * 1448
                s(0x10, seq, cseq + 301, 1448); yield
                if rng.random() < 0.01:
                    s(0x10, seq, cseq + 301, 1448); yield
                if i % 2 == 1:
                    c(0x10, cseq + 301, seq + 1448); yield
            end = sseq + 1 + segs * 1448
            s(0x11, end, cseq + 301); yield
            c(0x11, cseq + 301, end + 1); yield
            s(0x10, end + 1, cseq + 302)

        live = []
        k = 0
        while written < args.packets:
            while len(live) < args.concurrent:
                live.append(connection(k))
                k += 1
            i = rng.randrange(len(live))
            t += 0.00002
            try:
                next(live[i])
            except StopIteration:
                live[i] = live[-1]
                live.pop()
    print(f"{args.out}: {written} packets, {k} connections")


if __name__ == "__main__":
    main()
