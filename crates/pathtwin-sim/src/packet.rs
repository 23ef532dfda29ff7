//! The simulator's packet: addressing, a handle to its TCP segment, its IP ECN codepoint and
//! DiffServ mark, the segment's sequence number, and what the model reads of it. It implements [`PacketMeta`] so that the shared elements can carry it.
//! A `[[probe]]`'s datagram is one too, with no segment ([`SimPacket::datagram`]).
//!
//! The segment itself (≈100 bytes with its SACK blocks) stays in a [`SegmentSlab`] while the
//! packet travels; elements move only this 48-byte header. Profiling the dumbbell benchmark
//! showed packet copies at 15 % of the run time before this split.

use pathtwin_core::driver::{RouteId, Routed};
use pathtwin_core::packet::{FlowKey, Mark, PacketMeta, TcpFlags};
use pathtwin_tcp::{Ecn, Segment};

/// IPv4 header bytes added to every segment.
pub const IP_HEADER: u32 = 20;
/// IPv4 and UDP header bytes of a probe datagram.
pub const DATAGRAM_HEADERS: u32 = 28;
/// The `segment` of a packet that carries none (a probe's datagram).
pub const NO_SEGMENT: u32 = u32::MAX;

/// Aligned to 16 bytes: the elements move it as `(Instant, SimPacket)`, and with the packet at
/// an 8-byte offset those copies went through the stack in 16-byte pieces that straddled the
/// pieces just stored, which the processor cannot forward (a stall on every hop: the largest
/// single cost `perf annotate` showed in `Simulation::release`). At offset 16 the pieces line
/// up: the 600-s dumbbell's engine time went from 0.222 to 0.211 s, the results unchanged.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct SimPacket {
    pub src: u32,
    pub dst: u32,
    /// Connection index.
    pub conn: u32,
    /// Index of the segment in the simulation's [`SegmentSlab`]; [`NO_SEGMENT`] for a datagram.
    pub segment: u32,
    pub wire_len: u32,
    pub payload_len: u32,
    /// Position in the route: the index of the hop the packet is in.
    pub hop: u16,
    /// True when sent by the connection's client.
    pub from_client: bool,
    pub flags: TcpFlags,
    /// The IP header's ECN field: copied from the segment when sent, possibly set to CE by
    /// a queue on the way, and written back into the segment on arrival.
    pub ecn: Ecn,
    /// Drop precedence set by a marker on the way (the IP header's DSCP in a real network).
    pub mark: Mark,
    /// The segment's sequence number as a TCP header carries it (modulo 2^32), for markers
    /// that recognise retransmissions; a datagram's round number.
    pub seq: u32,
    /// Strict-priority band: 0 for Monaco's out-of-band control packets, else 1.
    pub band: u8,
    /// Explicit, so that a copy moves the whole 48 bytes in three aligned pieces: with the
    /// tail left as padding, the compiler copied 37 bytes with overlapping unaligned moves,
    /// and the next copy of those bytes waited on them.
    _pad: [u8; 11],
}

const _: () = assert!(std::mem::size_of::<SimPacket>() == 48);

impl SimPacket {
    /// A probe's datagram (or its echo) of `wire_len` IP bytes: "connection" `conn` is the
    /// probe series (numbered after the TCP connections, so that its routes follow theirs),
    /// `round` its probe number.
    pub fn datagram(src: u32, dst: u32, conn: u32, from_client: bool, wire_len: u32, round: u32) -> SimPacket {
        SimPacket {
            src,
            dst,
            conn,
            segment: NO_SEGMENT,
            wire_len,
            payload_len: wire_len.saturating_sub(DATAGRAM_HEADERS),
            hop: 0,
            from_client,
            flags: TcpFlags::default(),
            ecn: Ecn::NotEct,
            mark: Mark::Unmarked,
            seq: round,
            band: 1,
            _pad: [0; 11],
        }
    }

    pub fn is_datagram(&self) -> bool {
        self.segment == NO_SEGMENT
    }
}

impl PacketMeta for SimPacket {
    fn wire_len(&self) -> u32 {
        self.wire_len
    }
    fn payload_len(&self) -> u32 {
        self.payload_len
    }
    fn flow_key(&self) -> FlowKey {
        (self.conn as u64) << 1 | self.from_client as u64
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        (!self.is_datagram()).then_some(self.flags)
    }
    fn tcp_seq(&self) -> Option<u64> {
        (!self.is_datagram()).then_some(self.seq as u64)
    }
    fn mark(&self) -> Mark {
        self.mark
    }
    fn set_mark(&mut self, mark: Mark) {
        self.mark = mark;
    }
    fn ecn_capable(&self) -> bool {
        self.ecn.is_capable()
    }
    fn set_ce(&mut self) {
        if self.ecn.is_capable() {
            self.ecn = Ecn::Ce;
        }
    }
    fn priority(&self) -> u8 {
        self.band
    }
}

