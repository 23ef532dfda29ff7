//! A packet for the disciplines' unit tests: a length and an ECN field, nothing else (the
//! flow and the mark travel in [`Queued`]).

use super::Queued;
use crate::packet::{FlowKey, Mark, PacketMeta, TcpFlags};
use crate::time::Instant;

#[derive(Debug)]
pub struct Pkt {
    pub len: u32,
    pub ect: bool,
    pub ce: bool,
}

impl PacketMeta for Pkt {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn payload_len(&self) -> u32 {
        self.len
    }
    fn flow_key(&self) -> FlowKey {
        0
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        None
    }
    fn ecn_capable(&self) -> bool {
        self.ect
    }
    fn set_ce(&mut self) {
        self.ce = true;
    }
}

/// A real 1000-byte packet of `flow` with drop precedence `mark`.
pub fn packet(flow: FlowKey, mark: Mark, ect: bool) -> Queued<Pkt> {
    Queued { packet: Some(Pkt { len: 1000, ect, ce: false }), wire_len: 1000, flow, mark, priority: 1, enqueued_at: Instant::ZERO }
}

/// A placeholder of the same size, as the bandwidth queue makes them (unmarked).
pub fn placeholder() -> Queued<Pkt> {
    Queued { packet: None, flow: u64::MAX, ..packet(0, Mark::Unmarked, false) }
}
