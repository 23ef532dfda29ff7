//! BIC-TCP, binary increase congestion control (Xu, Harfoush & Rhee, "Binary Increase
//! Congestion Control (BIC) for Fast Long-Distance Networks", INFOCOM 2004), with the
//! constants and structure of Linux 2.6's `tcp_bic.c`.
//!
//! Windows are in segments. After a loss at window W, BIC remembers W_max = W and
//! multiplies the window by β (819/1024 ≈ 0.8). In congestion avoidance it then adds, per
//! round trip:
//!
//! - below W_max — binary search: (W_max − w)/B, the step towards the midpoint between the
//!   current window and W_max (B = 4, `BICTCP_B`), but at most `max_increment` (16) per RTT
//!   (additive increase far below W_max), and `B/smooth_part` (4/20 = 0.2) once the
//!   distance is at most one segment·B (the "smooth" approach to W_max);
//! - above W_max — max probing, the search's mirror image: 0.2 per RTT within B segments of
//!   W_max, (w − W_max)/(B − 1) per RTT up to W_max + max_increment·(B − 1), then
//!   `max_increment`;
//! - at or below `low_window` (14) segments: Reno's one segment per RTT, and a loss halves
//!   the window as Reno's does, so BIC is Reno-friendly where Reno does well.
//!
//! Until a loss has been seen (after a timeout, which resets BIC's state), the increase
//! above `low_window` is at least w/20 per RTT (Linux caps its ACKs-per-increment count at
//! 20 while `loss_cwnd` is 0: "increase cwnd 5% per RTT").
//!
//! Fast convergence: a loss below the previous W_max (the flow is losing ground to others)
//! sets W_max = W·(1 + β)/2 instead of W, releasing bandwidth sooner.
//!
//! Slow start is Reno's (RFC 5681 with appropriate byte counting). Loss reaction: on fast
//! retransmit ssthresh = max(β·cwnd, 2) (Linux `bictcp_recalc_ssthresh` scales `snd_cwnd`,
//! not FlightSize) and cwnd = ssthresh at the end of recovery; on a timeout cwnd = 1
//! segment and, as Linux resets BIC's state on entering the Loss state, W_max is forgotten
//! (the next congestion avoidance probes for the maximum from scratch). No growth during
//! recovery or when the sender was not limited by cwnd (RFC 7661 spirit, as Reno).
//!
//! Deviation: Linux counts ACKs per cwnd increment in integer arithmetic (and adjusts for
//! delayed ACKs with its `delayed_ack` ratio); here the per-RTT increment is spread over the
//! round's acknowledged bytes in floating point, which gives the same per-RTT increments.

use super::{AckEvent, CcParamError, CcParams, CongestionControl};
use pathtwin_core::config::BicSettings;
use pathtwin_core::time::Instant;

/// BIC's constants; the [`Default`] is Linux 2.6's `tcp_bic.c`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BicParams {
    /// Multiplicative decrease factor β: after a loss the window is β times what it was
    /// (dimensionless; Linux `beta` = 819/1024).
    pub beta: f64,
    /// At or below this window, in segments, BIC behaves as Reno (Linux `low_window` = 14).
    pub low_window: u32,
    /// Largest increase per RTT, in segments (Linux `max_increment` = 16; the paper's
    /// S_max).
    pub max_increment: u32,
    /// The increase near W_max is B/`smooth_part` segments per RTT (Linux `smooth_part` =
    /// 20).
    pub smooth_part: u32,
    /// Binary-search divisor B: each RTT moves 1/B of the way to W_max (Linux `BICTCP_B`
    /// = 4).
    pub b: u32,
    /// Lower W_max to W·(1 + β)/2 on a loss below the previous W_max (Linux
    /// `fast_convergence` = 1).
    pub fast_convergence: bool,
}

impl Default for BicParams {
    fn default() -> Self {
        BicParams { beta: 819.0 / 1024.0, low_window: 14, max_increment: 16, smooth_part: 20, b: 4, fast_convergence: true }
    }
}

