//! The receive side of the sequence space: RCV.NXT, out-of-order data, the peer's FIN, and
//! the SACK blocks that describe them (RFC 2018).
//!
//! This module owns which received sequence numbers are in order and which are held out of
//! order; it does not decide when to acknowledge (the endpoint's delayed-ACK policy) and
//! holds no payload bytes. The application is modelled as reading instantly, so in-order
//! data is delivered as soon as it is contiguous and the receive buffer only ever holds
//! out-of-order data, which always fits inside the advertised window.
//!
//! SACK block order follows RFC 2018 §4: the first block contains the segment that
//! arrived most recently, the following ones repeat the most recently reported blocks, and
//! any room left is filled with the remaining ranges, highest first.

use crate::ranges::RangeSet;
use crate::segment::SackBlocks;

/// What one arriving segment did to the receive sequence space.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// Bytes that became in order and were delivered to the application.
    pub delivered: u64,
    /// The segment lies above RCV.NXT (a hole precedes it).
    pub out_of_order: bool,
    /// The segment filled all or part of a hole (RFC 5681 §4.2: acknowledge at once).
    pub filled_gap: bool,
    /// Every sequence number in it had been received before.
    pub duplicate: bool,
    /// The peer's FIN was consumed by this arrival.
    pub fin: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct Reassembly {
    rcv_nxt: u64,
    ooo: RangeSet,
    /// Starts of the most recently received out-of-order segments, newest first.
    recent: [u64; SackBlocks::MAX],
    recent_len: usize,
    /// Sequence number of the peer's FIN, once seen.
    fin_at: Option<u64>,
    fin_received: bool,
    /// SACK blocks reaching `fin_at` cover the FIN (`TcpConfig::sack_covers_fin`).
    sack_covers_fin: bool,
    /// The last out-of-order arrival was the FIN alone (its block goes first).
    fin_latest: bool,
}

impl Reassembly {
    /// `rcv_nxt`: the first sequence number after the peer's SYN.
    pub fn new(rcv_nxt: u64) -> Self {
        Reassembly {
            rcv_nxt,
            ooo: RangeSet::new(),
            recent: [0; SackBlocks::MAX],
            recent_len: 0,
            fin_at: None,
            fin_received: false,
            sack_covers_fin: false,
            fin_latest: false,
        }
    }

    /// SACK blocks that reach the peer's FIN cover it (`TcpConfig::sack_covers_fin`).
    pub fn with_sack_covering_fin(mut self, on: bool) -> Self {
        self.sack_covers_fin = on;
        self
    }

    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    #[cfg(test)]
    pub fn fin_received(&self) -> bool {
        self.fin_received
    }

    #[cfg(test)]
    pub fn has_out_of_order(&self) -> bool {
        !self.ooo.is_empty()
    }

    /// Takes a segment's sequence range `[seq, seq + len)` and FIN; data beyond
    /// `rcv_nxt + window` is discarded (RFC 9293 §3.10.7.4 trims to the window).
    pub fn on_segment(&mut self, seq: u64, len: u64, fin: bool, window: u64) -> Arrival {
        let mut a = Arrival::default();
        let end = seq + len;
        if fin && self.fin_at.is_none() && !self.fin_received {
            self.fin_at = Some(end);
        }
        if len > 0 && end <= self.rcv_nxt {
            a.duplicate = true;
        }
        let right = self.rcv_nxt.saturating_add(window);
        let end = match self.fin_at {
            Some(f) => end.min(right).min(f),
            None => end.min(right),
        };
        let start = seq.max(self.rcv_nxt);
        if start < end {
            if start == self.rcv_nxt {
                a.filled_gap = !self.ooo.is_empty();
                let before = self.rcv_nxt;
                self.rcv_nxt = end;
                while let Some((s, e)) = self.ooo.first() {
                    if s > self.rcv_nxt {
                        break;
                    }
                    self.rcv_nxt = self.rcv_nxt.max(e);
                    self.ooo.remove_below(e);
                }
                a.delivered = self.rcv_nxt - before;
            } else {
                self.ooo.insert(start, end);
                self.note_recent(start);
                a.out_of_order = true;
            }
        } else if seq > self.rcv_nxt {
            // A FIN alone, or data beyond the window, above a hole.
            a.out_of_order = true;
            self.fin_latest = fin && len == 0;
        }
        if let Some(f) = self.fin_at {
            if !self.fin_received && self.rcv_nxt == f {
                self.rcv_nxt += 1;
                self.fin_received = true;
                self.fin_at = None;
                a.fin = true;
            }
        }
        a
    }