/// Connection `conn`'s packets from its client follow route `2 conn`, its server's `2 conn +
/// 1` (the simulation registers them in that order).
impl Routed for SimPacket {
    #[inline]
    fn route(&self) -> RouteId {
        self.conn << 1 | u32::from(!self.from_client)
    }
    #[inline]
    fn hop(&self) -> usize {
        usize::from(self.hop)
    }
    #[inline]
    fn set_hop(&mut self, hop: usize) {
        self.hop = hop as u16;
    }
}

/// Segments of packets in flight, reused through a free list.
#[derive(Default)]
pub struct SegmentSlab {
    segments: Vec<Segment>,
    free: Vec<u32>,
}

impl SegmentSlab {
    /// Stores `seg` and returns the packet header that carries it.
    pub fn packet(&mut self, src: u32, dst: u32, conn: u32, from_client: bool, seg: Segment) -> SimPacket {
        let wire_len = IP_HEADER + seg.header_bytes() + seg.len;
        let payload_len = seg.len;
        let flags = TcpFlags { syn: seg.flags.syn(), fin: seg.flags.fin(), rst: seg.flags.rst() };
        let segment = match self.free.pop() {
            Some(i) => {
                self.segments[i as usize] = seg;
                i
            }
            None => {
                self.segments.push(seg);
                (self.segments.len() - 1) as u32
            }
        };
        // A TCP header carries the sequence number modulo 2^32; the truncation is the wire's.
        let seq = seg.seq as u32;
        SimPacket { src, dst, conn, segment, wire_len, payload_len, hop: 0, from_client, flags, ecn: seg.ecn, mark: Mark::Unmarked, seq, band: seg.band(), _pad: [0; 11] }
    }

    /// The segment of a packet that has arrived, with the ECN field the packet arrived with
    /// (a queue may have marked it CE); its slot is reused afterwards.
    pub fn take(&mut self, pkt: &SimPacket) -> &Segment {
        self.free.push(pkt.segment);
        let seg = &mut self.segments[pkt.segment as usize];
        seg.ecn = pkt.ecn;
        seg
    }

    /// Releases the segment of a packet dropped on the way (a datagram holds none).
    pub fn release(&mut self, pkt: &SimPacket) {
        if !pkt.is_datagram() {
            self.free.push(pkt.segment);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_tcp::Flags;

    fn data(ecn: Ecn) -> Segment {
        Segment { seq: 1, ack: 1, flags: Flags::ACK, len: 1000, ecn, ..Segment::default() }
    }

    #[test]
    fn ce_set_by_a_queue_reaches_the_receiving_segment() {
        let mut slab = SegmentSlab::default();
        let mut pkt = slab.packet(0, 1, 0, true, data(Ecn::Ect0));
        assert!(pkt.ecn_capable());
        pkt.set_ce();
        assert!(pkt.ecn_capable(), "CE is still ECN-capable (RFC 3168 §5)");
        assert_eq!(slab.take(&pkt).ecn, Ecn::Ce);
    }

    #[test]
    fn packets_carry_the_segment_sequence_and_a_mark() {
        let mut slab = SegmentSlab::default();
        let seg = Segment { seq: (1 << 32) + 77, ..data(Ecn::NotEct) };
        let mut pkt = slab.packet(0, 1, 0, true, seg);
        assert_eq!(pkt.tcp_seq(), Some(77), "modulo 2^32, as on the wire");
        assert_eq!(pkt.mark(), Mark::Unmarked);
        pkt.set_mark(Mark::Out);
        assert_eq!(pkt.mark(), Mark::Out);
    }

    #[test]
    fn not_ect_packets_cannot_be_marked() {
        let mut slab = SegmentSlab::default();
        let mut pkt = slab.packet(0, 1, 0, true, data(Ecn::NotEct));
        assert!(!pkt.ecn_capable());
        pkt.set_ce();
        assert_eq!(slab.take(&pkt).ecn, Ecn::NotEct);
        // An unmarked ECT packet arrives as ECT(0).
        let pkt = slab.packet(0, 1, 0, true, data(Ecn::Ect0));
        assert_eq!(slab.take(&pkt).ecn, Ecn::Ect0);
    }
}
