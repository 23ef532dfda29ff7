//! RED, random early detection (Floyd & Jacobson, "Random Early Detection Gateways for
//! Congestion Avoidance", IEEE/ACM ToN 1993), with the variants of ns-2's `queue/red.cc`:
//! gentle RED, the `wait` rule, byte mode, idle-time decay, ECN marking (RFC 3168 §7) and
//! Adaptive RED (Floyd, Gummadi, Shenker 2001).
//!
//! On every arrival the average queue is updated, `avg ← (1 − w_q)·avg + w_q·q`; after an idle
//! period it first decays as if `m = idle·C/(8·mean packet size)` empty arrivals had been seen,
//! `avg ← (1 − w_q)^m·avg`. Then, with `count` the arrivals since the last early drop:
//!
//! ```text
//! avg < min_th                 admit (count = −1)
//! min_th ≤ avg < max_th        p_b = max_p·(avg − min_th)/(max_th − min_th)
//! max_th ≤ avg < 2·max_th      gentle: p_b = max_p + (1 − max_p)·(avg − max_th)/max_th
//! otherwise                    forced drop
//! p_a = p_b / (1 − count·p_b)                     (1 once count·p_b ≥ 1)
//! wait: p_a = 0 while count·p_b < 1, then p_b/(2 − count·p_b), 1 from count·p_b ≥ 2
//! ```
//!
//! Byte mode scales p_b by size/mean packet size. An early drop of an ECN-capable packet
//! marks it CE instead when `ecn` is on; forced drops stay drops. The hard limit of the
//! queue (packets or bytes) is enforced as DropTail.
//!
//! Placeholders (NSDI'09 cross traffic): they count in the average — they are queue
//! occupancy like any packet — but are never dropped early. Their rate is the path's
//! C − ABW by construction (a rejected placeholder waits at the entrance instead of being
//! lost, see `element::queue`), so an early "drop" of one would not thin the cross traffic;
//! only the limit applies to them.
//!
//! Adaptive RED: every `interval` (0.5 s) max_p moves towards keeping avg in the band
//! [min_th + 0.4·(max_th − min_th), min_th + 0.6·(max_th − min_th)]: up by
//! min(0.01, max_p/4) above it, times 0.9 below it, within [0.01, 0.5].

use super::aqm::{active_queue_qdisc, ActiveQueue, AqmQueue, AqmStats, Class};
use super::red_curve::{in_units, RedAverage, RedCurve, Verdict};
use super::Queued;
use crate::config::RedSettings;
use crate::packet::PacketMeta;
use crate::time::{Duration, Instant};
use crate::units::{QueueLimit, Rate};
use crate::Rng;

/// ns-2's `mean_pktsize_`: the mean packet size RED assumes unless told (bytes).
pub const NS2_MEAN_PACKET: u32 = 500;

/// RED's parameters. Thresholds count packets or bytes, as the average does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedParams {
    pub min_th: QueueLimit,
    pub max_th: QueueLimit,
    /// Drop probability at max_th (ns-2's `linterm_` is 1/max_p).
    pub max_p: f64,
    /// Weight of the average, w_q.
    pub w_q: f64,
    pub gentle: bool,
    /// ns-2's `wait_`: space early drops out more evenly.
    pub wait: bool,
    /// Scale the drop probability by packet size (ns-2's `bytes_`).
    pub byte_mode: bool,
    /// Mean packet size for the idle decay and byte mode (ns-2's `mean_pktsize_`, 500 B).
    pub mean_packet: u32,
    /// Mark ECN-capable packets instead of dropping them early.
    pub ecn: bool,
    pub adaptive: bool,
    /// Never drop, early or forced by the average, while the queue holds at most one packet
    /// (ns-2.35's `red.cc`: `qavg >= th_min && qlen > 1`; not in Floyd & Jacobson). RED only;
    /// RIO's classes ignore it, as ns-2's dsRED has no such rule.
    pub short_queue_exempt: bool,
    /// Adaptive RED's adjustment interval (0.5 s in the paper).
    pub interval: Duration,
}

impl RedParams {
    /// Floyd & Jacobson's and ns-2's long-standing values for a given pair of thresholds:
    /// max_p 0.1, w_q 0.002, gentle and wait on, packet mode, mean packet 500 B, no ECN.
    pub fn with_thresholds(min_th: QueueLimit, max_th: QueueLimit) -> Self {
        RedParams {
            min_th,
            max_th,
            max_p: 0.1,
            w_q: 0.002,
            gentle: true,
            wait: true,
            byte_mode: false,
            mean_packet: NS2_MEAN_PACKET,
            ecn: false,
            adaptive: false,
            short_queue_exempt: false,
            interval: Duration::from_millis(500),
        }
    }

