//! Segmentation offload at the TUN boundary: the virtio-net header the kernel puts before
//! every datagram of an `IFF_VNET_HDR` device, cutting a TCP super-packet read from a host
//! into the MTU-sized segments the model accounts one by one, and merging segments released
//! together back into one super-packet for a single write.
//!
//! With `TUNSETOFFLOAD` (checksum, TSO4, TSO6) a host's TCP hands the device super-packets
//! of up to 64 KB, each with a header saying how to cut it (`gso_size`, the MSS) and that its
//! transport checksum is left for the device to fill (`NEEDS_CSUM`, `csum_start`,
//! `csum_offset`). One `read(2)` then carries what took ~44 before. The model still sees
//! wire packets: [`split_tcp`] produces exactly the segments the kernel's own software GSO
//! would (`net/ipv4/tcp_offload.c: tcp_gso_segment`): the headers of the super-packet with
//! the IP length (and, for IPv4, an identification incremented per segment and a fresh
//! header checksum), the sequence number advanced by `gso_size` per segment, FIN and PSH
//! only on the last segment, CWR only on the first, and the TCP checksum left partial: its
//! field holds the pseudo-header sum for the segment's length, which whoever completes it
//! (the receiving kernel trusts a partial checksum from its own device; [`complete_checksum`]
//! does it here when a packet leaves the model's hands otherwise) sums over the segment.
//!
//! On the way out, [`Merge`] decides whether a released segment may join the ones before it
//! to the same host, with the rules of the kernel's TCP GRO (`tcp_gro_receive`): same flow,
//! contiguous sequence numbers, identical headers but for lengths, IDs, checksums and the
//! last segment's PSH/FIN, every segment but the last of full size, at most 64 KB. A merged
//! packet is written with one `writev(2)` and a header asking the receiving kernel to treat it
//! as one GSO packet: its TCP sees what a NIC's GRO would have handed it. Nothing here
//! changes what the model decides; it only changes how many system calls carry it.

use pathtwin_core::checksum;
use std::net::IpAddr;

/// Size of `struct virtio_net_hdr` (the device's default `TUNSETVNETHDRSZ`).
pub const VNET_HDR_LEN: usize = 10;
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_ECN: u8 = 0x80;
const TCP_CHECK_OFFSET: u16 = 16;
const UDP_CHECK_OFFSET: u16 = 6;
/// Most segments merged into one write (the kernel's GRO stops at 64 as well: `MAX_GRO_SKBS`
/// is per list, `gro_max_size` 64 KB is what binds at an MSS of 1448).
pub const MAX_MERGED: usize = 64;
/// Largest merged datagram: the IPv4 total length and IPv6 payload length are 16-bit fields.
const MAX_DATAGRAM: usize = 65_535;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const URG: u8 = 0x20;
const CWR: u8 = 0x80;

/// `struct virtio_net_hdr`, little-endian as the device uses it on the machines this runs on
/// (`TUNSETVNETLE` is the default byte order on little-endian hosts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

/// Where a checksum left for the device starts (the transport header) and where, from
/// there, its 16-bit field lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialCsum {
    pub start: u16,
    pub offset: u16,
}

impl VnetHdr {
    pub fn from_bytes(b: &[u8; VNET_HDR_LEN]) -> VnetHdr {
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHdr { flags: b[0], gso_type: b[1], hdr_len: le(2), gso_size: le(4), csum_start: le(6), csum_offset: le(8) }
    }

    pub fn to_bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// A single datagram, its checksum partial or complete.
    pub fn single(csum: Option<PartialCsum>) -> VnetHdr {
        match csum {
            Some(c) => VnetHdr { flags: F_NEEDS_CSUM, csum_start: c.start, csum_offset: c.offset, ..VnetHdr::default() },
            None => VnetHdr::default(),
        }
    }

    pub fn partial_csum(&self) -> Option<PartialCsum> {
        (self.flags & F_NEEDS_CSUM != 0).then_some(PartialCsum { start: self.csum_start, offset: self.csum_offset })
    }

