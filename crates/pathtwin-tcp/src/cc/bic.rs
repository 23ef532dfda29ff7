//! BIC, binary increase congestion control (Xu, Harfoush, Rhee, "Binary Increase Congestion
//! Control for Fast, Long Distance Networks", INFOCOM 2004), with the constants and the
//! structure of Linux 2.6's `tcp_bic.c`.
//!
//! After a loss the window jumps down to β·cwnd and then searches for the window W_max at
//! which the loss happened: each round trip it grows by half the remaining distance
//! (`(W_max − cwnd)/B`, B = 4 in Linux), but never by more than `max_increment` segments
//! (additive increase far from W_max) and never by less than `B/smooth_part` of a segment
//! close to it. Past W_max it probes for a new maximum, slowly at first and then faster
//! (max probing), up to `max_increment` per round trip again. Below `low_window` it behaves
//! as Reno. Growth is expressed as Linux does: one segment per `cnt` segments acknowledged.
//!
//! Deviations from `tcp_bic.c`: acknowledged segments are counted in bytes (RFC 3465 style),
//! which makes Linux's delayed-ACK ratio estimate unnecessary, and the 1/32 s hold between
//! recomputations of `cnt` is dropped (a simulator has no jiffies to save).

use super::window::{cwnd_limited, slow_start_increase};
use super::{AckEvent, CcParams, CongestionControl};
use pathtwin_core::time::Instant;

/// `BICTCP_B` of `tcp_bic.c`: the binary search halves the distance to W_max in this many
/// steps' worth of growth.
const BICTCP_B: u64 = 4;

/// BIC's parameters; `Default` gives Linux 2.6's module parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BicParams {
    /// Multiplicative decrease factor (Linux: 819/1024).
    pub beta: f64,
    /// At or below this window (segments) BIC behaves as Reno (Linux: 14).
    pub low_window: u32,
    /// Largest increase per round trip, in segments (Linux: 16).
    pub max_increment: u32,
    /// Round trips over which the window creeps the last segments to W_max (Linux: 20).
    pub smooth_part: u32,
    /// Release bandwidth faster to new flows: a loss below the last W_max lowers W_max
    /// further (Linux: on).
    pub fast_convergence: bool,
}

impl Default for BicParams {
    fn default() -> Self {
        BicParams { beta: 819.0 / 1024.0, low_window: 14, max_increment: 16, smooth_part: 20, fast_convergence: true }
    }
}

#[derive(Clone, Debug)]
pub struct Bic {
    p: BicParams,
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// W_max in segments: the window at the last loss (0 before the first).
    last_max: u64,
    /// Bytes acknowledged towards the next one-segment increase.
    acked: u64,
}

impl Bic {
    pub fn new(p: &CcParams, params: BicParams) -> Self {
        Bic { p: params, smss: p.smss as u64, cwnd: p.initial_cwnd.max(1), ssthresh: u64::MAX, last_max: 0, acked: 0 }
    }

    /// W_max in segments.
    pub fn w_max(&self) -> u64 {
        self.last_max
    }

    /// Segments to acknowledge per one-segment increase at window `cwnd` segments
    /// (`bictcp_update` of Linux 2.6): the window grows by cwnd/cnt segments per round trip.
    pub fn cnt(&self, cwnd: u64) -> u64 {
        let (max_inc, smooth) = (self.p.max_increment as u64, self.p.smooth_part as u64);
        let cnt = if cwnd <= self.p.low_window as u64 {
            cwnd
        } else if cwnd < self.last_max {
            let dist = (self.last_max - cwnd) / BICTCP_B;
            if dist > max_inc {
                cwnd / max_inc // additive increase, max_increment per round trip
            } else if dist <= 1 {
                cwnd * smooth / BICTCP_B // creep: B/smooth_part segments per round trip
            } else {
                cwnd / dist // binary search: half the distance, in B steps
            }
        } else if cwnd < self.last_max + BICTCP_B {
            cwnd * smooth / BICTCP_B // just above W_max: creep
        } else if cwnd < self.last_max + max_inc * (BICTCP_B - 1) {
            cwnd * (BICTCP_B - 1) / (cwnd - self.last_max) // max probing, accelerating
        } else {
            cwnd / max_inc
        };
        // Before any loss, stay at least as fast as 1/20 of a window per round trip.
        let cnt = if self.last_max == 0 { cnt.min(20) } else { cnt };
        cnt.max(1)
    }
}

