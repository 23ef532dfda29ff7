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
//! With RACK (RFC 8985, see `rack`) the DupThresh rule of IsLost is off and RACK's walk
//! ([`Scoreboard::rack_detect_loss`]) marks segments lost instead. It keeps the prefix form:
//! segments sent for the first time left in sequence order, so a RACK-lost one implies that
//! every unSACKed segment below it is lost too; a retransmission judged lost moves
//! `lost_upto` past itself, loses its "retransmission in flight" mark and lowers HighRxt so
//! that NextSeg offers it again. Retransmissions are also queued in the order they were
//! sent, so the walk finds lost ones without scanning the window.
//!
//! Each entry also keeps the delivery-rate snapshot of its latest transmission (see `rate`),
//! and the scoreboard reports each segment's delivery — by SACK or cumulative ACK, once —
//! to the connection's [`DeliveryRate`], because it is what knows which segments an ACK
//! newly delivered. It also counts the bytes ever deemed lost, for controllers that react to
//! losses per ACK (BBR).
//!
//! Retransmissions reuse their original segment boundaries (the MSS is fixed after the
//! handshake), so SACK blocks, which the receiver builds from whole segments, always cover
//! whole entries; a block that covers part of an entry leaves it unSACKed, the conservative
//! reading.

use crate::rack::{sent_after, Delivery};
use crate::ranges::RangeSet;
use crate::rate::{DeliveryRate, TxSnapshot};
use crate::segment::SackBlocks;
use pathtwin_core::time::{Duration, Instant};
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
    /// Number of the latest transmission (counted over the connection), RACK's send order.
    order: u64,
    flags: u8,
    /// Delivery-rate snapshot of the latest transmission.
    tx: TxSnapshot,
    /// SND.NXT (one past the highest sequence number sent) when the segment was last
    /// retransmitted: Linux's `TCP_SKB_CB(skb)->ack_seq` for a retransmission, which
    /// `tcp_mark_lost_retrans` compares with the highest SACKed sequence number.
    retx_snd_nxt: u64,
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

#[cfg(test)]
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
    /// Of those, the ones not SACKed before: what this ACK delivered (Linux's
    /// `tcp_newly_delivered` counts each segment once, when SACKed or else when acked).
    pub delivered: u64,
    /// Send time of the newest acknowledged segment not previously SACKed, when Karn's rule
    /// allows an RTT sample (none of the acknowledged segments was ever retransmitted).
    pub rtt_sent_at: Option<Instant>,
}

/// Result of [`Scoreboard::rack_detect_loss`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RackScan {
    /// Some segment was newly deemed lost.
    pub lost: bool,
    /// Retransmissions newly deemed lost.
    pub lost_retransmissions: u64,
    /// When the latest segment still within its reordering window will be due: the RACK
    /// timer (RFC 8985 §6.2 step 5 arms it for the largest remaining time).
    pub deadline: Option<Instant>,
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
    /// Segments marked SACKed (RACK.segs_sacked).
    sacked_segs: u64,
    /// RACK is on: IsLost's DupThresh rule is off and retransmissions are queued.
    rack: bool,
    /// Without RACK: deem a retransmission lost once data first sent after it is SACKed
    /// (Linux 2.6's `tcp_mark_lost_retrans`, see [`Scoreboard::use_lost_retransmit`]).
    /// Retransmissions are then queued too.
    lost_retrans: bool,
    /// (transmission number, start) of retransmissions in the order they were sent;
    /// entries whose segment has since been delivered or sent again are dropped lazily.
    rexmits: VecDeque<(u64, u64)>,
    /// Transmissions so far, for [`Sent::order`].
    transmissions: u64,
    /// Delivery-rate estimation, fed with every transmission and delivery.
    rate: DeliveryRate,
    /// Sequence numbers ever deemed lost (a lost retransmission counts again).
    lost_total: u64,
    /// Retransmissions deemed lost by the `lost_retrans` rule.
    lost_retransmissions: u64,
}