impl BicParams {
    /// The parameters of a `[tcp.bic]` table: the [`Default`] with the keys it sets replaced.
    pub fn from_settings(v: Option<&BicSettings>) -> Result<Self, CcParamError> {
        let mut p = BicParams::default();
        let Some(v) = v else { return Ok(p) };
        p.beta = v.beta.unwrap_or(p.beta);
        p.low_window = v.low_window.unwrap_or(p.low_window);
        p.max_increment = v.max_increment.unwrap_or(p.max_increment);
        p.smooth_part = v.smooth_part.unwrap_or(p.smooth_part);
        p.b = v.b.unwrap_or(p.b);
        p.fast_convergence = v.fast_convergence.unwrap_or(p.fast_convergence);
        p.validate().map(|()| p)
    }

    /// Checks β (strictly between 0 and 1), B (≥ 2), the largest increase and the smoothing
    /// (≥ 1).
    pub fn validate(&self) -> Result<(), CcParamError> {
        CcParamError::check(self.beta > 0.0 && self.beta < 1.0, "tcp.bic.beta", self.beta, "must be between 0 and 1 (exclusive)")?;
        CcParamError::check(self.b >= 2, "tcp.bic.b", self.b, "must be at least 2")?;
        CcParamError::check(self.max_increment >= 1, "tcp.bic.max_increment", self.max_increment, "must be at least 1 segment")?;
        CcParamError::check(self.smooth_part >= 1, "tcp.bic.smooth_part", self.smooth_part, "must be at least 1")
    }
}

/// BIC-TCP.
#[derive(Clone, Debug)]
pub struct Bic {
    params: BicParams,
    smss: f64,
    /// Window in segments.
    cwnd: f64,
    /// Slow-start threshold in segments.
    ssthresh: f64,
    /// Window before the last reduction, in segments; 0 when unknown (Linux
    /// `last_max_cwnd`).
    w_max: f64,
    /// Whether a loss has been seen since the state was last reset (Linux `loss_cwnd` ≠ 0).
    seen_loss: bool,
}

impl Bic {
    pub fn new(p: &CcParams, params: BicParams) -> Self {
        let smss = p.smss as f64;
        Bic { params, smss, cwnd: p.initial_cwnd.max(1) as f64 / smss, ssthresh: f64::INFINITY, w_max: 0.0, seen_loss: false }
    }

    /// Segments added per round trip at window `w` (Linux `bictcp_update`).
    pub fn increment_per_rtt(&self, w: f64) -> f64 {
        let p = &self.params;
        let (b, max_inc) = (p.b as f64, p.max_increment as f64);
        let smooth = b / p.smooth_part as f64;
        if w <= p.low_window as f64 {
            return 1.0;
        }
        let search = if w < self.w_max {
            let dist = (self.w_max - w) / b;
            if dist > max_inc {
                max_inc
            } else if dist <= 1.0 {
                smooth
            } else {
                dist
            }
        } else if w < self.w_max + b {
            smooth
        } else if w < self.w_max + max_inc * (b - 1.0) {
            (w - self.w_max) / (b - 1.0)
        } else {
            max_inc
        };
        if self.seen_loss { search } else { search.max(w / 20.0) }
    }

    /// The last remembered maximum window, in segments (0 when none).
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// Multiplicative decrease (Linux `bictcp_recalc_ssthresh`).
    fn reduce(&mut self) {
        let w = self.cwnd;
        let p = &self.params;
        self.w_max = if p.fast_convergence && w < self.w_max { w * (1.0 + p.beta) / 2.0 } else { w };
        self.seen_loss = true;
        self.ssthresh = if w <= p.low_window as f64 { (w / 2.0).max(2.0) } else { (w * p.beta).max(2.0) };
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
        let cwnd_bytes = self.cwnd * self.smss;
        let pipe = ev.pipe_before as f64;
        let acked = ev.bytes_acked as f64 / self.smss;
        if self.cwnd < self.ssthresh {
            if 2.0 * pipe >= cwnd_bytes {
                self.cwnd += acked.min(1.0);
            }
            return;
        }
        if pipe + self.smss <= cwnd_bytes {
            return;
        }
        self.cwnd += acked * self.increment_per_rtt(self.cwnd) / self.cwnd;
    }