    /// The MSS to cut at, when this is a TCP super-packet.
    pub fn tcp_gso_size(&self) -> Option<usize> {
        match self.gso_type & !GSO_ECN {
            GSO_TCPV4 | GSO_TCPV6 if self.gso_size > 0 => Some(usize::from(self.gso_size)),
            _ => None,
        }
    }

    /// Whether the device gave anything other than a plain datagram or a TCP super-packet
    /// (UDP fragmentation offload, which is never enabled here).
    pub fn is_unknown_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE && self.tcp_gso_size().is_none()
    }
}

/// Where the headers of an IPv4 or IPv6 TCP datagram end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TcpLayout {
    v4: bool,
    /// IP header length (IPv6: 40; extension headers are not cut or merged).
    l3: usize,
    /// TCP header length, options included.
    l4: usize,
}

impl TcpLayout {
    fn of(p: &[u8]) -> Option<TcpLayout> {
        let (v4, l3) = match p.first()? >> 4 {
            4 => {
                let ihl = usize::from(p[0] & 0x0f) * 4;
                // Not TCP, or a fragment: nothing to cut or merge.
                if ihl < 20 || p.len() < ihl || p[9] != 6 || u16::from_be_bytes([p[6], p[7]]) & 0x3fff != 0 {
                    return None;
                }
                (true, ihl)
            }
            6 if p.len() >= 40 && p[6] == 6 => (false, 40),
            _ => return None,
        };
        let l4 = usize::from(*p.get(l3 + 12)? >> 4) * 4;
        (l4 >= 20 && p.len() >= l3 + l4).then_some(TcpLayout { v4, l3, l4 })
    }

    fn headers(&self) -> usize {
        self.l3 + self.l4
    }

    fn addrs(&self, p: &[u8]) -> (IpAddr, IpAddr) {
        if self.v4 {
            let a = |i: usize| IpAddr::from(<[u8; 4]>::try_from(&p[i..i + 4]).expect("4 bytes"));
            (a(12), a(16))
        } else {
            let a = |i: usize| IpAddr::from(<[u8; 16]>::try_from(&p[i..i + 16]).expect("16 bytes"));
            (a(8), a(24))
        }
    }

    /// Sets the IP length fields for a datagram whose TCP payload is `payload` bytes.
    fn set_lengths(&self, p: &mut [u8], payload: usize) {
        if self.v4 {
            let total = (self.headers() + payload) as u16;
            p[2..4].copy_from_slice(&total.to_be_bytes());
        } else {
            let len = (self.l4 + payload) as u16;
            p[4..6].copy_from_slice(&len.to_be_bytes());
        }
    }

    fn refresh_ipv4_checksum(&self, p: &mut [u8]) {
        if self.v4 {
            p[10..12].copy_from_slice(&[0, 0]);
            let sum = checksum::of(&p[..self.l3]);
            p[10..12].copy_from_slice(&sum.to_be_bytes());
        }
    }

    /// Leaves the TCP checksum partial: the pseudo-header sum for `payload` bytes of data.
    fn seed_tcp_checksum(&self, p: &mut [u8], payload: usize) {
        let (src, dst) = self.addrs(p);
        let seed = pseudo_header_sum(src, dst, 6, (self.l4 + payload) as u32);
        let at = self.l3 + usize::from(TCP_CHECK_OFFSET);
        p[at..at + 2].copy_from_slice(&seed.to_be_bytes());
    }

    fn partial(&self) -> PartialCsum {
        PartialCsum { start: self.l3 as u16, offset: TCP_CHECK_OFFSET }
    }

    fn seq(&self, p: &[u8]) -> u32 {
        u32::from_be_bytes(p[self.l3 + 4..self.l3 + 8].try_into().expect("4 bytes"))
    }

    fn flags(&self, p: &[u8]) -> u8 {
        p[self.l3 + 13]
    }
}