impl Scoreboard {
    pub fn new() -> Self {
        Scoreboard {
            // Allocated on the first send: a receiver never sends data, and a 10 000-flow run
            // has 10 000 of them (a 64-segment reserve each was half the run's memory).
            segs: VecDeque::new(),
            sacked_ranges: RangeSet::new(),
            outstanding: 0,
            sacked: 0,
            lost: 0,
            retx: 0,
            lost_upto: 0,
            high_rxt: 0,
            high_sacked: 0,
            sacked_segs: 0,
            rack: false,
            lost_retrans: false,
            rexmits: VecDeque::new(),
            transmissions: 0,
            rate: DeliveryRate::new(),
            lost_total: 0,
            lost_retransmissions: 0,
        }
    }

    pub fn rate(&self) -> &DeliveryRate {
        &self.rate
    }

    pub fn rate_mut(&mut self) -> &mut DeliveryRate {
        &mut self.rate
    }

    /// Sequence numbers deemed lost over the connection's life, counting a segment again
    /// each time a retransmission of it is deemed lost.
    pub fn lost_total(&self) -> u64 {
        self.lost_total
    }

    /// Some segment deemed lost still waits for its retransmission (Linux's `lost_out >
    /// retrans_out`).
    pub fn has_lost_unretransmitted(&self) -> bool {
        self.lost > self.retx
    }

    /// Switches to RACK loss detection; called once SACK is negotiated, before any data.
    pub fn use_rack(&mut self) {
        self.rack = true;
    }

    /// Without RACK, detects lost retransmissions as Linux 2.6 does (`tcp_mark_lost_retrans`
    /// in `net/ipv4/tcp_input.c`, 2.6.25 on; ns-2.35's TCP-Linux port does the same in
    /// `ScoreBoard1::UpdateScoreBoard`, a retransmitted packet whose `snd_nxt` at
    /// retransmission is at or below the highest SACKed packet is marked lost again): a
    /// retransmission is deemed lost once a SACK covers sequence numbers at or above SND.NXT
    /// as it was when the retransmission was sent, i.e. data first sent after it arrived.
    /// RFC 6675 has no such rule: a lost retransmission waits for the retransmission
    /// timer. With RACK it has no effect (RACK finds lost retransmissions by time).
    /// Called once SACK is negotiated, before any data.
    pub fn use_lost_retransmit(&mut self) {
        self.lost_retrans = true;
    }

    /// Whether [`Scoreboard::use_lost_retransmit`] was called.
    pub fn detects_lost_retransmissions(&self) -> bool {
        self.lost_retrans
    }

    /// Segments currently SACKed (RACK.segs_sacked).
    pub fn sacked_segments(&self) -> u64 {
        self.sacked_segs
    }

    /// Whether RACK could find anything to mark: only data SACKed, or a retransmission in
    /// flight, can lie below a delivered segment that was sent later.
    pub fn rack_has_candidates(&self) -> bool {
        self.sacked > 0 || !self.rexmits.is_empty()
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

    /// No loss is known: nothing is deemed lost and no retransmission is in flight. The
    /// sender is then in RFC 5681's normal state, limited by FlightSize rather than pipe.
    pub fn is_open(&self) -> bool {
        self.lost == 0 && self.retx == 0
    }

    /// Records a first transmission of `[start, end)`; segments must be pushed in order.
    pub fn push(&mut self, start: u64, end: u64, fin: bool, now: Instant) {
        debug_assert!(self.segs.back().map_or(start, |s| s.end) == start, "scoreboard gap");
        let flags = if fin { FIN } else { 0 };
        self.transmissions += 1;
        let tx = self.rate.on_send(now, self.segs.is_empty());
        self.segs.push_back(Sent { start, end, sent_at: now, order: self.transmissions, flags, tx, retx_snd_nxt: 0 });
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

    /// The cumulative ACK point moved to `ack`. Newly delivered segments are noted in
    /// `delivery` when RACK runs.
    pub fn ack(&mut self, ack: u64, mut delivery: Option<&mut Delivery>) -> CumAck {
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
                if let Some(d) = delivery.as_deref_mut() {
                    d.note(s.sent_at, s.order, s.end.min(ack), s.has(EVER_RETX));
                }
                self.rate.on_delivered(&s.tx, s.sent_at, s.order, s.end.min(ack) - s.start, s.has(EVER_RETX));
            }
            if s.end <= ack {
                self.sacked_segs -= s.has(SACKED) as u64;
                self.forget(&s, s.len());
                out.acked += s.len();
                if !s.has(SACKED) {
                    out.delivered += s.len();
                }
                self.segs.pop_front();
            } else {
                // The peer acknowledged part of a segment.
                let units = ack - s.start;
                self.forget(&s, units);
                out.acked += units;
                if !s.has(SACKED) {
                    out.delivered += units;
                }
                self.segs[0].start = ack;
                break;
            }
        }
        self.sacked_ranges.remove_below(ack);
        self.rate.limit_dupack_credit(self.outstanding);
        if karn_ok {
            out.rtt_sent_at = newest;
        }
        out
    }

