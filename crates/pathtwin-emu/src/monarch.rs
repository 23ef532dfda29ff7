//! Monarch's packet translation, sans-IO (Haeberlen et al., "Monarch: A Tool to Emulate
//! Transport Protocol Flows over the Internet at Large", IMC 2006, §2-3; ALGORITHMS.md §6).
//!
//! A local TCP sender and receiver talk through a proxy. Each packet the sender sends is held,
//! and a *probe* of the same size goes to a remote host that runs no cooperating software
//! instead; when the host's answer comes back, the held packet is released to the receiver.
//! The receiver's packets go straight back to the sender. The flow thus sees the remote
//! path's delay, bandwidth, loss and reordering in the direction of its data (probes travel
//! *downstream*), and the responses' fate upstream stands in for the ACKs' (the paper's
//! terms: the remote host is a broadband client).
//!
//! Probe kinds and the answers Linux (like most hosts) gives them:
//! - `tcp-ack`: an ACK segment to a closed port; the answer is a RST whose sequence number is
//!   the probe's acknowledgment number (RFC 9293 §3.10.7.1), which carries the probe's key;
//! - `udp`: a datagram to a closed port; the answer is an ICMP port unreachable quoting the
//!   probe's IP header, whose identification carries the key (Linux rate-limits these:
//!   `net.ipv4.icmp_ratelimit`, `icmp_msgs_per_sec`);
//! - `icmp-echo`: an echo request; the reply mirrors its payload, so it is as large as the
//!   probe, and its sequence number is the key;
//! - `icmp-timestamp`: a timestamp request (fixed 20 bytes of ICMP, so the probe cannot match
//!   a data packet's size); the reply's sequence number is the key.
//!
//! Probes are as large as the packet they stand for (total IP length), except timestamps.
//! This module owns the translation and the bookkeeping of held packets; which device a
//! packet comes from and when it is written are the engine's.

use std::net::Ipv4Addr;

use etherparse::{Icmpv4Type, IcmpEchoHeader, Ipv4HeaderSlice, NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use pathtwin_core::checksum;
use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::packet::IpPacket;

/// The closed ports probes go to (traceroute's first UDP port; TCP's "discard" port is just
/// as unlikely to be open, but a closed high port is what scans show).
pub const CLOSED_UDP_PORT: u16 = 33434;
pub const CLOSED_TCP_PORT: u16 = 33435;
/// Identifier of the ICMP probes of a flow.
const ICMP_ID: u16 = 0x4d4f;
/// Headers of a probe below which no payload is possible (IPv4 + the probe's own header).
const IPV4_HEADER: usize = 20;

pub use pathtwin_core::config::ProbeKind;

/// Counts of one translator.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct MonarchStats {
    pub probes: u64,
    pub responses: u64,
    /// Answers to no held packet: a duplicate, or one so late its key was reused.
    pub unmatched: u64,
    /// Held packets whose key came round again before any answer (their probe or its
    /// answer was lost).
    pub abandoned: u64,
}

/// The proxy's state for one sender and one remote host.
pub struct Translator {
    kind: ProbeKind,
    /// Source of the probes: the sender's address, so answers come back along its route.
    prober: Ipv4Addr,
    target: Ipv4Addr,
    next_key: u16,
    /// Acknowledgment numbers of TCP probes start here (the key is added), so that a RST
    /// for some other segment is unlikely to match.
    tcp_base: u32,
    held: FxHashMap<u16, IpPacket>,
    pub stats: MonarchStats,
}

impl Translator {
    pub fn new(kind: ProbeKind, prober: Ipv4Addr, target: Ipv4Addr, tcp_base: u32) -> Translator {
        Translator { kind, prober, target, next_key: 0, tcp_base, held: FxHashMap::default(), stats: MonarchStats::default() }
    }

    pub fn target(&self) -> Ipv4Addr {
        self.target
    }

