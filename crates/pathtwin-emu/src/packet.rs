//! Raw IP datagrams as the model sees them: [`IpPacket`] owns the bytes read from a host's
//! device and the few header fields the model and the driver need, parsed once on arrival.
//!
//! Parsing is done with `etherparse` (two layers, as the project's wire-format convention
//! asks: its slices give field access, this module keeps the validated summary). IPv4 and
//! IPv6 (with extension headers) carrying TCP, UDP, ICMP or ICMPv6 are understood; any other
//! transport is still routed and queued, with a flow key built from addresses and protocol.
//! This module does not route, queue or write packets.

use std::net::IpAddr;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pathtwin_core::packet::{FlowKey, Mark, PacketMeta, TcpFlags};

use crate::gso::{complete_checksum, PartialCsum};

/// Why a datagram read from a host could not be used. The driver counts these per host
/// instead of failing: a host's kernel may emit anything.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    /// The bytes are not a well-formed IPv4 or IPv6 header (or are truncated).
    #[error("malformed IP packet: {0}")]
    Malformed(String),
}

/// The transport header fields the model looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp { src_port: u16, dst_port: u16, flags: TcpFlags },
    Udp { src_port: u16, dst_port: u16 },
    Icmp,
    Icmpv6,
    /// Another protocol, or a non-first fragment whose transport header is elsewhere.
    Other(u8),
}

/// One IP datagram and its parsed summary.
#[derive(Clone, Debug)]
pub struct IpPacket {
    bytes: Vec<u8>,
    src: IpAddr,
    dst: IpAddr,
    transport: Transport,
    payload_len: u32,
    mark: Mark,
    /// The TCP header's sequence number, for markers that recognise retransmissions.
    tcp_seq: Option<u32>,
    /// Strict-priority band from the DSCP (see `band_from_dscp`).
    band: u8,
    /// A transport checksum the sending host's device left for us to complete (offload,
    /// see [`crate::gso`]); the receiving host's kernel accepts it as it is.
    partial_csum: Option<PartialCsum>,
}

/// DiffServ code points for assured forwarding (RFC 2597): AFx1 is low drop precedence
/// (IN), AFx2 and AFx3 are higher (OUT). Everything else is unmarked.
fn mark_from_dscp(dscp: u8) -> Mark {
    match dscp {
        10 | 18 | 26 | 34 => Mark::In,
        12 | 14 | 20 | 22 | 28 | 30 | 36 | 38 => Mark::Out,
        _ => Mark::Unmarked,
    }
}

/// The strict-priority band of a code point, as a router's DiffServ classifier would map it
/// (RFC 4594 §3): network control (CS6, CS7) and expedited forwarding (EF, RFC 3246) go first,
/// so out-of-band control traffic — Monaco's probes in the simulator — can be sent from a
/// real host by setting `IP_TOS`; lower effort (CS1, RFC 8622's LE) goes last; the rest is
/// band 1.
fn band_from_dscp(dscp: u8) -> u8 {
    match dscp {
        46 | 48 | 56 => 0,
        1 | 8 => 2,
        _ => 1,
    }
}

impl IpPacket {
    /// Parses `bytes` as one IP datagram (no link-layer header).
    pub fn parse(bytes: Vec<u8>) -> Result<IpPacket, ParseError> {
        let mut p = IpPacket::parse_headers(&bytes)?;
        p.bytes = bytes;
        Ok(p)
    }

