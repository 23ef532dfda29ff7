//! CUBIC congestion control, RFC 9438, with HyStart++ (RFC 9406) in the initial slow
//! start.
//!
//! Windows are in segments, time in seconds. After a congestion event at window W:
//!
//! - W_max = W, or W·(1 + β)/2 with fast convergence when W is below the previous W_max
//!   (§4.7); cwnd_prior = W; ssthresh = max(FlightSize·β, 2) (§4.6, which scales
//!   flight_size); cwnd = ssthresh once recovery ends.
//! - Congestion avoidance starts an epoch at its first ACK, at time t_epoch with window
//!   cwnd_epoch: K = ∛((W_max − cwnd_epoch)/C) (§4.2, eq. 2; K = ∛(W_max(1 − β)/C) after a
//!   plain reduction) and W_cubic(t) = C(t − K)³ + W_max (eq. 1), t = now − t_epoch.
//!   Below W_max (t < K) the curve is concave, above it convex (§4.4, §4.5); both follow
//!   from the same rule here.
//! - Per ACK of N bytes (N/SMSS segments): target = clamp(W_cubic(t + RTT), cwnd, 1.5·cwnd)
//!   with RTT the smoothed RTT (§4.2), cwnd += (target − cwnd)/cwnd per segment acked
//!   (W_cubic(t) without `rtt_lookahead`, as ns-2.35's port).
//! - Reno-friendly region (§4.3): W_est starts at cwnd_epoch and grows by
//!   α_cubic·(segments acked)/cwnd, α_cubic = 3(1 − β)/(1 + β), becoming 1 once W_est ≥
//!   cwnd_prior; when W_cubic(t) < W_est, cwnd = W_est. Deviation: cwnd = max(cwnd, W_est)
//!   — the two agree except on the ACK where the regions swap, where RFC's rule could shrink
//!   the window without a congestion signal.
//! - Timeout (§4.8): ssthresh and W_max as for a congestion event (on the first timeout of a
//!   segment only, as RFC 5681), cwnd = 1 segment; the first congestion avoidance after it
//!   uses K = 0 and W_max = the window at its start.
//! - Slow start is Reno's (RFC 5681, one SMSS per ACK at most); with HyStart++ it is
//!   divided by 4 in Conservative Slow Start and ends with ssthresh = cwnd (see
//!   `hystart.rs`). Without a previous congestion event, the first epoch uses W_max =
//!   cwnd_epoch (K = 0), the same rule as after a timeout.
//!
//! As Reno: no growth during recovery, nor when the sender was not limited by cwnd
//! (RFC 9438 §5.8's application-limited rule in the RFC 7661 form Reno uses here). The
//! epoch's clock keeps running while the sender is not cwnd-limited (Linux's form shifts it
//! after idle periods, below; a bulk sender has none).
//!
//! **Linux's form** ([`CubicParams::LINUX`], `linux = true`; `net/ipv4/tcp_cubic.c` of Linux
//! 6.x, `bictcp_update`, `cubictcp_recalc_ssthresh`, `cubictcp_acked`, `cubictcp_state`),
//! where it differs from the above:
//!
//! - β = 717/1024 (`beta`); ssthresh = max(cwnd·β, 2) of cwnd, not of FlightSize.
//! - Slow start ends by Linux's HyStart (ACK train and delay, `hystart.rs`), not HyStart++,
//!   and runs in every slow start: a timeout resets CUBIC (`bictcp_reset` on entering the
//!   Loss state), forgetting W_max and delay_min, so HyStart runs again after it.
//! - The curve is aimed at t + delay_min (the smallest RTT sample, which `cubictcp_acked`
//!   does not update during an epoch's first second), not t + SRTT.
//! - Per ACK, cwnd grows by acked/cnt with cnt = cwnd/(target − cwnd) (100·cwnd at or above
//!   the target), at most 20 while no loss has set W_max (the window grows at least 5 % per
//!   round trip after HyStart's exit or a timeout, "initial growth ... too conservative"),
//!   never below 2 (at most 1.5× per round trip).
//! - Reno-friendliness: the estimated Reno window starts at cwnd and gains one segment per
//!   cwnd·`beta_scale`/8 segments acknowledged (`beta_scale` = 8·(1024 + 717)/3/(1024 − 717)
//!   = 15 in integers, so α ≈ 0.53); while it is above cwnd, cnt ≤ cwnd/(W_est − cwnd).
//!   Linux's integer arithmetic (cwnd in whole segments, cnt recomputed once per jiffy) is
//!   not modelled.
//! - After idle: a segment sent with nothing in flight moves the epoch's start on by the
//!   time since the previous data segment (`cubictcp_cwnd_event`, `CA_EVENT_TX_START`), so
//!   the curve resumes where it stopped rather than jumping ahead by the idle time.

