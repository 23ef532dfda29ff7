//! Delivery-rate estimation, draft-cheng-iccrg-delivery-rate-estimation-00 (the algorithm
//! Linux's `tcp_rate.c` implements): on every ACK that delivers data, how fast data has
//! recently been delivered, and whether that rate was limited by the application.
//!
//! The idea (draft §2): every transmission records a snapshot of the connection's delivery
//! state (`TxSnapshot`: `C.delivered`, `C.delivered_time`, `C.first_sent_time`,
//! `C.app_limited`). When a segment is delivered, the data delivered since its snapshot,
//! divided by the longer of the send phase (`P.sent_time − P.first_sent_time`) and the ACK
//! phase (`now − P.delivered_time`), is the delivery rate over about one round trip. Taking
//! the longer of the two keeps ACK compression (a short ACK phase) and bursty sending (a
//! short send phase) from overestimating the rate.
//!
//! This module owns the per-connection variables, the snapshots' contents and the sample
//! ([`RateSample`]). It does not own which segments were delivered: the scoreboard stores
//! each segment's snapshot and reports its delivery (`DeliveryRate::on_delivered`); the
//! endpoint generates one sample per ACK (`DeliveryRate::generate`), marks app-limited
//! periods (`DeliveryRate::mark_app_limited`) and hands the sample to the congestion
//! controller.
//!
//! Units and choices:
//! - Counts are sequence-space bytes, not packets (Linux counts packets): controllers here
//!   work in bytes.
//! - Among the segments one ACK delivers, the sample is taken from the one sent last (by
//!   transmission order), as Linux does since 4.19; the draft's "P.delivered >
//!   rs.prior_delivered" picks the first of several segments sent back to back, whose send
//!   phase is shorter.
//! - A sample whose interval is shorter than the connection's minimum RTT is invalid
//!   ([`RateSample::interval`] is `None`), as in Linux (`tcp_rate_gen`): it comes from a
//!   segment sent so recently that the interval cannot span a round trip, and would
//!   overestimate the rate.
//! - The sample's RTT is that of the segment it was taken from, and none when that segment
//!   was ever retransmitted (Karn's rule: without timestamps the ACK is ambiguous).
//! - Without SACK, each duplicate ACK counts as one SMSS delivered, as Linux counts it as
//!   one packet (`tcp_add_reno_sack`): a segment beyond the hole arrived. The cumulative ACK
//!   that later covers that data does not count it again. Otherwise the ACK that repairs a
//!   hole would deliver a whole window at once, and its sample — taken from the
//!   retransmission, sent less than a round trip earlier — would overestimate the rate
//!   many times over. A duplicate ACK delivers no particular segment, so its sample has no
//!   rate ([`RateSample::interval`] is `None`). Unlike Linux, which forgets its Reno
//!   `sacked_out` on a timeout, the credit survives one: the go-back-N that follows
//!   resends data the receiver holds, and its cumulative ACKs would otherwise count that
//!   data again from retransmissions sent one round trip earlier (measured: a BtlBw 15
//!   times the link's behind a 34-packet buffer, and the flow collapsing). Duplicate ACKs
//!   that the go-back-N's duplicates provoke may add spurious credit; it is bounded by the
//!   data outstanding.

use pathtwin_core::time::{Duration, Instant};

/// The connection's delivery state when a segment was last (re)transmitted (the draft's
/// `P.delivered`, `P.delivered_time`, `P.first_sent_time`, `P.is_app_limited`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TxSnapshot {
    delivered: u64,
    delivered_time: Instant,
    first_sent_time: Instant,
    app_limited: bool,
}

