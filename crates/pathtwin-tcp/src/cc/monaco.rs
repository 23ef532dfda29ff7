//! Monaco's congestion response (Wang, Kalyanaraman et al., "Accumulation-based Congestion
//! Control", ACC paper §III-B.2): a window set by the accumulation the receiver reports
//! (the estimation protocol is `crate::monaco`), and a leaky-bucket pacer at cwnd/RTT.
//!
//! Per answered control pair, with â the reported accumulation and a* the target, both in
//! bytes here:
//!
//! - cwnd ← cwnd − K·(â − a*) (the paper's eq. 13; K = 0.5, a* = 3 packets), or
//! - cwnd ← cwnd/2 when the answer reports loss ("decrease-due-to-loss", as Reno halves).
//!
//! The sender paces at cwnd/rtt with a burst of one packet (the endpoint's leaky bucket,
//! one segment deep), rtt being the control loop's round trip (below).
//!
//! Reverse-path congestion (§III-C: the estimator "excludes the effect of reverse path
//! congestion", and Monaco keeps ~100 % utilisation where Vegas collapses). §II-B's window
//! is the flow's data in the forward path, "stored either in node buffers as accumulation
//! or on transmission links": w = a + x·rtt_p, so x = w / (rtt_p + forward queueing). The
//! round trip that goes with it is the control loop's — probe out of band, count in band,
//! answer out of band back — which §III-B.1's Figure 2 measures at the ingress node and
//! which no reverse queue lengthens, since the answer skips them
//! ([`AccumulationFeedback::loop_rtt`]). So:
//! - the pacer runs at cwnd over the loop round trip, not cwnd/SRTT (with half weight on the
//!   loop's queueing part, below);
//! - the window the endpoint fills with unacknowledged data is cwnd plus what has left the
//!   forward path and whose ACKs still queue on the way back: cwnd · (1 + b/loop rtt), b the
//!   reverse path's extra delay, taken per answer as the largest ACK round trip sampled since
//!   the previous answer less the answer's loop round trip (never negative). Without a
//!   reverse queue b = 0 and this is the plain window.
//!
//! Why the largest sample of the period: a reverse FIFO shared with bulk data compresses the
//! ACKs. Behind the Reno flows' bursts they arrive in clumps with 10–20-ms gaps between them,
//! and a window sized for the typical ACK delay runs dry in every gap: the forward queue holds
//! only a* = 3 packets (2.4 ms at 10 Mbit/s). Sized for the latest period's largest delay,
//! the window carries the flow across the gaps and the pacer, not the ACKs, sets its rate.
//!
//! Why the pacer weighs the loop's queueing by one half ([`PACER_QUEUE_WEIGHT`]): pacing at
//! w/(P + q) with q the forward queueing delay is a window's self-clocking (the queue settles
//! at w − x·P), but q is sampled once per control period and a period late. Linearised, the
//! queue then obeys qₙ₊₁ − q* = (qₙ − q*) − (qₙ₋₁ − q*), whose roots lie on the unit circle: an
//! undamped oscillation with a period of six answers. With the ACKs clocking the window that
//! loop never acts; once the reverse allowance hands the rate to the pacer it does, and the
//! forward queue swung between 0 and 20–27 packets every 150 ms. With weight γ on q the roots
//! have modulus √γ; γ = ½ damps the swing while eq. 13, which integrates â − a*, still holds
//! the accumulation at a*. P is the smallest loop round trip seen (the loop's propagation;
//! should a re-route lengthen it, the pacer runs faster than w/(P + q) and the ACK-clocked
//! window, which that cannot loosen, is what holds the flow).
//!
//! Measured on `pathtwin reproduce acc-3c`'s reverse-congestion run (one Monaco flow, five
//! Reno flows the other way from 10 s; the forward flow can have at most about 94 % of the
//! link, the rest being headers and the reverse flows' ACKs), forward share / link
//! utilisation:
//! - pacing at cwnd/SRTT and filling cwnd against ACKs: 75 % / 80 %. The ACKs behind a
//!   70–100-packet reverse queue held the sender below the bottleneck rate, and when the Reno
//!   flows backed off they came back bunched and SRTT fell from ~75 to ~48 ms: bursts of
//!   â = 13–29 packets that the next answers cut by tens of packets;
//! - b as SRTT − loop rtt, minimum over eight answers: 83 % / 89.2 %;
//! - b as the period's smallest ACK sample, minimum over two answers, undamped pacer:
//!   86 % / 91.7 %, with the window binding in 75 % of the milliseconds the forward queue
//!   was empty;
//! - the period's largest sample and the damped pacer (this module): 88.4 % / 94.6 %.
//!   Over 2, 5 and 10 reverse flows and 50- and 100-packet buffers it gives 87.9–89.3 % /
//!   94.3–95.3 % (the minimum rule: 84.9–87.8 % / 91.2–93.8 %); with 200-packet buffers
//!   79–82 % / 85–88 % (was 77–80 % / 83–86 %).
//! - what is left is the ACKs' own jitter: with a window that never binds, the pacer alone
//!   reached 90.4 % / 96.8 % here, but lost packets on §IV-A's paths, where the window's
//!   ACK clock is what keeps joining flows from overshooting.
//! - rejected: the largest sample over the last two answers (94.5–95 % utilisation, but
//!   drops while §IV-A's flows start on the 55-packet path, where the paper has none);
//!   the damped pacer with the minimum rule (92.0 %: the window still binds).
//!
//! Choices the paper does not make, and why:
//! - Slow start. The paper has none: eq. 13 alone grows the window by K·a* = 1.5 packets
//!   per round trip, which is what its §IV-A figures show (flows joining a loaded path without
//!   a single loss). That is slow to fill a large bandwidth-delay product, so
//!   [`MonacoParams::slow_start`] (off by default) starts the window in Reno's slow start
//!   (one SMSS per SMSS acknowledged) until the first answer with â ≥ a* or with loss, where
//!   eq. 13 takes over. Measured on §IV-A with the 90-packet buffer: with slow start, 140
//!   drops in the first 0.2 s and bursts of drops whenever a set joins; without it, none.
//! - The window never goes below two segments (ns-2's Vegas floor), so that pacing at
//!   cwnd/RTT never stops the flow.
//! - TCP's own loss signals: a fast retransmit changes nothing here, because the answer to
//!   the next control pair reports the same loss and halves the window — reacting to both
//!   would halve twice for one loss. A retransmission timeout halves the window (the
//!   feedback loop itself may have failed), and so does an ECN echo.