use super::hystart::{HyStartLinux, HyStartPlusPlus, LinuxAck};
use super::round::RoundCounter;
use super::{AckEvent, CcParamError, CcParams, CongestionControl, SentEvent, SlowStart};
use pathtwin_core::config::{CubicPreset, CubicSettings, TcpProfile};
use pathtwin_core::time::{Duration, Instant};

/// Linux's `beta`, 717/1024 (`tcp_cubic.c`).
const LINUX_BETA: f64 = 717.0 / 1024.0;
/// Linux's cap on cnt while no loss has set W_max: at least 5 % growth per round trip.
const LINUX_INITIAL_CNT: f64 = 20.0;
/// Linux's floor on cnt: at most one segment per two acknowledged.
const LINUX_MIN_CNT: f64 = 2.0;
/// `cubictcp_acked` ignores RTT samples in an epoch's first second (`HZ`).
const LINUX_DELAY_MIN_HOLDOFF: Duration = Duration::from_secs(1);

/// CUBIC's constants and switches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicParams {
    /// C, in segments per second³: how fast the cubic function grows away from W_max
    /// (RFC 9438 §5: 0.4).
    pub c: f64,
    /// Multiplicative decrease factor β_cubic, dimensionless (RFC 9438: 0.7).
    pub beta: f64,
    /// Lower W_max to W·(1 + β)/2 when a loss comes below the previous W_max (RFC 9438
    /// §4.7).
    pub fast_convergence: bool,
    /// Grow at least as fast as Reno would (RFC 9438 §4.3).
    pub reno_friendly: bool,
    /// HyStart++ (RFC 9406) in the initial slow start.
    pub hystart: bool,
    /// Aim at W_cubic(t + RTT), where the window should be one round trip from now (RFC
    /// 9438 §4.2; Linux adds its minimum RTT). Off: aim at W_cubic(t), as ns-2.35's port of
    /// `tcp_cubic.c` does (its `bictcp_acked` never records the minimum RTT that
    /// `bictcp_update` adds, so the term is zero), which lags the curve by a round trip and
    /// holds long-RTT flows back.
    pub rtt_lookahead: bool,
    /// Linux 6.x's `tcp_cubic.c` where it differs from RFC 9438: its HyStart, its growth
    /// rules and its reset on a timeout (see the module doc).
    pub linux: bool,
}

impl CubicParams {
    /// RFC 9438's recommended values, with HyStart++ on.
    pub const RFC9438: CubicParams = CubicParams { c: 0.4, beta: 0.7, fast_convergence: true, reno_friendly: true, hystart: true, rtt_lookahead: true, linux: false };
    /// Linux 2.6's early `tcp_cubic.c`: β = 819/1024 (Linux changed it to 717/1024 in
    /// 2.6.25), C = 0.4, fast convergence and TCP friendliness on, and no HyStart (added
    /// in 2.6.29).
    pub const LINUX_2_6: CubicParams = CubicParams { c: 0.4, beta: 819.0 / 1024.0, fast_convergence: true, reno_friendly: true, hystart: false, rtt_lookahead: true, linux: false };
    /// ns-2.35's `Agent/TCP/Linux` with `select_ca cubic`: Linux 2.6's constants as
    /// [`Self::LINUX_2_6`], without the round trip of look-ahead (see `rtt_lookahead`).
    pub const NS2: CubicParams = CubicParams { rtt_lookahead: false, ..CubicParams::LINUX_2_6 };
    /// Linux 6.x's `tcp_cubic.c` with its module defaults: `bic_scale` = 41 (C = 41·10/1024
    /// ≈ 0.4), `beta` = 717, `fast_convergence` = 1, `tcp_friendliness` = 1, `hystart` = 1
    /// with both detectors (`hystart_detect` = 3).
    pub const LINUX: CubicParams = CubicParams { c: 0.4, beta: LINUX_BETA, fast_convergence: true, reno_friendly: true, hystart: true, rtt_lookahead: true, linux: true };