/// The pseudo-header sum of a transport segment of `len` bytes (RFC 9293 §3.1, RFC 8200
/// §8.1), folded but not complemented: what the kernel leaves in the checksum field of a
/// packet whose checksum a device is to complete.
pub fn pseudo_header_sum(src: IpAddr, dst: IpAddr, proto: u8, len: u32) -> u16 {
    let mut words = [0u8; 40];
    let n = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            words[..4].copy_from_slice(&s.octets());
            words[4..8].copy_from_slice(&d.octets());
            8
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            words[..16].copy_from_slice(&v6(s).octets());
            words[16..32].copy_from_slice(&v6(d).octets());
            32
        }
    };
    checksum::sum(&words[..n], u32::from(proto) + (len >> 16) + (len & 0xffff))
}

/// Completes a partial transport checksum in place, as a device would: the one's complement
/// of the sum from `csum.start` to the end (whose checksum field holds the pseudo-header
/// sum). A UDP checksum of zero is sent as 0xffff (RFC 768). Out-of-range offsets (a
/// malformed header from the device) leave the packet unchanged.
pub fn complete_checksum(p: &mut [u8], csum: PartialCsum) {
    let start = usize::from(csum.start);
    let at = start + usize::from(csum.offset);
    if at + 2 > p.len() {
        return;
    }
    let mut ck = checksum::of(&p[start..]);
    if ck == 0 && csum.offset == UDP_CHECK_OFFSET {
        ck = 0xffff;
    }
    p[at..at + 2].copy_from_slice(&ck.to_be_bytes());
}

/// Why a super-packet could not be cut.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("a TCP segmentation request on a datagram that is not IPv4/IPv6 TCP without extension headers")]
    NotTcp,
}

/// What every segment of one split shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Where the (partial) TCP checksum is.
    pub csum: PartialCsum,
    /// Length of the IP and TCP headers.
    pub headers: usize,
}