use super::{AckEvent, CcParamError, CcParams, CongestionControl};
use crate::monaco::AccumulationFeedback;
use pathtwin_core::config::MonacoSettings;
use pathtwin_core::time::{Duration, Instant};
use std::any::Any;

/// Weight γ of the loop round trip's queueing part in the pacer's round trip (module docs:
/// the pacer's own loop has roots of modulus √γ).
pub const PACER_QUEUE_WEIGHT: f64 = 0.5;

/// Monaco's gain and target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MonacoParams {
    /// Proportional gain K of eq. 13.
    pub k: f64,
    /// Target accumulation a* in segments (SMSS each).
    pub target: f64,
    /// Start in slow start (see the module docs); false (the paper) runs eq. 13 from the
    /// first answer.
    pub slow_start: bool,
}

impl MonacoParams {
    /// The ACC paper's values: K = 0.5, a* = 3 packets, no slow start.
    pub const PAPER: MonacoParams = MonacoParams { k: 0.5, target: 3.0, slow_start: false };

    /// The parameters of a `[tcp.monaco]` table: [`MonacoParams::PAPER`] with the keys it
    /// sets replaced.
    pub fn from_settings(v: Option<&MonacoSettings>) -> Result<Self, CcParamError> {
        let mut p = MonacoParams::PAPER;
        let Some(v) = v else { return Ok(p) };
        p.k = v.k.unwrap_or(p.k);
        p.target = v.target.unwrap_or(p.target);
        p.slow_start = v.slow_start.unwrap_or(p.slow_start);
        p.validate().map(|()| p)
    }

    /// Checks the gain (in (0, 1]) and the target (positive).
    pub fn validate(&self) -> Result<(), CcParamError> {
        CcParamError::check(self.k.is_finite() && self.k > 0.0 && self.k <= 1.0, "tcp.monaco.k", self.k, "must be a gain in (0, 1]")?;
        CcParamError::check(self.target.is_finite() && self.target > 0.0, "tcp.monaco.target", self.target, "must be a positive number of segments")
    }
}