    /// ns-2.35's `Queue/RED` with its default settings (`thresh_` and `maxthresh_` 0,
    /// `q_weight_` -1, `bytes_` and `queue_in_bytes_` true, `mean_pktsize_` 500, `linterm_`
    /// 10, gentle and wait on; `red.cc`'s `initialize_params`), on a link of `capacity` and
    /// one-way `delay`, for packets of `mean_packet` bytes on average. With `ptc` the link's
    /// rate in mean packets per second:
    /// - min_th = max(5, ptc · 5 ms / 2) mean packets (half the queue of the 5-ms target
    ///   delay), max_th = 3 · min_th, both counted in bytes;
    /// - w_q = 1 − exp(−1 / (10 · rtt · ptc)), rtt = max(100 ms, 3 · (delay + 1 / ptc)): the
    ///   average's time constant ten round trips of an assumed RTT;
    /// - byte mode, and no drop while the queue holds at most one packet (ns-2.35).
    pub fn ns2_automatic(capacity: Rate, delay: Duration, mean_packet: u32) -> Self {
        const TARGET_DELAY_S: f64 = 0.005;
        let ptc = capacity.as_f64() / (8.0 * mean_packet as f64);
        let min_pkts = (TARGET_DELAY_S * ptc / 2.0).max(5.0);
        let bytes = |pkts: f64| QueueLimit::Bytes((pkts * mean_packet as f64).round() as u64);
        let rtt = (3.0 * (delay.as_secs_f64() + 1.0 / ptc)).max(0.1);
        RedParams {
            w_q: 1.0 - (-1.0 / (10.0 * rtt * ptc)).exp(),
            byte_mode: true,
            mean_packet,
            short_queue_exempt: true,
            ..RedParams::with_thresholds(bytes(min_pkts), bytes(3.0 * min_pkts))
        }
    }

    /// The parameters of an entry's `red` table (none: every key left out) on a link of
    /// `capacity` and one-way `delay`: with thresholds, theirs, and for every key the table
    /// leaves out the value of [`RedParams::with_thresholds`]; without, those of
    /// [`RedParams::ns2_automatic`] for the table's mean packet, then every key it gives.
    pub fn from_settings(r: Option<&RedSettings>, capacity: Rate, delay: Duration) -> Self {
        let none = RedSettings::default();
        let r = r.unwrap_or(&none);
        let d = match (r.min_th, r.max_th) {
            (Some(min_th), Some(max_th)) => RedParams::with_thresholds(min_th, max_th),
            // Validation allows both or neither.
            _ => {
                let mean = r.mean_packet.map_or(NS2_MEAN_PACKET, |m| m.bytes() as u32);
                RedParams::ns2_automatic(capacity, delay, mean)
            }
        };
        RedParams {
            max_p: r.max_p.unwrap_or(d.max_p),
            w_q: r.w_q.unwrap_or(d.w_q),
            gentle: r.gentle.unwrap_or(d.gentle),
            wait: r.wait.unwrap_or(d.wait),
            byte_mode: r.byte_mode.unwrap_or(d.byte_mode),
            mean_packet: r.mean_packet.map_or(d.mean_packet, |m| m.bytes() as u32),
            ecn: r.ecn.unwrap_or(d.ecn),
            adaptive: r.adaptive.unwrap_or(d.adaptive),
            short_queue_exempt: r.short_queue_exempt.unwrap_or(d.short_queue_exempt),
            ..d
        }
    }
}

pub struct Red<P> {
    curve: RedCurve,
    average: RedAverage,
    queue: AqmQueue<P>,
}

impl<P: Send + Sync> Red<P> {
    /// A RED queue with hard limit `limit` on a link of `capacity`.
    pub fn new(p: RedParams, limit: QueueLimit, capacity: Rate) -> Self {
        Red { curve: RedCurve::new(p), average: RedAverage::default(), queue: AqmQueue::new(limit, capacity) }
    }

    /// The average queue, in the thresholds' unit (packets or bytes).
    pub fn average(&self) -> f64 {
        self.average.avg
    }

    pub fn max_p(&self) -> f64 {
        self.curve.p.max_p
    }

    pub fn red_stats(&self) -> AqmStats {
        self.queue.stats
    }

    /// p_b for the current average (see [`RedCurve::base_probability`]).
    pub fn base_probability(&self) -> Option<f64> {
        self.curve.base_probability(self.average.avg)
    }