    /// The parameters of a `[tcp.cubic]` table: its preset's, with the keys it sets
    /// replaced. Without a preset (or a table) the profile's: [`CubicParams::LINUX`] under
    /// `profile = "linux"`, else [`CubicParams::RFC9438`].
    pub fn from_settings(v: Option<&CubicSettings>, profile: TcpProfile) -> Result<Self, CcParamError> {
        let default = match profile {
            TcpProfile::Linux => CubicParams::LINUX,
            TcpProfile::Ns2 => CubicParams::RFC9438,
        };
        let Some(v) = v else { return Ok(default) };
        let mut p = match v.preset {
            None => default,
            Some(CubicPreset::Rfc9438) => CubicParams::RFC9438,
            Some(CubicPreset::Linux26) => CubicParams::LINUX_2_6,
            Some(CubicPreset::Ns2) => CubicParams::NS2,
            Some(CubicPreset::Linux) => CubicParams::LINUX,
        };
        p.c = v.c.unwrap_or(p.c);
        p.beta = v.beta.unwrap_or(p.beta);
        p.fast_convergence = v.fast_convergence.unwrap_or(p.fast_convergence);
        p.reno_friendly = v.reno_friendly.unwrap_or(p.reno_friendly);
        p.hystart = v.hystart.unwrap_or(p.hystart);
        p.rtt_lookahead = v.rtt_lookahead.unwrap_or(p.rtt_lookahead);
        p.validate().map(|()| p)
    }

    /// Checks C (positive) and β (strictly between 0 and 1).
    pub fn validate(&self) -> Result<(), CcParamError> {
        CcParamError::check(self.c.is_finite() && self.c > 0.0, "tcp.cubic.c", self.c, "must be a positive number of segments per second cubed")?;
        CcParamError::check(self.beta > 0.0 && self.beta < 1.0, "tcp.cubic.beta", self.beta, "must be between 0 and 1 (exclusive)")
    }
}

impl Default for CubicParams {
    fn default() -> Self {
        CubicParams::RFC9438
    }
}

/// One congestion-avoidance epoch (RFC 9438's t_epoch, K, W_max, W_est, α_cubic).
#[derive(Clone, Copy, Debug)]
struct Epoch {
    start: Instant,
    /// Seconds from `start` until W_cubic reaches W_max.
    k: f64,
    w_max: f64,
    w_est: f64,
    alpha: f64,
    /// Linux: segments acknowledged towards the next step of W_est (`ack_cnt`).
    ack_cnt: f64,
}

/// CUBIC (RFC 9438).
#[derive(Clone, Debug)]
pub struct Cubic {
    params: CubicParams,
    smss: f64,
    /// Window in segments.
    cwnd: f64,
    /// Slow-start threshold in segments.
    ssthresh: f64,
    /// W_max set by the last congestion event, in segments.
    w_max: Option<f64>,
    /// cwnd before the last congestion event, in segments.
    cwnd_prior: f64,
    epoch: Option<Epoch>,
    /// The next epoch is the first after a timeout (RFC 9438 §4.8: K = 0).
    after_timeout: bool,
    /// HyStart++ while the initial slow start lasts.
    hystart: Option<HyStartPlusPlus>,
    /// Linux's HyStart (with `linux` and `hystart`), reset on a timeout.
    hystart_linux: Option<HyStartLinux>,
    /// Linux's delay_min: the smallest RTT sample since the last reset.
    delay_min: Option<Duration>,
    rounds: RoundCounter,
    slow_start: SlowStart,
    /// When the last data segment went out (Linux's `lsndtime`), for the epoch's shift
    /// after idle (`linux`).
    last_sent: Option<Instant>,
}

impl Cubic {
    pub fn new(p: &CcParams, params: CubicParams) -> Self {
        let smss = p.smss as f64;
        Cubic {
            params,
            smss,
            cwnd: p.initial_cwnd.max(1) as f64 / smss,
            ssthresh: f64::INFINITY,
            w_max: None,
            cwnd_prior: 0.0,
            epoch: None,
            after_timeout: false,
            hystart: (params.hystart && !params.linux).then(HyStartPlusPlus::new),
            hystart_linux: (params.hystart && params.linux).then(HyStartLinux::default),
            delay_min: None,
            rounds: RoundCounter::default(),
            slow_start: p.slow_start,
            last_sent: None,
        }
    }

    /// The current epoch's K in seconds, once congestion avoidance has begun.
    pub fn k(&self) -> Option<f64> {
        self.epoch.map(|e| e.k)
    }

    /// The W_max in use, in segments: the epoch's, else the last congestion event's.
    pub fn w_max(&self) -> Option<f64> {
        self.epoch.map(|e| e.w_max).or(self.w_max)
    }