impl Default for MonacoParams {
    fn default() -> Self {
        MonacoParams::PAPER
    }
}

#[derive(Debug)]
pub struct Monaco {
    params: MonacoParams,
    smss: f64,
    max_window: f64,
    cwnd: f64,
    slow_start: bool,
    srtt: Option<Duration>,
    /// The control loop's round trip at the latest answer.
    loop_rtt: Option<Duration>,
    /// The smallest loop round trip seen: the loop's propagation.
    min_loop_rtt: Option<Duration>,
    /// The reverse path's extra delay b at the latest answer that had ACK samples.
    reverse_delay: Duration,
    /// The largest ACK round trip sampled since the last answer.
    max_rtt_since_answer: Option<Duration>,
}

impl Monaco {
    pub fn new(cc: &CcParams, params: MonacoParams) -> Self {
        Monaco {
            params,
            smss: cc.smss as f64,
            max_window: cc.max_window as f64,
            cwnd: cc.initial_cwnd as f64,
            slow_start: params.slow_start,
            srtt: None,
            loop_rtt: None,
            min_loop_rtt: None,
            reverse_delay: Duration::ZERO,
            max_rtt_since_answer: None,
        }
    }

    /// Still in the initial slow start.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    fn floor(&self) -> f64 {
        2.0 * self.smss
    }

    /// The round trip the pacer divides by: once an answer has timed the control loop, its
    /// propagation plus [`PACER_QUEUE_WEIGHT`] of its latest queueing (module docs); else SRTT.
    pub fn pacing_rtt(&self) -> Option<Duration> {
        match (self.loop_rtt, self.min_loop_rtt) {
            (Some(latest), Some(propagation)) => {
                let queueing = latest.as_secs_f64() - propagation.as_secs_f64();
                Some(propagation + Duration::from_secs_f64(PACER_QUEUE_WEIGHT * queueing))
            }
            _ => self.srtt,
        }
    }

    /// The window eq. 13 sets (the forward path's part), before the allowance for data whose
    /// ACKs queue on the reverse path that [`cwnd`](CongestionControl::cwnd) adds.
    pub fn forward_window(&self) -> u64 {
        self.cwnd as u64
    }

    /// The reverse path's extra delay b (module docs).
    pub fn reverse_delay(&self) -> Duration {
        self.reverse_delay
    }

    fn halve(&mut self) {
        self.slow_start = false;
        self.cwnd = (self.cwnd / 2.0).max(self.floor());
    }
}