    /// The same summary of a datagram we do not own, with no bytes: the template of
    /// [`IpPacket::segment`].
    pub fn parse_headers(bytes: &[u8]) -> Result<IpPacket, ParseError> {
        let sliced = SlicedPacket::from_ip(bytes).map_err(|e| ParseError::Malformed(e.to_string()))?;
        let (src, dst, dscp, proto) = match &sliced.net {
            Some(NetSlice::Ipv4(v4)) => {
                let h = v4.header();
                (IpAddr::V4(h.source_addr()), IpAddr::V4(h.destination_addr()), h.dcp().value(), v4.payload().ip_number.0)
            }
            Some(NetSlice::Ipv6(v6)) => {
                let h = v6.header();
                (IpAddr::V6(h.source_addr()), IpAddr::V6(h.destination_addr()), h.traffic_class() >> 2, v6.payload().ip_number.0)
            }
            None => return Err(ParseError::Malformed("no IP header".into())),
        };
        let tcp_seq = match &sliced.transport {
            Some(TransportSlice::Tcp(t)) => Some(t.sequence_number()),
            _ => None,
        };
        let (transport, payload_len) = match &sliced.transport {
            Some(TransportSlice::Tcp(t)) => (
                Transport::Tcp {
                    src_port: t.source_port(),
                    dst_port: t.destination_port(),
                    flags: TcpFlags { syn: t.syn(), fin: t.fin(), rst: t.rst() },
                },
                t.payload().len(),
            ),
            Some(TransportSlice::Udp(u)) => {
                (Transport::Udp { src_port: u.source_port(), dst_port: u.destination_port() }, u.payload().len())
            }
            Some(TransportSlice::Icmpv4(i)) => (Transport::Icmp, i.payload().len()),
            Some(TransportSlice::Icmpv6(i)) => (Transport::Icmpv6, i.payload().len()),
            None => (Transport::Other(proto), sliced.net.as_ref().and_then(|n| n.ip_payload_ref()).map_or(0, |p| p.payload.len())),
        };
        Ok(IpPacket { src, dst, transport, payload_len: payload_len as u32, mark: mark_from_dscp(dscp), tcp_seq, band: band_from_dscp(dscp), bytes: Vec::new(), partial_csum: None })
    }

    /// Rewrites an IPv4 packet's identification (and its header checksum); IPv6 has none.
    pub fn set_ipv4_id(&mut self, id: u16) {
        if !self.src.is_ipv4() || self.bytes.len() < 20 {
            return;
        }
        let ihl = usize::from(self.bytes[0] & 0x0f) * 4;
        if self.bytes.len() < ihl {
            return;
        }
        self.bytes[4..6].copy_from_slice(&id.to_be_bytes());
        self.bytes[10..12].copy_from_slice(&[0, 0]);
        let sum = pathtwin_core::checksum::of(&self.bytes[..ihl]);
        self.bytes[10..12].copy_from_slice(&sum.to_be_bytes());
    }

    /// One segment cut from the TCP super-packet `self` summarizes (see
    /// [`crate::gso::split_tcp`]): `bytes` with `headers` bytes of headers, its data
    /// `seq_offset` bytes into the super-packet's, FIN kept on the last segment only. Saves
    /// parsing each of ~44 segments whose headers differ only there.
    pub fn segment(&self, bytes: Vec<u8>, headers: usize, seq_offset: u32, last: bool) -> IpPacket {
        let transport = match self.transport {
            Transport::Tcp { src_port, dst_port, flags } => {
                Transport::Tcp { src_port, dst_port, flags: TcpFlags { fin: flags.fin && last, ..flags } }
            }
            other => other,
        };
        IpPacket {
            payload_len: bytes.len().saturating_sub(headers) as u32,
            tcp_seq: self.tcp_seq.map(|s| s.wrapping_add(seq_offset)),
            transport,
            bytes,
            ..*self
        }
    }

    /// Records that the transport checksum is partial (as the device described it).
    pub fn set_partial_checksum(&mut self, csum: Option<PartialCsum>) {
        self.partial_csum = csum;
    }

    pub fn partial_checksum(&self) -> Option<PartialCsum> {
        self.partial_csum
    }

    /// Fills in a partial transport checksum, for a packet that leaves the model other than
    /// to a device that accepts partial checksums (a capture, Monarch's translation).
    pub fn complete_checksum(&mut self) {
        if let Some(c) = self.partial_csum.take() {
            complete_checksum(&mut self.bytes, c);
        }
    }

    pub fn src(&self) -> IpAddr {
        self.src
    }
    pub fn dst(&self) -> IpAddr {
        self.dst
    }
    pub fn transport(&self) -> Transport {
        self.transport
    }
    /// The strict-priority band the packet's DSCP asks for: 0 first, 1 by default.
    pub fn priority_band(&self) -> u8 {
        self.band
    }
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// Gives the buffer back so the driver can reuse its allocation.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The 5-tuple (addresses, protocol, ports) with the direction kept: the two directions
    /// of one connection are two flows, as the flow monitor counts them per route direction.
    pub fn five_tuple(&self) -> FiveTuple {
        let (proto, sp, dp) = match self.transport {
            Transport::Tcp { src_port, dst_port, .. } => (6, src_port, dst_port),
            Transport::Udp { src_port, dst_port } => (17, src_port, dst_port),
            Transport::Icmp => (1, 0, 0),
            Transport::Icmpv6 => (58, 0, 0),
            Transport::Other(p) => (p, 0, 0),
        };
        FiveTuple { src: self.src, dst: self.dst, proto, src_port: sp, dst_port: dp }
    }

