//! CUBIC (RFC 9438), with HyStart++ (RFC 9406) in slow start.
//!
//! After a congestion event the window is cut to β·cwnd and then follows
//!
//! ```text
//! W_cubic(t) = C·(t − K)³ + W_max,    K = ∛((W_max − cwnd_epoch)/C)      (§4.2, eq. 1–2)
//! ```
//!
//! in segments, t seconds into the congestion-avoidance epoch: concave up to W_max, where the
//! last loss happened, then convex beyond it. Each ACK moves cwnd towards
//! target = W_cubic(t + RTT), clamped to [cwnd, 1.5·cwnd] (§4.4–4.5), by
//! (target − cwnd)/cwnd per acknowledged segment. In the Reno-friendly region (§4.3), where a
//! Reno flow with CUBIC's β would have a larger window W_est (growing by
//! α = 3(1 − β)/(1 + β) segments per window, 1 once W_est passes W_max), cwnd is W_est.
//! Fast convergence (§4.7) lowers W_max to cwnd·(1 + β)/2 when a loss comes below the last
//! W_max, yielding to newer flows.
//!
//! Choices: ssthresh = β·cwnd (§4.6 allows cwnd or FlightSize; Linux uses cwnd); the epoch
//! starts at the first ACK in congestion avoidance, as Linux's `bictcp_update`; on a timeout
//! (§4.8) W_max and ssthresh are set as for a congestion event, cwnd = 1 segment and slow
//! start begins again. HyStart++ replaces Linux's original HyStart (ACK trains and delay
//! increase) because it is the standardised one: it leaves slow start for Conservative Slow
//! Start when a round's minimum RTT rises by max(4 ms, min(16 ms, last round's minimum/8)),
//! returns to slow start if the RTT falls back, and enters congestion avoidance after five
//! rounds of CSS.
//!
//! Presets: [`CubicParams::RFC9438`] (C = 0.4, β = 0.7) and [`CubicParams::LINUX_2_6`], the
//! 2.6-era Linux code's β = 819/1024 (which the ACC-era and Monarch-era papers measured).

use super::window::{cwnd_limited, slow_start_increase, Rounds};
use super::{AckEvent, CcParams, CongestionControl, SentEvent};
use pathtwin_core::time::{Duration, Instant};

/// CUBIC's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicParams {
    /// C, in segments per second³.
    pub c: f64,
    /// Multiplicative decrease factor: the window after a loss is β·cwnd.
    pub beta: f64,
    /// Fast convergence (§4.7).
    pub fast_convergence: bool,
    /// The Reno-friendly region (§4.3).
    pub reno_friendly: bool,
    /// HyStart++ (RFC 9406) in slow start.
    pub hystart: bool,
}

impl CubicParams {
    pub const RFC9438: CubicParams = CubicParams { c: 0.4, beta: 0.7, fast_convergence: true, reno_friendly: true, hystart: true };
    /// Linux 2.6.x `tcp_cubic.c`: β = 819/1024.
    pub const LINUX_2_6: CubicParams = CubicParams { beta: 819.0 / 1024.0, ..CubicParams::RFC9438 };
}

impl Default for CubicParams {
    fn default() -> Self {
        CubicParams::RFC9438
    }
}

// HyStart++ constants, RFC 9406 §4.3.
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u64 = 8;
const N_RTT_SAMPLE: u32 = 8;
const CSS_GROWTH_DIVISOR: u64 = 4;
const CSS_ROUNDS: u32 = 5;

/// HyStart++'s per-round RTT tracking (RFC 9406 §4.2).
#[derive(Clone, Debug, Default)]
struct HyStart {
    last_round_min: Option<Duration>,
    round_min: Option<Duration>,
    samples: u32,
    /// In Conservative Slow Start: the RTT that triggered it, and rounds spent so far.
    css: Option<(Duration, u32)>,
}

impl HyStart {
    fn new_round(&mut self) {
        self.last_round_min = self.round_min.take().or(self.last_round_min);
        self.samples = 0;
        if let Some((_, rounds)) = &mut self.css {
            *rounds += 1;
        }
    }