    /// The average after an arrival at `now` sees the instantaneous queue `q`.
    fn update_average(&mut self, now: Instant, q: f64) {
        let p = &self.curve.p;
        // The link could have sent m packets of mean size while idle (ns-2's estimator).
        let m = self.queue.idle_m(now, p.mean_packet);
        self.average.decay(p.w_q, m);
        self.average.update(p.w_q, q);
    }
}

impl<P: PacketMeta + Send + Sync> ActiveQueue<P> for Red<P> {
    fn queue(&self) -> &AqmQueue<P> {
        &self.queue
    }

    fn queue_mut(&mut self) -> &mut AqmQueue<P> {
        &mut self.queue
    }

    fn judge(&mut self, now: Instant, item: &Queued<P>, rng: &mut Rng) -> (Verdict, Class, bool) {
        let q = in_units(self.curve.p.min_th, self.queue.backlog());
        self.update_average(now, q);
        if self.curve.p.adaptive {
            self.curve.adapt(now, self.average.avg);
        }
        let class = Class::of(item.mark);
        if self.curve.p.short_queue_exempt && self.queue.backlog().packets <= 1 {
            // As below min_th: nothing dropped, and the next drop decision starts afresh.
            self.curve.count = -1;
            return (Verdict::Admit, class, self.curve.p.ecn);
        }
        (self.curve.judge(self.average.avg, item.wire_len, rng), class, self.curve.p.ecn)
    }

    fn kind_name(&self) -> &'static str {
        "red"
    }

    fn reported_average(&self) -> f64 {
        self.average.avg
    }
}

