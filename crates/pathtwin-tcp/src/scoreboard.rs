//! The sender's record of everything sent and not yet cumulatively acknowledged: one entry
//! per transmitted segment, with what SACK said about it, whether it is deemed lost, and
//! whether a retransmission of it is in flight. This is RFC 6675's scoreboard, and also
//! what Reno/NewReno and the retransmission timer retransmit from.
//!
//! It owns RFC 6675's `IsLost`, `SetPipe` (as counters kept up to date, never a walk), and
//! rules (1) and (3) of `NextSeg`; rule (2), new data, is the endpoint's, as are the
//! decisions *when* to mark segments lost (recovery entry, NewReno partial ACKs, timeouts).
//!
//! Representation and cost. Segments live in a `VecDeque` in sequence order; sending pushes
//! at the back and cumulative ACKs pop at the front, so the steady state allocates nothing.
//! SACKed data is also kept as ranges, so that a SACK block repeated in every ACK (as RFC 2018
//! asks) only touches the segments it newly covers. The "lost" set is a prefix: IsLost(S)
//! depends on what is SACKed *above* S, which only grows, so every unSACKed segment ending at
//! or below `lost_upto` is lost. With these, pipe = outstanding − SACKed − lost +
//! retransmitted-in-flight is exactly RFC 6675 §4 SetPipe, and each ACK costs O(log n) plus
//! work proportional to the segments whose state it changes.
//!
//! Retransmissions reuse their original segment boundaries (the MSS is fixed after the
//! handshake), so SACK blocks, which the receiver builds from whole segments, always cover
//! whole entries; a block that covers part of an entry leaves it unSACKed, the conservative
//! reading.

use crate::ranges::RangeSet;
use crate::segment::SackBlocks;
use pathtwin_core::time::Instant;
use std::collections::VecDeque;

const SACKED: u8 = 1;
/// A retransmission of this segment is in flight (RFC 6675's "retransmitted" in SetPipe).
const RETX: u8 = 2;
/// The segment has been retransmitted at least once: Karn's rule forbids RTT samples.
const EVER_RETX: u8 = 4;
/// The segment's last sequence number is our FIN.
const FIN: u8 = 8;

/// One transmitted segment.
#[derive(Clone, Copy, Debug)]
struct Sent {
    start: u64,
    end: u64,
    sent_at: Instant,
    flags: u8,
}

impl Sent {
    fn len(&self) -> u64 {
        self.end - self.start
    }
    fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// A segment to (re)transmit, as the endpoint needs it to build the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retransmit {
    pub start: u64,
    pub end: u64,
    pub fin: bool,
}

impl Retransmit {
    /// Payload bytes (the FIN's sequence number carries none).
    pub fn payload(&self) -> u64 {
        self.end - self.start - self.fin as u64
    }
}

/// A segment NextSeg could return, by index into the scoreboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Candidate {
    /// Deemed lost and not yet retransmitted: rule (1), before any new data.
    Lost(usize),
    /// Not deemed lost, but SACKed data lies above it: rule (3), only when no new data
    /// can be sent.
    Rule3(usize),
}

impl Candidate {
    pub fn index(self) -> usize {
        match self {
            Candidate::Lost(i) | Candidate::Rule3(i) => i,
        }
    }
}

/// Result of a cumulative ACK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CumAck {
    /// Sequence numbers newly acknowledged.
    pub acked: u64,
    /// Send time of the newest acknowledged segment not previously SACKed, when Karn's rule
    /// allows an RTT sample (none of the acknowledged segments was ever retransmitted).
    pub rtt_sent_at: Option<Instant>,
}

#[derive(Clone, Debug)]
pub(crate) struct Scoreboard {
    segs: VecDeque<Sent>,
    sacked_ranges: RangeSet,
    /// Counters in sequence numbers, all over the segments in `segs`.
    outstanding: u64,
    sacked: u64,
    /// UnSACKed and deemed lost.
    lost: u64,
    /// UnSACKed with a retransmission in flight.
    retx: u64,
    /// Every unSACKed segment with `end <= lost_upto` is lost.
    lost_upto: u64,
    /// RFC 6675 HighRxt (one past): every unSACKed segment starting below it has been
    /// retransmitted in the current episode.
    high_rxt: u64,
    /// One past the highest SACKed sequence number.
    high_sacked: u64,
}