    fn start_epoch(&mut self, now: Instant) -> Epoch {
        let p = &self.params;
        let cwnd_epoch = self.cwnd;
        let w_max = match self.w_max {
            Some(w) if !self.after_timeout && w > cwnd_epoch => w,
            _ => cwnd_epoch,
        };
        self.after_timeout = false;
        self.w_max = Some(w_max);
        let alpha = if cwnd_epoch >= self.cwnd_prior { 1.0 } else { 3.0 * (1.0 - p.beta) / (1.0 + p.beta) };
        Epoch { start: now, k: ((w_max - cwnd_epoch) / p.c).cbrt(), w_max, w_est: cwnd_epoch, alpha, ack_cnt: 0.0 }
    }

    fn congestion_event(&mut self, flight: u64) {
        let p = self.params;
        let w = self.cwnd;
        // Linux compares with the last loss's W_max (`last_max_cwnd`), not an epoch's origin.
        let previous = if p.linux { self.w_max } else { self.w_max() }.unwrap_or(0.0);
        self.w_max = Some(if p.fast_convergence && w < previous { w * (1.0 + p.beta) / 2.0 } else { w });
        self.cwnd_prior = w;
        // min(FlightSize, cwnd): with SACK, FlightSize after a long recovery spans several windows (SACKed data included), and β times that re-inflates ssthresh at each timeout; Linux (and ns-2's port) scale cwnd.
        let base = if p.linux { w } else { (flight as f64 / self.smss).min(w) };
        self.ssthresh = (base * p.beta).max(2.0);
        self.epoch = None;
        self.hystart = None;
    }

    fn congestion_avoidance(&mut self, ev: &AckEvent, acked: f64) {
        let epoch = match self.epoch {
            Some(e) => e,
            None => self.start_epoch(ev.now),
        };
        let mut e = epoch;
        let p = self.params;
        let t = (ev.now - e.start).as_secs_f64();
        let ahead = if p.rtt_lookahead { ev.srtt.or(ev.rtt).map_or(0.0, |d| d.as_secs_f64()) } else { 0.0 };
        let w_cubic = |t: f64| p.c * (t - e.k).powi(3) + e.w_max;
        if p.reno_friendly {
            e.w_est += e.alpha * acked / self.cwnd;
            if e.w_est >= self.cwnd_prior {
                e.alpha = 1.0;
            }
        }
        if p.reno_friendly && w_cubic(t) < e.w_est {
            self.cwnd = self.cwnd.max(e.w_est);
        } else {
            let target = w_cubic(t + ahead).clamp(self.cwnd, 1.5 * self.cwnd);
            self.cwnd += (target - self.cwnd) / self.cwnd * acked;
        }
        self.epoch = Some(e);
    }
}

impl Cubic {
    /// `bictcp_update` and `tcp_cong_avoid_ai` (Linux 6.x), in segments: one ACK of `acked`
    /// segments in congestion avoidance.
    fn congestion_avoidance_linux(&mut self, now: Instant, acked: f64) {
        let p = self.params;
        let cwnd = self.cwnd;
        let mut e = match self.epoch {
            Some(e) => e,
            None => {
                // A new epoch: K = 0 and the origin at cwnd unless a loss set W_max above it.
                let (k, origin) = match self.w_max {
                    Some(w) if w > cwnd => (((w - cwnd) / p.c).cbrt(), w),
                    _ => (0.0, cwnd),
                };
                Epoch { start: now, k, w_max: origin, w_est: cwnd, alpha: 0.0, ack_cnt: 0.0 }
            }
        };
        let t = (now - e.start).as_secs_f64() + self.delay_min.map_or(0.0, |d| d.as_secs_f64());
        let target = p.c * (t - e.k).powi(3) + e.w_max;
        let mut cnt = if target > cwnd { cwnd / (target - cwnd) } else { 100.0 * cwnd };
        if self.w_max.is_none() {
            cnt = cnt.min(LINUX_INITIAL_CNT);
        }
        if p.reno_friendly {
            // beta_scale = 8·(1024 + β)/3/(1024 − β), in integers as Linux computes it.
            let b = (p.beta * 1024.0).round();
            let beta_scale = (8.0 * (1024.0 + b) / 3.0).floor() / (1024.0 - b);
            let step = cwnd * beta_scale.floor() / 8.0;
            e.ack_cnt += acked;
            if step > 0.0 {
                while e.ack_cnt > step {
                    e.ack_cnt -= step;
                    e.w_est += 1.0;
                }
            }
            if e.w_est > cwnd {
                cnt = cnt.min(cwnd / (e.w_est - cwnd));
            }
        }
        cnt = cnt.max(LINUX_MIN_CNT);
        self.cwnd += acked / cnt;
        self.epoch = Some(e);
    }

