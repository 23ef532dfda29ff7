"""Agreement of `pathtwin trace analyze` with tcptrace (`tcptrace -l -r`) on a directory of
captures: connections, packets, data packets, data bytes, unique bytes and retransmissions
each way, and the RTT of the three-way handshake.

    python3 compare_tcptrace.py DIR [--details] [--tcptrace PATH]

Every file in DIR is tried (``.gz`` files are decompressed to a temporary directory);
pathtwin reads pcap and pcapng only, so other formats (snoop, ERF, EtherPeek, ...) are
listed as skipped with their format. For each capture both tools run and their connections
are matched by endpoints (in order of first packet when a 4-tuple is reused); each cell of
the table is "agreeing / compared" over both directions of every matched connection.
``--details`` prints each disagreement.

What is compared, as tcptrace defines it (trace.c, rexmit.c of tcptrace 6.6):
- packets: every TCP segment of the connection in that direction;
- data pkts / data bytes: segments with payload, and their payload bytes (IP length less
  headers, so a snap-length cut does not change them);
- unique bytes: payload bytes not seen before in that direction;
- rexmt pkts / bytes: segments any of whose sequence space (SYN and FIN count one each) was
  seen before, except zero-window probes; and the bytes seen before;
- 3WHS RTT: a->b is SYN to SYN-ACK, b->a is SYN-ACK to the ACK of it, each only when the
  SYN being acknowledged was sent once (tcptrace prints 0.1 ms resolution, 0.0 for none).
"""

from __future__ import annotations