    fn sample(&mut self, rtt: Duration) {
        self.round_min = Some(self.round_min.map_or(rtt, |m| m.min(rtt)));
        self.samples += 1;
        if self.samples < N_RTT_SAMPLE {
            return;
        }
        let (Some(cur), Some(last)) = (self.round_min, self.last_round_min) else { return };
        match self.css {
            None => {
                let thresh = Duration::from_nanos(last.as_nanos() / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                if cur >= last + thresh {
                    self.css = Some((cur, 0));
                }
            }
            // The RTT fell below what triggered CSS: the increase was spurious (§4.2).
            Some((baseline, _)) if cur < baseline => self.css = None,
            Some(_) => {}
        }
    }
}

#[derive(Clone, Debug)]
pub struct Cubic {
    p: CubicParams,
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// W_max in segments (0 before the first congestion event).
    w_max: f64,
    /// Start of the congestion-avoidance epoch, and its K in seconds.
    epoch: Option<(Instant, f64)>,
    /// Reno-friendly estimate W_est, in segments.
    w_est: f64,
    /// Fractional bytes of growth not yet added to cwnd.
    carry: f64,
    rounds: Rounds,
    hystart: HyStart,
}

impl Cubic {
    pub fn new(p: &CcParams, params: CubicParams) -> Self {
        Cubic {
            p: params,
            smss: p.smss as u64,
            cwnd: p.initial_cwnd.max(1),
            ssthresh: u64::MAX,
            w_max: 0.0,
            epoch: None,
            w_est: 0.0,
            carry: 0.0,
            rounds: Rounds::default(),
            hystart: HyStart::default(),
        }
    }

    /// W_max, in segments.
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// K of the current epoch, in seconds.
    pub fn k(&self) -> Option<f64> {
        self.epoch.map(|(_, k)| k)
    }

    /// Whether HyStart++ has put slow start into its conservative phase.
    pub fn in_conservative_slow_start(&self) -> bool {
        self.hystart.css.is_some()
    }

    /// W_cubic(t) in segments (eq. 1).
    pub fn w_cubic(&self, t: f64, k: f64) -> f64 {
        self.p.c * (t - k).powi(3) + self.w_max
    }

    fn segments(&self) -> f64 {
        self.cwnd as f64 / self.smss as f64
    }

    fn congestion_event(&mut self) {
        let w = self.segments();
        self.w_max = if self.p.fast_convergence && w < self.w_max { w * (1.0 + self.p.beta) / 2.0 } else { w };
        self.ssthresh = ((self.cwnd as f64 * self.p.beta) as u64).max(2 * self.smss);
        self.epoch = None;
        self.carry = 0.0;
        self.hystart.css = None;
    }

    fn congestion_avoidance(&mut self, ev: &AckEvent) {
        let w = self.segments();
        let (start, k) = *self.epoch.get_or_insert_with(|| {
            if w >= self.w_max {
                // Above the last maximum (or no loss yet): the curve starts at its plateau.
                self.w_max = w;
            }
            self.w_est = w;
            (ev.now, ((self.w_max - w) / self.p.c).cbrt())
        });
        let t = ev.now.saturating_since(start).as_secs_f64();
        let rtt = ev.srtt.or(ev.rtt).map_or(0.0, |d| d.as_secs_f64());
        let acked_segments = ev.bytes_acked as f64 / self.smss as f64;
        if self.p.reno_friendly {
            let alpha = if self.w_est >= self.w_max { 1.0 } else { 3.0 * (1.0 - self.p.beta) / (1.0 + self.p.beta) };
            self.w_est += alpha * acked_segments / w;
            if self.w_cubic(t, k) < self.w_est {
                self.cwnd = self.cwnd.max((self.w_est * self.smss as f64) as u64);
                return;
            }
        }
        let target = self.w_cubic(t + rtt, k).clamp(w, 1.5 * w);
        self.carry += (target - w) / w * acked_segments * self.smss as f64;
        let whole = self.carry.floor();
        self.cwnd += whole as u64;
        self.carry -= whole;
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        let new_round = self.rounds.on_ack(ev.bytes_acked);
        if ev.in_recovery {
            return;
        }
        if self.cwnd < self.ssthresh {
            if self.p.hystart {
                if new_round {
                    self.hystart.new_round();
                    if matches!(self.hystart.css, Some((_, r)) if r >= CSS_ROUNDS) {
                        self.ssthresh = self.cwnd;
                        self.hystart.css = None;
                        return;
                    }
                }
                if let Some(rtt) = ev.rtt {
                    self.hystart.sample(rtt);
                }
            }
            if let Some(inc) = slow_start_increase(ev, self.cwnd, self.smss) {
                let divisor = if self.hystart.css.is_some() { CSS_GROWTH_DIVISOR } else { 1 };
                self.cwnd += (inc / divisor).max(1);
            }
            return;
        }
        if cwnd_limited(ev, self.cwnd, self.smss) {
            self.congestion_avoidance(ev);
        }
    }

