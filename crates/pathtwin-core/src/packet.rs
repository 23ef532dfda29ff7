//! What the model needs to know about a packet, as the [`PacketMeta`] trait.
//!
//! The simulator's packets are structs with a TCP segment inside; the emulator's are raw IP
//! datagrams. Elements and queue disciplines are generic over `P: PacketMeta`, so both engines
//! run the same monomorphized code without the model ever touching bytes on a wire.

/// DiffServ-style drop precedence set by markers and read by RIO/FRIO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mark {
    /// Not marked: treated as IN by RIO (the conservative choice).
    #[default]
    Unmarked,
    /// In profile (low drop precedence).
    In,
    /// Out of profile (high drop precedence).
    Out,
}

impl Mark {
    /// The DiffServ code point a mark travels as: AF11 (10) for IN and AF12 (12) for OUT,
    /// the low and middle drop precedence of assured-forwarding class 1 (RFC 2597 §6), so
    /// that a capture shows what a marker decided; 0 (default forwarding) when unmarked.
    pub fn dscp(self) -> u8 {
        match self {
            Mark::In => 10,
            Mark::Out => 12,
            Mark::Unmarked => 0,
        }
    }
}

/// TCP header flags the flow monitor looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TcpFlags {
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
}

/// Identifies one transport flow in one direction (e.g. a hash of the 5-tuple, or the
/// simulator's flow id with a direction bit). Equal keys mean the same flow.
pub type FlowKey = u64;

/// The view of a packet that elements, queue disciplines and markers need.
pub trait PacketMeta {
    /// Bytes on the wire at the IP layer (header + payload), used for serialization time
    /// and byte-mode queue limits.
    fn wire_len(&self) -> u32;
    /// Transport payload bytes; zero for pure ACKs and control packets.
    fn payload_len(&self) -> u32;
    /// The flow this packet belongs to.
    fn flow_key(&self) -> FlowKey;
    /// TCP flags, or `None` for non-TCP packets.
    fn tcp_flags(&self) -> Option<TcpFlags>;
    /// The TCP sequence number of the segment's first octet, or `None` for non-TCP packets
    /// (and packet types that do not expose it). Both engines give the 32-bit value a TCP
    /// header carries, so a reader compares sequence numbers modulo 2^32 (RFC 1982 serial
    /// arithmetic). The TCP-friendly marker reads it to recognise retransmissions.
    fn tcp_seq(&self) -> Option<u64> {
        None
    }
    /// Drop precedence set by a marker.
    fn mark(&self) -> Mark {
        Mark::Unmarked
    }
    /// Sets the drop precedence (markers call this).
    fn set_mark(&mut self, _mark: Mark) {}
    /// Whether the packet's IP ECN field says ECN-capable transport (ECT(0), ECT(1) or CE,
    /// RFC 3168 §5): a queue may then mark it instead of dropping it.
    fn ecn_capable(&self) -> bool {
        false
    }
    /// Sets the IP ECN field to CE (congestion experienced); only meaningful when
    /// [`ecn_capable`](Self::ecn_capable).
    fn set_ce(&mut self) {}
    /// Strict-priority band: 0 is served first.
    fn priority(&self) -> u8 {
        1
    }
}