import argparse
import gzip
import ipaddress
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PCAP_MAGICS = {b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\xcd\x34", b"\x34\xcd\xb2\xa1"}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
# Formats tcptrace reads and pathtwin does not, recognised by magic or by extension.
OTHER_FORMATS = {b"snoop\0\0\0": "snoop"}
OTHER_EXTENSIONS = {".erf": "ERF", ".epeek": "EtherPeek", ".epeek7": "EtherPeek", ".netm": "NetMon/NetMetrix", ".tsh": "NLANR TSH", ".snoop": "snoop", ".snp": "snoop"}

# (column label, tcptrace field, pathtwin column prefix or None)
COUNTS = [
    ("pkts", "total packets", "packets"),
    ("data pkts", "actual data pkts", "data_packets"),
    ("data bytes", "actual data bytes", "bytes"),
    ("unique bytes", "unique bytes sent", "unique_bytes"),
    ("rexmt pkts", "rexmt data pkts", "retrans_packets"),
    ("rexmt bytes", "rexmt data bytes", "retrans_bytes"),
]
METRICS = [c[0] for c in COUNTS] + ["3WHS RTT"]
# tcptrace prints the handshake RTT in ms with one decimal.
RTT_TOLERANCE_MS = 0.05 + 1e-6


def capture_format(path: Path) -> str:
    """'pcap', 'pcapng', or the name of another format (for the skip list)."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head[:4] in PCAP_MAGICS:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        return "pcapng"
    for magic, name in OTHER_FORMATS.items():
        if head.startswith(magic):
            return name
    return OTHER_EXTENSIONS.get(path.suffix.lower(), f"unknown (magic {head[:4].hex()})")


def endpoint(text: str) -> tuple[str, int]:
    """'192.0.2.1:80' or 'fe80::1:80' to (normalised address, port)."""
    addr, port = text.rsplit(":", 1)
    return str(ipaddress.ip_address(addr.strip("[]"))), int(port)


# `tcptrace -l -r` prints, per connection, "name: value [unit]" twice per line: a->b, b->a.
_PAIR = re.compile(r"^\s*(.+?):\s+(\S+)(?: [a-zA-Z]+)?\s+(.+?):\s+(\S+)")


def tcptrace_connections(capture: Path, tcptrace: str = "tcptrace") -> tuple[list[dict], int]:
    """tcptrace's connections in its order ({'a', 'b': endpoint, field: (a->b, b->a)}) and
    its count of TCP packets in the capture."""
    out = subprocess.run([tcptrace, "-l", "-r", "-n", str(capture)], capture_output=True, text=True, check=True).stdout
    m = re.search(r"(\d+) TCP packets traced", out)
    tcp_packets = int(m.group(1)) if m else 0
    conns = []
    for block in re.split(r"^TCP connection \d+:", out, flags=re.M)[1:]:
        hosts = re.findall(r"^\s*host \w+:\s+(\S+)", block, flags=re.M)
        if len(hosts) < 2:
            continue
        fields: dict = {"a": endpoint(hosts[0]), "b": endpoint(hosts[1])}
        for line in block.splitlines():
            m = _PAIR.match(line)
            if m and m.group(1).strip() == m.group(3).strip():
                fields[m.group(1).strip()] = (m.group(2), m.group(4))
        conns.append(fields)
    return conns, tcp_packets


def pathtwin_connections(capture: Path) -> tuple[list[dict], int]:
    """pathtwin's connections in order of first packet, as dicts of its output columns, and
    its count of TCP packets."""
    from pathtwin import trace

    df, stats = trace.analyze(capture)
    return df.to_dict("records"), stats["tcp_packets"]


@dataclass
class FileResult:
    """Agreement on one capture: per metric (agreeing, compared), and what disagreed."""

    name: str
    tcptrace_conns: int = 0
    pathtwin_conns: int = 0
    matched: int = 0
    tcp_packets: tuple = (0, 0)
    cells: dict = field(default_factory=lambda: {m: [0, 0] for m in METRICS})
    disagreements: list = field(default_factory=list)
    note: str = ""

    @property
    def identical(self) -> bool:
        """Every connection matched, every value agreed, the same TCP packets counted."""
        return not self.note and not self.disagreements

    @property
    def agree(self) -> int:
        return sum(a for a, _ in self.cells.values())

    @property
    def compared(self) -> int:
        return sum(n for _, n in self.cells.values())


def _num(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if x != x else x  # NaN: no value


def compare(name: str, theirs: list[dict], ours: list[dict], tcp_packets: tuple = (0, 0)) -> FileResult:
    """Matches connections by endpoints and compares every metric in both directions;
    `tcp_packets` is (tcptrace's, pathtwin's) count of TCP packets in the whole capture."""
    res = FileResult(name, len(theirs), len(ours), tcp_packets=tcp_packets)
    if tcp_packets[0] != tcp_packets[1]:
        res.disagreements.append(f"TCP packets in the capture: tcptrace {tcp_packets[0]}, pathtwin {tcp_packets[1]}")
    pending: dict = {}
    for r in ours:
        key = frozenset([(r["client_ip"], int(r["client_port"])), (r["server_ip"], int(r["server_port"]))])
        pending.setdefault(key, []).append(r)
    for i, t in enumerate(theirs, 1):
        candidates = pending.get(frozenset([t["a"], t["b"]]))
        if not candidates:
            res.disagreements.append(f"tcptrace connection {i} {t['a']}<->{t['b']}: not found by pathtwin")
            continue
        r = candidates.pop(0)
        res.matched += 1
        # pathtwin's columns are client-to-server (c2s) and back; tcptrace's a is the sender
        # of the connection's first packet.
        a_is_client = t["a"] == (r["client_ip"], int(r["client_port"]))
        dirs = ("c2s", "s2c") if a_is_client else ("s2c", "c2s")
        for label, tfield, col in COUNTS:
            for side, arrow in enumerate(("a->b", "b->a")):
                cell = res.cells[label]
                cell[1] += 1
                theirs_v = int(t[tfield][side]) if tfield in t else None
                ours_v = r.get(f"{col}_{dirs[side]}")
                if theirs_v is not None and ours_v is not None and int(ours_v) == theirs_v:
                    cell[0] += 1
                else:
                    res.disagreements.append(f"conn {i} {arrow} {label}: tcptrace {theirs_v}, pathtwin {ours_v}")
        # a->b: the SYN of a answered by b; b->a: b's SYN(-ACK) answered by a.
        rtt_cols = ("syn_rtt_ms", "handshake_rtt_ms") if a_is_client else ("handshake_rtt_ms", "syn_rtt_ms")
        for side, arrow in enumerate(("a->b", "b->a")):
            theirs_v = _num(t.get("RTT from 3WHS", (None, None))[side])
            ours_v = _num(r.get(rtt_cols[side]))
            theirs_v = None if theirs_v == 0.0 else theirs_v  # tcptrace's "no sample"
            if theirs_v is None and (ours_v is None or ours_v < RTT_TOLERANCE_MS):
                continue  # neither has a (printable) sample
            cell = res.cells["3WHS RTT"]
            cell[1] += 1
            if theirs_v is not None and ours_v is not None and abs(theirs_v - ours_v) <= RTT_TOLERANCE_MS:
                cell[0] += 1
            else:
                res.disagreements.append(f"conn {i} {arrow} 3WHS RTT: tcptrace {theirs_v} ms, pathtwin {ours_v} ms")
    for rows in pending.values():
        for r in rows:
            res.disagreements.append(
                f"pathtwin connection {r['conn_id']} {r['client_ip']}:{r['client_port']}<->{r['server_ip']}:{r['server_port']}: not found by tcptrace"
            )
    return res


def compare_file(path: Path, tcptrace: str = "tcptrace") -> FileResult:
    """Runs both tools on one pcap/pcapng capture and compares them."""
    from pathtwin.errors import PathtwinError

    try:
        ours, our_packets = pathtwin_connections(path)
    except PathtwinError as e:
        res = FileResult(path.name)
        res.note = f"pathtwin: {e}"
        return res
    theirs, their_packets = tcptrace_connections(path, tcptrace)
    return compare(path.name, theirs, ours, (their_packets, our_packets))


def table(results: list[FileResult]) -> str:
    """The per-file agreement table."""
    head = ["file", "TCP pkts tt/pt", "conns tt/pt/match"] + METRICS + ["agree"]
    rows = []
    for r in results:
        if r.note:
            rows.append([r.name, r.note])
            continue
        cells = [f"{a}/{n}" if n else "-" for a, n in r.cells.values()]
        pct = f"{100 * r.agree / r.compared:.1f}%" if r.compared else "-"
        rows.append([r.name, "%d/%d" % r.tcp_packets, f"{r.tcptrace_conns}/{r.pathtwin_conns}/{r.matched}"] + cells + [pct])
    full = [r for r in rows if len(r) == len(head)]
    widths = [max(len(str(x[i])) for x in [head] + full) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    for r in rows:
        if len(r) == len(head):
            lines.append("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))
        else:
            lines.append(f"{r[0].ljust(widths[0])}  {r[1]}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description="pathtwin vs tcptrace agreement on a directory of captures")
    ap.add_argument("dir", type=Path)
    ap.add_argument("--details", action="store_true", help="print every disagreement")
    ap.add_argument("--tcptrace", default="tcptrace", help="tcptrace binary")
    args = ap.parse_args()
    if shutil.which(args.tcptrace) is None:
        sys.exit(f"{args.tcptrace}: not found")
    if not args.dir.is_dir():
        sys.exit(f"{args.dir}: not a directory")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for p in sorted(args.dir.iterdir()):
            if not p.is_file():
                continue
            if p.suffix == ".gz":
                out = Path(tmp) / p.stem
                with gzip.open(p) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                p = out
            files.append(p)
        results, skipped = [], []
        for p in files:
            fmt = capture_format(p)
            if fmt in ("pcap", "pcapng"):
                results.append(compare_file(p, args.tcptrace))
            elif not fmt.startswith("unknown"):
                skipped.append(f"{p.name} ({fmt})")
        print(table(results))
        compared = [r for r in results if not r.note]
        agree, total = sum(r.agree for r in compared), sum(r.compared for r in compared)
        if total:
            print(f"\noverall: {agree}/{total} values agree ({100 * agree / total:.2f}%) over {len(compared)} captures")
        if skipped:
            print(f"skipped (not pcap/pcapng): {', '.join(skipped)}")
        if args.details:
            for r in results:
                for d in r.disagreements:
                    print(f"{r.name}: {d}")


if __name__ == "__main__":
    main()
