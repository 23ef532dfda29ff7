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
//! The sender paces at cwnd/SRTT with a burst of one packet (the endpoint's leaky bucket,
//! one segment deep).
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
        }
    }

    /// Still in the initial slow start.
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    fn floor(&self) -> f64 {
        2.0 * self.smss
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
        self.cwnd as u64
    }

    fn ssthresh(&self) -> u64 {
        if self.slow_start {
            u64::MAX
        } else {
            self.cwnd as u64
        }
    }

    fn pacing_rate(&self) -> Option<u64> {
        let rtt = self.srtt?.as_secs_f64();
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
        let fb = AccumulationFeedback { accumulation: (accumulation_segments * MSS as f64) as u64, loss };
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

    #[test]
    fn paces_at_cwnd_over_srtt() {
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