    fn on_enter_recovery(&mut self, _now: Instant, _flight: u64) {
        self.congestion_event();
        self.cwnd = self.ssthresh;
    }

    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {
        self.cwnd = self.ssthresh;
    }

    fn on_rto(&mut self, _now: Instant, _flight: u64, first: bool) {
        if first {
            self.congestion_event();
        }
        self.epoch = None;
        self.cwnd = self.smss;
    }

    fn on_packet_sent(&mut self, ev: &SentEvent) {
        self.rounds.on_sent(ev);
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

    fn cubic(p: CubicParams) -> Cubic {
        Cubic::new(&CcParams { smss: MSS as u32, initial_cwnd: 10 * MSS, max_window: u64::MAX }, p)
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn ack(now: Instant, cwnd: u64, rtt_ms: u64) -> AckEvent {
        AckEvent {
            now,
            bytes_acked: MSS,
            rtt: Some(Duration::from_millis(rtt_ms)),
            srtt: Some(Duration::from_millis(rtt_ms)),
            flight_before: cwnd,
            pipe_before: cwnd,
            in_recovery: false,
        }
    }

    /// A CUBIC that lost at `w` segments and is now in congestion avoidance.
    fn after_loss(p: CubicParams, w: u64) -> Cubic {
        let mut c = cubic(p);
        c.cwnd = w * MSS;
        c.on_enter_recovery(at(0), w * MSS);
        c.on_exit_recovery(at(0), 0);
        c
    }

    /// Acknowledges full windows every `rtt_ms` until `until_ms`; returns cwnd (segments)
    /// sampled at each round trip.
    fn run(c: &mut Cubic, from_ms: u64, until_ms: u64, rtt_ms: u64) -> Vec<(u64, f64)> {
        let mut out = Vec::new();
        let mut t = from_ms;
        while t <= until_ms {
            let w = c.cwnd();
            let n = w / MSS;
            for i in 0..n {
                // The window is in full use: what was in flight before each ACK is cwnd.
                let in_flight = c.cwnd();
                c.on_ack(&ack(at(t + i * rtt_ms / n.max(1)), in_flight, rtt_ms));
            }
            out.push((t, c.cwnd() as f64 / MSS as f64));
            t += rtt_ms;
        }
        out
    }

    #[test]
    fn loss_cuts_to_beta_and_k_follows_eq_2() {
        let mut c = after_loss(CubicParams { reno_friendly: false, ..CubicParams::RFC9438 }, 100);
        assert_eq!(c.cwnd(), 70 * MSS, "β = 0.7");
        assert_eq!(c.w_max(), 100.0);
        c.on_ack(&ack(at(0), 70 * MSS, 100));
        // K = ∛(100·0.3/0.4) = ∛75 ≈ 4.2172 s.
        assert!((c.k().unwrap() - 4.2172).abs() < 1e-3, "{:?}", c.k());
        let k = c.k().unwrap();
        assert!((c.w_cubic(k, k) - 100.0).abs() < 1e-12, "W(K) = W_max");
    }

    #[test]
    fn window_follows_the_cubic_curve_concave_then_convex() {
        // A long RTT keeps the Reno-friendly region out of the way; the window is read
        // against W_cubic(t + RTT) directly.
        let p = CubicParams { reno_friendly: false, ..CubicParams::RFC9438 };
        let mut c = after_loss(p, 100);
        let k = 75f64.cbrt();
        let samples = run(&mut c, 0, 8000, 100);
        for &(t_ms, w) in &samples[5..] {
            let t = t_ms as f64 / 1e3;
            let expect = (0.4 * (t + 0.1 - k).powi(3) + 100.0).max(70.0);
            assert!((w - expect).abs() / expect < 0.03, "t = {t}: cwnd {w} vs W(t+RTT) {expect}");
        }
        let at_k = samples.iter().find(|(t, _)| *t as f64 / 1e3 >= k).unwrap().1;
        assert!((at_k - 100.0).abs() < 3.0, "cwnd at K ≈ W_max, got {at_k}");
        let half = samples.iter().find(|(t, _)| *t as f64 / 1e3 >= k / 2.0).unwrap().1;
        assert!(half > 85.0 && half < 100.0, "concave: most of the way back at K/2, got {half}");
    }

    #[test]
    fn fast_convergence_lowers_w_max_below_the_last_one() {
        let mut c = after_loss(CubicParams::RFC9438, 100);
        c.cwnd = 80 * MSS;
        c.on_enter_recovery(at(0), 80 * MSS);
        assert!((c.w_max() - 80.0 * 1.7 / 2.0).abs() < 1e-9, "{}", c.w_max());
        let mut c = after_loss(CubicParams { fast_convergence: false, ..CubicParams::RFC9438 }, 100);
        c.cwnd = 80 * MSS;
        c.on_enter_recovery(at(0), 80 * MSS);
        assert_eq!(c.w_max(), 80.0);
    }

    #[test]
    fn reno_friendly_region_takes_over_on_short_rtts() {
        // At 1 ms RTT the cubic curve barely moves in a second, while a Reno flow with
        // β = 0.7 grows α = 3·0.3/1.7 ≈ 0.53 segments per round trip: 1000 round trips
        // later W_est ≈ 70 + 529 > W_max. CUBIC must be at least that large.
        let mut c = after_loss(CubicParams::RFC9438, 100);
        let samples = run(&mut c, 0, 1000, 1);
        let w = samples.last().unwrap().1;
        let cubic_only = 0.4 * (1.0f64 - 75f64.cbrt()).powi(3) + 100.0;
        assert!(w > 150.0 && w > 1.4 * cubic_only, "cwnd {w}, W_cubic {cubic_only}");
    }

    #[test]
    fn linux_2_6_preset_keeps_more_after_a_loss() {
        let c = after_loss(CubicParams::LINUX_2_6, 1000);
        assert_eq!(c.cwnd() / MSS, 799);
    }

    #[test]
    fn hystart_leaves_slow_start_when_the_round_minimum_rtt_rises() {
        let mut c = cubic(CubicParams::RFC9438);
        // Rounds at 100 ms, then the RTT jumps by 20 ms (> max(4, min(16, 100/8)) = 12.5 ms).
        let mut t = 0;
        let mut rtt = 100;
        for round in 0..12 {
            if round == 4 {
                rtt = 120;
            }
            let w = c.cwnd();
            c.on_packet_sent(&SentEvent { now: at(t), seq: 0, bytes: w, pipe: w, retransmission: false });
            for _ in 0..w / MSS {
                c.on_ack(&ack(at(t), w, rtt));
            }
            t += rtt;
            if round == 4 {
                assert!(c.in_conservative_slow_start(), "CSS after the RTT rise");
            }
        }
        assert!(c.ssthresh() < u64::MAX, "five CSS rounds end slow start");
        // Without HyStart the same rounds keep doubling.
        let mut plain = cubic(CubicParams { hystart: false, ..CubicParams::RFC9438 });
        for _ in 0..12 {
            let w = plain.cwnd();
            plain.on_packet_sent(&SentEvent { now: at(0), seq: 0, bytes: w, pipe: w, retransmission: false });
            for _ in 0..w / MSS {
                plain.on_ack(&ack(at(0), w, 100));
            }
        }
        assert_eq!(plain.ssthresh(), u64::MAX);
        assert!(plain.cwnd() > c.cwnd());
    }
}