    /// Rewrites the DiffServ field so that the mark travels with the packet, fixing the IPv4
    /// header checksum incrementally (RFC 1624) rather than recomputing it.
    fn write_dscp(&mut self, dscp: u8) {
        let tc = self.traffic_class();
        self.write_traffic_class((dscp << 2) | (tc & 0x03));
    }

    /// The IPv4 TOS byte or the IPv6 traffic class: DSCP in the high six bits, ECN in the
    /// low two (RFC 2474, RFC 3168).
    fn traffic_class(&self) -> u8 {
        match self.src {
            IpAddr::V4(_) => self.bytes[1],
            // It spans the low nibble of byte 0 and the high nibble of byte 1.
            IpAddr::V6(_) => ((self.bytes[0] & 0x0f) << 4) | (self.bytes[1] >> 4),
        }
    }

    fn write_traffic_class(&mut self, tc: u8) {
        match self.src {
            IpAddr::V4(_) => {
                let old = u16::from_be_bytes([self.bytes[0], self.bytes[1]]);
                self.bytes[1] = tc;
                let new = u16::from_be_bytes([self.bytes[0], self.bytes[1]]);
                let ck = u16::from_be_bytes([self.bytes[10], self.bytes[11]]);
                let ck = pathtwin_core::checksum::update(ck, old, new);
                self.bytes[10..12].copy_from_slice(&ck.to_be_bytes());
            }
            IpAddr::V6(_) => {
                self.bytes[0] = (self.bytes[0] & 0xf0) | (tc >> 4);
                self.bytes[1] = (self.bytes[1] & 0x0f) | (tc << 4);
            }
        }
    }
}

/// A flow's identity in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct FiveTuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub src_port: u16,
    pub dst_port: u16,
}

impl FiveTuple {
    /// FNV-1a over the tuple: stable across runs and platforms, unlike `std`'s hasher, so
    /// that flow keys in results can be compared between runs.
    pub fn key(&self) -> FlowKey {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |b: &[u8]| {
            for &x in b {
                h ^= x as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                eat(&s.octets());
                eat(&d.octets());
            }
            (s, d) => {
                eat(&to_v6(s).octets());
                eat(&to_v6(d).octets());
            }
        }
        eat(&[self.proto]);
        eat(&self.src_port.to_be_bytes());
        eat(&self.dst_port.to_be_bytes());
        h
    }
}

