//! The simulator's packet: addressing, a TCP segment, and its size on the wire.
//! It implements [`PacketMeta`] so that the shared elements can carry it.

use pathtwin_core::packet::{FlowKey, PacketMeta, TcpFlags};
use pathtwin_tcp::Segment;

/// IPv4 header bytes added to every segment.
pub const IP_HEADER: u32 = 20;

#[derive(Clone, Debug)]
pub struct SimPacket {
    pub src: u32,
    pub dst: u32,
    /// Connection index.
    pub conn: u32,
    /// True when sent by the connection's client.
    pub from_client: bool,
    /// Position in the route: the index of the hop the packet is in.
    pub hop: u16,
    pub seg: Segment,
    pub wire_len: u32,
}

impl SimPacket {
    pub fn new(src: u32, dst: u32, conn: u32, from_client: bool, seg: Segment) -> Self {
        let wire_len = IP_HEADER + seg.header_bytes() + seg.len;
        SimPacket { src, dst, conn, from_client, hop: 0, seg, wire_len }
    }
}

impl PacketMeta for SimPacket {
    fn wire_len(&self) -> u32 {
        self.wire_len
    }
    fn payload_len(&self) -> u32 {
        self.seg.len
    }
    fn flow_key(&self) -> FlowKey {
        (self.conn as u64) << 1 | self.from_client as u64
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        Some(TcpFlags { syn: self.seg.flags.syn(), fin: self.seg.flags.fin(), rst: self.seg.flags.rst() })
    }
}