    /// `cubictcp_acked`: the RTT sample for delay_min (held off in an epoch's first second)
    /// and, in slow start, HyStart. Returns true when HyStart ends slow start.
    fn on_ack_linux(&mut self, ev: &AckEvent) -> bool {
        let Some(rtt) = ev.rtt else { return false };
        if self.epoch.is_some_and(|e| ev.now.saturating_since(e.start) < LINUX_DELAY_MIN_HOLDOFF) {
            return false;
        }
        let rtt = rtt.max(Duration::from_nanos(1));
        let delay_min = self.delay_min.map_or(rtt, |d| d.min(rtt));
        self.delay_min = Some(delay_min);
        let in_slow_start = self.cwnd < self.ssthresh;
        match (&mut self.hystart_linux, self.rounds.snd_una()) {
            (Some(h), Some(snd_una)) if in_slow_start => h.on_ack(&LinuxAck {
                now: ev.now,
                rtt,
                snd_una,
                snd_nxt: self.rounds.snd_nxt(),
                cwnd: self.cwnd,
                smss: self.smss,
                srtt: ev.srtt,
                delay_min,
            }),
            _ => false,
        }
    }

    /// Slow start's growth from an ACK of `acked` segments (`tcp_slow_start` with
    /// [`SlowStart::Linux`]); returns what is left for congestion avoidance.
    fn slow_start(&mut self, acked: f64, divisor: f64) -> f64 {
        match self.slow_start {
            SlowStart::Rfc5681 => {
                self.cwnd += acked.min(1.0) / divisor;
                0.0
            }
            SlowStart::Linux => {
                let grown = (self.cwnd + acked / divisor).min(self.ssthresh.max(self.cwnd));
                let left = acked - (grown - self.cwnd) * divisor;
                self.cwnd = grown;
                left.max(0.0)
            }
        }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        let round_ended = self.rounds.on_ack(ev.bytes_acked);
        // Linux runs `pkts_acked` (delay_min, HyStart) on every ACK, before `cong_avoid`.
        let hystart_exit = self.params.linux && self.on_ack_linux(ev);
        if ev.in_recovery {
            return;
        }
        let cwnd_bytes = self.cwnd * self.smss;
        let pipe = ev.pipe_before as f64;
        let acked = ev.bytes_acked as f64 / self.smss;
        if self.params.linux {
            if hystart_exit {
                self.ssthresh = self.cwnd;
            }
            let mut acked = acked;
            if self.cwnd < self.ssthresh {
                if 2.0 * pipe < cwnd_bytes {
                    return;
                }
                acked = self.slow_start(acked, 1.0);
                if acked <= 0.0 {
                    return;
                }
            } else if pipe + self.smss <= cwnd_bytes {
                return;
            }
            self.congestion_avoidance_linux(ev.now, acked);
            return;
        }
        if self.cwnd < self.ssthresh {
            let divisor = self.hystart.as_ref().map_or(1.0, |h| h.growth_divisor());
            if 2.0 * pipe >= cwnd_bytes {
                self.slow_start(acked, divisor);
            }
            if let Some(h) = self.hystart.as_mut() {
                if h.on_ack(ev.rtt, round_ended) {
                    self.ssthresh = self.cwnd;
                    self.hystart = None;
                }
            }
            return;
        }
        if pipe + self.smss <= cwnd_bytes {
            return;
        }
        self.congestion_avoidance(ev, acked);
    }

    fn on_packet_sent(&mut self, ev: &SentEvent) {
        self.rounds.on_sent(ev);
        if self.params.linux {
            // `cubictcp_cwnd_event(CA_EVENT_TX_START)` (`net/ipv4/tcp_cubic.c`), which
            // `tcp_event_data_sent` (`net/ipv4/tcp_output.c`) raises for a segment sent with
            // nothing in flight: "We were application limited (idle) for a while. Shift
            // epoch_start to keep cwnd growth to cubic curve": epoch_start += now −
            // lsndtime, at most now.
            if ev.pipe <= ev.bytes {
                if let (Some(e), Some(last)) = (self.epoch.as_mut(), self.last_sent) {
                    let idle = ev.now.saturating_since(last);
                    if idle > Duration::ZERO {
                        e.start = (e.start + idle).min(ev.now);
                    }
                }
            }
            self.last_sent = Some(ev.now);
        }
    }