impl CongestionControl for Bic {
    fn name(&self) -> &'static str {
        "bic"
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        if ev.in_recovery {
            return;
        }
        if self.cwnd < self.ssthresh {
            if let Some(inc) = slow_start_increase(ev, self.cwnd, self.smss) {
                self.cwnd += inc;
            }
            return;
        }
        if !cwnd_limited(ev, self.cwnd, self.smss) {
            return;
        }
        self.acked += ev.bytes_acked;
        let step = self.cnt(self.cwnd / self.smss) * self.smss;
        if self.acked >= step {
            self.acked -= step;
            self.cwnd += self.smss;
        }
    }

    /// `bictcp_recalc_ssthresh`: remember W_max (lowered under fast convergence), then
    /// β·cwnd, or half of it at small windows.
    fn on_enter_recovery(&mut self, _now: Instant, _flight: u64) {
        let cwnd = self.cwnd / self.smss;
        self.last_max = if cwnd < self.last_max && self.p.fast_convergence {
            (cwnd as f64 * (1.0 + self.p.beta) / 2.0) as u64
        } else {
            cwnd
        };
        let ss = if cwnd <= self.p.low_window as u64 { cwnd / 2 } else { (cwnd as f64 * self.p.beta) as u64 };
        self.ssthresh = ss.max(2) * self.smss;
        self.cwnd = self.ssthresh;
        self.acked = 0;
    }

    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {
        self.cwnd = self.ssthresh;
        self.acked = 0;
    }

    fn on_rto(&mut self, now: Instant, flight: u64, first: bool) {
        if first {
            self.on_enter_recovery(now, flight);
        }
        self.cwnd = self.smss;
        self.acked = 0;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn bic() -> Bic {
        Bic::new(&CcParams { smss: MSS as u32, initial_cwnd: 10 * MSS, max_window: u64::MAX }, BicParams::default())
    }

    /// Window increase over one round trip of a fully used window, in segments.
    fn growth_per_rtt(b: &Bic, cwnd: u64) -> f64 {
        cwnd as f64 / b.cnt(cwnd) as f64
    }

    #[test]
    fn loss_keeps_beta_of_the_window_and_remembers_w_max() {
        let mut b = bic();
        b.cwnd = 1000 * MSS;
        b.ssthresh = 0;
        b.on_enter_recovery(Instant::ZERO, 1000 * MSS);
        assert_eq!(b.w_max(), 1000);
        assert_eq!(b.ssthresh(), 799 * MSS, "819/1024 of 1000 segments");
        // Fast convergence: a loss below W_max sets W_max = cwnd·(1 + β)/2.
        b.on_enter_recovery(Instant::ZERO, 799 * MSS);
        assert_eq!(b.w_max(), (799.0 * (1.0 + 819.0 / 1024.0) / 2.0) as u64);
    }

    #[test]
    fn growth_is_binary_search_capped_by_max_increment() {
        let mut b = bic();
        b.last_max = 1000;
        // Far below W_max: (1000 − 500)/4 = 125 > 16 → max_increment per round trip.
        assert!((growth_per_rtt(&b, 500) - 16.0).abs() < 0.3, "integer cnt = cwnd/16");
        // Distance 40: (1000 − 960)/4 = 10 segments per round trip.
        assert!((growth_per_rtt(&b, 960) - 10.0).abs() < 0.1);
        // Within B of W_max: B/smooth_part = 0.2 segments per round trip.
        assert!((growth_per_rtt(&b, 998) - 0.2).abs() < 0.01);
        // Just above W_max: creep, then accelerating max probing, then max_increment.
        assert!((growth_per_rtt(&b, 1002) - 0.2).abs() < 0.01);
        let probe = growth_per_rtt(&b, 1010);
        assert!((probe - 10.0 / 3.0).abs() < 0.05, "(cwnd − W_max)/(B − 1) = 10/3, got {probe}");
        assert!((growth_per_rtt(&b, 1100) - 16.0).abs() < 0.3);
        // At small windows BIC is Reno: one segment per round trip.
        assert!((growth_per_rtt(&b, 10) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn ack_counting_applies_cnt() {
        let mut b = bic();
        b.last_max = 1000;
        b.cwnd = 500 * MSS;
        b.ssthresh = 0;
        for _ in 0..500 {
            let w = b.cwnd();
            b.on_ack(&AckEvent {
                now: Instant::ZERO,
                bytes_acked: MSS,
                rtt: None,
                srtt: None,
                flight_before: w,
                pipe_before: w,
                in_recovery: false,
            });
        }
        // One window of ACKs at 500 segments, 125 segments from W_max's quarter → +16.
        assert!((516..=517).contains(&(b.cwnd() / MSS)), "{}", b.cwnd() / MSS);
    }
}