/// One delivery-rate sample, produced for every ACK that newly delivers data (cumulatively
/// or by SACK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSample {
    /// Bytes delivered between the sampled segment's transmission and this ACK
    /// (`C.delivered − P.delivered`).
    pub delivered: u64,
    /// max(send phase, ACK phase): the interval `delivered` took. `None` when the sample is
    /// invalid because the interval is shorter than the minimum RTT.
    pub interval: Option<Duration>,
    /// `P.sent_time − P.first_sent_time`.
    pub send_elapsed: Duration,
    /// `now − P.delivered_time`.
    pub ack_elapsed: Duration,
    /// `C.delivered` when the sampled segment was sent (`rs.prior_delivered`). A controller
    /// counts round trips with it: a round ends when a segment sent after the round began is
    /// delivered.
    pub prior_delivered: u64,
    /// The sampled segment was sent during an application-limited period: the rate says
    /// more about the application than about the path.
    pub is_app_limited: bool,
    /// RTT of the sampled segment, unless it was ever retransmitted.
    pub rtt: Option<Duration>,
    /// Bytes newly delivered by this ACK, cumulatively or by SACK (Linux's
    /// `rs->acked_sacked`).
    pub newly_delivered: u64,
    /// `C.delivered` after this ACK: all bytes delivered on the connection.
    pub total_delivered: u64,
}

impl RateSample {
    /// Delivery rate in bytes per second, when the sample is valid.
    pub fn delivery_rate(&self) -> Option<u64> {
        let ns = self.interval?.as_nanos();
        if ns == 0 {
            return None;
        }
        Some((self.delivered as u128 * 1_000_000_000 / ns as u128).min(u64::MAX as u128) as u64)
    }
}

/// The segment a sample is being built from, while one ACK is processed.
#[derive(Clone, Copy, Debug)]
struct Newest {
    order: u64,
    tx: TxSnapshot,
    sent_at: Instant,
    retransmitted: bool,
}

/// Per-connection delivery-rate state (the draft's `C.*`) and the sample being built for
/// the ACK in progress.
#[derive(Clone, Debug)]
pub(crate) struct DeliveryRate {
    /// `C.delivered`: bytes delivered so far.
    delivered: u64,
    /// `C.delivered_time`: when `delivered` last grew.
    delivered_time: Instant,
    /// `C.first_sent_time`: send time of the segment the last sample was taken from, i.e.
    /// the start of the current send phase.
    first_sent_time: Instant,
    /// `C.app_limited`: 0, or the value of `delivered` beyond which the application-limited
    /// period ends.
    app_limited_until: u64,
    /// Bytes delivered by the ACK in progress.
    newly_delivered: u64,
    /// Bytes counted as delivered by duplicate ACKs (without SACK) and not yet covered by
    /// the cumulative ACK (Linux's `sacked_out` of a Reno connection).
    dupack_credit: u64,
    /// The next cumulatively delivered segment is the first of its ACK: the hole that the
    /// duplicate ACKs were about, which no credit covers.
    first_of_ack: bool,
    newest: Option<Newest>,
}

impl DeliveryRate {
    pub fn new() -> Self {
        DeliveryRate {
            delivered: 0,
            delivered_time: Instant::ZERO,
            first_sent_time: Instant::ZERO,
            app_limited_until: 0,
            newly_delivered: 0,
            dupack_credit: 0,
            first_of_ack: true,
            newest: None,
        }
    }

    /// Whether an application-limited period is in progress (`C.app_limited != 0`).
    #[cfg(test)]
    pub fn is_app_limited(&self) -> bool {
        self.app_limited_until != 0
    }