    /// Records that the out-of-order segment starting at `start` arrived last: its block
    /// moves to the front, and older entries inside the same block are dropped.
    fn note_recent(&mut self, start: u64) {
        self.fin_latest = false;
        let block = self.ooo.containing(start);
        let mut kept = [0u64; SackBlocks::MAX];
        kept[0] = start;
        let mut n = 1;
        for &s in &self.recent[..self.recent_len] {
            let same_block = matches!(block, Some((b0, b1)) if b0 <= s && s < b1);
            if !same_block && n < SackBlocks::MAX {
                kept[n] = s;
                n += 1;
            }
        }
        self.recent = kept;
        self.recent_len = n;
    }

    /// SACK blocks for the next outgoing segment (empty when nothing is out of order), at
    /// most `max` of them (fewer fit beside the timestamp option).
    pub fn sack_blocks(&self, max: usize) -> SackBlocks {
        let mut blocks = SackBlocks::EMPTY;
        // A FIN alone above a hole is one sequence number in Linux's out-of-order queue,
        // and SACKed as such (bench/fidelity's kernel captures: `sack 1 {10001:10002}`).
        let lone_fin = self
            .fin_at
            .filter(|&f| self.sack_covers_fin && f > self.rcv_nxt && self.ooo.containing(f - 1).is_none())
            .map(|f| (f, f + 1));
        if self.ooo.is_empty() && lone_fin.is_none() {
            return blocks;
        }
        if let Some(b) = lone_fin.filter(|_| self.fin_latest) {
            blocks.push(b.0, b.1);
        }
        // A block that reaches the peer's FIN covers it too: Linux's out-of-order queue
        // holds the FIN's segment with an end_seq past the FIN, and its SACK blocks are
        // those ends. A block stopping short of the FIN leaves the sender's last segment
        // (which carries it) never wholly SACKed, so RACK cannot learn from its delivery
        // and a lost segment before it waits for the retransmission timer.
        let fin = self.fin_at.filter(|_| self.sack_covers_fin);
        let add = |r: (u64, u64), blocks: &mut SackBlocks| {
            let r = if fin == Some(r.1) { (r.0, r.1 + 1) } else { r };
            if !blocks.iter().any(|b| b == r) {
                blocks.push(r.0, r.1);
            }
        };
        for &s in &self.recent[..self.recent_len] {
            if blocks.len() == max {
                break;
            }
            if let Some(r) = self.ooo.containing(s) {
                add(r, &mut blocks);
            }
        }
        for r in self.ooo.iter().rev() {
            if blocks.len() >= max {
                break;
            }
            add(r, &mut blocks);
        }
        if let Some(b) = lone_fin.filter(|_| !self.fin_latest && blocks.len() < max) {
            blocks.push(b.0, b.1);
        }
        blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = 1 << 20;

    #[test]
    fn a_sack_block_reaching_an_out_of_order_fin_covers_it() {
        let mut r = Reassembly::new(1).with_sack_covering_fin(true);
        r.on_segment(1, 100, false, W);
        // 101..201 lost; the last segment, 201..301 with the FIN (sequence 301), arrives.
        let a = r.on_segment(201, 100, true, W);
        assert!(a.out_of_order && !a.fin);
        assert_eq!(r.sack_blocks(SackBlocks::MAX).iter().collect::<Vec<_>>(), [(201, 302)]);
        let mut ns2 = r.clone().with_sack_covering_fin(false);
        assert_eq!(ns2.sack_blocks(SackBlocks::MAX).iter().collect::<Vec<_>>(), [(201, 301)]);
        assert_eq!(ns2.on_segment(101, 100, false, W).delivered, 200);
        let a = r.on_segment(101, 100, false, W);
        assert_eq!((a.delivered, a.fin), (200, true));
        assert!(r.sack_blocks(SackBlocks::MAX).is_empty());
        // A FIN alone above a hole is SACKed as its one sequence number, as Linux's.
        let mut r = Reassembly::new(1).with_sack_covering_fin(true);
        r.on_segment(1, 100, false, W);
        let a = r.on_segment(201, 0, true, W);
        assert!(a.out_of_order && !a.fin);
        assert_eq!(r.sack_blocks(SackBlocks::MAX).iter().collect::<Vec<_>>(), [(201, 202)]);
        assert_eq!(r.on_segment(101, 100, false, W), Arrival { delivered: 100, filled_gap: false, fin: true, ..Default::default() });
        assert!(r.sack_blocks(SackBlocks::MAX).is_empty());
    }

    #[test]
    fn in_order_data_is_delivered_at_once() {
        let mut r = Reassembly::new(1);
        let a = r.on_segment(1, 100, false, W);
        assert_eq!(a, Arrival { delivered: 100, ..Default::default() });
        assert_eq!(r.rcv_nxt(), 101);
        assert!(r.sack_blocks(SackBlocks::MAX).is_empty());
    }

    #[test]
    fn hole_then_fill_delivers_everything_and_flags_the_fill() {
        let mut r = Reassembly::new(1);
        assert!(r.on_segment(101, 100, false, W).out_of_order);
        assert!(r.on_segment(301, 100, false, W).out_of_order);
        assert_eq!(r.sack_blocks(SackBlocks::MAX).as_slice(), [(301, 401), (101, 201)]);
        let a = r.on_segment(1, 100, false, W);
        assert_eq!((a.delivered, a.filled_gap), (200, true));
        assert_eq!(r.sack_blocks(SackBlocks::MAX).as_slice(), [(301, 401)]);
        let a = r.on_segment(201, 100, false, W);
        assert_eq!((a.delivered, a.filled_gap), (200, true));
        assert_eq!(r.rcv_nxt(), 401);
        assert!(!r.has_out_of_order());
    }

    #[test]
    fn first_sack_block_holds_the_newest_segment() {
        let mut r = Reassembly::new(1);
        for s in [101, 301, 501, 701, 901] {
            r.on_segment(s, 100, false, W);
        }
        let b = r.sack_blocks(SackBlocks::MAX);
        assert_eq!(b.len(), 4);
        assert_eq!(b.as_slice()[0], (901, 1001));
        assert_eq!(b.as_slice()[1], (701, 801));
        // Extending an older block makes it first again.
        r.on_segment(201, 100, false, W);
        assert_eq!(r.sack_blocks(SackBlocks::MAX).as_slice()[0], (101, 401));
    }

    #[test]
    fn duplicates_and_window_trimming() {
        let mut r = Reassembly::new(1);
        r.on_segment(1, 100, false, W);
        assert!(r.on_segment(1, 100, false, W).duplicate);
        let a = r.on_segment(101, 1000, false, 300);
        assert_eq!(a.delivered, 300);
    }

    #[test]
    fn fin_is_consumed_only_in_order() {
        let mut r = Reassembly::new(1);
        let a = r.on_segment(101, 50, true, W);
        assert!(a.out_of_order && !a.fin);
        let a = r.on_segment(1, 100, false, W);
        assert_eq!((a.delivered, a.fin), (150, true));
        assert_eq!(r.rcv_nxt(), 152);
        assert!(r.fin_received());
        // A retransmitted FIN is a duplicate.
        let a = r.on_segment(151, 0, true, W);
        assert!(!a.fin && a.delivered == 0);
    }
}
