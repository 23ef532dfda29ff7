"""Agreement with tcptrace on captures written here: the comparison of
`bench/trace/compare_tcptrace.py` (the one run on tcptrace's own test captures), applied to
small captures with a known story each — retransmissions both ways, zero-window probes, a
refused connection, a reused 4-tuple, a FIN overtaking the last data, and an old pcap 2.2
file with a snap length that cuts the SYN's options. Every count must agree exactly and the handshake RTTs to tcptrace's
printed resolution."""

from __future__ import annotations

import importlib.util
import shutil
import struct
import sys
from pathlib import Path

import pytest

from test_trace import ACK, FIN, PSH, SYN, T0, http_exchange, ipv4, pcap

pytestmark = pytest.mark.skipif(shutil.which("tcptrace") is None, reason="tcptrace not installed")

RST = 0x04
CLIENT, SERVER = "198.51.100.7", "192.0.2.80"


def _comparison():
    path = Path(__file__).resolve().parents[1] / "bench" / "trace" / "compare_tcptrace.py"
    spec = importlib.util.spec_from_file_location("compare_tcptrace", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


cmp = _comparison()


def seg(t, up, seq, ack, flags, payload=b"", window=65535, opts=b"", cport=40001):
    """One segment between CLIENT:cport and SERVER:80 at time t."""
    sport, dport = (cport, 80) if up else (80, cport)
    off = (20 + len(opts)) // 4
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, off << 4, flags, window, 0, 0)
    src, dst = (CLIENT, SERVER) if up else (SERVER, CLIENT)
    return t, ipv4(src, dst, 6, hdr + opts + payload)


def retransmissions():
    """The server's first response segment is lost and resent after 200 ms; the client's
    request is sent twice; the client's FIN is repeated."""
    c, s = 1000, 7000
    req = b"GET /a HTTP/1.0\r\n\r\n"
    return [
        seg(T0, True, c, 0, SYN),
        seg(T0 + 0.001, False, s, c + 1, SYN | ACK),
        seg(T0 + 0.031, True, c + 1, s + 1, ACK),
        seg(T0 + 0.032, True, c + 1, s + 1, ACK | PSH, req),
        seg(T0 + 0.300, True, c + 1, s + 1, ACK | PSH, req),
        seg(T0 + 0.301, False, s + 1, c + 1 + len(req), ACK, b"x" * 1000),
        seg(T0 + 0.302, False, s + 1001, c + 1 + len(req), ACK, b"y" * 1000),
        seg(T0 + 0.332, True, c + 1 + len(req), s + 1, ACK),
        seg(T0 + 0.502, False, s + 1, c + 1 + len(req), ACK, b"x" * 1000),
        seg(T0 + 0.532, True, c + 1 + len(req), s + 2001, ACK),
        seg(T0 + 0.533, False, s + 2001, c + 1 + len(req), ACK | FIN),
        seg(T0 + 0.563, True, c + 1 + len(req), s + 2002, ACK | FIN),
        seg(T0 + 0.900, True, c + 1 + len(req), s + 2002, ACK | FIN),
        seg(T0 + 0.901, False, s + 2002, c + 2 + len(req), ACK),
    ]


def zero_window():
    """The client's window closes; the server probes twice with the next byte, then sends
    it with more once the window opens (as in tcptrace's zwnd.dmp)."""
    c, s = 1000, 7000
    return [
        seg(T0, True, c, 0, SYN),
        seg(T0 + 0.001, False, s, c + 1, SYN | ACK),
        seg(T0 + 0.031, True, c + 1, s + 1, ACK),
        seg(T0 + 0.040, False, s + 1, c + 1, ACK, b"d" * 1000),
        seg(T0 + 0.070, True, c + 1, s + 1001, ACK, window=0),
        seg(T0 + 0.500, False, s + 1001, c + 1, ACK, b"p"),
        seg(T0 + 0.530, True, c + 1, s + 1001, ACK, window=0),
        seg(T0 + 1.500, False, s + 1001, c + 1, ACK, b"p"),
        seg(T0 + 1.530, True, c + 1, s + 1001, ACK, window=0),
        seg(T0 + 2.000, True, c + 1, s + 1001, ACK, window=65535),
        seg(T0 + 2.001, False, s + 1001, c + 1, ACK, b"p" + b"e" * 999),
        seg(T0 + 2.031, True, c + 1, s + 2001, ACK),
    ]


def refused_and_reused():
    """A refused connection (SYN, RST-ACK) and then the same 4-tuple twice in a row, closed
    with FINs in between."""
    pkts = [seg(T0, True, 500, 0, SYN, cport=40009), seg(T0 + 0.004, False, 0, 501, RST | ACK, window=0, cport=40009)]
    for k, t in enumerate((T0 + 1, T0 + 2)):
        c, s = 100_000 * (k + 1), 9_000_000 * (k + 1)
        pkts += [
            seg(t, True, c, 0, SYN),
            seg(t + 0.002, False, s, c + 1, SYN | ACK),
            seg(t + 0.012, True, c + 1, s + 1, ACK, b"hello"),
            seg(t + 0.013, False, s + 1, c + 6, ACK | FIN, b"bye"),
            seg(t + 0.023, True, c + 6, s + 5, ACK | FIN),
            seg(t + 0.024, False, s + 5, c + 7, ACK),
        ]
    return pkts


