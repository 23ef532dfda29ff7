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
//! - the pacer runs at cwnd / (the latest loop round trip), not cwnd/SRTT;
//! - the window the endpoint fills with unacknowledged data is cwnd plus what has left the
//!   forward path and whose ACKs still queue on the way back: cwnd · (1 + b/loop rtt), b the
//!   reverse path's extra delay, taken per answer as the smallest ACK round trip sampled since
//!   the previous answer less the answer's loop round trip (both sampled over the same
//!   control period; the smallest sample is the one least inflated by bursts), and as the
//!   minimum over the last [`REVERSE_SAMPLES`] answers (a reverse queue that persists; never
//!   negative). Without a reverse queue b = 0 and this is the plain window.
//!
//! What this replaced, and why: pacing at cwnd/SRTT and filling cwnd against ACKs let the
//! reverse path drive the forward flow. On `pathtwin reproduce acc`'s reverse-congestion run
//! (one Monaco flow, five Reno flows the other way from 10 s) the ACKs waiting behind a
//! 70–100-packet reverse queue held the sender below the bottleneck rate (the estimator rightly
//! reported â ≈ 0, and the window crept up by K·a* per answer); whenever the Reno flows backed
//! off and that queue drained, the ACKs came back bunched, SRTT fell from ~75 to ~48 ms and
//! the pacer let out a burst (â of 13–29 packets) that the next answers cut by tens of
//! packets. The flow kept 75 % of the bottleneck (80 % link utilisation). A first version of
//! b, SRTT − loop rtt at each answer and its minimum over the last eight answers (SRTT's
//! memory), gave 83 % (89.2 %): SRTT lags the Reno flows' saw-tooth, and eight answers (half
//! a second) hold b at the saw-tooth's trough. With the ACK samples of each control period
//! and two answers: 86 % (91.7 %), where the forward flow can have at most about 92 % (the
//! headers and the reverse flows' ACKs share the link). Taking the largest recent b instead
//! reached 88 % (94.7 %) but let flows joining §IV-A's 55-packet path overshoot it (609
//! drops in the first 10 s where the paper and this rule have none).
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

use super::{AckEvent, CcParams, CongestionControl};
use crate::monaco::AccumulationFeedback;
use pathtwin_core::time::{Duration, Instant};
use std::any::Any;
use std::collections::VecDeque;

/// Answers over which the reverse path's extra delay is taken as a minimum (module docs).
pub const REVERSE_SAMPLES: usize = 2;

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
    /// Smallest ACK round trip of the period − loop round trip (seconds), at each of the last
    /// [`REVERSE_SAMPLES`] answers.
    reverse_excess: VecDeque<f64>,
    /// The smallest RTT sample since the last answer.
    min_rtt_since_answer: Option<Duration>,
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
            reverse_excess: VecDeque::with_capacity(REVERSE_SAMPLES),
            min_rtt_since_answer: None,
        }
    }

    /// Still in the initial slow start.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    fn floor(&self) -> f64 {
        2.0 * self.smss
    }

    /// The round trip the pacer divides by: the control loop's once an answer has timed it,
    /// else SRTT.
    pub fn pacing_rtt(&self) -> Option<Duration> {
        self.loop_rtt.or(self.srtt)
    }

    /// The window eq. 13 sets (the forward path's part), before the allowance for data whose
    /// ACKs queue on the reverse path that [`cwnd`](CongestionControl::cwnd) adds.
    pub fn forward_window(&self) -> u64 {
        self.cwnd as u64
    }

    /// The reverse path's persistent extra delay b (module docs).
    pub fn reverse_delay(&self) -> Duration {
        if self.reverse_excess.len() < REVERSE_SAMPLES {
            return Duration::ZERO;
        }
        let b = self.reverse_excess.iter().copied().fold(f64::INFINITY, f64::min);
        Duration::from_secs_f64(b.max(0.0))
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
            self.min_rtt_since_answer = Some(self.min_rtt_since_answer.map_or(r, |m| m.min(r)));
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
            if let Some(rtt) = self.min_rtt_since_answer.take() {
                if self.reverse_excess.len() == REVERSE_SAMPLES {
                    self.reverse_excess.pop_front();
                }
                self.reverse_excess.push_back(rtt.as_secs_f64() - sample.as_secs_f64());
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

    const MSS: u64 = 1000;

    fn monaco(slow_start: bool, cwnd_segments: u64) -> Monaco {
        let cc = CcParams { smss: MSS as u32, initial_cwnd: cwnd_segments * MSS, max_window: 1 << 30 };
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
        for _ in 0..REVERSE_SAMPLES {
            period(&mut m, &[100], 25);
        }
        assert_eq!(m.forward_window(), 20 * MSS, "answers at the target hold eq. 13's window");
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 40), "cwnd / 25 ms, not cwnd / 100 ms");
        assert_eq!(m.cwnd(), 4 * 20 * MSS, "x · 100 ms of data is unacknowledged");
    }

    /// Without a reverse queue the two round trips agree: the plain window, paced at
    /// cwnd/rtt (§III-B.2).
    #[test]
    fn without_reverse_queueing_the_window_is_eq_13s() {
        let mut m = monaco(false, 20);
        for _ in 0..REVERSE_SAMPLES {
            period(&mut m, &[25], 25);
        }
        assert_eq!(m.cwnd(), 20 * MSS);
        assert_eq!(m.pacing_rate(), Some(20 * MSS * 40));
    }

    /// b is the smallest ACK round trip of each period less its loop round trip, and the
    /// smallest of that over the recent answers: a burst of late ACKs, or one period of a
    /// longer reverse queue, does not count as the reverse path's persistent delay.
    #[test]
    fn the_reverse_allowance_takes_the_smallest_excess_of_each_period_and_of_recent_answers() {
        let mut m = monaco(false, 20);
        for _ in 0..REVERSE_SAMPLES - 1 {
            period(&mut m, &[100], 25);
        }
        assert_eq!(m.cwnd(), 20 * MSS, "too few answers to call the excess persistent");
        let mut m = monaco(false, 20);
        for _ in 0..REVERSE_SAMPLES {
            period(&mut m, &[100, 50, 75], 25);
        }
        assert_eq!(m.cwnd(), 2 * 20 * MSS, "each period's smallest sample: b = 50 − 25 ms");
        period(&mut m, &[125], 25);
        assert_eq!(m.cwnd(), 2 * 20 * MSS, "one longer period does not raise b");
        for _ in 0..REVERSE_SAMPLES {
            period(&mut m, &[75], 25);
        }
        assert_eq!(m.cwnd(), 3 * 20 * MSS, "a longer reverse delay on every recent answer does");
        period(&mut m, &[], 25);
        assert_eq!(m.cwnd(), 3 * 20 * MSS, "a period without an ACK sample adds nothing");
        for _ in 0..REVERSE_SAMPLES {
            period(&mut m, &[20], 25);
        }
        assert_eq!(m.cwnd(), 20 * MSS, "an ACK faster than the loop is no reverse delay: b ≥ 0");
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