    fn on_enter_recovery(&mut self, _now: Instant, _flight: u64) {
        self.reduce();
        self.cwnd = self.ssthresh;
    }

    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {
        self.cwnd = self.ssthresh;
    }

    fn on_rto(&mut self, _now: Instant, _flight: u64, first: bool) {
        if first {
            self.reduce();
        }
        // Linux's bictcp_reset on entering the Loss state.
        self.w_max = 0.0;
        self.seen_loss = false;
        self.cwnd = 1.0;
    }

    fn on_cwnd_restart(&mut self, _now: Instant, cwnd: u64, ssthresh: u64) {
        self.cwnd = (cwnd as f64 / self.smss).max(1.0 / self.smss);
        self.ssthresh = if ssthresh == u64::MAX { f64::INFINITY } else { ssthresh as f64 / self.smss };
    }

    fn cwnd(&self) -> u64 {
        (self.cwnd * self.smss) as u64
    }

    fn ssthresh(&self) -> u64 {
        if self.ssthresh.is_finite() { (self.ssthresh * self.smss) as u64 } else { u64::MAX }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_overrides_linux_constants_and_is_checked() {
        let s = BicSettings { low_window: Some(4), fast_convergence: Some(false), ..Default::default() };
        assert_eq!(BicParams::from_settings(Some(&s)), Ok(BicParams { low_window: 4, fast_convergence: false, ..BicParams::default() }));
        let bad = BicSettings { b: Some(1), ..Default::default() };
        assert_eq!(BicParams::from_settings(Some(&bad)).unwrap_err().key, "tcp.bic.b");
    }

    const MSS: u64 = 1000;

    fn bic(cwnd_segments: u64) -> Bic {
        Bic::new(&CcParams { smss: MSS as u32, initial_cwnd: cwnd_segments * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 }, BicParams::default())
    }

    /// One round trip of ACKs, one per segment, with the sender cwnd-limited.
    fn round(b: &mut Bic) {
        let n = b.cwnd().div_ceil(MSS);
        for _ in 0..n {
            let pipe = b.cwnd();
            b.on_ack(&AckEvent { now: Instant::ZERO, bytes_acked: MSS, rtt: None, srtt: None, flight_before: pipe, pipe_before: pipe, in_recovery: false });
        }
    }

    fn loss_at(w: u64) -> Bic {
        let mut b = bic(w);
        b.on_enter_recovery(Instant::ZERO, w * MSS);
        b.on_exit_recovery(Instant::ZERO, w * MSS);
        b
    }

    #[test]
    fn loss_multiplies_by_beta_and_remembers_w_max() {
        let b = loss_at(1000);
        assert_eq!(b.w_max(), 1000.0);
        assert_eq!(b.cwnd(), (1000.0 * 819.0 / 1024.0 * MSS as f64) as u64);
        // Below low_window a loss halves, as Reno.
        let b = loss_at(12);
        assert_eq!(b.cwnd(), 6 * MSS);
    }

    #[test]
    fn binary_search_increment_is_min_of_max_increment_and_distance_over_b() {
        let mut b = loss_at(1000);
        b.w_max = 1000.0;
        // Far below W_max: (1000 − 800)/4 = 50 > 16 → 16.
        assert_eq!(b.increment_per_rtt(800.0), 16.0);
        // Close: (1000 − 960)/4 = 10.
        assert_eq!(b.increment_per_rtt(960.0), 10.0);
        // Within B segments: the smooth part, B/20 = 0.2.
        assert_eq!(b.increment_per_rtt(998.0), 0.2);
        // Reno below low_window.
        assert_eq!(b.increment_per_rtt(10.0), 1.0);
    }

    #[test]
    fn max_probing_above_w_max_is_the_mirror_image() {
        let mut b = loss_at(1000);
        b.w_max = 1000.0;
        assert_eq!(b.increment_per_rtt(1002.0), 0.2);
        // (w − W_max)/(B − 1) up to W_max + 16·3 = 1048.
        assert_eq!(b.increment_per_rtt(1030.0), 10.0);
        assert_eq!(b.increment_per_rtt(1100.0), 16.0);
    }

    #[test]
    fn window_after_loss_approaches_w_max_by_binary_search() {
        let mut b = loss_at(1000);
        // Round by round the window gains min(16, (W_max − w)/4) segments, 0.2 once that
        // distance term is at most 1 (per-ACK spreading moves each round's gain slightly).
        let mut w = b.cwnd;
        let mut expected = w;
        for _ in 0..30 {
            let dist = (1000.0 - expected) / 4.0;
            let inc = if dist > 16.0 { 16.0 } else if dist <= 1.0 { 0.2 } else { dist };
            expected += inc;
            round(&mut b);
            let got = b.cwnd;
            assert!((got - expected).abs() / expected < 0.01, "got {got}, expected {expected}");
            assert!(got > w, "grows every round");
            w = got;
        }
        assert!(b.cwnd > 990.0 && b.cwnd < 1005.0, "{}", b.cwnd);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut b = loss_at(1000);
        // A second loss at 900 < W_max = 1000: W_max = 900·(1 + β)/2.
        b.cwnd = 900.0;
        b.on_enter_recovery(Instant::ZERO, 900 * MSS);
        let beta = 819.0 / 1024.0;
        assert!((b.w_max() - 900.0 * (1.0 + beta) / 2.0).abs() < 1e-9);
        let mut no_fc = Bic::new(&CcParams { smss: MSS as u32, initial_cwnd: 1000 * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 }, BicParams { fast_convergence: false, ..Default::default() });
        no_fc.on_enter_recovery(Instant::ZERO, 1000 * MSS);
        no_fc.cwnd = 900.0;
        no_fc.on_enter_recovery(Instant::ZERO, 900 * MSS);
        assert_eq!(no_fc.w_max(), 900.0);
    }

    #[test]
    fn after_a_timeout_w_max_is_forgotten_and_growth_is_at_least_five_percent_per_rtt() {
        let mut b = loss_at(1000);
        // Linux scales snd_cwnd, not FlightSize: ssthresh = β·cwnd.
        let w = b.cwnd;
        b.on_rto(Instant::ZERO, 10 * MSS, true);
        assert_eq!((b.cwnd(), b.w_max()), (MSS, 0.0));
        assert_eq!(b.ssthresh(), (w * 819.0 / 1024.0 * MSS as f64) as u64);
        // Max probing from W_max = 0: 16 per RTT above 0 + 16·3, but 5 % of 640 is 32.
        assert_eq!(b.increment_per_rtt(640.0), 32.0);
        assert_eq!(b.increment_per_rtt(100.0), 16.0);
        // Reno below low_window regardless.
        assert_eq!(b.increment_per_rtt(10.0), 1.0);
    }

    #[test]
    fn no_growth_in_recovery_or_when_not_cwnd_limited() {
        let mut b = loss_at(1000);
        let w = b.cwnd();
        b.on_ack(&AckEvent { now: Instant::ZERO, bytes_acked: MSS, rtt: None, srtt: None, flight_before: w, pipe_before: w, in_recovery: true });
        b.on_ack(&AckEvent { now: Instant::ZERO, bytes_acked: MSS, rtt: None, srtt: None, flight_before: w / 2, pipe_before: w / 2, in_recovery: false });
        assert_eq!(b.cwnd(), w);
    }
}