def fin_overtakes_data():
    """The server's FIN arrives before its last data, which then comes again with the FIN
    (as in tcptrace's single_byte_rexmit.dmp): one retransmitted sequence number, no
    retransmitted data."""
    c, s = 1000, 7000
    return [
        seg(T0, True, c, 0, SYN),
        seg(T0 + 0.001, False, s, c + 1, SYN | ACK),
        seg(T0 + 0.021, True, c + 1, s + 1, ACK, b"GET"),
        seg(T0 + 0.022, False, s + 419, c + 4, ACK | FIN),
        seg(T0 + 0.042, True, c + 4, s + 1, ACK),
        seg(T0 + 0.300, False, s + 1, c + 4, ACK | FIN | PSH, b"z" * 418),
        seg(T0 + 0.320, True, c + 4, s + 420, ACK | FIN),
        seg(T0 + 0.321, False, s + 420, c + 5, ACK),
    ]


def pcap_v22_snapped(packets, snap=68):
    """A pcap 2.2 file (original length before captured length in each record header, as
    before libpcap 2.3) over Ethernet, cut at `snap` bytes like `tcpdump -s 68`."""
    out = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 2, 0, 0, snap, 1)
    for t, ip in packets:
        frame = bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip
        cap = frame[:snap]
        out += struct.pack("<IIII", int(t), int(round((t % 1) * 1e6)), len(frame), len(cap)) + cap
    return out


def syn_with_options():
    """An exchange whose SYNs carry 20 bytes of options (MSS, window scale, SACK-permitted,
    timestamps): a 68-byte snap length cuts them inside the timestamp option."""
    opts = bytes([2, 4, 5, 180, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0])
    c, s = 4242, 8080
    return [
        seg(T0, True, c, 0, SYN, opts=opts),
        seg(T0 + 0.001, False, s, c + 1, SYN | ACK, opts=opts),
        seg(T0 + 0.021, True, c + 1, s + 1, ACK),
        seg(T0 + 0.022, True, c + 1, s + 1, ACK | PSH, b"q" * 100),
        seg(T0 + 0.023, False, s + 1, c + 101, ACK, b"r" * 1400),
        seg(T0 + 0.043, True, c + 101, s + 1401, ACK | FIN),
        seg(T0 + 0.044, False, s + 1401, c + 102, ACK | FIN),
        seg(T0 + 0.064, True, c + 102, s + 1402, ACK),
    ]


CAPTURES = {
    "two-exchanges": lambda: pcap(http_exchange(T0, CLIENT, 40001) + http_exchange(T0 + 1, "198.51.100.8", 40002, rtt=0.1)),
    "retransmissions": lambda: pcap(retransmissions()),
    "zero-window": lambda: pcap(zero_window()),
    "refused-and-reused": lambda: pcap(refused_and_reused()),
    "fin-overtakes-data": lambda: pcap(fin_overtakes_data()),
    "pcap-2.2-snapped": lambda: pcap_v22_snapped(syn_with_options() + retransmissions()),
}


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_agrees_with_tcptrace(tmp_path, name):
    path = tmp_path / f"{name}.pcap"
    path.write_bytes(CAPTURES[name]())
    res = cmp.compare_file(path)
    assert res.compared > 0 and res.matched == res.tcptrace_conns
    assert res.identical, "\n".join(res.disagreements)


def test_agreement_catches_a_disagreement(tmp_path):
    """The comparison is not vacuous: a pathtwin row with one count changed disagrees."""
    path = tmp_path / "r.pcap"
    path.write_bytes(pcap(retransmissions()))
    theirs, their_packets = cmp.tcptrace_connections(path)
    ours, our_packets = cmp.pathtwin_connections(path)
    assert cmp.compare("r", theirs, ours, (their_packets, our_packets)).identical
    ours[0]["retrans_packets_s2c"] += 1
    res = cmp.compare("r", theirs, ours, (their_packets, our_packets))
    assert not res.identical and any("rexmt pkts" in d for d in res.disagreements)


def test_expected_values_of_the_stories(tmp_path):
    """What the captures were built to contain, independently of tcptrace."""
    from pathtwin import trace

    path = tmp_path / "z.pcap"
    path.write_bytes(pcap(zero_window()))
    r = trace.analyze(path)[0].iloc[0]
    assert (r.bytes_s2c, r.unique_bytes_s2c, r.retrans_packets_s2c) == (2002, 2000, 0)
    path.write_bytes(pcap(retransmissions()))
    r = trace.analyze(path)[0].iloc[0]
    assert (r.retrans_packets_c2s, r.retrans_packets_s2c, r.retrans_bytes_s2c, r.retrans_bytes_c2s) == (2, 1, 1000, 20)
    path.write_bytes(pcap(fin_overtakes_data()))
    r = trace.analyze(path)[0].iloc[0]
    assert (r.unique_bytes_s2c, r.retrans_packets_s2c, r.retrans_bytes_s2c) == (418, 1, 1)
    path.write_bytes(pcap(refused_and_reused()))
    conns = trace.analyze(path)[0]
    assert len(conns) == 3 and conns.loc[0, "termination"] == "rst"
    assert round(conns.loc[0, "syn_rtt_ms"], 3) == 4.0