/// Cuts the TCP super-packet `p` into segments of at most `mss` payload bytes, appended to
/// `out` (buffers taken from `spare` when it has any). Each segment's checksum is partial
/// (see the module doc).
pub fn split_tcp(p: &[u8], mss: usize, spare: &mut Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>) -> Result<Split, SplitError> {
    let lay = TcpLayout::of(p).ok_or(SplitError::NotTcp)?;
    let hl = lay.headers();
    let payload = &p[hl..];
    let n = payload.len().div_ceil(mss.max(1)).max(1);
    let seq0 = lay.seq(p);
    let id0 = if lay.v4 { u16::from_be_bytes([p[4], p[5]]) } else { 0 };
    for i in 0..n {
        let chunk = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        let mut seg = spare.pop().unwrap_or_default();
        seg.clear();
        seg.extend_from_slice(&p[..hl]);
        seg.extend_from_slice(chunk);
        lay.set_lengths(&mut seg, chunk.len());
        if lay.v4 {
            seg[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            lay.refresh_ipv4_checksum(&mut seg);
        }
        let seq = seq0.wrapping_add((i * mss) as u32);
        seg[lay.l3 + 4..lay.l3 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = lay.flags(p);
        if i + 1 < n {
            flags &= !(FIN | PSH);
        }
        if i > 0 {
            flags &= !CWR;
        }
        seg[lay.l3 + 13] = flags;
        lay.seed_tcp_checksum(&mut seg, chunk.len());
        out.push(seg);
    }
    Ok(Split { csum: lay.partial(), headers: hl })
}

/// A run of released segments to one host that can go out as one super-packet: built by
/// [`Merge::start`] and [`Merge::accepts`], written with [`Merge::header`].
#[derive(Clone, Copy, Debug)]
pub struct Merge {
    lay: TcpLayout,
    mss: usize,
    /// Segments and payload bytes so far.
    count: usize,
    payload: usize,
    /// Where the next segment's data must start.
    next_seq: u32,
    /// Whether the last segment so far is of full size and without PSH/FIN (so it may be
    /// followed).
    open: bool,
    /// PSH and FIN of the last segment (the merged header carries them).
    last_flags: u8,
}

/// Header bytes that must be equal in every merged segment, as (from, to) ranges within the
/// IP header and, offset by it, the TCP header. IPv4: version/IHL, TOS (so a CE mark is never
/// merged away), flags (DF) and fragment offset, TTL, protocol, addresses. IPv6: version,
/// traffic class, flow label, next header, hop limit, addresses.
const V4_SAME: [(usize, usize); 3] = [(0, 2), (6, 10), (12, 20)];
const V6_SAME: [(usize, usize); 3] = [(0, 4), (6, 8), (8, 40)];
/// TCP: ports; acknowledgment number, data offset; window, urgent pointer. Options are
/// compared whole, after the fixed header.
const TCP_SAME: [(usize, usize); 4] = [(0, 4), (8, 13), (14, 16), (18, 20)];

impl Merge {
    /// A merge starting with segment `p`, or `None` if `p` can never be merged (not TCP, no
    /// data, control flags, CWR).
    pub fn start(p: &[u8]) -> Option<Merge> {
        let lay = TcpLayout::of(p)?;
        let flags = lay.flags(p);
        let payload = p.len() - lay.headers();
        if payload == 0 || flags & (SYN | RST | URG | CWR) != 0 {
            return None;
        }
        Some(Merge {
            lay,
            mss: payload,
            count: 1,
            payload,
            next_seq: lay.seq(p).wrapping_add(payload as u32),
            open: flags & (PSH | FIN) == 0,
            last_flags: flags & (PSH | FIN),
        })
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether `next` may follow the merged segments, whose first is `first`; if so, it is
    /// taken in.
    pub fn accepts(&mut self, first: &[u8], next: &[u8]) -> bool {
        if !self.open || self.count >= MAX_MERGED || next.len() > self.lay.headers() + self.mss {
            return false;
        }
        let lay = self.lay;
        if TcpLayout::of(next) != Some(lay) {
            return false;
        }
        let payload = next.len() - lay.headers();
        if payload == 0 || lay.headers() + self.payload + payload > MAX_DATAGRAM || lay.seq(next) != self.next_seq {
            return false;
        }
        let (fa, fb) = (lay.flags(first), lay.flags(next));
        // Only PSH and FIN may differ, and only on the segment that ends the merge.
        if (fa ^ fb) & !(PSH | FIN) != 0 {
            return false;
        }
        let ip_same: &[(usize, usize)] = if lay.v4 { &V4_SAME } else { &V6_SAME };
        let tcp_same = TCP_SAME.iter().map(|&(a, b)| (lay.l3 + a, lay.l3 + b));
        let options = std::iter::once((lay.l3 + 20, lay.headers()));
        if !ip_same.iter().copied().chain(tcp_same).chain(options).all(|(a, b)| first[a..b] == next[a..b]) {
            return false;
        }
        self.count += 1;
        self.payload += payload;
        self.next_seq = self.next_seq.wrapping_add(payload as u32);
        self.open = payload == self.mss && fb & (PSH | FIN) == 0;
        self.last_flags = fb & (PSH | FIN);
        true
    }

    /// The headers of the merged datagram (the first segment's, with the total length, the
    /// last segment's PSH/FIN and a partial checksum) into `out`, and the device header that
    /// asks the kernel to take it as one super-packet.
    pub fn header(&self, first: &[u8], out: &mut Vec<u8>) -> VnetHdr {
        let lay = self.lay;
        out.clear();
        out.extend_from_slice(&first[..lay.headers()]);
        lay.set_lengths(out, self.payload);
        lay.refresh_ipv4_checksum(out);
        out[lay.l3 + 13] |= self.last_flags;
        lay.seed_tcp_checksum(out, self.payload);
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if lay.v4 { GSO_TCPV4 } else { GSO_TCPV6 },
            hdr_len: lay.headers() as u16,
            gso_size: self.mss as u16,
            csum_start: lay.l3 as u16,
            csum_offset: TCP_CHECK_OFFSET,
        }
    }

    /// Where each segment's data begins (its headers are the merged packet's).
    pub fn headers_len(&self) -> usize {
        self.lay.headers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, SlicedPacket, TcpOptionElement, TransportSlice};

    /// A TCP datagram with timestamps (as Linux sends), `payload` bytes of a counting
    /// pattern starting at `from`, and the given flags on top of ACK.
    fn tcp(v6: bool, seq: u32, from: usize, payload: usize, psh: bool, fin: bool) -> Vec<u8> {
        let b = if v6 {
            let s: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
            let mut d = s;
            d[15] = 2;
            PacketBuilder::ipv6(s, d, 64)
        } else {
            PacketBuilder::ipv4([10, 7, 0, 1], [10, 7, 0, 2], 64)
        };
        let mut b = b.tcp(40000, 5201, seq, 500).ack(77);
        b = b.options(&[TcpOptionElement::Noop, TcpOptionElement::Noop, TcpOptionElement::Timestamp(11, 22)]).unwrap();
        if psh {
            b = b.psh();
        }
        if fin {
            b = b.fin();
        }
        let data: Vec<u8> = (from..from + payload).map(|i| (i % 251) as u8).collect();
        let mut out = Vec::new();
        b.write(&mut out, &data).unwrap();
        out
    }

    /// The checksum a packet should carry, computed by etherparse from scratch.
    fn expected_tcp_checksum(p: &[u8]) -> (u16, u16) {
        let s = SlicedPacket::from_ip(p).unwrap();
        let Some(TransportSlice::Tcp(t)) = &s.transport else { panic!("not tcp") };
        let calc = match &s.net {
            Some(etherparse::NetSlice::Ipv4(v4)) => t.to_header().calc_checksum_ipv4(&v4.header().to_header(), t.payload()).unwrap(),
            Some(etherparse::NetSlice::Ipv6(v6)) => t.to_header().calc_checksum_ipv6(&v6.header().to_header(), t.payload()).unwrap(),
            _ => unreachable!(),
        };
        (t.checksum(), calc)
    }

    fn completed(mut p: Vec<u8>, csum: PartialCsum) -> Vec<u8> {
        complete_checksum(&mut p, csum);
        p
    }

    /// A super-packet as a host's kernel hands it over: the total length, and a checksum
    /// field holding the pseudo-header sum.
    fn super_packet(v6: bool, payload: usize, psh: bool) -> Vec<u8> {
        let mut p = tcp(v6, 1_000, 0, payload, psh, false);
        let lay = TcpLayout::of(&p).unwrap();
        lay.seed_tcp_checksum(&mut p, payload);
        p
    }

    /// Each segment is what the sender would have sent without offload: its data is the
    /// super-packet's next `mss` bytes, its sequence number and length follow, PSH is on the
    /// last only, its IPv4 header checksum is valid and, once completed, so is its TCP
    /// checksum (against etherparse's, computed from scratch).
    #[test]
    fn a_super_packet_splits_into_the_segments_the_sender_would_have_sent() {
        for v6 in [false, true] {
            let p = super_packet(v6, 10_000, true);
            let (mut spare, mut out) = (Vec::new(), Vec::new());
            let csum = split_tcp(&p, 1448, &mut spare, &mut out).unwrap().csum;
            assert_eq!(out.len(), 7, "10 000 bytes at 1448 per segment");
            let mut data = Vec::new();
            for (i, seg) in out.into_iter().enumerate() {
                let seg = completed(seg, csum);
                let s = SlicedPacket::from_ip(&seg).unwrap();
                let Some(TransportSlice::Tcp(t)) = &s.transport else { panic!() };
                assert_eq!(t.sequence_number(), 1_000 + 1448 * i as u32);
                assert_eq!(t.psh(), i == 6, "segment {i}");
                assert_eq!(t.payload().len(), if i < 6 { 1448 } else { 10_000 - 6 * 1448 });
                data.extend_from_slice(t.payload());
                let (got, want) = expected_tcp_checksum(&seg);
                assert_eq!(got, want, "segment {i} (v6 {v6})");
                if let Some(etherparse::NetSlice::Ipv4(v4)) = &s.net {
                    let h = v4.header();
                    assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                    assert_eq!(h.identification(), u16::from_be_bytes([p[4], p[5]]).wrapping_add(i as u16));
                }
            }
            let want: Vec<u8> = (0..10_000).map(|i| (i % 251) as u8).collect();
            assert_eq!(data, want);
        }
    }

    /// Merging the segments of a split gives back the super-packet, byte for byte once both
    /// checksums are completed; and a super-packet whose checksum the device completes
    /// carries the same checksum etherparse computes for it.
    #[test]
    fn merging_the_segments_of_a_split_gives_the_super_packet_back() {
        for v6 in [false, true] {
            let p = super_packet(v6, 20_000, true);
            let (mut spare, mut segs) = (Vec::new(), Vec::new());
            let csum = split_tcp(&p, 1448, &mut spare, &mut segs).unwrap().csum;
            let mut m = Merge::start(&segs[0]).unwrap();
            for s in &segs[1..] {
                assert!(m.accepts(&segs[0], s));
            }
            let mut merged = Vec::new();
            let hdr = m.header(&segs[0], &mut merged);
            for s in &segs {
                merged.extend_from_slice(&s[m.headers_len()..]);
            }
            assert_eq!(hdr.tcp_gso_size(), Some(1448));
            assert_eq!(usize::from(hdr.hdr_len), m.headers_len());
            let merged = completed(merged, hdr.partial_csum().unwrap());
            let (got, want) = expected_tcp_checksum(&merged);
            assert_eq!(got, want);
            let mut original = completed(p.clone(), csum);
            if !v6 {
                // The merged packet keeps the first segment's IPv4 ID, which is the original's.
                original[10..12].copy_from_slice(&merged[10..12]);
            }
            assert_eq!(merged, original, "v6 {v6}");
        }
    }

    /// What GRO refuses, this refuses: a gap, a different acknowledgment, a CE mark on one
    /// segment, a short segment that is not the last, anything after PSH, and a flow change.
    #[test]
    fn segments_that_gro_would_not_merge_stay_apart() {
        let a = tcp(false, 0, 0, 1000, false, false);
        let follows = |b: &[u8]| Merge::start(&a).unwrap().accepts(&a, b);
        assert!(follows(&tcp(false, 1000, 1000, 1000, false, false)));
        assert!(follows(&tcp(false, 1000, 1000, 400, true, false)), "a short last segment with PSH ends a merge");
        assert!(!follows(&tcp(false, 1001, 1000, 1000, false, false)), "gap");
        assert!(!follows(&tcp(false, 1000, 1000, 1001, false, false)), "longer than the first");
        let mut other_ack = tcp(false, 1000, 1000, 1000, false, false);
        other_ack[20 + 11] ^= 1;
        assert!(!follows(&other_ack));
        let mut ce = tcp(false, 1000, 1000, 1000, false, false);
        ce[1] |= 0x03;
        assert!(!follows(&ce));
        let mut other_port = tcp(false, 1000, 1000, 1000, false, false);
        other_port[20 + 1] ^= 1;
        assert!(!follows(&other_port));
        assert!(!follows(&tcp(true, 1000, 1000, 1000, false, false)), "another IP version");

        let short = tcp(false, 0, 0, 500, false, false);
        let mut m = Merge::start(&a).unwrap();
        assert!(m.accepts(&a, &tcp(false, 1000, 1000, 500, false, false)));
        assert!(!m.accepts(&a, &tcp(false, 1500, 1500, 500, false, false)), "after a short segment");
        let mut m = Merge::start(&short).unwrap();
        assert!(!m.accepts(&short, &tcp(false, 500, 500, 1000, false, false)));
        let pushed = tcp(false, 0, 0, 1000, true, false);
        let mut m = Merge::start(&pushed).unwrap();
        assert!(!m.accepts(&pushed, &tcp(false, 1000, 1000, 1000, true, false)), "after PSH");
        assert!(Merge::start(&tcp(false, 0, 0, 0, false, false)).is_none(), "a pure ACK");
    }

    /// A merge stops at 64 KB of datagram even when every segment would follow.
    #[test]
    fn a_merge_stays_within_one_datagram() {
        let first = tcp(false, 0, 0, 1448, false, false);
        let mut m = Merge::start(&first).unwrap();
        let mut seq = 1448u32;
        while m.accepts(&first, &tcp(false, seq, 0, 1448, false, false)) {
            seq += 1448;
        }
        let hl = m.headers_len();
        assert!(hl + m.count() * 1448 <= MAX_DATAGRAM && hl + (m.count() + 1) * 1448 > MAX_DATAGRAM, "{} segments", m.count());
    }
}