fn to_v6(a: IpAddr) -> std::net::Ipv6Addr {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

impl PacketMeta for IpPacket {
    fn wire_len(&self) -> u32 {
        self.bytes.len() as u32
    }
    fn payload_len(&self) -> u32 {
        self.payload_len
    }
    fn flow_key(&self) -> FlowKey {
        self.five_tuple().key()
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        match self.transport {
            Transport::Tcp { flags, .. } => Some(flags),
            _ => None,
        }
    }
    fn tcp_seq(&self) -> Option<u64> {
        self.tcp_seq.map(u64::from)
    }
    fn mark(&self) -> Mark {
        self.mark
    }
    fn set_mark(&mut self, mark: Mark) {
        if mark != self.mark {
            self.mark = mark;
            self.write_dscp(mark.dscp());
        }
    }
    /// ECT(0), ECT(1) or already CE in the real header (the sending kernel's choice).
    fn ecn_capable(&self) -> bool {
        self.traffic_class() & 0x03 != 0
    }
    fn set_ce(&mut self) {
        let tc = self.traffic_class();
        self.write_traffic_class(tc | 0x03);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn tcp_v4(syn: bool, payload: &[u8]) -> Vec<u8> {
        let b = PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).tcp(40000, 5201, 7, 65535);
        let b = if syn { b.syn() } else { b.ack(1) };
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    /// The header checksum after CE marking equals one computed from scratch.
    #[test]
    fn ce_mark_sets_the_ecn_bits_and_keeps_the_ipv4_checksum_valid() {
        let mut bytes = tcp_v4(false, &[0u8; 10]);
        bytes[1] = 0x02 | (10 << 2); // ECT(0), DSCP AF11
        let ip = etherparse::Ipv4HeaderSlice::from_slice(&bytes).unwrap().to_header();
        let ck = ip.calc_header_checksum();
        bytes[10..12].copy_from_slice(&ck.to_be_bytes());
        let mut p = IpPacket::parse(bytes).unwrap();
        assert!(p.ecn_capable());
        p.set_ce();
        let h = etherparse::Ipv4HeaderSlice::from_slice(&p.bytes).unwrap();
        assert_eq!(h.ecn().value(), 3, "CE");
        assert_eq!(h.slice()[1] >> 2, 10, "DSCP kept");
        assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
        assert!(!IpPacket::parse(tcp_v4(false, &[0u8; 10])).unwrap().ecn_capable(), "Not-ECT");
    }

    #[test]
    fn tcp_v4_fields_and_lengths() {
        let p = IpPacket::parse(tcp_v4(true, &[0u8; 100])).unwrap();
        assert_eq!(p.wire_len(), 20 + 20 + 100);
        assert_eq!(p.payload_len(), 100);
        assert_eq!(p.tcp_flags(), Some(TcpFlags { syn: true, fin: false, rst: false }));
        assert_eq!(p.src(), "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(p.five_tuple().dst_port, 5201);
    }

    #[test]
    fn udp_and_icmp_v6() {
        let mut out = Vec::new();
        PacketBuilder::ipv6([0xfd; 16], [0xfe; 16], 64).udp(1000, 2000).write(&mut out, &[1, 2, 3]).unwrap();
        let p = IpPacket::parse(out).unwrap();
        assert_eq!(p.transport(), Transport::Udp { src_port: 1000, dst_port: 2000 });
        assert_eq!(p.wire_len(), 40 + 8 + 3);
        assert_eq!(p.payload_len(), 3);
        assert_eq!(p.tcp_flags(), None);

        let mut out = Vec::new();
        PacketBuilder::ipv6([0xfd; 16], [0xfe; 16], 64).icmpv6_echo_request(1, 1).write(&mut out, &[0; 56]).unwrap();
        let p = IpPacket::parse(out).unwrap();
        assert_eq!(p.transport(), Transport::Icmpv6);
        assert_eq!(p.payload_len(), 56);
    }

    #[test]
    fn directions_are_distinct_flows() {
        let a = IpPacket::parse(tcp_v4(false, b"x")).unwrap();
        let mut rev = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 2], [10, 0, 0, 1], 64).tcp(5201, 40000, 1, 100).write(&mut rev, &[]).unwrap();
        let b = IpPacket::parse(rev).unwrap();
        assert_ne!(a.flow_key(), b.flow_key());
        assert_eq!(a.flow_key(), IpPacket::parse(tcp_v4(true, b"")).unwrap().flow_key());
    }

    #[test]
    fn marking_rewrites_dscp_and_keeps_the_ipv4_checksum_valid() {
        let mut p = IpPacket::parse(tcp_v4(false, b"data")).unwrap();
        p.set_mark(Mark::Out);
        let reparsed = IpPacket::parse(p.bytes().to_vec()).unwrap();
        assert_eq!(reparsed.mark(), Mark::Out);
        let h = etherparse::Ipv4HeaderSlice::from_slice(p.bytes()).unwrap().to_header();
        assert_eq!(h.header_checksum, h.calc_header_checksum());
    }

    /// RFC 4594's classes: network control and EF ahead of data, lower effort behind it,
    /// read from both IP versions' headers.
    #[test]
    fn the_dscp_picks_the_strict_priority_band() {
        let v4 = |dscp: u8| {
            let mut bytes = tcp_v4(false, b"x");
            bytes[1] = dscp << 2;
            IpPacket::parse(bytes).unwrap()
        };
        assert_eq!(v4(46).priority_band(), 0, "EF");
        assert_eq!(v4(48).priority_band(), 0, "CS6");
        assert_eq!(v4(0).priority_band(), 1, "best effort");
        assert_eq!(v4(10).priority_band(), 1, "AF11 is data");
        assert_eq!(v4(8).priority_band(), 2, "CS1");
        let mut out = Vec::new();
        PacketBuilder::ipv6([0xfd; 16], [0xfe; 16], 64).udp(1, 2).write(&mut out, &[0]).unwrap();
        out[0] = 0x60 | (46 >> 2); // traffic class = EF << 2, split across the first two bytes
        out[1] = ((46 & 0x3) << 6) as u8;
        assert_eq!(IpPacket::parse(out).unwrap().priority_band(), 0);
    }

    #[test]
    fn marking_an_ipv6_datagram_rewrites_the_traffic_class_dscp_and_keeps_ecn() {
        let mut out = Vec::new();
        PacketBuilder::ipv6([0xfd; 16], [0xfe; 16], 64).tcp(40000, 5201, 0xfff0_0001, 65535).ack(1).write(&mut out, b"data").unwrap();
        // Traffic class 0x01 (ECT(1)) with a flow label, to see that neither is disturbed.
        out[1] = (out[1] & 0x0f) | 0x10;
        out[0] &= 0xf0;
        out[2] = 0xab;
        let mut p = IpPacket::parse(out).unwrap();
        assert_eq!(p.mark(), Mark::Unmarked);
        for (mark, dscp) in [(Mark::Out, 12u8), (Mark::In, 10)] {
            p.set_mark(mark);
            let h = etherparse::Ipv6HeaderSlice::from_slice(p.bytes()).unwrap();
            assert_eq!(h.traffic_class(), dscp << 2 | 0x01, "AF1x DSCP over ECT(1)");
            assert_eq!(h.flow_label().value() >> 8 & 0xff, 0xab, "flow label kept");
            assert_eq!(IpPacket::parse(p.bytes().to_vec()).unwrap().mark(), mark);
        }
        assert_eq!(p.tcp_seq(), Some(0xfff0_0001));
    }

    #[test]
    fn marking_ipv4_in_then_out_keeps_the_checksum_valid_each_time() {
        let mut p = IpPacket::parse(tcp_v4(false, b"data")).unwrap();
        for mark in [Mark::In, Mark::Out, Mark::Unmarked, Mark::Out] {
            p.set_mark(mark);
            let h = etherparse::Ipv4HeaderSlice::from_slice(p.bytes()).unwrap();
            assert_eq!(h.dcp().value(), mark.dscp());
            assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum(), "{mark:?}");
        }
        assert_eq!(p.tcp_seq(), Some(7));
        let mut udp = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).udp(1, 2).write(&mut udp, b"x").unwrap();
        assert_eq!(IpPacket::parse(udp).unwrap().tcp_seq(), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(IpPacket::parse(vec![0x45, 0, 0]).is_err());
        assert!(IpPacket::parse(vec![]).is_err());
        assert!(IpPacket::parse(vec![0x60; 10]).is_err());
    }

    /// A segment's summary made from its super-packet's is the one parsing the segment gives:
    /// sequence number, payload length, FIN on the last segment only, flow and mark.
    #[test]
    fn a_segment_summary_equals_parsing_the_segment() {
        let mut sup = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).tcp(40000, 5201, 7, 65535).ack(1).fin().write(&mut sup, &[9u8; 5000]).unwrap();
        sup[1] = 10 << 2; // AF11: an IN mark
        let template = IpPacket::parse_headers(&sup).unwrap();
        let (mut spare, mut segs) = (Vec::new(), Vec::new());
        let split = crate::gso::split_tcp(&sup, 1448, &mut spare, &mut segs).unwrap();
        let last = segs.len() - 1;
        for (i, seg) in segs.into_iter().enumerate() {
            let made = template.segment(seg.clone(), split.headers, (i * 1448) as u32, i == last);
            let parsed = IpPacket::parse(seg).unwrap();
            assert_eq!(made.five_tuple(), parsed.five_tuple());
            assert_eq!((made.payload_len(), made.tcp_seq(), made.tcp_flags()), (parsed.payload_len(), parsed.tcp_seq(), parsed.tcp_flags()), "segment {i}");
            assert_eq!((made.mark(), made.priority_band(), made.bytes()), (parsed.mark(), parsed.priority_band(), parsed.bytes()));
        }
    }
}
