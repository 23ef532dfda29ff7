//! Trace-driven loss: drops the transmissions a capture showed lost, by their place in the
//! TCP byte stream rather than by chance, so a replayed connection loses the data its
//! traced original lost (a `[[pipe]]`'s `drop`, one element per direction).
//!
//! The list is of byte offsets relative to the direction's initial sequence number (offset
//! 0 is the first payload byte, ISN + 1), an offset listed k times standing for k lost
//! transmissions of the byte. The element learns the ISN from the SYN (or SYN-ACK) that
//! crosses it — a replay pipe carries one connection — and drops a data segment when it
//! covers a listed offset that still has transmissions to lose, taking one from every
//! listed offset it covers: the first k transmissions covering an offset are lost, whatever
//! the replay's segment boundaries (its sender may cut the stream differently from the
//! traced one). Sequence numbers are compared modulo 2^32 (RFC 1982), so an offset names a
//! byte of the first 4 GiB of a direction. Packets without a TCP sequence number, before a
//! SYN, or without payload pass. Zero delay, like random loss.

use crate::element::Passthrough;
use crate::packet::PacketMeta;
use crate::time::Instant;

pub struct TraceLoss<P> {
    /// (offset, transmissions still to lose), sorted by offset, one entry per offset.
    offsets: Vec<(u32, u32)>,
    /// The SYN's sequence number on this pipe direction, once seen.
    isn: Option<u32>,
    pending: Passthrough<P>,
    arrivals: u64,
    drops: u64,
}

impl<P: PacketMeta> TraceLoss<P> {
    /// `offsets`: one entry per lost transmission (an offset repeated k times loses k),
    /// each below 2^32 (the config checks it).
    pub fn new(offsets: &[u64]) -> Self {
        let mut sorted: Vec<u32> = offsets.iter().map(|&o| o as u32).collect();
        sorted.sort_unstable();
        let mut counted: Vec<(u32, u32)> = Vec::new();
        for o in sorted {
            match counted.last_mut() {
                Some((last, k)) if *last == o => *k += 1,
                _ => counted.push((o, 1)),
            }
        }
        TraceLoss { offsets: counted, isn: None, pending: Passthrough::default(), arrivals: 0, drops: 0 }
    }

    /// Returns the packet if it was dropped.
    pub fn push(&mut self, at: Instant, pkt: P) -> Option<P> {
        self.arrivals += 1;
        if self.lost(&pkt) {
            self.drops += 1;
            Some(pkt)
        } else {
            self.pending.push(at, pkt);
            None
        }
    }

    /// Whether `pkt` is a transmission to lose; takes it from the offsets it covers.
    fn lost(&mut self, pkt: &P) -> bool {
        let Some(seq) = pkt.tcp_seq() else { return false };
        let seq = seq as u32;
        if pkt.tcp_flags().is_some_and(|f| f.syn) {
            // A SYN's data, if any, starts at ISN + 1 too: the offset arithmetic holds.
            self.isn = Some(seq);
        }
        let (Some(isn), len) = (self.isn, pkt.payload_len()) else { return false };
        if len == 0 || self.offsets.is_empty() {
            return false;
        }
        // The segment's first payload byte; a SYN carrying data has it one past the SYN.
        let syn = u32::from(pkt.tcp_flags().is_some_and(|f| f.syn));
        let start = seq.wrapping_add(syn).wrapping_sub(isn).wrapping_sub(1);
        let covered = |o: u32| o.wrapping_sub(start) < len;
        // Offsets in [start, start + len): a range that may wrap past 2^32 only for a
        // stream longer than 4 GiB, which the offsets cannot name anyway.
        let first = self.offsets.partition_point(|&(o, _)| o < start);
        let hit = self.offsets[first..].iter().take_while(|&&(o, _)| covered(o)).any(|&(_, k)| k > 0);
        if !hit {
            return false;
        }
        for (o, k) in self.offsets[first..].iter_mut() {
            if !covered(*o) {
                break;
            }
            *k = k.saturating_sub(1);
        }
        true
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        self.pending.next_wakeup()
    }

    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        self.pending.poll_output(now)
    }

    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    pub fn drops(&self) -> u64 {
        self.drops
    }

    /// Transmissions still to lose (what the connection did not send again).
    pub fn remaining(&self) -> u64 {
        self.offsets.iter().map(|&(_, k)| u64::from(k)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{FlowKey, TcpFlags};

    /// A TCP segment: sequence number, payload length, SYN.
    struct Seg(u32, u32, bool);

    impl PacketMeta for Seg {
        fn wire_len(&self) -> u32 {
            self.1 + 52
        }
        fn payload_len(&self) -> u32 {
            self.1
        }
        fn flow_key(&self) -> FlowKey {
            1
        }
        fn tcp_flags(&self) -> Option<TcpFlags> {
            Some(TcpFlags { syn: self.2, ..Default::default() })
        }
        fn tcp_seq(&self) -> Option<u64> {
            Some(self.0 as u64)
        }
    }

    const ISN: u32 = 4_000_000_000;

    fn offer(e: &mut TraceLoss<Seg>, seq_offset: u32, len: u32) -> bool {
        e.push(Instant::ZERO, Seg(ISN.wrapping_add(1).wrapping_add(seq_offset), len, false)).is_some()
    }

    /// Offsets 1448 (twice) and 5000: the segment [1448, 2896) is lost on its first two
    /// transmissions and passes on its third; the stream wraps past 2^32 on the way, as an
    /// ISN near the top makes it; 5000 falls inside a replay segment cut differently from
    /// the traced one ([4344, 5792)), which is lost once.
    #[test]
    fn drops_the_first_k_transmissions_covering_each_offset() {
        let mut e = TraceLoss::new(&[1448, 5000, 1448]);
        assert!(e.push(Instant::ZERO, Seg(ISN, 0, true)).is_none(), "the SYN passes");
        assert!(!offer(&mut e, 0, 1448));
        assert!(offer(&mut e, 1448, 1448), "first transmission of 1448");
        assert!(!offer(&mut e, 2896, 1448));
        assert!(offer(&mut e, 4344, 1448), "covers 5000");
        assert!(offer(&mut e, 1448, 1448), "second transmission of 1448");
        assert!(!offer(&mut e, 1448, 1448), "third transmission passes");
        assert!(!offer(&mut e, 4344, 1448), "5000 was lost once");
        assert_eq!((e.arrivals(), e.drops(), e.remaining()), (8, 3, 0));
    }

    /// One segment covering two listed offsets is one lost transmission of both; a pure ACK
    /// at a listed offset, and anything before the SYN, pass.
    #[test]
    fn a_segment_over_two_offsets_takes_one_from_each_and_acks_pass() {
        let mut e = TraceLoss::new(&[0, 1000, 1000]);
        assert!(!offer(&mut e, 0, 100), "no SYN seen yet: no ISN to count from");
        assert!(e.push(Instant::ZERO, Seg(ISN, 0, true)).is_none());
        assert!(!offer(&mut e, 1000, 0), "a pure ACK carries no byte");
        assert!(offer(&mut e, 0, 2000));
        assert_eq!(e.remaining(), 1);
        assert!(!offer(&mut e, 0, 1000), "offset 0 had one loss");
        assert!(offer(&mut e, 500, 1000), "1000's second");
        assert!(!offer(&mut e, 500, 1000));
        assert_eq!(e.remaining(), 0);
    }
}