    fn on_enter_recovery(&mut self, _now: Instant, flight: u64) {
        self.congestion_event(flight);
        self.cwnd = self.ssthresh;
    }

    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {
        self.cwnd = self.ssthresh;
    }

    fn on_rto(&mut self, _now: Instant, flight: u64, first: bool) {
        if first {
            self.congestion_event(flight);
        }
        self.epoch = None;
        self.hystart = None;
        self.after_timeout = true;
        self.cwnd = 1.0;
        if self.params.linux {
            // `cubictcp_state(TCP_CA_Loss)`: `bictcp_reset` and `bictcp_hystart_reset`.
            self.w_max = None;
            self.delay_min = None;
            self.hystart_linux = self.params.hystart.then(HyStartLinux::default);
        }
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
    use super::super::round::testing::FakeSender;
    use super::*;
    use pathtwin_core::time::Duration;

    #[test]
    fn a_table_starts_from_its_preset_and_is_checked() {
        assert_eq!(CubicParams::from_settings(None, TcpProfile::Ns2), Ok(CubicParams::RFC9438));
        let ns2 = CubicSettings { preset: Some(CubicPreset::Ns2), rtt_lookahead: Some(true), ..Default::default() };
        assert_eq!(CubicParams::from_settings(Some(&ns2), TcpProfile::Ns2), Ok(CubicParams::LINUX_2_6));
        let bad = CubicSettings { preset: Some(CubicPreset::Linux26), beta: Some(1.5), ..Default::default() };
        assert_eq!(CubicParams::from_settings(Some(&bad), TcpProfile::Ns2).unwrap_err().to_string(), "tcp.cubic.beta = 1.5: must be between 0 and 1 (exclusive)");
        // The profile chooses the preset a table does not name.
        assert_eq!(CubicParams::from_settings(None, TcpProfile::Linux), Ok(CubicParams::LINUX));
        let no_hystart = CubicSettings { hystart: Some(false), ..Default::default() };
        assert_eq!(CubicParams::from_settings(Some(&no_hystart), TcpProfile::Linux), Ok(CubicParams { hystart: false, ..CubicParams::LINUX }));
    }

    const MSS: u64 = 1000;

    fn cubic(params: CubicParams, cwnd_segments: u64) -> Cubic {
        Cubic::new(&CcParams { smss: MSS as u32, initial_cwnd: cwnd_segments * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 }, params)
    }

    /// A CUBIC flow that has just lost at a window of 100 segments, cwnd-limited (FlightSize
    /// = cwnd).
    fn after_loss_at_100(params: CubicParams) -> Cubic {
        let mut c = cubic(params, 100);
        c.on_enter_recovery(Instant::ZERO, 100 * MSS);
        c.on_exit_recovery(Instant::ZERO, 70 * MSS);
        c
    }

    fn segs(c: &Cubic) -> f64 {
        c.cwnd() as f64 / MSS as f64
    }

    #[test]
    fn multiplicative_decrease_is_beta() {
        let c = after_loss_at_100(CubicParams::RFC9438);
        assert_eq!(c.cwnd(), 70 * MSS);
        assert_eq!(c.ssthresh(), 70 * MSS);
        let c = after_loss_at_100(CubicParams::LINUX_2_6);
        assert_eq!(c.cwnd(), (100.0 * 819.0 / 1024.0 * MSS as f64) as u64);
    }

    #[test]
    fn k_and_w_of_t_follow_the_worked_example() {
        // W_max = 100, C = 0.4, β = 0.7: K = ∛(100·0.3/0.4) = ∛75 ≈ 4.2172 s.
        let params = CubicParams { reno_friendly: false, ..CubicParams::RFC9438 };
        let mut c = after_loss_at_100(params);
        let mut tx = FakeSender::new(MSS);
        let rtt = Duration::from_millis(100);
        tx.round(&mut c, rtt);
        assert!((c.k().unwrap() - 4.2172).abs() < 1e-4, "K = {:?}", c.k());
        assert_eq!(c.w_max(), Some(100.0));
        // cwnd tracks W(t + RTT) from below: sample it round by round against eq. 1.
        let w = |t: f64| 0.4 * (t - 75f64.cbrt()).powi(3) + 100.0;
        let mut at_half_k = None;
        while tx.now.as_secs_f64() < 75f64.cbrt() {
            tx.round(&mut c, rtt);
            let t = tx.now.as_secs_f64() - 0.1; // the epoch began one RTT in
            let got = segs(&c);
            assert!(got <= w(t + 0.1) + 0.5 && got >= w(t) - 1.0, "t = {t:.2}: cwnd {got:.2}, W(t) = {:.2}", w(t));
            if at_half_k.is_none() && t >= 75f64.cbrt() / 2.0 {
                at_half_k = Some(got);
            }
        }
        let half = at_half_k.unwrap();
        // Concave: at K/2 the window has made up most of the distance: W(K/2) = 100 −
        // 0.4·(K/2)³ = 100 − 0.4·75/8 = 96.25.
        assert!(half > 85.0 && half < 100.0, "cwnd at K/2 = {half}");
        assert!((segs(&c) - 100.0).abs() < 2.0, "cwnd at K = {}", segs(&c));
    }

    #[test]
    fn without_lookahead_the_window_trails_the_curve_by_a_round_trip() {
        // Per ACK cwnd moves (target − cwnd)/cwnd, so one round trip brings it to the
        // target: aiming at W(t + RTT) keeps it on the curve, aiming at W(t) (ns-2.35's
        // port) one round trip behind it, W(t − RTT).
        let rtt = Duration::from_millis(200);
        let run = |params: CubicParams| {
            let mut c = after_loss_at_100(CubicParams { reno_friendly: false, ..params });
            let mut tx = FakeSender::new(MSS);
            tx.round(&mut c, rtt); // starts the epoch
            let mut trace = Vec::new();
            for _ in 0..15 {
                tx.round(&mut c, rtt);
                trace.push((tx.now.as_secs_f64() - 0.2, segs(&c)));
            }
            trace
        };
        let w = |t: f64| 0.4 * (t - 75f64.cbrt()).powi(3) + 100.0;
        let ahead = run(CubicParams::RFC9438);
        let trailing = run(CubicParams { rtt_lookahead: false, ..CubicParams::RFC9438 });
        for (&(t, on), &(_, off)) in ahead.iter().zip(&trailing).skip(1) {
            assert!(on >= w(t) - 1.0 && on <= w(t + 0.2) + 0.5, "t = {t:.1}: with look-ahead {on:.2}, W(t) = {:.2}", w(t));
            assert!(off >= w(t - 0.2) - 1.0 && off <= w(t) + 0.5, "t = {t:.1}: without {off:.2}, W(t − RTT) = {:.2}", w(t - 0.2));
            let lag = w(t) - w(t - 0.2);
            assert!(on - off >= 0.5 * lag, "t = {t:.1}: {on:.2} vs {off:.2}, one RTT of the curve = {lag:.2}");
        }
        assert_eq!(CubicParams::NS2, CubicParams { rtt_lookahead: false, ..CubicParams::LINUX_2_6 });
    }

    #[test]
    fn reno_friendly_region_takes_over_on_a_short_rtt_path() {
        // RTT 1 ms: in 50 RTTs W_cubic barely moves (W(0.05) ≈ 71.1) while Reno's estimate
        // gains α = 3·0.3/1.7 ≈ 0.529 segment per RTT: W_est ≈ 70 + 50·0.529 ≈ 96.5.
        let mut c = after_loss_at_100(CubicParams::RFC9438);
        let mut tx = FakeSender::new(MSS);
        for _ in 0..50 {
            tx.round(&mut c, Duration::from_millis(1));
        }
        let alpha = 3.0 * 0.3 / 1.7;
        let want = 70.0 + 50.0 * alpha;
        assert!((segs(&c) / want - 1.0).abs() < 0.03, "cwnd {} vs W_est {want}", segs(&c));
        let mut pure = after_loss_at_100(CubicParams { reno_friendly: false, ..CubicParams::RFC9438 });
        let mut tx = FakeSender::new(MSS);
        for _ in 0..50 {
            tx.round(&mut pure, Duration::from_millis(1));
        }
        assert!(segs(&pure) < 72.0, "pure cubic {}", segs(&pure));
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = after_loss_at_100(CubicParams::RFC9438);
        // A second loss at 90 segments, below W_max = 100.
        c.cwnd = 90.0;
        c.on_enter_recovery(Instant::ZERO, 90 * MSS);
        assert!((c.w_max().unwrap() - 90.0 * 1.7 / 2.0).abs() < 1e-9);
        let mut c = after_loss_at_100(CubicParams { fast_convergence: false, ..CubicParams::RFC9438 });
        c.cwnd = 90.0;
        c.on_enter_recovery(Instant::ZERO, 90 * MSS);
        assert_eq!(c.w_max(), Some(90.0));
    }

    #[test]
    fn convex_above_w_max() {
        // With W_max = cwnd_epoch (K = 0), the window grows as C·t³ above it.
        let mut c = after_loss_at_100(CubicParams { reno_friendly: false, ..CubicParams::RFC9438 });
        c.w_max = Some(70.0);
        let mut tx = FakeSender::new(MSS);
        let rtt = Duration::from_millis(100);
        let mut gains = Vec::new();
        for _ in 0..40 {
            let before = segs(&c);
            tx.round(&mut c, rtt);
            gains.push(segs(&c) - before);
        }
        assert!(gains.windows(2).skip(1).all(|g| g[1] >= g[0]), "gains grow: {gains:?}");
        let t = 3.9; // 40 rounds, the epoch starting with the first
        let want = 0.4 * t * t * t + 70.0;
        assert!((segs(&c) / want - 1.0).abs() < 0.05, "cwnd {} vs C·t³ + W_max {want}", segs(&c));
    }

    #[test]
    fn timeout_sets_beta_ssthresh_and_restarts_from_one_segment_with_k_zero() {
        let mut c = cubic(CubicParams::RFC9438, 100);
        c.on_rto(Instant::ZERO, 100 * MSS, true);
        assert_eq!((c.cwnd(), c.ssthresh()), (MSS, 70 * MSS));
        c.on_rto(Instant::ZERO, MSS, false);
        assert_eq!(c.ssthresh(), 70 * MSS, "a repeated timeout keeps ssthresh");
        let mut tx = FakeSender::new(MSS);
        while c.cwnd() < c.ssthresh() {
            tx.round(&mut c, Duration::from_millis(100));
        }
        tx.round(&mut c, Duration::from_millis(100));
        assert_eq!(c.k(), Some(0.0));
    }

    /// `cubictcp_cwnd_event(CA_EVENT_TX_START)`: a segment sent with nothing in flight
    /// moves the epoch's start on by the time since the last one, at most to now.
    #[test]
    fn linux_shifts_the_epoch_by_the_idle_time() {
        let at = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        let sent = |now, pipe| SentEvent { now, seq: 1, bytes: MSS, pipe, retransmission: false };
        for (params, shifts) in [(CubicParams::LINUX, true), (CubicParams::RFC9438, false)] {
            let mut c = cubic(params, 100);
            c.epoch = Some(Epoch { start: at(1_000), k: 1.0, w_max: 120.0, w_est: 100.0, alpha: 1.0, ack_cnt: 0.0 });
            c.on_packet_sent(&sent(at(2_000), 50 * MSS));
            // Idle from 2 s to 5 s: the epoch starts 3 s later.
            c.on_packet_sent(&sent(at(5_000), MSS));
            let want = if shifts { at(4_000) } else { at(1_000) };
            assert_eq!(c.epoch.unwrap().start, want, "{params:?}");
            // Data in flight: no shift.
            c.on_packet_sent(&sent(at(6_000), 2 * MSS));
            assert_eq!(c.epoch.unwrap().start, want, "{params:?}");
            // Never past now.
            c.epoch.as_mut().unwrap().start = at(6_500);
            c.on_packet_sent(&sent(at(7_000), MSS));
            assert_eq!(c.epoch.unwrap().start, if shifts { at(7_000) } else { at(6_500) }, "{params:?}");
        }
    }

    #[test]
    fn hystart_leaves_slow_start_on_an_rtt_increase() {
        let run = |hystart: bool| {
            let mut c = cubic(CubicParams { hystart, ..CubicParams::RFC9438 }, 10);
            let mut tx = FakeSender::new(MSS);
            tx.round(&mut c, Duration::from_millis(100));
            let mut grown = Vec::new();
            for _ in 0..7 {
                let before = segs(&c);
                tx.round(&mut c, Duration::from_millis(130));
                grown.push(segs(&c) / before);
            }
            (c, grown)
        };
        let (c, grown) = run(true);
        assert!(c.ssthresh() < u64::MAX && c.cwnd() >= c.ssthresh(), "left slow start: {grown:?}");
        // Full CSS rounds grow by a quarter of slow start's doubling.
        assert!((grown[2] - 1.25).abs() < 0.01, "{grown:?}");
        let (c, grown) = run(false);
        assert_eq!(c.ssthresh(), u64::MAX, "without HyStart, slow start goes on: {grown:?}");
    }
}