    /// A segment is (re)transmitted at `now` (draft §3.2 "Transmitting a data packet");
    /// `nothing_in_flight` is true when no other segment is outstanding, which starts a
    /// new send phase and a new ACK phase. Returns the snapshot to store with the segment.
    pub fn on_send(&mut self, now: Instant, nothing_in_flight: bool) -> TxSnapshot {
        if nothing_in_flight {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        TxSnapshot {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            app_limited: self.app_limited_until != 0,
        }
    }

    /// `units` bytes of a segment whose last transmission (number `order`, at `sent_at`)
    /// recorded `tx` were delivered (draft §3.3 "UpdateRateSample"). Each byte must be
    /// reported once: SACKed segments are not reported again when the cumulative ACK
    /// passes them. A cumulative ACK reports its segments in sequence order.
    pub fn on_delivered(&mut self, tx: &TxSnapshot, sent_at: Instant, order: u64, units: u64, retransmitted: bool) {
        // Linux `tcp_remove_reno_sacks`: a cumulative ACK delivers at least the segment at
        // the hole; the rest of what it covers, up to the credit, was counted already.
        let credited = if std::mem::take(&mut self.first_of_ack) { 0 } else { units.min(self.dupack_credit) };
        self.dupack_credit -= credited;
        self.delivered += units - credited;
        self.newly_delivered += units - credited;
        if self.newest.is_none_or(|n| order > n.order) {
            self.newest = Some(Newest { order, tx: *tx, sent_at, retransmitted });
            // The next send phase starts at this segment's transmission.
            self.first_sent_time = sent_at;
        }
    }

    /// Bytes duplicate ACKs (without SACK) reported delivered beyond the cumulative ACK:
    /// data no longer in the network, although RFC 6675's pipe without SACK counts it.
    pub fn dupack_credit(&self) -> u64 {
        self.dupack_credit
    }

    /// A duplicate ACK without SACK: one segment of `smss` bytes beyond the hole arrived.
    /// The credit never exceeds `outstanding`, the data not yet cumulatively acknowledged.
    pub fn on_duplicate_ack(&mut self, smss: u64, outstanding: u64) {
        let credit = (self.dupack_credit + smss).min(outstanding);
        let units = credit.saturating_sub(self.dupack_credit);
        self.dupack_credit = credit;
        self.delivered += units;
        self.newly_delivered += units;
    }

    /// The cumulative ACK moved: no more can be held beyond it than is outstanding.
    pub fn limit_dupack_credit(&mut self, outstanding: u64) {
        self.dupack_credit = self.dupack_credit.min(outstanding);
    }

    /// Ends the ACK in progress at `now` (draft §3.3 "GenerateRateSample"): the sample, or
    /// `None` if the ACK delivered nothing. `min_rtt` is the connection's minimum RTT. An
    /// ACK that delivered only by duplicate-ACK credit gives a sample with no rate whose
    /// other fields but `newly_delivered` and `total_delivered` are zero.
    pub fn generate(&mut self, now: Instant, min_rtt: Option<Duration>) -> Option<RateSample> {
        // The app-limited period ends once everything in flight when it began is delivered.
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let newly_delivered = std::mem::take(&mut self.newly_delivered);
        self.first_of_ack = true;
        let Some(p) = self.newest.take() else {
            if newly_delivered == 0 {
                return None;
            }
            // Duplicate ACKs only: data was delivered, but no segment to sample.
            self.delivered_time = now;
            return Some(RateSample {
                delivered: 0,
                interval: None,
                send_elapsed: Duration::ZERO,
                ack_elapsed: Duration::ZERO,
                prior_delivered: 0,
                is_app_limited: false,
                rtt: None,
                newly_delivered,
                total_delivered: self.delivered,
            });
        };
        self.delivered_time = now;
        let send_elapsed = p.sent_at.saturating_since(p.tx.first_sent_time);
        let ack_elapsed = now.saturating_since(p.tx.delivered_time);
        let interval = send_elapsed.max(ack_elapsed);
        let valid = min_rtt.is_none_or(|m| interval >= m);
        Some(RateSample {
            delivered: self.delivered - p.tx.delivered,
            interval: valid.then_some(interval),
            send_elapsed,
            ack_elapsed,
            prior_delivered: p.tx.delivered,
            is_app_limited: p.tx.app_limited,
            rtt: (!p.retransmitted).then(|| now.saturating_since(p.sent_at)),
            newly_delivered,
            total_delivered: self.delivered,
        })
    }

    /// The sender has room in its window but nothing to send (draft §3.4): segments sent
    /// from now until everything now in flight (`in_flight` bytes) is delivered are marked
    /// application-limited.
    pub fn mark_app_limited(&mut self, in_flight: u64) {
        self.app_limited_until = (self.delivered + in_flight).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn at_us(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    /// Sends `n` segments starting at `t0`, one every `gap_us`, and returns their snapshots
    /// with their send times and transmission numbers.
    fn send_train(dr: &mut DeliveryRate, first_order: u64, n: u64, t0: Instant, gap_us: u64, empty: bool) -> Vec<(TxSnapshot, Instant, u64)> {
        (0..n)
            .map(|i| {
                let t = t0 + Duration::from_micros(i * gap_us);
                (dr.on_send(t, empty && i == 0), t, first_order + i)
            })
            .collect()
    }

    #[test]
    fn ack_spacing_wider_than_send_spacing_gives_the_ack_rate() {
        // Ten segments sent back to back, 100 µs apart (10 MB/s), through a bottleneck
        // that delivers one every 1 ms (1 MB/s). Base RTT 10 ms: segment i is ACKed at
        // 10 ms + (i + 1) ms.
        let mut dr = DeliveryRate::new();
        let sent = send_train(&mut dr, 1, 10, Instant::ZERO, 100, true);
        let mut samples = Vec::new();
        for (i, (tx, t, order)) in sent.iter().enumerate() {
            dr.on_delivered(tx, *t, *order, MSS, false);
            samples.push(dr.generate(at_us(10_000 + (i as u64 + 1) * 1_000), Some(Duration::from_millis(10))).unwrap());
        }
        // All snapshots share delivered = 0 and delivered_time = 0 (the first send). The
        // first sample spans 11 ms of ACK phase for one segment: 1000 B / 11 ms.
        assert_eq!(samples[0].interval, Some(Duration::from_micros(11_000)));
        assert_eq!(samples[0].delivery_rate(), Some(1000 * 1_000_000 / 11_000));
        // Segment 9: 10 segments delivered since its snapshot, send phase 0.9 ms (its own
        // send time minus the first send), ACK phase 20 ms: the ACK phase wins.
        let s = samples[9];
        assert_eq!((s.delivered, s.send_elapsed, s.ack_elapsed), (10 * MSS, at_us(900) - Instant::ZERO, Duration::from_millis(20)));
        assert_eq!(s.delivery_rate(), Some(10 * MSS * 1_000_000 / 20_000));
        assert_eq!(s.rtt, Some(at_us(20_000) - at_us(900)));
        assert!(samples.iter().all(|s| !s.is_app_limited && s.newly_delivered == MSS));

        // ACK clocking: each ACK (one every 1 ms) releases one new segment. Flight 2's
        // k-th segment leaves at 11 + k ms with the k-th ACK of flight 1 and is ACKed 10 ms
        // later; flight 3 likewise at 21 + k ms, ACKed at 31 + k ms.
        let mut dr = DeliveryRate::new();
        let mut flight = send_train(&mut dr, 1, 10, Instant::ZERO, 100, true);
        let mut rates = Vec::new();
        for round in 1..=3u64 {
            let mut next = Vec::new();
            for (k, (tx, t, order)) in flight.iter().enumerate() {
                let now = at_us(round * 10_000 + 1_000 + k as u64 * 1_000);
                dr.on_delivered(tx, *t, *order, MSS, false);
                let s = dr.generate(now, None).unwrap();
                if round > 1 {
                    // Each sample spans the 10 segments delivered since its segment left.
                    assert_eq!(s.delivered, 10 * MSS);
                    assert_eq!(s.ack_elapsed, Duration::from_millis(10));
                    rates.push((round, k as u64, s.send_elapsed, s.delivery_rate().unwrap()));
                }
                next.push((dr.on_send(now, false), now, 10 * round + 1 + k as u64));
            }
            flight = next;
        }
        for (round, k, send_elapsed, rate) in rates {
            if round == 2 {
                // Flight 2's send phase runs from flight 1's k-th segment (sent at 0.1·k ms,
                // a burst followed by a 10 ms pause) to its own send at 11 + k ms: the
                // sender, not the path, limited the rate.
                let us = 11_000 + 900 * k;
                assert_eq!(send_elapsed, Duration::from_micros(us));
                assert_eq!(rate, 10 * MSS * 1_000_000 / us, "flight 2 segment {k}");
            } else {
                // Flight 3: send phase 10 ms, ACK phase 10 ms: the bottleneck's 1 MB/s.
                assert_eq!(send_elapsed, Duration::from_millis(10));
                assert_eq!(rate, 1_000_000, "flight 3 segment {k}");
            }
        }
    }

    #[test]
    fn send_phase_longer_than_ack_phase_gives_the_send_rate() {
        // Four segments sent 5 ms apart (200 kB/s) whose ACKs are compressed and arrive
        // together 50 ms after the first send.
        let mut dr = DeliveryRate::new();
        let sent = send_train(&mut dr, 1, 4, Instant::ZERO, 5_000, true);
        for (tx, t, order) in &sent {
            dr.on_delivered(tx, *t, *order, MSS, false);
        }
        let s = dr.generate(at_us(50_000), None).unwrap();
        // Taken from the last segment sent: delivered since its snapshot = 4 segments,
        // send phase 15 ms, ACK phase 50 ms (since the first send).
        assert_eq!(s.newly_delivered, 4 * MSS);
        assert_eq!(s.interval, Some(Duration::from_millis(50)));
        // The next flight: the sample's segment's send time starts the new send phase.
        let later = dr.on_send(at_us(50_000), false);
        assert_eq!(later.first_sent_time, at_us(15_000));
        assert_eq!(later.delivered_time, at_us(50_000));
        // Four more 5 ms apart, then one compressed ACK 1 ms after the last send.
        let mut txs = vec![(later, at_us(50_000), 5)];
        for i in 1..4 {
            let t = at_us(50_000 + i * 5_000);
            txs.push((dr.on_send(t, false), t, 5 + i));
        }
        for (tx, t, order) in &txs {
            dr.on_delivered(tx, *t, *order, MSS, false);
        }
        let s = dr.generate(at_us(66_000), None).unwrap();
        // The last segment's snapshot: delivered 4 segments at 50 ms, first_sent_time
        // 15 ms; send phase 65 − 15 = 50 ms, ACK phase 66 − 50 = 16 ms: the send phase wins.
        assert_eq!((s.send_elapsed, s.ack_elapsed), (Duration::from_millis(50), Duration::from_millis(16)));
        assert_eq!(s.delivered, 4 * MSS);
        assert_eq!(s.delivery_rate(), Some(4 * MSS * 1000 / 50));
    }

    #[test]
    fn sacked_segment_yields_a_sample_and_counts_once() {
        // Three segments sent at 0, 1, 2 ms; the first is lost and the third is SACKed at
        // 30 ms, which gives a sample. The cumulative ACK that later covers all three
        // reports only the first two: the scoreboard never reports a byte twice.
        let mut dr = DeliveryRate::new();
        let sent = send_train(&mut dr, 1, 3, Instant::ZERO, 1_000, true);
        let (tx2, t2, o2) = sent[2];
        dr.on_delivered(&tx2, t2, o2, MSS, false);
        let s = dr.generate(at_us(30_000), None).unwrap();
        assert_eq!((s.delivered, s.total_delivered, s.newly_delivered), (MSS, MSS, MSS));
        assert_eq!(s.interval, Some(Duration::from_millis(30)));
        assert_eq!(s.rtt, Some(Duration::from_millis(28)));
        // The retransmission of segment 0 at 40 ms; then the cumulative ACK at 70 ms
        // delivers segments 0 and 1 (segment 2 was SACKed and is not reported again).
        let rtx = dr.on_send(at_us(40_000), false);
        assert_eq!(rtx.delivered, MSS);
        assert_eq!(rtx.delivered_time, at_us(30_000));
        dr.on_delivered(&sent[1].0, sent[1].1, sent[1].2, MSS, false);
        dr.on_delivered(&rtx, at_us(40_000), 4, MSS, true);
        let s = dr.generate(at_us(70_000), None).unwrap();
        assert_eq!(s.total_delivered, 3 * MSS);
        assert_eq!(s.newly_delivered, 2 * MSS);
        // From the retransmission (sent last): 2 segments since its snapshot, ACK phase
        // 70 − 30 = 40 ms, send phase 40 − 2 = 38 ms; no RTT (Karn).
        assert_eq!(s.delivered, 2 * MSS);
        assert_eq!(s.interval, Some(Duration::from_millis(40)));
        assert_eq!(s.rtt, None);
    }

    #[test]
    fn app_limited_marks_segments_until_the_flight_at_the_mark_is_delivered() {
        let mut dr = DeliveryRate::new();
        let sent = send_train(&mut dr, 1, 2, Instant::ZERO, 0, true);
        // The application has nothing more; two segments (2·MSS) are in flight.
        dr.mark_app_limited(2 * MSS);
        assert!(dr.is_app_limited());
        let during = dr.on_send(at_us(1_000), false);
        for (tx, t, o) in &sent {
            dr.on_delivered(tx, *t, *o, MSS, false);
        }
        let s = dr.generate(at_us(10_000), None).unwrap();
        assert!(!s.is_app_limited, "sent before the mark");
        // delivered = 2·MSS is not beyond the mark yet.
        assert!(dr.is_app_limited());
        dr.on_delivered(&during, at_us(1_000), 3, MSS, false);
        let s = dr.generate(at_us(11_000), None).unwrap();
        assert!(s.is_app_limited, "sent during the app-limited period");
        assert!(!dr.is_app_limited(), "everything in flight at the mark is delivered");
        assert!(!dr.on_send(at_us(11_000), false).app_limited);
    }

    #[test]
    fn duplicate_acks_without_sack_count_once_and_tame_the_repairing_ack() {
        // Ten segments sent 1 ms apart at 0–9 ms; the first is lost. Its nine successors
        // arrive and produce duplicate ACKs at 41–49 ms; the retransmission leaves at 49 ms
        // and its ACK covers all ten at 89 ms.
        let mut dr = DeliveryRate::new();
        let sent = send_train(&mut dr, 1, 10, Instant::ZERO, 1_000, true);
        for k in 1..10u64 {
            dr.on_duplicate_ack(MSS, 10 * MSS);
            let s = dr.generate(at_us(40_000 + k * 1_000), None).unwrap();
            assert_eq!((s.newly_delivered, s.total_delivered, s.interval), (MSS, k * MSS, None));
        }
        let rtx = dr.on_send(at_us(49_000), false);
        assert_eq!((rtx.delivered, rtx.delivered_time), (9 * MSS, at_us(49_000)));
        dr.on_delivered(&rtx, at_us(49_000), 11, MSS, true); // the hole, first in sequence
        for (tx, t, o) in &sent[1..] {
            dr.on_delivered(tx, *t, *o, MSS, false);
        }
        let s = dr.generate(at_us(89_000), None).unwrap();
        // Only the retransmitted segment, the hole, is new; the sample, from the
        // retransmission, is one segment (not ten) over its send phase, 49 ms since the flight's first send (no
        // segment was sampled in between), which is longer than its 40 ms ACK phase.
        assert_eq!((s.newly_delivered, s.total_delivered, s.delivered), (MSS, 10 * MSS, MSS));
        assert_eq!((s.send_elapsed, s.ack_elapsed), (Duration::from_millis(49), Duration::from_millis(40)));
        // The credit is capped by what is outstanding.
        let mut dr = DeliveryRate::new();
        let sent = send_train(&mut dr, 1, 3, Instant::ZERO, 0, true);
        for _ in 0..5 {
            dr.on_duplicate_ack(MSS, 2 * MSS);
        }
        assert_eq!(dr.generate(at_us(1_000), None).unwrap().total_delivered, 2 * MSS);
        // The hole and the two segments the credit stands for: one segment new.
        for (i, (tx, t, o)) in sent.iter().enumerate() {
            dr.on_delivered(tx, *t, *o, MSS, false);
            if i == 0 {
                dr.limit_dupack_credit(2 * MSS);
            }
        }
        assert_eq!(dr.generate(at_us(2_000), None).unwrap().total_delivered, 3 * MSS);
        assert_eq!(dr.dupack_credit(), 0);
    }

    #[test]
    fn interval_shorter_than_min_rtt_is_invalid() {
        let mut dr = DeliveryRate::new();
        let sent = send_train(&mut dr, 1, 1, Instant::ZERO, 0, true);
        dr.on_delivered(&sent[0].0, sent[0].1, 1, MSS, false);
        let s = dr.generate(at_us(5_000), Some(Duration::from_millis(10))).unwrap();
        assert_eq!((s.interval, s.delivery_rate()), (None, None));
        assert_eq!(s.newly_delivered, MSS);
        assert_eq!(dr.generate(at_us(6_000), None), None, "nothing delivered, no sample");
    }
}
