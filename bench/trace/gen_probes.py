"""Writes a large synthetic pure-probe capture for the diagnosis benchmark: Monarch's
tcp-ack probes to a closed port and the remote hosts' RSTs, as taken at the Monarch host.

Each of FLOWS flows sends PROBES probes (ACK, the acknowledgement number advancing by one
segment per probe), interleaved round robin; the remote host numbers its RSTs with an IP ID
counter. About 1 % of probes are lost on the way there, 0.5 % of responses on the way back,
and 1 % of responses overtake the one before them. Ethernet framing, microsecond pcap,
70 bytes per record.

    python3 gen_probes.py OUT.pcap [--flows 1000] [--probes 10000] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import struct

ETH = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
LOCAL = bytes([10, 0, 0, 1])
REC = struct.Struct("<IIII")
IP = struct.Struct("!BBHHHBBH4s4s")
TCP = struct.Struct("!HHIIBBHHH")
FRAME = len(ETH) + IP.size + TCP.size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--probes", type=int, default=10_000, help="probes per flow")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    flows = [
        {
            "remote": bytes([10, 3, (f >> 8) & 255, f & 255]),
            "sport": 20000 + f % 40000,
            "ack": rng.getrandbits(32),
            "id": rng.getrandbits(16),
            "flight": [],
        }
        for f in range(args.flows)
    ]
    t = 1_700_000_000.0
    local_id = 0
    buf = bytearray()

    def emit(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int, ip_id: int) -> None:
        usec = int(t * 1e6)
        buf.extend(REC.pack(usec // 1_000_000, usec % 1_000_000, FRAME, FRAME))
        buf.extend(ETH)
        buf.extend(IP.pack(0x45, 0, 40, ip_id & 0xFFFF, 0x4000, 64, 6, 0, src, dst))
        buf.extend(TCP.pack(sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 512, 0, 0))

    with open(args.out, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(args.probes + 3):
            for fl in flows:
                t += 1e-6
                if i < args.probes:
                    ack = fl["ack"] + i * 1448
                    emit(LOCAL, fl["remote"], fl["sport"], 33434, 1, ack, 0x10, local_id)
                    local_id += 1
                    r = rng.random()
                    if r >= 0.01:  # else lost on the way there: no ID used
                        fl["id"] += 1
                        if r >= 0.015:  # else the response is lost on the way back
                            fl["flight"].append((ack, fl["id"]))
                flight = fl["flight"]
                if len(flight) > 2 or (i >= args.probes and flight):
                    if len(flight) > 1 and rng.random() < 0.01:
                        flight[0], flight[1] = flight[1], flight[0]
                    ack, rid = flight.pop(0)
                    # The RST answering an ACK carries the ACK number as its sequence number.
                    emit(fl["remote"], LOCAL, 33434, fl["sport"], ack, 0, 0x04, rid)
            if len(buf) > 1 << 22:
                out.write(buf)
                buf.clear()
        out.write(buf)


if __name__ == "__main__":
    main()