    /// Applies the SACK blocks of one ACK and re-evaluates IsLost; returns the sequence
    /// numbers newly SACKed. Blocks outside `(una, snd_max)` are ignored (D-SACK is not used).
    /// Newly SACKed segments are noted in `delivery` when RACK runs; IsLost's DupThresh rule
    /// then stays off.
    pub fn sack(
        &mut self,
        blocks: &SackBlocks,
        una: u64,
        snd_max: u64,
        dupthresh: u32,
        smss: u64,
        mut delivery: Option<&mut Delivery>,
    ) -> u64 {
        let mut newly = 0;
        for (s, e) in blocks.iter() {
            let (s, e) = (s.max(una), e.min(snd_max));
            if s >= e {
                continue;
            }
            let segs = &mut self.segs;
            let (sacked, lost, retx, high) = (&mut self.sacked, &mut self.lost, &mut self.retx, &mut self.high_sacked);
            let sacked_segs = &mut self.sacked_segs;
            let rate = &mut self.rate;
            let delivery = &mut delivery;
            let lost_upto = self.lost_upto;
            self.sacked_ranges.insert_with(s, e, |a, b| {
                let mut i = segs.partition_point(|x| x.start < a);
                while i < segs.len() && segs[i].end <= b {
                    let seg = &mut segs[i];
                    if !seg.has(SACKED) {
                        let n = seg.len();
                        seg.flags |= SACKED;
                        *sacked_segs += 1;
                        if let Some(d) = delivery.as_deref_mut() {
                            d.note(seg.sent_at, seg.order, seg.end, seg.has(EVER_RETX));
                        }
                        rate.on_delivered(&seg.tx, seg.sent_at, seg.order, seg.len(), seg.has(EVER_RETX));
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
        if newly > 0 && !self.rack {
            self.update_lost(dupthresh, smss);
            if self.lost_retrans {
                self.mark_lost_retransmissions();
            }
        }
        newly
    }

    /// Linux 2.6's `tcp_mark_lost_retrans` (see [`Scoreboard::use_lost_retransmit`]): every
    /// retransmission in flight that was sent when SND.NXT was below the highest SACKed
    /// sequence number is deemed lost (Linux: `after(received_upto, ack_seq)`); it leaves
    /// pipe and NextSeg offers it again. The queue is in send order and SND.NXT never
    /// decreases, so the walk stops at the first retransmission that is not yet due.
    /// Returns how many were deemed lost.
    fn mark_lost_retransmissions(&mut self) -> u64 {
        let mut n = 0;
        while let Some(&(order, start)) = self.rexmits.front() {
            let i = self.segs.partition_point(|s| s.start < start);
            let live = self.segs.get(i).is_some_and(|s| s.start == start && s.order == order && s.has(RETX));
            if !live {
                self.rexmits.pop_front();
                continue;
            }
            if self.high_sacked <= self.segs[i].retx_snd_nxt {
                break;
            }
            self.retransmission_lost(i);
            self.rexmits.pop_front();
            n += 1;
        }
        self.lost_retransmissions += n;
        n
    }

    /// Retransmissions deemed lost by [`Scoreboard::use_lost_retransmit`]'s rule so far.
    pub fn lost_retransmissions(&self) -> u64 {
        self.lost_retransmissions
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
    /// Segment `i`'s retransmission is deemed lost: the segment is lost again (and counted
    /// again, which `mark_lost_upto` does only for a segment not deemed lost yet) and may be
    /// retransmitted once more. The caller removes it from `rexmits`.
    fn retransmission_lost(&mut self, i: usize) {
        let s = self.segs[i];
        if s.end <= self.lost_upto {
            self.lost_total += s.len();
        }
        self.mark_lost_upto(s.end);
        self.segs[i].flags &= !RETX;
        self.retx -= s.len();
        self.high_rxt = self.high_rxt.min(s.start);
    }

    fn mark_lost_upto(&mut self, seq: u64) {
        if seq <= self.lost_upto {
            return;
        }
        let mut i = self.segs.partition_point(|s| s.end <= self.lost_upto);
        while i < self.segs.len() && self.segs[i].end <= seq {
            if !self.segs[i].has(SACKED) {
                self.lost += self.segs[i].len();
                self.lost_total += self.segs[i].len();
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
            if s.has(RETX) {
                // The retransmission in flight is deemed lost with it.
                self.segs[0].flags &= !RETX;
                self.retx -= s.len();
            }
            self.high_rxt = self.high_rxt.min(s.start);
        }
    }

    /// RACK_detect_loss (RFC 8985 §6.2 step 5): deems lost every unacknowledged segment
    /// sent before `latest` (RACK.xmit_ts, RACK.end_seq) whose send time lies `delay`
    /// (RACK.rtt + RACK.reo_wnd) or more before `now`; `latest` is a (send time,
    /// transmission number) pair. Retransmissions are judged by their
    /// latest transmission, from the queue of retransmissions; first transmissions by a walk
    /// up from `lost_upto` that skips SACKed runs and stops at the first one sent after
    /// `latest`. A walk costs O(log n) plus the unSACKed segments it passes.
    pub fn rack_detect_loss(&mut self, now: Instant, latest: (Instant, u64), delay: Duration) -> RackScan {
        let mut out = RackScan::default();
        let due = |sent_at: Instant, out: &mut RackScan| {
            let at = sent_at + delay;
            if at <= now {
                out.lost = true;
                true
            } else {
                out.deadline = Some(out.deadline.map_or(at, |d| d.max(at)));
                false
            }
        };
        let mut k = 0;
        while let Some(&(order, start)) = self.rexmits.get(k) {
            let i = self.segs.partition_point(|s| s.start < start);
            let live = self.segs.get(i).is_some_and(|s| s.start == start && s.order == order && s.has(RETX));
            if !live {
                self.rexmits.remove(k);
                continue;
            }
            let s = self.segs[i];
            if !sent_after(latest, (s.sent_at, order)) {
                break; // the queue is in send order: the rest were sent later still
            }
            if due(s.sent_at, &mut out) {
                self.retransmission_lost(i);
                self.rexmits.remove(k);
                out.lost_retransmissions += 1;
            } else {
                k += 1;
            }
        }
        let mut i = self.segs.partition_point(|s| s.end <= self.lost_upto);
        while let Some(&s) = self.segs.get(i) {
            if s.has(SACKED) {
                let end = self.sacked_ranges.containing(s.start).map_or(s.end, |r| r.1);
                i = self.segs.partition_point(|x| x.start < end);
                continue;
            }
            i += 1;
            if s.has(RETX) {
                continue; // judged by its retransmission above
            }
            if !sent_after(latest, (s.sent_at, s.order)) {
                break; // first transmissions left in sequence order
            }
            if due(s.sent_at, &mut out) {
                self.mark_lost_upto(s.end);
            }
        }
        out
    }

    /// Retransmission timeout: everything unSACKed is lost and no retransmission is still
    /// believed in flight, so all of it will be sent again, in order. SACK information is
    /// kept (RFC 6675 §5.1 allows it; the simulated receiver never reneges).
    pub fn on_rto(&mut self) {
        self.rexmits.clear();
        let Some(front) = self.segs.front() else { return };
        self.high_rxt = front.start;
        self.lost_upto = self.segs.back().map_or(0, |s| s.end);
        let lost_before = self.lost;
        self.lost = 0;
        self.retx = 0;
        for s in self.segs.iter_mut() {
            s.flags &= !RETX;
            if !s.has(SACKED) {
                self.lost += s.len();
            }
        }
        self.lost_total += self.lost - lost_before;
    }

    /// RFC 6675 NextSeg rules (1) and (3): the first unSACKed segment at or above HighRxt
    /// without a retransmission in flight, if it is lost (rule 1) or SACKed data lies above
    /// it (a rule-3 candidate). Because lost segments form a prefix, nothing above a segment
    /// that is not lost is lost. Skipping segments advances HighRxt past them, so repeated
    /// calls stay cheap.
    pub fn next_retransmission(&mut self) -> Option<Candidate> {
        let mut i = self.segs.partition_point(|s| s.start < self.high_rxt);
        while i < self.segs.len() && self.segs[i].flags & (SACKED | RETX) != 0 {
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

    /// Records that the segment at `idx` was retransmitted at `now` by NextSeg.
    pub fn retransmitted(&mut self, idx: usize, now: Instant) -> Retransmit {
        let r = self.record_retransmission(idx, now);
        self.high_rxt = self.high_rxt.max(r.end);
        r
    }

    /// A tail loss probe resends the last segment (RFC 8985 §7.3). HighRxt stays: the
    /// probe is not NextSeg's, and the holes below it must still be offered.
    pub fn probe_retransmitted(&mut self, now: Instant) -> Option<Retransmit> {
        let idx = self.segs.len().checked_sub(1)?;
        Some(self.record_retransmission(idx, now))
    }

    fn record_retransmission(&mut self, idx: usize, now: Instant) -> Retransmit {
        let tx = self.rate.on_send(now, false);
        let snd_nxt = self.segs.back().map_or(0, |s| s.end);
        let s = &mut self.segs[idx];
        s.retx_snd_nxt = snd_nxt;
        s.tx = tx;
        if !s.has(RETX) {
            s.flags |= RETX;
            self.retx += s.len();
        }
        s.flags |= EVER_RETX;
        s.sent_at = now;
        self.transmissions += 1;
        s.order = self.transmissions;
        if self.rack || self.lost_retrans {
            self.rexmits.push_back((s.order, s.start));
        }
        Retransmit { start: s.start, end: s.end, fin: s.has(FIN) }
    }

    /// Recomputes every counter by walking the segments.
    #[cfg(test)]
    pub fn check_counters(&self) {
        let (mut out, mut sacked, mut lost, mut retx) = (0, 0, 0, 0);
        let sacked_segs = self.segs.iter().filter(|s| s.has(SACKED)).count() as u64;
        assert_eq!(sacked_segs, self.sacked_segs, "SACKed segment count drifted");
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
        let n = sb.sack(&blocks(&[(seg(1).0, seg(3).1)]), 1, 1 + 10 * MSS, 3, MSS, None);
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
        assert_eq!(sb.sack(&blocks(&[(seg(1).0, seg(2).1)]), una, max, 3, MSS, None), 2 * MSS);
        assert!(!sb.front_is_lost()); // 200 bytes above, not more than 2·MSS
        assert_eq!(sb.sack(&blocks(&[(seg(5).0, seg(5).1), (seg(1).0, seg(2).1)]), una, max, 3, MSS, None), MSS);
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
        let a = sb.ack(seg(1).1, None);
        assert_eq!(a.acked, 2 * MSS);
        assert_eq!(a.rtt_sent_at, Some(Instant::from_nanos(1)));
        sb.mark_front_lost();
        let i = sb.next_retransmission().unwrap().index();
        sb.retransmitted(i, T0);
        let a = sb.ack(seg(3).1, None);
        assert_eq!(a.acked, 2 * MSS);
        assert_eq!(a.rtt_sent_at, None, "Karn: segment 2 was retransmitted");
        assert!(sb.is_empty());
        sb.check_counters();
    }

    #[test]
    fn a_cumulative_ack_delivers_only_what_was_not_sacked_before() {
        // Segment 0 lost, 1..=3 SACKed (300 bytes delivered then); the repair's cumulative
        // ACK covers 400 bytes but delivers 100, as Linux's `tcp_clean_rtx_queue` counts
        // (`tcp_count_delivered` only for segments not SACKed): what PRR is given.
        let mut sb = board(5);
        assert_eq!(sb.sack(&blocks(&[(seg(1).0, seg(3).1)]), 1, 1 + 5 * MSS, 3, MSS, None), 3 * MSS);
        let a = sb.ack(seg(3).1, None);
        assert_eq!((a.acked, a.delivered), (4 * MSS, MSS));
        let a = sb.ack(seg(4).1, None);
        assert_eq!((a.acked, a.delivered), (MSS, MSS));
        sb.check_counters();
    }

    #[test]
    fn partial_segment_ack_trims_the_front() {
        let mut sb = board(2);
        let a = sb.ack(51, None);
        assert_eq!(a.acked, 50);
        assert_eq!(sb.outstanding(), 150);
        assert_eq!(sb.get(0).start, 51);
        sb.check_counters();
    }

    #[test]
    fn rto_marks_everything_unsacked_lost_and_restarts_from_front() {
        let mut sb = board(6);
        sb.sack(&blocks(&[(seg(2).0, seg(3).1)]), 1, 1 + 6 * MSS, 3, MSS, None);
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
        sb.sack(&blocks(&[(seg(0).0, seg(0).1)]), 1, 1 + 5 * MSS, 3, MSS, None);
        assert_eq!(sb.pipe(), 4 * MSS);
        sb.check_counters();
    }

    #[test]
    fn rack_finds_a_lost_retransmission_and_offers_it_again() {
        let t = |ms: u64| T0 + Duration::from_millis(ms);
        let mut sb = Scoreboard::new();
        sb.use_rack();
        for i in 0..6 {
            let (a, b) = seg(i);
            sb.push(a, b, false, t(0));
        }
        // Segment 0 is lost and retransmitted at 100 ms; segment 6 is sent after it.
        sb.mark_front_lost();
        let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!("front not lost") };
        sb.retransmitted(i, t(100));
        sb.push(seg(6).0, seg(6).1, false, t(100));
        // SACKs for 1..=5 do not mark anything by DupThresh any more.
        sb.sack(&blocks(&[(seg(1).0, seg(5).1)]), 1, seg(6).1, 3, MSS, None);
        assert_eq!(sb.pipe(), MSS + MSS, "the retransmission and segment 6");
        // RACK.xmit_ts = segment 1's send time: the retransmission was sent later.
        let latest_old = (t(0), sb.segs[1].order);
        assert_eq!(sb.rack_detect_loss(t(150), latest_old, Duration::from_millis(100)), RackScan::default());
        // Segment 6, sent after the retransmission, is SACKed at 200 ms (RACK.rtt 100 ms).
        sb.sack(&blocks(&[(seg(1).0, seg(6).1)]), 1, seg(6).1, 3, MSS, None);
        let latest = (t(100), sb.segs[6].order);
        // Within the reordering window nothing is lost yet; the timer is set for when it ends.
        let scan = sb.rack_detect_loss(t(200), latest, Duration::from_millis(110));
        assert_eq!(scan, RackScan { lost: false, lost_retransmissions: 0, deadline: Some(t(210)) });
        let scan = sb.rack_detect_loss(t(210), latest, Duration::from_millis(110));
        assert_eq!((scan.lost, scan.lost_retransmissions, scan.deadline), (true, 1, None));
        assert_eq!(sb.pipe(), 0);
        let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!("not offered again") };
        assert_eq!(sb.get(i).start, seg(0).0);
        sb.retransmitted(i, t(210));
        assert_eq!(sb.pipe(), MSS);
        sb.check_counters();
    }

    /// Linux 2.6 `tcp_mark_lost_retrans` (net/ipv4/tcp_input.c): a retransmission is lost
    /// once the highest SACKed sequence number is after SND.NXT as it was when the
    /// retransmission left (`after(received_upto, ack_seq)`); SACKs of data sent before the
    /// retransmission say nothing about it. Classic RFC 6675 (the default) never marks it.
    #[test]
    fn linux_rule_finds_a_lost_retransmission_once_later_data_is_sacked() {
        for linux in [false, true] {
            let mut sb = board(6);
            if linux {
                sb.use_lost_retransmit();
            }
            let max = seg(5).1;
            // Segments 1..=3 SACKed: segment 0 is lost (IsLost) and retransmitted when
            // SND.NXT is the end of segment 5.
            sb.sack(&blocks(&[(seg(1).0, seg(3).1)]), 1, max, 3, MSS, None);
            let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!("front not lost") };
            sb.retransmitted(i, T0);
            // Segments 4 and 5 were sent before the retransmission: their SACK is no sign.
            sb.sack(&blocks(&[(seg(1).0, seg(5).1)]), 1, max, 3, MSS, None);
            assert_eq!(sb.pipe(), MSS, "the retransmission is still believed in flight");
            assert_eq!(sb.next_retransmission(), None);
            // Segment 6 is the first one sent after the retransmission; it is SACKed.
            sb.push(seg(6).0, seg(6).1, false, T0);
            sb.sack(&blocks(&[(seg(1).0, seg(6).1)]), 1, seg(6).1, 3, MSS, None);
            if linux {
                assert_eq!(sb.lost_retransmissions(), 1);
                assert_eq!(sb.pipe(), 0, "the lost retransmission left the pipe");
                let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!("not offered again") };
                assert_eq!(sb.get(i).start, seg(0).0);
                sb.retransmitted(i, T0);
                assert_eq!(sb.pipe(), MSS);
            } else {
                assert_eq!(sb.lost_retransmissions(), 0);
                assert_eq!(sb.pipe(), MSS, "RFC 6675: only the timer finds it");
                assert_eq!(sb.next_retransmission(), None);
            }
            sb.check_counters();
        }
    }

    /// The rule also covers a retransmission that NextSeg rule (3) sent (not deemed lost
    /// then), and only retransmissions older than the SACKed data: one sent after it stays.
    #[test]
    fn linux_rule_spares_retransmissions_sent_after_the_sacked_data() {
        let mut sb = board(8);
        sb.use_lost_retransmit();
        let max = seg(7).1;
        // Hole at 0 and 1; 2..=4 SACKed: 0 and 1 lost.
        sb.sack(&blocks(&[(seg(2).0, seg(4).1)]), 1, max, 3, MSS, None);
        let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!() };
        sb.retransmitted(i, T0); // segment 0, SND.NXT = end of 7
        sb.push(seg(8).0, seg(8).1, false, T0);
        let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!() };
        sb.retransmitted(i, T0); // segment 1, SND.NXT = end of 8
        // Segment 8 SACKed: sent after the first retransmission, not after the second.
        sb.sack(&blocks(&[(seg(2).0, seg(4).1), (seg(8).0, seg(8).1)]), 1, seg(8).1, 3, MSS, None);
        assert_eq!(sb.lost_retransmissions(), 1);
        let Some(Candidate::Lost(i)) = sb.next_retransmission() else { panic!() };
        assert_eq!(sb.get(i).start, seg(0).0);
        sb.retransmitted(i, T0);
        assert_eq!(sb.next_retransmission().map(|c| sb.get(c.index()).start), Some(seg(5).0), "rule 3 next, not segment 1");
        sb.check_counters();
    }

    #[test]
    fn rack_marks_first_transmissions_sent_before_the_latest_delivery() {
        let t = |ms: u64| T0 + Duration::from_millis(ms);
        let mut sb = Scoreboard::new();
        sb.use_rack();
        for i in 0..5 {
            let (a, b) = seg(i);
            sb.push(a, b, false, t(i));
        }
        // Segment 3 SACKed: 0, 1 and 2 were sent before it, 4 after.
        sb.sack(&blocks(&[(seg(3).0, seg(3).1)]), 1, seg(4).1, 3, MSS, None);
        let latest = (t(3), sb.segs[3].order);
        let scan = sb.rack_detect_loss(t(103), latest, Duration::from_millis(100) + Duration::from_micros(1500));
        // Segments 0 and 1 are due (sent ≥ 1.5 ms before segment 3); 2 is due at 103.5 ms.
        assert_eq!(scan.deadline, Some(t(2) + Duration::from_micros(101_500)));
        assert!(scan.lost);
        assert_eq!(sb.pipe(), 2 * MSS, "segments 2 and 4");
        sb.check_counters();
    }

    /// RFC 6675 §4 IsLost and SetPipe computed from scratch, segment by segment.
    fn naive_pipe(sb: &Scoreboard, dupthresh: u32, smss: u64) -> u64 {
        let segs: Vec<Sent> = sb.segs.iter().copied().collect();
        let mut pipe = 0;
        for (i, s) in segs.iter().enumerate() {
            if s.has(SACKED) {
                continue;
            }
            let above = segs[i + 1..].iter().filter(|x| x.has(SACKED));
            let (count, bytes) = above.fold((0u32, 0u64), |(c, b), x| (c + 1, b + x.len()));
            let is_lost = count >= dupthresh || bytes > (dupthresh as u64 - 1) * smss;
            if !is_lost {
                pipe += s.len();
            }
            if s.has(RETX) {
                pipe += s.len();
            }
        }
        pipe
    }

    #[test]
    fn incremental_pipe_matches_rfc6675_setpipe_under_random_sacks() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let (mut saw_lost, mut saw_retx) = (0, 0);
        for _round in 0..50 {
            let mut sb = Scoreboard::new();
            let mut next = 1u64;
            let mut una = 1u64;
            // Mixed segment sizes, so that both the byte and the count rule of IsLost bite.
            let push = |sb: &mut Scoreboard, next: &mut u64, rand: &mut dyn FnMut(u64) -> u64| {
                let len = if rand(3) == 0 { 1 + rand(MSS) } else { MSS };
                sb.push(*next, *next + len, false, T0);
                *next += len;
            };
            for _ in 0..40 {
                push(&mut sb, &mut next, &mut rand);
            }
            for _step in 0..200 {
                match rand(10) {
                    0..=5 => {
                        // SACK a run of whole segments above the front.
                        let n = sb.segs.len();
                        if n > 1 {
                            let a = 1 + rand(n as u64 - 1) as usize;
                            let b = (a + 1 + rand(4) as usize).min(n);
                            let blk = blocks(&[(sb.segs[a].start, sb.segs[b - 1].end)]);
                            sb.sack(&blk, una, next, 3, MSS, None);
                        }
                    }
                    6 => {
                        if let Some(Candidate::Lost(i)) = sb.next_retransmission() {
                            sb.retransmitted(i, T0);
                            saw_retx += 1;
                        }
                    }
                    7 => {
                        // The front arrives: cumulative ACK up to the next hole.
                        if let Some(front) = sb.segs.front().copied() {
                            let mut ack = front.end;
                            for s in sb.segs.iter().skip(1) {
                                if s.has(SACKED) && s.start == ack {
                                    ack = s.end;
                                } else {
                                    break;
                                }
                            }
                            sb.ack(ack, None);
                            una = ack;
                        }
                    }
                    _ => push(&mut sb, &mut next, &mut rand),
                }
                sb.check_counters();
                assert_eq!(sb.pipe(), naive_pipe(&sb, 3, MSS));
                saw_lost += (sb.lost > 0) as u32;
            }
        }
        assert!(saw_lost > 1000 && saw_retx > 100, "the walk must exercise loss: {saw_lost} {saw_retx}");
    }
}