impl CongestionControl for Monaco {
    fn name(&self) -> &'static str {
        "monaco"
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        if ev.srtt.is_some() {
            self.srtt = ev.srtt;
        }
        if let Some(r) = ev.rtt {
            self.max_rtt_since_answer = Some(self.max_rtt_since_answer.map_or(r, |m| m.max(r)));
        }
        if self.slow_start && !ev.in_recovery {
            self.cwnd = (self.cwnd + ev.bytes_acked as f64).min(self.max_window);
        }
    }

    fn on_enter_recovery(&mut self, _now: Instant, _flight: u64) {}

    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {}

    fn on_rto(&mut self, _now: Instant, _flight: u64, first: bool) {
        if first {
            self.halve();
        }
    }

    fn on_ecn(&mut self, _now: Instant, _flight: u64) {
        self.halve();
    }

    fn on_accumulation(&mut self, _now: Instant, fb: &AccumulationFeedback) {
        if let Some(sample) = fb.loop_rtt {
            self.loop_rtt = Some(sample);
            self.min_loop_rtt = Some(self.min_loop_rtt.map_or(sample, |m| m.min(sample)));
            if let Some(rtt) = self.max_rtt_since_answer.take() {
                self.reverse_delay = rtt.saturating_sub(sample);
            }
        }
        if fb.loss {
            self.halve();
            return;
        }
        let target = self.params.target * self.smss;
        let accumulation = fb.accumulation as f64;
        if self.slow_start {
            if accumulation < target {
                return;
            }
            self.slow_start = false;
        }
        self.cwnd = (self.cwnd - self.params.k * (accumulation - target)).clamp(self.floor(), self.max_window.max(self.floor()));
    }

    fn cwnd(&self) -> u64 {
        // The forward window, plus at the pacing rate cwnd/loop rtt the data sent during the
        // reverse path's extra delay b, whose ACKs have not come back (module docs, §III-C).
        let scale = match self.loop_rtt {
            Some(l) if l > Duration::ZERO => 1.0 + self.reverse_delay().as_secs_f64() / l.as_secs_f64(),
            _ => 1.0,
        };
        (self.cwnd * scale).min(self.max_window.max(self.cwnd)) as u64
    }

    fn ssthresh(&self) -> u64 {
        if self.slow_start {
            u64::MAX
        } else {
            self.cwnd as u64
        }
    }

    fn pacing_rate(&self) -> Option<u64> {
        let rtt = self.pacing_rtt()?.as_secs_f64();
        (rtt > 0.0).then(|| (self.cwnd / rtt) as u64)
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_overrides_the_papers_values_and_is_checked() {
        let s = MonacoSettings { target: Some(5.0), slow_start: Some(true), ..Default::default() };
        assert_eq!(MonacoParams::from_settings(Some(&s)), Ok(MonacoParams { target: 5.0, slow_start: true, ..MonacoParams::PAPER }));
        let bad = MonacoSettings { k: Some(2.0), ..Default::default() };
        assert_eq!(MonacoParams::from_settings(Some(&bad)).unwrap_err().key, "tcp.monaco.k");
    }

    const MSS: u64 = 1000;

    fn monaco(slow_start: bool, cwnd_segments: u64) -> Monaco {
        let cc = CcParams { smss: MSS as u32, initial_cwnd: cwnd_segments * MSS, max_window: 1 << 30, slow_start: crate::cc::SlowStart::Rfc5681 };
        Monaco::new(&cc, MonacoParams { slow_start, ..MonacoParams::PAPER })
    }

    fn answer(m: &mut Monaco, accumulation_segments: f64, loss: bool) {
        let fb = AccumulationFeedback { accumulation: (accumulation_segments * MSS as f64) as u64, loss, loop_rtt: None };
        m.on_accumulation(Instant::ZERO, &fb);
    }

    #[test]
    fn eq_13_moves_the_window_by_half_the_error() {
        let mut m = monaco(false, 20);
        answer(&mut m, 7.0, false); // 4 segments over a* = 3: −0.5·4
        assert_eq!(m.cwnd(), 18 * MSS);
        answer(&mut m, 1.0, false); // 2 under: +0.5·2
        assert_eq!(m.cwnd(), 19 * MSS);
        answer(&mut m, 3.0, false);
        assert_eq!(m.cwnd(), 19 * MSS, "at the target the window holds");
    }

    #[test]
    fn loss_halves_and_the_floor_is_two_segments() {
        let mut m = monaco(false, 20);
        answer(&mut m, 0.0, true);
        assert_eq!(m.cwnd(), 10 * MSS);
        answer(&mut m, 100.0, false);
        assert_eq!(m.cwnd(), 2 * MSS);
    }

    #[test]
    fn slow_start_doubles_per_window_until_the_target_is_reached() {
        let mut m = monaco(true, 10);
        let ack = |bytes| AckEvent {
            now: Instant::ZERO,
            bytes_acked: bytes,
            rtt: Some(Duration::from_millis(10)),
            srtt: Some(Duration::from_millis(10)),
            flight_before: 10 * MSS,
            pipe_before: 10 * MSS,
            in_recovery: false,
        };
        for _ in 0..10 {
            m.on_ack(&ack(MSS));
        }
        assert_eq!(m.cwnd(), 20 * MSS);
        answer(&mut m, 1.0, false);
        assert!(m.in_slow_start(), "below a* the window keeps doubling");
        answer(&mut m, 9.0, false);
        assert!(!m.in_slow_start());
        assert_eq!(m.cwnd(), 17 * MSS, "eq. 13 applies from the answer that ends slow start");
        m.on_ack(&ack(MSS));
        assert_eq!(m.cwnd(), 17 * MSS, "after slow start only answers move the window");
    }

    /// An ACK whose round trip sample (and SRTT) is `rtt_ms`.
    fn ack_rtt(m: &mut Monaco, rtt_ms: u64) {
        let rtt = Some(Duration::from_millis(rtt_ms));
        m.on_ack(&AckEvent { now: Instant::ZERO, bytes_acked: 0, rtt, srtt: rtt, flight_before: 0, pipe_before: 0, in_recovery: false });
    }

    /// An answer at the target (the window holds) whose control loop took `loop_ms`.
    fn answer_after(m: &mut Monaco, loop_ms: u64) {
        let fb = AccumulationFeedback { accumulation: 3 * MSS, loss: false, loop_rtt: Some(Duration::from_millis(loop_ms)) };
        m.on_accumulation(Instant::ZERO, &fb);
    }

    /// One control period: ACKs with these round trips, then an answer after `loop_ms`.
    fn period(m: &mut Monaco, ack_rtts_ms: &[u64], loop_ms: u64) {
        for &r in ack_rtts_ms {
            ack_rtt(m, r);
        }
        answer_after(m, loop_ms);
    }

    /// §III-C, §III-B.1: a reverse queue delays the ACKs (100 ms) but not the control loop,
    /// whose answers skip it (25 ms = propagation + forward queueing). The rate is the forward
    /// window over the forward round trip, x = w / 25 ms, and the data not yet acknowledged is
    /// that rate times the ACKs' round trip, x · 100 ms = 4w.
    #[test]
    fn reverse_queueing_slows_neither_the_pacer_nor_the_window() {
        let mut m = monaco(false, 20);
        period(&mut m, &[100], 25);
        assert_eq!(m.forward_window(), 20 * MSS, "answers at the target hold eq. 13's window");
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 40), "cwnd / 25 ms, not cwnd / 100 ms");
        assert_eq!(m.cwnd(), 4 * 20 * MSS, "x · 100 ms of data is unacknowledged");
    }

    /// Without a reverse queue the two round trips agree: the plain window, paced at
    /// cwnd/rtt (§III-B.2).
    #[test]
    fn without_reverse_queueing_the_window_is_eq_13s() {
        let mut m = monaco(false, 20);
        period(&mut m, &[25, 25], 25);
        assert_eq!(m.cwnd(), 20 * MSS);
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 40));
    }

    /// b is the largest ACK round trip of the latest period less its loop round trip: the
    /// window covers the longest gap the reverse queue put between ACKs, and follows the
    /// reverse queue down as well as up.
    #[test]
    fn the_reverse_allowance_covers_the_latest_periods_largest_ack_delay() {
        let mut m = monaco(false, 20);
        period(&mut m, &[50, 100, 75], 25);
        assert_eq!(m.cwnd(), 4 * 20 * MSS, "b = 100 − 25 ms: w · (1 + 75/25)");
        period(&mut m, &[50], 25);
        assert_eq!(m.cwnd(), 2 * 20 * MSS, "a shorter reverse queue shrinks it: b = 25 ms");
        period(&mut m, &[], 25);
        assert_eq!(m.cwnd(), 2 * 20 * MSS, "a period without an ACK sample keeps the last b");
        period(&mut m, &[20], 25);
        assert_eq!(m.cwnd(), 20 * MSS, "an ACK faster than the loop is no reverse delay: b ≥ 0");
    }

    /// The pacer's round trip is the loop's propagation (its smallest round trip) plus half of
    /// its latest queueing: 20 ms + ½ · (30 − 20) ms = 25 ms, so x = w / 25 ms.
    #[test]
    fn the_pacer_weighs_the_loops_queueing_by_one_half() {
        let mut m = monaco(false, 20);
        period(&mut m, &[], 20);
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 50), "no queueing yet: w / 20 ms");
        period(&mut m, &[], 30);
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 40), "w / (20 + 5) ms");
        period(&mut m, &[], 20);
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 50), "the queue drained: w / 20 ms again");
    }

    #[test]
    fn paces_at_cwnd_over_srtt_until_the_loop_is_timed() {
        let mut m = monaco(false, 20);
        assert_eq!(m.pacing_rate(), None);
        m.on_ack(&AckEvent {
            now: Instant::ZERO,
            bytes_acked: 0,
            rtt: None,
            srtt: Some(Duration::from_millis(20)),
            flight_before: 0,
            pipe_before: 0,
            in_recovery: false,
        });
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 50));
    }
}