active_queue_qdisc!(Red);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Mark;
    use crate::qdisc::testing::{packet, placeholder, Pkt};
    use crate::qdisc::{ClassStats, Qdisc};
    use rand::SeedableRng;

    fn item(ect: bool) -> Queued<Pkt> {
        packet(0, Mark::Unmarked, ect)
    }

    /// ns-2.35's automatic settings, worked by hand from `red.cc`'s `initialize_params`.
    #[test]
    fn automatic_settings_follow_ns2s_rules() {
        // 20 Mbit/s, 2 ms: 5000 mean packets/s; half the 5-ms target queue is 12.5 packets,
        // above the floor of 5; the assumed RTT 3 · 2.2 ms is below 100 ms, so 100 ms.
        let p = RedParams::ns2_automatic(Rate::from_mbps(20), Duration::from_millis(2), 500);
        assert_eq!((p.min_th, p.max_th), (QueueLimit::Bytes(6250), QueueLimit::Bytes(18_750)));
        assert!((p.w_q - (1.0 - (-1.0f64 / 5000.0).exp())).abs() < 1e-15, "{}", p.w_q);
        assert!(p.byte_mode && p.gentle && p.wait && p.short_queue_exempt && !p.ecn && !p.adaptive);
        assert_eq!((p.max_p, p.mean_packet), (0.1, 500));
        // 1 Mbit/s, 100 ms: 250 packets/s, so the floor of 5 packets; RTT 3 · 104 ms.
        let p = RedParams::ns2_automatic(Rate::from_mbps(1), Duration::from_millis(100), 500);
        assert_eq!((p.min_th, p.max_th), (QueueLimit::Bytes(2500), QueueLimit::Bytes(7500)));
        assert!((p.w_q - (1.0 - (-1.0f64 / (10.0 * 0.312 * 250.0)).exp())).abs() < 1e-12, "{}", p.w_q);
        // A table without thresholds starts there and keeps what it gives.
        let r = RedSettings { ecn: Some(true), w_q: Some(0.01), ..RedSettings::default() };
        let q = RedParams::from_settings(Some(&r), Rate::from_mbps(20), Duration::from_millis(2));
        assert_eq!((q.min_th, q.w_q, q.ecn, q.byte_mode), (QueueLimit::Bytes(6250), 0.01, true, true));
    }

    fn red(p: RedParams) -> Red<Pkt> {
        Red::new(p, QueueLimit::Packets(1000), Rate::from_mbps(10))
    }

    fn params() -> RedParams {
        RedParams::with_thresholds(QueueLimit::Packets(5), QueueLimit::Packets(15))
    }

    #[test]
    fn base_probability_is_linear_then_gentle_then_forced() {
        let mut r = red(params());
        r.average.avg = 10.0;
        assert!((r.base_probability().unwrap() - 0.05).abs() < 1e-12);
        r.average.avg = 20.0; // gentle: 0.1 + 0.9·(20 − 15)/15
        assert!((r.base_probability().unwrap() - 0.4).abs() < 1e-12);
        r.average.avg = 31.0;
        assert_eq!(r.base_probability(), None);
        let mut r = red(RedParams { gentle: false, ..params() });
        r.average.avg = 16.0;
        assert_eq!(r.base_probability(), None, "without gentle, max_th forces drops");
        r.average.avg = 4.0;
        assert_eq!(r.base_probability(), Some(0.0));
    }

    #[test]
    fn actual_probability_with_and_without_wait() {
        let p = RedCurve::actual_probability;
        assert!((p(0.02, 10, false) - 0.02 / 0.8).abs() < 1e-12);
        assert_eq!(p(0.02, 10, true), 0.0, "wait: nothing while count·p_b < 1");
        assert!((p(0.02, 60, true) - 0.02 / 0.8).abs() < 1e-12);
        assert_eq!(p(0.02, 120, true), 1.0);
        assert_eq!(p(0.02, 50, false), 1.0);
    }

    #[test]
    fn idle_time_decays_the_average_as_m_empty_arrivals() {
        let mut r = red(params());
        r.average.avg = 10.0;
        r.queue.idle.mark_idle(Instant::ZERO);
        // 1 s idle at 10 Mbit/s with 500-byte mean packets: m = 2500.
        r.update_average(Instant::ZERO + Duration::from_secs(1), 0.0);
        let expect = 10.0 * 0.998f64.powf(2500.0) * 0.998;
        assert!((r.average() - expect).abs() < 1e-9, "{} vs {expect}", r.average());
    }

    /// The idle time starts when the link, done sending, finds the queue empty (the
    /// `dequeue` that returns nothing), as ns-2's `red.cc`: not when the last packet left
    /// the queue for the link.
    #[test]
    fn idle_time_counts_from_when_the_link_finds_the_queue_empty() {
        let mut r = red(params());
        let mut rng = Rng::seed_from_u64(1);
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        r.enqueue(t(0), item(false), &mut rng).unwrap();
        r.average.avg = 10.0;
        assert!(r.dequeue(t(0)).is_some(), "onto the link; the queue is empty from now");
        assert!(r.dequeue(t(100)).is_none(), "the link is done and finds nothing");
        assert!(r.dequeue(t(150)).is_none(), "asking again does not restart the idle time");
        r.enqueue(t(300), item(false), &mut rng).unwrap();
        // 200 ms idle at 10 Mbit/s, 500-byte mean: m = 500; then one arrival at q = 0.
        let expect = 10.0 * 0.998f64.powf(500.0) * 0.998;
        assert!((r.average() - expect).abs() < 1e-9, "{} vs {expect}", r.average());
    }

    /// ns-2's rule, when asked for: nothing is dropped while the queue holds at most one
    /// packet, however high the average; from two packets on, RED as usual.
    #[test]
    fn short_queue_exempt_spares_arrivals_at_a_nearly_empty_queue() {
        let mut r = red(RedParams { short_queue_exempt: true, w_q: 0.0, ..params() });
        r.queue.idle.mark_busy();
        r.average.avg = 40.0; // beyond 2·max_th: every arrival would be a forced drop
        let mut rng = Rng::seed_from_u64(2);
        assert!(r.enqueue(Instant::ZERO, item(false), &mut rng).is_ok(), "empty queue");
        assert!(r.enqueue(Instant::ZERO, item(false), &mut rng).is_ok(), "one packet queued");
        assert!(r.enqueue(Instant::ZERO, item(false), &mut rng).is_err(), "two queued: forced drop");
        let mut plain = red(RedParams { w_q: 0.0, ..params() });
        plain.queue.idle.mark_busy();
        plain.average.avg = 40.0;
        assert!(plain.enqueue(Instant::ZERO, item(false), &mut rng).is_err(), "Floyd & Jacobson's RED drops");
    }

    /// With avg held fixed, `count` makes the gap X between early drops uniform (Floyd &
    /// Jacobson §7): with count including the arrival being judged, the survival after n
    /// arrivals telescopes to (1 − (n+1)·p_b)/(1 − p_b), so P(X = n) = p_b/(1 − p_b) for
    /// n = 1 … 1/p_b − 1 and E[X] = 1/(2·p_b): twice the drops of independent coin flips.
    #[test]
    fn count_spreads_drops_uniformly() {
        let mut r = red(RedParams { w_q: 0.0, wait: false, ..params() });
        r.average.avg = 10.0; // p_b = 0.05
        r.queue.idle.mark_busy();
        let mut rng = Rng::seed_from_u64(7);
        let n = 200_000;
        let mut dropped = 0;
        for _ in 0..n {
            match r.enqueue(Instant::ZERO, item(false), &mut rng) {
                Ok(()) => {
                    r.queue.fifo.dequeue(Instant::ZERO);
                }
                Err(_) => dropped += 1,
            }
        }
        let frac = dropped as f64 / n as f64;
        let expect = 2.0 * 0.05;
        assert!((frac - expect).abs() < 0.003, "{frac} vs {expect}");
        assert_eq!(r.red_stats().early_drops, dropped);
    }

    #[test]
    fn ecn_capable_packets_are_marked_not_dropped_early_but_forced_drops_stay() {
        let mut r = red(RedParams { ecn: true, w_q: 0.0, ..params() });
        r.queue.idle.mark_busy();
        r.average.avg = 14.9;
        r.curve.count = 1000; // the next early decision is certain
        let mut rng = Rng::seed_from_u64(1);
        r.enqueue(Instant::ZERO, item(true), &mut rng).expect("marked, not dropped");
        let marked = r.queue.fifo.dequeue(Instant::ZERO).unwrap();
        assert!(marked.packet.unwrap().ce);
        assert_eq!(r.red_stats().ecn_marks, 1);
        r.curve.count = 1000;
        assert!(r.enqueue(Instant::ZERO, item(false), &mut rng).is_err(), "not ECN-capable: dropped");
        r.average.avg = 40.0;
        assert!(r.enqueue(Instant::ZERO, item(true), &mut rng).is_err(), "forced drops are drops");
        let class = ClassStats { arrivals: 3, early_drops: 1, forced_drops: 1, ecn_marks: 1 };
        assert_eq!(r.red_stats(), AqmStats { early_drops: 1, forced_drops: 1, ecn_marks: 1, in_class: class, out_class: ClassStats::default() });
    }

    #[test]
    fn placeholders_count_in_the_average_but_are_never_dropped_early() {
        let mut r = red(RedParams { w_q: 0.0, ..params() });
        r.queue.idle.mark_busy();
        r.average.avg = 14.0;
        let mut rng = Rng::seed_from_u64(3);
        for _ in 0..200 {
            assert!(r.enqueue(Instant::ZERO, placeholder(), &mut rng).is_ok());
        }
        assert_eq!(r.red_stats().early_drops, 0);
        let mut r = red(RedParams { w_q: 0.5, ..params() });
        r.queue.idle.mark_busy();
        for _ in 0..10 {
            r.enqueue(Instant::ZERO, placeholder(), &mut rng).unwrap();
        }
        assert!(r.average() > 4.0, "placeholders raise the average: {}", r.average());
    }

    /// An average left high by a burst must decay while the queue stays empty, even when
    /// every arrival meanwhile is dropped (a stalled sender's retransmissions): otherwise
    /// the queue would drop every packet forever.
    #[test]
    fn an_empty_queue_keeps_decaying_across_dropped_arrivals() {
        let mut r = red(params());
        r.queue.idle.mark_busy();
        r.average.avg = 31.0; // above 2·max_th: forced drops
        let mut rng = Rng::seed_from_u64(9);
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        assert!(r.enqueue(t(0), item(false), &mut rng).is_err());
        assert!(r.enqueue(t(1), item(false), &mut rng).is_err(), "1 ms of idle decay is not enough");
        // 200 ms idle at 10 Mbit/s, 500-byte mean: m = 500, 0.998^500 ≈ 0.37.
        assert!(r.enqueue(t(200), item(false), &mut rng).is_ok());
        assert!(r.average() < 15.0, "{}", r.average());
    }

    #[test]
    fn adaptive_red_steps_max_p_toward_the_target_band() {
        let mut r = red(RedParams { adaptive: true, w_q: 0.0, ..params() });
        r.queue.idle.mark_busy();
        r.average.avg = 14.0; // above the band [9, 11]
        let mut rng = Rng::seed_from_u64(5);
        let t = |ms| Instant::ZERO + Duration::from_millis(ms);
        let _ = r.enqueue(t(0), item(false), &mut rng);
        let _ = r.enqueue(t(500), item(false), &mut rng);
        assert!((r.max_p() - 0.11).abs() < 1e-12, "+min(0.01, max_p/4): {}", r.max_p());
        r.average.avg = 6.0; // below the band
        let _ = r.enqueue(t(1000), item(false), &mut rng);
        assert!((r.max_p() - 0.099).abs() < 1e-12, "×0.9: {}", r.max_p());
    }
}