impl Scoreboard {
    pub fn new() -> Self {
        Scoreboard {
            segs: VecDeque::with_capacity(64),
            sacked_ranges: RangeSet::new(),
            outstanding: 0,
            sacked: 0,
            lost: 0,
            retx: 0,
            lost_upto: 0,
            high_rxt: 0,
            high_sacked: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Sequence numbers sent and not cumulatively acknowledged (RFC 5681 FlightSize).
    pub fn outstanding(&self) -> u64 {
        self.outstanding
    }

    /// RFC 6675 pipe: the sender's estimate of sequence numbers in the network.
    pub fn pipe(&self) -> u64 {
        self.outstanding - self.sacked - self.lost + self.retx
    }

    pub fn sacked(&self) -> u64 {
        self.sacked
    }

    /// Records a first transmission of `[start, end)`; segments must be pushed in order.
    pub fn push(&mut self, start: u64, end: u64, fin: bool, now: Instant) {
        debug_assert!(self.segs.back().map_or(true, |s| s.end == start), "scoreboard gap");
        let flags = if fin { FIN } else { 0 };
        self.segs.push_back(Sent { start, end, sent_at: now, flags });
        self.outstanding += end - start;
    }

    /// Removes `units` sequence numbers of `s` from the counters.
    fn forget(&mut self, s: &Sent, units: u64) {
        self.outstanding -= units;
        if s.has(SACKED) {
            self.sacked -= units;
        } else {
            if s.end <= self.lost_upto {
                self.lost -= units;
            }
            if s.has(RETX) {
                self.retx -= units;
            }
        }
    }

    /// The cumulative ACK point moved to `ack`.
    pub fn ack(&mut self, ack: u64) -> CumAck {
        let mut out = CumAck::default();
        let mut karn_ok = true;
        let mut newest: Option<Instant> = None;
        while let Some(&s) = self.segs.front() {
            if s.start >= ack {
                break;
            }
            karn_ok &= !s.has(EVER_RETX);
            if !s.has(SACKED) {
                newest = Some(s.sent_at);
            }
            if s.end <= ack {
                self.forget(&s, s.len());
                out.acked += s.len();
                self.segs.pop_front();
            } else {
                // The peer acknowledged part of a segment.
                let units = ack - s.start;
                self.forget(&s, units);
                out.acked += units;
                self.segs[0].start = ack;
                break;
            }
        }
        self.sacked_ranges.remove_below(ack);
        if karn_ok {
            out.rtt_sent_at = newest;
        }
        out
    }

    /// Applies the SACK blocks of one ACK and re-evaluates IsLost; returns the sequence
    /// numbers newly SACKed. Blocks outside `(una, snd_max)` are ignored (D-SACK is not used).
    pub fn sack(&mut self, blocks: &SackBlocks, una: u64, snd_max: u64, dupthresh: u32, smss: u64) -> u64 {
        let mut newly = 0;
        for (s, e) in blocks.iter() {
            let (s, e) = (s.max(una), e.min(snd_max));
            if s >= e {
                continue;
            }
            let segs = &mut self.segs;
            let (sacked, lost, retx, high) = (&mut self.sacked, &mut self.lost, &mut self.retx, &mut self.high_sacked);
            let lost_upto = self.lost_upto;
            self.sacked_ranges.insert_with(s, e, |a, b| {
                let mut i = segs.partition_point(|x| x.start < a);
                while i < segs.len() && segs[i].end <= b {
                    let seg = &mut segs[i];
                    if !seg.has(SACKED) {
                        let n = seg.len();
                        seg.flags |= SACKED;
                        *sacked += n;
                        newly += n;
                        if seg.end <= lost_upto {
                            *lost -= n;
                        }
                        if seg.has(RETX) {
                            seg.flags &= !RETX;
                            *retx -= n;
                        }
                        *high = (*high).max(seg.end);
                    }
                    i += 1;
                }
            });
        }
        if newly > 0 {
            self.update_lost(dupthresh, smss);
        }
        newly
    }

    /// RFC 6675 §4 IsLost, applied to the whole scoreboard: a segment is lost once
    /// DupThresh SACKed segments, or more than (DupThresh − 1)·SMSS SACKed bytes, lie above
    /// it. Walks down from the highest SACKed segment to the point where that first holds.
    fn update_lost(&mut self, dupthresh: u32, smss: u64) {
        let mut i = self.segs.partition_point(|s| s.start < self.high_sacked);
        let (mut count, mut bytes) = (0u32, 0u64);
        let byte_limit = (dupthresh as u64 - 1) * smss;
        while i > 0 {
            i -= 1;
            let s = self.segs[i];
            if s.end <= self.lost_upto {
                return;
            }
            if s.has(SACKED) {
                count += 1;
                bytes += s.len();
                if count >= dupthresh || bytes > byte_limit {
                    self.mark_lost_upto(s.start);
                    return;
                }
            }
        }
    }

    /// Deems every unSACKed segment ending at or below `seq` lost.
    fn mark_lost_upto(&mut self, seq: u64) {
        if seq <= self.lost_upto {
            return;
        }
        let mut i = self.segs.partition_point(|s| s.end <= self.lost_upto);
        while i < self.segs.len() && self.segs[i].end <= seq {
            if !self.segs[i].has(SACKED) {
                self.lost += self.segs[i].len();
            }
            i += 1;
        }
        self.lost_upto = seq;
    }

    /// Whether the first unacknowledged segment is deemed lost (RFC 6675 IsLost(HighACK+1)).
    pub fn front_is_lost(&self) -> bool {
        self.segs.front().is_some_and(|s| !s.has(SACKED) && s.end <= self.lost_upto)
    }

    /// Fast retransmit / NewReno partial ACK: deem the first unacknowledged segment lost and
    /// make it the next retransmission, whether or not it was retransmitted before.
    pub fn mark_front_lost(&mut self) {
        if let Some(&s) = self.segs.front() {
            self.mark_lost_upto(s.end);
            self.high_rxt = self.high_rxt.min(s.start);
        }
    }

    /// Retransmission timeout: everything unSACKed is lost and no retransmission is still
    /// believed in flight, so all of it will be sent again, in order. SACK information is
    /// kept (RFC 6675 §5.1 allows it; the simulated receiver never reneges).
    pub fn on_rto(&mut self) {
        let Some(front) = self.segs.front() else { return };
        self.high_rxt = front.start;
        self.lost_upto = self.segs.back().map_or(0, |s| s.end);
        self.lost = 0;
        self.retx = 0;
        for s in self.segs.iter_mut() {
            s.flags &= !RETX;
            if !s.has(SACKED) {
                self.lost += s.len();
            }
        }
    }

    /// RFC 6675 NextSeg rules (1) and (3): the first unSACKed segment at or above HighRxt,
    /// if it is lost (rule 1) or SACKed data lies above it (a rule-3 candidate). Skipping
    /// SACKed segments advances HighRxt past them, so repeated calls stay cheap.
    pub fn next_retransmission(&mut self) -> Option<Candidate> {
        let mut i = self.segs.partition_point(|s| s.start < self.high_rxt);
        while i < self.segs.len() && self.segs[i].has(SACKED) {
            i += 1;
        }
        let s = self.segs.get(i)?;
        self.high_rxt = self.high_rxt.max(s.start);
        if s.end <= self.lost_upto {
            Some(Candidate::Lost(i))
        } else if s.start < self.high_sacked {
            Some(Candidate::Rule3(i))
        } else {
            None
        }
    }

    /// The segment at `idx` as it would be retransmitted.
    pub fn get(&self, idx: usize) -> Retransmit {
        let s = &self.segs[idx];
        Retransmit { start: s.start, end: s.end, fin: s.has(FIN) }
    }

    /// Records that the segment at `idx` was retransmitted at `now`.
    pub fn retransmitted(&mut self, idx: usize, now: Instant) -> Retransmit {
        let s = &mut self.segs[idx];
        if !s.has(RETX) {
            s.flags |= RETX;
            self.retx += s.len();
        }
        s.flags |= EVER_RETX;
        s.sent_at = now;
        self.high_rxt = self.high_rxt.max(s.end);
        Retransmit { start: s.start, end: s.end, fin: s.has(FIN) }
    }

    /// Recomputes every counter by walking the segments (tests and debug assertions).
    #[cfg(any(test, debug_assertions))]
    pub fn check_counters(&self) {
        let (mut out, mut sacked, mut lost, mut retx) = (0, 0, 0, 0);
        for s in &self.segs {
            out += s.len();
            if s.has(SACKED) {
                sacked += s.len();
            } else {
                if s.end <= self.lost_upto {
                    lost += s.len();
                }
                if s.has(RETX) {
                    retx += s.len();
                }
            }
        }
        assert_eq!(
            (out, sacked, lost, retx),
            (self.outstanding, self.sacked, self.lost, self.retx),
            "scoreboard counters drifted"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 100;
    const T0: Instant = Instant::ZERO;

    /// Segments 0..n of MSS bytes starting at sequence 1.
    fn board(n: u64) -> Scoreboard {
        let mut sb = Scoreboard::new();
        for i in 0..n {
            sb.push(1 + i * MSS, 1 + (i + 1) * MSS, false, Instant::from_nanos(i));
        }
        sb
    }

    fn seg(i: u64) -> (u64, u64) {
        (1 + i * MSS, 1 + (i + 1) * MSS)
    }

    fn blocks(list: &[(u64, u64)]) -> SackBlocks {
        let mut b = SackBlocks::EMPTY;
        for &(s, e) in list {
            b.push(s, e);
        }
        b
    }

    #[test]
    fn pipe_follows_rfc6675_setpipe() {
        let mut sb = board(10);
        assert_eq!(sb.pipe(), 10 * MSS);
        // Segment 0 lost; 1, 2, 3 SACKed: IsLost(0) holds (3 segments above).
        let n = sb.sack(&blocks(&[(seg(1).0, seg(3).1)]), 1, 1 + 10 * MSS, 3, MSS);
        assert_eq!(n, 3 * MSS);
        assert!(sb.front_is_lost());
        // 10 outstanding - 3 SACKed - 1 lost
        assert_eq!(sb.pipe(), 6 * MSS);
        let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!("front not lost") };
        assert_eq!(sb.retransmitted(i, T0).start, 1);
        // lost and retransmitted counts once
        assert_eq!(sb.pipe(), 7 * MSS);
        assert_eq!(sb.next_retransmission(), None);
        sb.check_counters();
    }

    #[test]
    fn repeated_blocks_count_once_and_is_lost_needs_three_above() {
        let mut sb = board(10);
        let una = 1;
        let max = 1 + 10 * MSS;
        // Hole at 0 and 4; SACK 1..=2 and 5.
        assert_eq!(sb.sack(&blocks(&[(seg(1).0, seg(2).1)]), una, max, 3, MSS), 2 * MSS);
        assert!(!sb.front_is_lost()); // 200 bytes above, not more than 2·MSS
        assert_eq!(sb.sack(&blocks(&[(seg(5).0, seg(5).1), (seg(1).0, seg(2).1)]), una, max, 3, MSS), MSS);
        assert!(sb.front_is_lost());
        // Segments 3 and 4 have only one SACKed segment above: not lost yet, but rule 3
        // may resend the first of them.
        let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!("front not lost") };
        sb.retransmitted(i, T0);
        let Some(Candidate::Rule3(i)) = sb.next_retransmission() else { panic!("no rule-3 candidate") };
        assert_eq!(sb.get(i).start, seg(3).0);
        sb.check_counters();
    }

    #[test]
    fn cumulative_ack_pops_and_applies_karn() {
        let mut sb = board(4);
        let a = sb.ack(seg(1).1);
        assert_eq!(a.acked, 2 * MSS);
        assert_eq!(a.rtt_sent_at, Some(Instant::from_nanos(1)));
        sb.mark_front_lost();
        let i = sb.next_retransmission().unwrap().index();
        sb.retransmitted(i, T0);
        let a = sb.ack(seg(3).1);
        assert_eq!(a.acked, 2 * MSS);
        assert_eq!(a.rtt_sent_at, None, "Karn: segment 2 was retransmitted");
        assert!(sb.is_empty());
        sb.check_counters();
    }

    #[test]
    fn partial_segment_ack_trims_the_front() {
        let mut sb = board(2);
        let a = sb.ack(51);
        assert_eq!(a.acked, 50);
        assert_eq!(sb.outstanding(), 150);
        assert_eq!(sb.get(0).start, 51);
        sb.check_counters();
    }

    #[test]
    fn rto_marks_everything_unsacked_lost_and_restarts_from_front() {
        let mut sb = board(6);
        sb.sack(&blocks(&[(seg(2).0, seg(3).1)]), 1, 1 + 6 * MSS, 3, MSS);
        sb.on_rto();
        assert_eq!(sb.pipe(), 0);
        let mut order = Vec::new();
        while let Some(Candidate::Lost(i)) = sb.next_retransmission() {
            order.push(sb.retransmitted(i, T0).start);
        }
        assert_eq!(order, [seg(0).0, seg(1).0, seg(4).0, seg(5).0]);
        assert_eq!(sb.pipe(), 4 * MSS);
        sb.check_counters();
    }

    #[test]
    fn sacking_a_retransmission_in_flight_removes_it_from_pipe() {
        let mut sb = board(5);
        sb.mark_front_lost();
        let i = sb.next_retransmission().unwrap().index();
        sb.retransmitted(i, T0);
        assert_eq!(sb.pipe(), 5 * MSS);
        sb.sack(&blocks(&[(seg(0).0, seg(0).1)]), 1, 1 + 5 * MSS, 3, MSS);
        assert_eq!(sb.pipe(), 4 * MSS);
        sb.check_counters();
    }
}