    /// Packets held for an answer.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Holds `pkt` (from the sender) and returns the probe that stands for it.
    pub fn probe_for(&mut self, pkt: IpPacket) -> IpPacket {
        let key = self.next_key;
        self.next_key = self.next_key.wrapping_add(1);
        let size = pkt.bytes().len();
        let src_port = match pkt.transport() {
            crate::packet::Transport::Tcp { src_port, .. } | crate::packet::Transport::Udp { src_port, .. } => src_port,
            _ => 40000,
        };
        if self.held.insert(key, pkt).is_some() {
            self.stats.abandoned += 1;
        }
        self.stats.probes += 1;
        let ip = PacketBuilder::ipv4(self.prober.octets(), self.target.octets(), 64);
        let mut out = Vec::with_capacity(size.max(64));
        let built = match self.kind {
            ProbeKind::TcpAck => {
                let b = ip.tcp(src_port, CLOSED_TCP_PORT, u32::from(key), 65535).ack(self.tcp_base.wrapping_add(u32::from(key)));
                let pad = size.saturating_sub(IPV4_HEADER + 20);
                b.write(&mut out, &vec![0u8; pad])
            }
            ProbeKind::Udp => {
                let pad = size.saturating_sub(IPV4_HEADER + 8);
                ip.udp(src_port, CLOSED_UDP_PORT).write(&mut out, &vec![0u8; pad])
            }
            ProbeKind::IcmpEcho => {
                let pad = size.saturating_sub(IPV4_HEADER + 8);
                ip.icmpv4_echo_request(ICMP_ID, key).write(&mut out, &vec![0u8; pad])
            }
            ProbeKind::IcmpTimestamp => {
                let ts = etherparse::icmpv4::TimestampMessage { id: ICMP_ID, seq: key, originate_timestamp: 0, receive_timestamp: 0, transmit_timestamp: 0 };
                ip.icmpv4(Icmpv4Type::TimestampRequest(ts)).write(&mut out, &[])
            }
        };
        built.expect("a probe of at most an MTU always serializes");
        if self.kind == ProbeKind::Udp {
            // The key rides in the IP identification, which the ICMP error quotes.
            out[4..6].copy_from_slice(&key.to_be_bytes());
            out[10..12].copy_from_slice(&[0, 0]);
            let sum = checksum::of(&out[..IPV4_HEADER]);
            out[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        IpPacket::parse(out).expect("a built probe parses")
    }

    /// Takes back the packet of the last probe made, a probe that was never sent (a real
    /// target's rate cap, or the kernel refused it): the packet is dropped, and the probe and
    /// its key are as if never made.
    pub fn withdraw_last(&mut self) -> Option<IpPacket> {
        let key = self.next_key.wrapping_sub(1);
        let packet = self.held.remove(&key)?;
        self.next_key = key;
        self.stats.probes -= 1;
        Some(packet)
    }

    /// If `resp` (from the remote host, to the prober) answers a held packet, returns that
    /// packet: it is now the receiver's. Anything else is `None` (not an answer, or an
    /// answer to nothing held).
    pub fn on_response(&mut self, resp: &IpPacket) -> Option<IpPacket> {
        let key = self.key_of(resp.bytes())?;
        match self.held.remove(&key) {
            Some(p) => {
                self.stats.responses += 1;
                Some(p)
            }
            None => {
                self.stats.unmatched += 1;
                None
            }
        }
    }

    /// The key an answer carries, if it is an answer of this translator's kind.
    fn key_of(&self, bytes: &[u8]) -> Option<u16> {
        let sliced = SlicedPacket::from_ip(bytes).ok()?;
        match &sliced.net {
            Some(NetSlice::Ipv4(v4)) if v4.header().source_addr() == self.target && v4.header().destination_addr() == self.prober => {}
            _ => return None,
        }
        match (self.kind, sliced.transport?) {
            (ProbeKind::TcpAck, TransportSlice::Tcp(t)) if t.rst() && t.source_port() == CLOSED_TCP_PORT => {
                u16::try_from(t.sequence_number().wrapping_sub(self.tcp_base)).ok()
            }
            (ProbeKind::Udp, TransportSlice::Icmpv4(i)) => match i.icmp_type() {
                Icmpv4Type::DestinationUnreachable(_) => Ipv4HeaderSlice::from_slice(i.payload()).ok().map(|h| h.identification()),
                _ => None,
            },
            (ProbeKind::IcmpEcho, TransportSlice::Icmpv4(i)) => match i.icmp_type() {
                Icmpv4Type::EchoReply(IcmpEchoHeader { id: ICMP_ID, seq }) => Some(seq),
                _ => None,
            },
            (ProbeKind::IcmpTimestamp, TransportSlice::Icmpv4(i)) => match i.icmp_type() {
                Icmpv4Type::TimestampReply(m) if m.id == ICMP_ID => Some(m.seq),
                _ => None,
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::icmpv4::{DestUnreachableHeader, TimestampMessage};

    const SENDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const TARGET: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

    fn data(len: usize) -> IpPacket {
        let mut out = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).tcp(5000, 6000, 1, 65535).ack(1).write(&mut out, &vec![7u8; len]).unwrap();
        IpPacket::parse(out).unwrap()
    }

    /// The answer a Linux host gives each probe kind (RFC 9293 §3.10.7.1 for the RST,
    /// RFC 792 for the ICMP ones).
    fn answer(kind: ProbeKind, probe: &IpPacket) -> IpPacket {
        let p = SlicedPacket::from_ip(probe.bytes()).unwrap();
        let back = PacketBuilder::ipv4(TARGET.octets(), SENDER.octets(), 64);
        let mut out = Vec::new();
        match (kind, p.transport.unwrap()) {
            (ProbeKind::TcpAck, TransportSlice::Tcp(t)) => {
                back.tcp(t.destination_port(), t.source_port(), t.acknowledgment_number(), 0).rst().write(&mut out, &[]).unwrap()
            }
            (ProbeKind::Udp, TransportSlice::Udp(_)) => back
                .icmpv4(Icmpv4Type::DestinationUnreachable(DestUnreachableHeader::Port))
                .write(&mut out, &probe.bytes()[..28])
                .unwrap(),
            (ProbeKind::IcmpEcho, TransportSlice::Icmpv4(i)) => match i.icmp_type() {
                Icmpv4Type::EchoRequest(h) => back.icmpv4_echo_reply(h.id, h.seq).write(&mut out, i.payload()).unwrap(),
                other => panic!("{other:?}"),
            },
            (ProbeKind::IcmpTimestamp, TransportSlice::Icmpv4(i)) => match i.icmp_type() {
                Icmpv4Type::TimestampRequest(m) => {
                    back.icmpv4(Icmpv4Type::TimestampReply(TimestampMessage { receive_timestamp: 5, transmit_timestamp: 5, ..m })).write(&mut out, &[]).unwrap()
                }
                other => panic!("{other:?}"),
            },
            (k, t) => panic!("{k:?} probe carried {t:?}"),
        }
        IpPacket::parse(out).unwrap()
    }

    /// Stamping a target's packets with a sequential ID keeps the header valid.
    #[test]
    fn a_restamped_ip_id_comes_with_a_valid_checksum() {
        let mut p = data(100);
        p.set_ipv4_id(0xbeef);
        let h = Ipv4HeaderSlice::from_slice(p.bytes()).unwrap().to_header();
        assert_eq!(h.identification, 0xbeef);
        assert_eq!(h.header_checksum, h.calc_header_checksum());
    }

    #[test]
    fn every_probe_kind_is_answered_and_releases_its_packet() {
        for kind in [ProbeKind::TcpAck, ProbeKind::Udp, ProbeKind::IcmpEcho, ProbeKind::IcmpTimestamp] {
            let mut t = Translator::new(kind, SENDER, TARGET, 0x1000_0000);
            let packets: Vec<IpPacket> = (0..3).map(|i| data(500 + 100 * i)).collect();
            let probes: Vec<IpPacket> = packets.iter().map(|p| t.probe_for(p.clone())).collect();
            for (p, probe) in packets.iter().zip(&probes) {
                assert_eq!(probe.dst(), std::net::IpAddr::V4(TARGET));
                if kind != ProbeKind::IcmpTimestamp {
                    assert_eq!(probe.bytes().len(), p.bytes().len(), "{kind:?}: a probe is as large as its packet");
                }
            }
            assert_eq!(t.held(), 3);
            // Answers out of order release the matching packets.
            for i in [2, 0, 1] {
                let released = t.on_response(&answer(kind, &probes[i])).unwrap_or_else(|| panic!("{kind:?} answer {i} unmatched"));
                assert_eq!(released.bytes(), packets[i].bytes());
            }
            // A duplicate answer releases nothing; a packet from elsewhere is not an answer.
            assert!(t.on_response(&answer(kind, &probes[0])).is_none());
            assert!(t.on_response(&packets[0]).is_none());
            assert_eq!((t.stats.probes, t.stats.responses, t.stats.unmatched, t.held()), (3, 3, 1, 0), "{kind:?}");
        }
    }
}
