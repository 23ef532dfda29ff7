//! TCP Vegas congestion avoidance (Brakmo & Peterson, "TCP Vegas: End to End Congestion
//! Avoidance on a Global Internet", IEEE JSAC 13(8), 1995), with the semantics of ns-2's
//! `tcp-vegas.cc` and Linux's `tcp_vegas.c`, and the Vegas-k variant of Mo et al. as named
//! in the ACC paper (Wang et al., `papers/acc-monaco-accumulation-congestion-control.txt`
//! §III-A).
//!
//! Once per round trip, with the window w in segments, Vegas estimates the segments it keeps
//! queued, diff = (w/baseRTT − w/RTT)·baseRTT = w·(1 − baseRTT/RTT) (ACC paper eq. 10), and
//! in congestion avoidance grows the window by one segment per RTT while diff < α, shrinks it
//! by one while diff > β, and holds in between (ACC eq. 12). Slow start grows as Reno's only
//! in every other round trip, so that a round with a stable window measures the RTT (Brakmo &
//! Peterson §3.3), and ends when diff > γ. Two rule sets ([`VegasRules`]) fill in what the
//! paper leaves open:
//!
//! **ns-2** (`tcp-vegas.cc`, the Arizona code; `[tcp.vegas] rules = "ns2"`, which
//! bench/tcp/cc.py uses with the `ns2` preset and an ACK per segment). A round ends with the ACK of
//! the first segment sent after the previous round ended, and that ACK's RTT sample counts in
//! the next round. diff is computed in whole segments as ns-2 does:
//! delta = ⌊(outstanding + 1) − sent·baseRTT/RTT + ½⌋, with `outstanding` the segments in
//! flight after the ACK (ns-2's `t_seqno_ − last_ack_` counts one more) and `sent` the
//! segments sent during the round; so it holds while roughly ½ ≤ diff < β + ½. Growth is
//! spread over the next round: 1/w segments per ACK with w frozen when the round ended,
//! while the window is used to within two segments; a cut (−1) is immediate. Slow start's
//! growth applies after the round's decision, on the same ACK, and its exit takes
//! w −= w/8. Measured against ns-2 (bench/tcp/cc.py, 20 Mbit/s dumbbells, 24 draws): each
//! rule moved a queue by about a packet. Together they bring one, two and ten flows' queues
//! to 3.8/3.8, 4.0/3.5 and 26.3/26.0 packets (before: 3.8/3.8, 4.4/3.5, 20.3/26.0).
//! Where the per-ACK growth falls in the window train matters: growth recomputed
//! from the current window at every ACK falls short of a segment per round, so the next
//! round crosses the integer early, delays its whole train by a packet, and holds there;
//! one flow then settled a packet short of ns-2.
//!
//! **Linux** (`tcp_vegas.c`; the default for both presets). A round ends when everything sent at its
//! start is acknowledged (`round.rs`); diff unrounded; the window moves by a whole segment at
//! the end of the round; slow start ends with w = min(w, target + 1), target = w·baseRTT/RTT
//! (the expected window), ssthresh = w. A round with fewer than three samples is not trusted
//! (Linux's `cntRTT <= 2` rule, because of delayed ACKs) and grows the window by Reno's one
//! segment per round in congestion avoidance instead.
//!
//! Which RTT of a round congestion avoidance reads is the preset's ([`RoundRtt`]):
//! - **Mean** of the round's samples for the `ns2` preset, as ns-2's `tcp-vegas.cc` (and
//!   Brakmo & Peterson) do. Measured against ns-2 (3 draws, before the ns-2 rules above):
//!   with the minimum, one flow settled with 2.9 packets queued against ns-2's 3.8 and ten
//!   flows' goodputs were 0.52–1.74 of ns-2's; with the mean, 3.9 against 3.8.
//! - **Minimum** for the `linux` preset, as Linux's `tcp_vegas.c` does: with delayed ACKs (up
//!   to 40 ms here) and ACK compression a sample carries receiver-side delay the queue did not
//!   cause, and the minimum is the sample least inflated by it.
//!
//! Slow start's exit test always reads the round's **mean**, as Brakmo & Peterson and ns-2 do,
//! because a round that doubles the window builds its queue in its second half, which the
//! minimum does not see (with the minimum, ten flows overshot to 136 segments on a 68-packet
//! path and later flows met twice ns-2's queue).
//!
//! baseRTT is the minimum RTT sample ever seen (every ACK's sample). **Vegas-k**
//! ([`VegasParams::base_rtt_window`] = k): baseRTT is the minimum of the last k per-round
//! minima. The ACC paper speaks of "the minimum of the last k, instead of all, RTT samples"
//! and then of Vegas-k being unable to drain a queue "within k RTTs", so a sample there is
//! one per round trip; the round's minimum is the per-round sample Vegas already uses.
//!
//! Loss reaction is Reno's (halve FlightSize on fast retransmit, one segment on a timeout,
//! cwnd = ssthresh at the end of recovery), for both presets, as Linux's Vegas does
//! (`tcp_reno_ssthresh`; Vegas is off outside the Open state). Deviation for the ns-2
//! preset: ns-2's `tcp-vegas.cc` (the Arizona code) cuts the window to 3/4 on the first
//! fast retransmit of a segment sent since the last cut, halves it for a segment
//! retransmitted before, and runs its own fine-grained retransmission checks; here loss
//! detection and recovery are the endpoint's, shared by all controllers. No growth during
//! recovery; RTT samples taken during recovery still update baseRTT. As in Reno, the window grows only when it
//! limited the sender (RFC 7661 spirit); a decrease applies regardless.

use super::round::RoundCounter;
use super::{AckEvent, CcParamError, CcParams, CongestionControl, SentEvent};
use pathtwin_core::config::{RoundRtt, VegasPreset, VegasRules, VegasSettings};
use pathtwin_core::time::{Duration, Instant};
use std::collections::VecDeque;

/// Vegas's thresholds, in segments of queued data (diff), and its base-RTT memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VegasParams {
    /// Grow the window by one segment per RTT while diff is below this many segments.
    pub alpha: f64,
    /// Shrink the window by one segment per RTT while diff is above this many segments.
    pub beta: f64,
    /// Leave slow start once diff exceeds this many segments.
    pub gamma: f64,
    /// `None`: baseRTT is the minimum RTT ever seen (Vegas). `Some(k)`: the minimum of the
    /// last k per-round-trip minimum RTT samples (Vegas-k); k ≥ 1.
    pub base_rtt_window: Option<u32>,
    /// The RTT of a round that congestion avoidance compares with baseRTT.
    pub round_rtt: RoundRtt,
    /// Whose reading of the paper fills in rounds, rounding and growth (module docs).
    pub rules: VegasRules,
}

impl VegasParams {
    /// Brakmo & Peterson's and ns-2's `Agent/TCP/Vegas` defaults: α = 1, β = 3, γ = 1.
    /// Linux's rules: ns-2's assume an ACK per segment (see [`VegasRules::Ns2`]).
    pub const NS2: VegasParams = VegasParams { alpha: 1.0, beta: 3.0, gamma: 1.0, base_rtt_window: None, round_rtt: RoundRtt::Mean, rules: VegasRules::Linux };
    /// Linux `tcp_vegas.c` and ns-3 `TcpVegas` defaults: α = 2, β = 4, γ = 1.
    pub const LINUX: VegasParams = VegasParams { alpha: 2.0, beta: 4.0, gamma: 1.0, base_rtt_window: None, round_rtt: RoundRtt::Min, rules: VegasRules::Linux };

    /// Vegas-k with these thresholds.
    pub fn with_base_rtt_window(self, k: u32) -> Self {
        VegasParams { base_rtt_window: Some(k), ..self }
    }

    /// The parameters of a `[tcp.vegas]` table: its preset's (`"ns2"` without one), with
    /// the keys it sets replaced; [`VegasParams::NS2`] without a table.
    pub fn from_settings(v: Option<&VegasSettings>) -> Result<Self, CcParamError> {
        let Some(v) = v else { return Ok(VegasParams::NS2) };
        let mut p = match v.preset {
            None | Some(VegasPreset::Ns2) => VegasParams::NS2,
            Some(VegasPreset::Linux) => VegasParams::LINUX,
        };
        p.alpha = v.alpha.unwrap_or(p.alpha);
        p.beta = v.beta.unwrap_or(p.beta);
        p.gamma = v.gamma.unwrap_or(p.gamma);
        p.base_rtt_window = v.base_rtt_window.or(p.base_rtt_window);
        p.round_rtt = v.round_rtt.unwrap_or(p.round_rtt);
        p.rules = v.rules.unwrap_or(p.rules);
        p.validate().map(|()| p)
    }

    /// Checks the thresholds (finite, 0 ≤ α ≤ β, γ ≥ 0) and the base-RTT window (≥ 1).
    pub fn validate(&self) -> Result<(), CcParamError> {
        CcParamError::check(self.alpha.is_finite() && self.alpha >= 0.0, "tcp.vegas.alpha", self.alpha, "must be a number of segments >= 0")?;
        CcParamError::check(self.beta.is_finite() && self.beta >= self.alpha, "tcp.vegas.beta", self.beta, "must be a number of segments >= alpha")?;
        CcParamError::check(self.gamma.is_finite() && self.gamma >= 0.0, "tcp.vegas.gamma", self.gamma, "must be a number of segments >= 0")?;
        let k = self.base_rtt_window.unwrap_or(1);
        CcParamError::check(k >= 1, "tcp.vegas.base_rtt_window", k, "must be at least 1 round trip")
    }
}

impl Default for VegasParams {
    /// The original paper's values ([`VegasParams::NS2`]).
    fn default() -> Self {
        VegasParams::NS2
    }
}

/// Rounds with fewer RTT samples than this make no Vegas decision (Linux `cntRTT <= 2`).
const MIN_SAMPLES_PER_ROUND: u32 = 3;

/// ns-2's spread growth: 1/w segments per ACK through a round, w frozen when it was decided.
#[derive(Clone, Copy, Debug)]
struct SpreadGrowth {
    /// The window (bytes) when the round that decided to grow ended.
    window: u64,
    /// Growth owed but not yet a whole byte, in bytes × `window`.
    remainder: u64,
}

/// TCP Vegas (and Vegas-k).
#[derive(Clone, Debug)]
pub struct Vegas {
    params: VegasParams,
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    rounds: RoundCounter,
    /// Minimum RTT ever seen (Vegas).
    min_rtt_ever: Option<Duration>,
    /// Per-round minima of the last k rounds (Vegas-k), oldest first.
    round_minima: VecDeque<Duration>,
    round_min: Option<Duration>,
    /// Sum of the round's RTT samples, for slow start's exit test.
    round_sum: Duration,
    round_samples: u32,
    /// Whether any ACK of this round found the sender limited by cwnd.
    round_cwnd_limited: bool,
    /// Vegas slow start grows in every other round; true in the growing ones.
    slow_start_grows: bool,
    /// ns-2 rules only: growth in progress.
    growth: Option<SpreadGrowth>,
}

impl Vegas {
    pub fn new(p: &CcParams, params: VegasParams) -> Self {
        Vegas {
            params,
            smss: p.smss as u64,
            cwnd: p.initial_cwnd.max(1),
            ssthresh: u64::MAX,
            rounds: match params.rules {
                VegasRules::Ns2 => RoundCounter::ns2(),
                VegasRules::Linux => RoundCounter::default(),
            },
            min_rtt_ever: None,
            round_minima: VecDeque::new(),
            round_min: None,
            round_sum: Duration::ZERO,
            round_samples: 0,
            round_cwnd_limited: false,
            slow_start_grows: true,
            growth: None,
        }
    }

    /// The propagation-delay estimate in use now: all-time minimum for Vegas, minimum of the
    /// last k completed rounds and the current one for Vegas-k.
    pub fn base_rtt(&self) -> Option<Duration> {
        match self.params.base_rtt_window {
            None => self.min_rtt_ever,
            Some(_) => self.round_minima.iter().copied().chain(self.round_min).min(),
        }
    }

    /// diff in segments for a round whose RTT was `rtt`.
    fn diff(&self, rtt: Duration, base: Duration) -> f64 {
        let w = self.cwnd as f64 / self.smss as f64;
        w * (1.0 - base.as_secs_f64() / rtt.as_secs_f64())
    }

    /// Closes the round's RTT statistics: its minimum (kept for Vegas-k), the sum and count.
    fn take_round_samples(&mut self) -> (Option<Duration>, Duration, u32) {
        let rtt = self.round_min.take();
        let sum = std::mem::replace(&mut self.round_sum, Duration::ZERO);
        let samples = std::mem::take(&mut self.round_samples);
        if let (Some(k), Some(m)) = (self.params.base_rtt_window, rtt) {
            self.round_minima.push_back(m);
            while self.round_minima.len() > k.max(1) as usize {
                self.round_minima.pop_front();
            }
        }
        (rtt, sum, samples)
    }

    fn end_round(&mut self, control: bool) {
        let (rtt, sum, samples) = self.take_round_samples();
        let limited = std::mem::take(&mut self.round_cwnd_limited);
        if !control {
            return;
        }
        let in_slow_start = self.cwnd < self.ssthresh;
        let base = self.base_rtt();
        let (Some(rtt), Some(base), true) = (rtt, base, samples >= MIN_SAMPLES_PER_ROUND) else {
            if in_slow_start {
                self.slow_start_grows = !self.slow_start_grows;
            } else if limited {
                self.cwnd += self.smss;
            }
            return;
        };
        let mean = Duration::from_nanos(sum.as_nanos() / samples as u64);
        let diff = match self.params.round_rtt {
            RoundRtt::Mean => self.diff(mean, base),
            RoundRtt::Min => self.diff(rtt, base),
        };
        let floor = 2 * self.smss;
        if in_slow_start {
            // Always the round's mean RTT: see the module doc.
            let diff = self.diff(mean, base);
            if diff > self.params.gamma {
                let expected = self.cwnd as f64 * base.as_secs_f64() / mean.as_secs_f64();
                self.cwnd = self.cwnd.min(expected as u64 + self.smss).max(floor);
                self.ssthresh = self.cwnd;
            } else {
                self.slow_start_grows = !self.slow_start_grows;
            }
        } else if diff > self.params.beta {
            self.cwnd = (self.cwnd.saturating_sub(self.smss)).max(floor);
            // Stay in congestion avoidance (cwnd ≥ ssthresh).
            self.ssthresh = self.ssthresh.min(self.cwnd);
        } else if diff < self.params.alpha && limited {
            self.cwnd += self.smss;
        }
    }

    /// ns-2's once-per-round decision at the ACK that ends a round (`tcp-vegas.cc`,
    /// `VegasTcpAgent::recv`); `outstanding` is what is in flight after this ACK, `sent` the
    /// bytes of new data sent during the round.
    fn end_round_ns2(&mut self, outstanding: u64, sent: u64) {
        let (rtt_min, sum, samples) = self.take_round_samples();
        self.growth = None;
        let in_slow_start = self.cwnd < self.ssthresh;
        let (Some(rtt_min), Some(base), true) = (rtt_min, self.base_rtt(), samples > 0) else {
            if in_slow_start {
                self.slow_start_grows = !self.slow_start_grows;
            }
            return;
        };
        let mean = Duration::from_nanos(sum.as_nanos() / samples as u64);
        let smss = self.smss as f64;
        let delta = |rtt: Duration| {
            let expected = outstanding as f64 / smss + 1.0;
            let actual = sent as f64 / smss * base.as_secs_f64() / rtt.as_secs_f64();
            // ns-2's int(x + 0.5): whole segments, truncated toward zero.
            ((expected - actual + 0.5) as i64) as f64
        };
        let floor = 2 * self.smss;
        if in_slow_start {
            // Always the round's mean RTT: see the module doc.
            if delta(mean) > self.params.gamma {
                self.cwnd = (self.cwnd - self.cwnd / 8).max(floor);
                self.ssthresh = self.cwnd;
            } else {
                self.slow_start_grows = !self.slow_start_grows;
            }
            return;
        }
        let delta = delta(match self.params.round_rtt {
            RoundRtt::Mean => mean,
            RoundRtt::Min => rtt_min,
        });
        if delta > self.params.beta {
            self.cwnd = (self.cwnd.saturating_sub(self.smss)).max(floor);
            self.ssthresh = self.ssthresh.min(self.cwnd);
        } else if delta < self.params.alpha {
            self.growth = Some(SpreadGrowth { window: self.cwnd, remainder: 0 });
        }
    }

    fn record_sample(&mut self, rtt: Duration) {
        self.round_min = Some(self.round_min.map_or(rtt, |m| m.min(rtt)));
        self.round_sum += rtt;
        self.round_samples += 1;
        self.min_rtt_ever = Some(self.min_rtt_ever.map_or(rtt, |m| m.min(rtt)));
    }

    /// ns-2's order at each ACK: the round's decision, then growth, then the RTT sample
    /// (which belongs to the next round).
    fn on_ack_ns2(&mut self, ev: &AckEvent) {
        let sent = self.rounds.sent_this_round();
        let round_ended = self.rounds.on_ack(ev.bytes_acked);
        let outstanding = ev.pipe_before.saturating_sub(ev.bytes_acked);
        if ev.in_recovery {
            if round_ended {
                self.reset_round();
            }
        } else {
            let limited = 2 * ev.pipe_before >= self.cwnd;
            if round_ended {
                self.end_round_ns2(outstanding, sent);
            }
            if self.cwnd < self.ssthresh {
                if self.slow_start_grows && limited {
                    self.cwnd += ev.bytes_acked.min(self.smss);
                }
            } else if let Some(g) = self.growth.as_mut() {
                // Only while the window is in use (ns-2: cwnd − in flight ≤ 2).
                if self.cwnd <= outstanding + 2 * self.smss {
                    g.remainder += ev.bytes_acked.div_ceil(self.smss) * self.smss * self.smss;
                    let bytes = g.remainder / g.window;
                    g.remainder -= bytes * g.window;
                    self.cwnd += bytes;
                }
            }
        }
        if let Some(rtt) = ev.rtt {
            self.record_sample(rtt);
        }
    }

    fn reduce(&mut self, flight: u64) {
        self.ssthresh = (flight / 2).max(2 * self.smss);
    }

    fn reset_round(&mut self) {
        self.round_min = None;
        self.round_sum = Duration::ZERO;
        self.round_samples = 0;
        self.round_cwnd_limited = false;
        self.growth = None;
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        if self.params.base_rtt_window.is_some() { "vegas-k" } else { "vegas" }
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        if self.params.rules == VegasRules::Ns2 {
            return self.on_ack_ns2(ev);
        }
        if let Some(rtt) = ev.rtt {
            self.record_sample(rtt);
        }
        let in_slow_start = self.cwnd < self.ssthresh;
        let limited = if in_slow_start { 2 * ev.pipe_before >= self.cwnd } else { ev.pipe_before + self.smss > self.cwnd };
        self.round_cwnd_limited |= limited;
        let round_ended = self.rounds.on_ack(ev.bytes_acked);
        if ev.in_recovery {
            if round_ended {
                self.end_round(false);
            }
            return;
        }
        if in_slow_start && self.slow_start_grows && limited {
            self.cwnd += ev.bytes_acked.min(self.smss);
        }
        if round_ended {
            self.end_round(true);
        }
    }

    fn on_packet_sent(&mut self, ev: &SentEvent) {
        self.rounds.on_sent(ev);
    }

    fn on_enter_recovery(&mut self, _now: Instant, flight: u64) {
        self.reduce(flight);
        self.cwnd = self.ssthresh;
        self.reset_round();
    }

    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {
        self.cwnd = self.ssthresh;
        self.reset_round();
    }

    fn on_rto(&mut self, _now: Instant, flight: u64, first: bool) {
        if first {
            self.reduce(flight);
        }
        self.cwnd = self.smss;
        self.slow_start_grows = true;
        self.reset_round();
    }

    fn on_cwnd_restart(&mut self, _now: Instant, cwnd: u64, ssthresh: u64) {
        self.cwnd = cwnd.max(1);
        self.ssthresh = ssthresh;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }
}

#[cfg(test)]
mod tests {
    use super::super::round::testing::FakeSender;
    use super::*;

    #[test]
    fn a_table_starts_from_its_preset_and_is_checked() {
        assert_eq!(VegasParams::from_settings(None), Ok(VegasParams::NS2));
        let linux = VegasSettings { preset: Some(VegasPreset::Linux), round_rtt: Some(RoundRtt::Mean), rules: Some(VegasRules::Ns2), ..Default::default() };
        assert_eq!(VegasParams::from_settings(Some(&linux)), Ok(VegasParams { round_rtt: RoundRtt::Mean, rules: VegasRules::Ns2, ..VegasParams::LINUX }));
        let k = VegasSettings { base_rtt_window: Some(8), gamma: Some(2.0), ..Default::default() };
        assert_eq!(VegasParams::from_settings(Some(&k)), Ok(VegasParams { gamma: 2.0, ..VegasParams::NS2.with_base_rtt_window(8) }));
        let bad = VegasSettings { base_rtt_window: Some(0), ..Default::default() };
        assert_eq!(VegasParams::from_settings(Some(&bad)).unwrap_err().key, "tcp.vegas.base_rtt_window");
    }

    const MSS: u64 = 1000;
    /// ns-2's thresholds with ns-2's rules, as bench/tcp/cc.py runs them.
    const NS2_RULES: VegasParams = VegasParams { rules: VegasRules::Ns2, ..VegasParams::NS2 };

    fn vegas(params: VegasParams, cwnd_segments: u64) -> Vegas {
        let mut v = Vegas::new(&CcParams { smss: MSS as u32, initial_cwnd: cwnd_segments * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 }, params);
        // Start in congestion avoidance at this window.
        v.ssthresh = v.cwnd;
        v
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// RTT at which a window of `w` segments has `queued` segments queued over a 100 ms
    /// base RTT: diff = w·(1 − base/RTT) ⇔ RTT = base·w/(w − queued).
    fn rtt_for_queue(w: u64, queued: f64) -> Duration {
        Duration::from_secs_f64(0.1 * w as f64 / (w as f64 - queued))
    }

    /// The window change in segments that one round whose RTT means `queued` segments
    /// queued (over a 100 ms baseRTT) brings about.
    fn step(params: VegasParams, queued: f64) -> i64 {
        let mut v = vegas(params, 20);
        let mut tx = FakeSender::new(MSS);
        match params.rules {
            VegasRules::Linux => {
                // Decides at the round's last ACK.
                tx.round(&mut v, ms(100));
                let before = v.cwnd() / MSS;
                tx.round(&mut v, rtt_for_queue(before, queued));
                v.cwnd() as i64 / MSS as i64 - before as i64
            }
            VegasRules::Ns2 => {
                // Decides at the next round's first ACK and spreads growth over that round.
                v.min_rtt_ever = Some(ms(100));
                let before = v.cwnd() / MSS;
                tx.round(&mut v, rtt_for_queue(before, queued));
                tx.round(&mut v, ms(100));
                v.cwnd() as i64 / MSS as i64 - before as i64
            }
        }
    }

    #[test]
    fn grows_holds_and_shrinks_around_alpha_and_beta() {
        // ¾ of a segment from the thresholds: ns-2 rounds diff to whole segments.
        for p in [VegasParams::NS2, VegasParams::LINUX, NS2_RULES] {
            assert_eq!(step(p, p.alpha - 0.75), 1, "{p:?} below α");
            assert_eq!(step(p, (p.alpha + p.beta) / 2.0), 0, "{p:?} between α and β");
            assert_eq!(step(p, p.beta + 0.75), -1, "{p:?} above β");
        }
    }

    #[test]
    fn ns2_rounds_diff_to_the_nearest_segment() {
        // ns-2's delta = int(diff + ½): it grows below ½ and shrinks from β + ½ on, where
        // the unrounded (Linux) reading grows below α and shrinks above β.
        let ns2 = NS2_RULES;
        let unrounded = VegasParams::NS2;
        assert_eq!(step(ns2, 0.4), 1);
        assert_eq!(step(ns2, 0.6), 0);
        assert_eq!(step(unrounded, 0.6), 1);
        assert_eq!(step(ns2, 3.4), 0);
        assert_eq!(step(unrounded, 3.4), -1);
    }

    #[test]
    fn presets_are_the_published_values() {
        assert_eq!((VegasParams::NS2.alpha, VegasParams::NS2.beta, VegasParams::NS2.gamma), (1.0, 3.0, 1.0));
        assert_eq!((VegasParams::LINUX.alpha, VegasParams::LINUX.beta, VegasParams::LINUX.gamma), (2.0, 4.0, 1.0));
        // 1.5 queued: NS2 holds (α = 1), LINUX grows (α = 2).
        assert_eq!(step(VegasParams::NS2, 1.5), 0);
        assert_eq!(step(VegasParams::LINUX, 1.5), 1);
        // 3.75 queued: NS2 shrinks (β = 3), LINUX holds (β = 4).
        assert_eq!(step(VegasParams::NS2, 3.75), -1);
        assert_eq!(step(NS2_RULES, 3.75), -1);
        assert_eq!(step(VegasParams::LINUX, 3.75), 0);
    }

    #[test]
    fn vegas_k_forgets_an_old_minimum_after_k_rounds() {
        let k = 3;
        // Linux's round timing (a round closes at its last ACK; ns-2's one ACK later).
        let params = VegasParams::NS2;
        let mut vk = vegas(params.with_base_rtt_window(k), 20);
        let mut v = vegas(params, 20);
        let mut tx = FakeSender::new(MSS);
        let mut tx2 = FakeSender::new(MSS);
        tx.round(&mut vk, ms(50));
        tx2.round(&mut v, ms(50));
        assert_eq!(vk.base_rtt(), Some(ms(50)));
        // The path's delay rises to 80 ms (a route change); the 50 ms round stays among the
        // last k for k − 1 more rounds, then drops out.
        for i in 1..=k {
            tx.round(&mut vk, ms(80));
            tx2.round(&mut v, ms(80));
            let want = if i < k { ms(50) } else { ms(80) };
            assert_eq!(vk.base_rtt(), Some(want), "after {i} rounds at 80 ms");
        }
        assert_eq!(v.base_rtt(), Some(ms(50)), "plain Vegas never forgets");
        assert_eq!(vk.name(), "vegas-k");
        assert_eq!(v.name(), "vegas");
    }

    #[test]
    fn ns2_slow_start_doubles_every_other_round_and_leaves_with_an_eighth_off() {
        let mut v = Vegas::new(&CcParams { smss: MSS as u32, initial_cwnd: 3 * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 }, NS2_RULES);
        let mut tx = FakeSender::new(MSS);
        let mut windows = vec![v.cwnd() / MSS];
        for _ in 0..6 {
            tx.round(&mut v, ms(100));
            windows.push(v.cwnd() / MSS);
        }
        // The first round's decision (at its first ACK) turns growth off, as ns-2's
        // v_inc_flag_ does; then every other round doubles.
        assert_eq!(windows, [3, 3, 6, 6, 12, 12, 24]);
        assert!(v.cwnd() < v.ssthresh(), "no queue, still in slow start");
        // A queue: diff = 24·(1 − 100/150) = 8 > γ, read at the next round's first ACK.
        tx.round(&mut v, ms(150));
        tx.round(&mut v, ms(150));
        assert_eq!(v.cwnd(), 21 * MSS, "24 − 24/8");
        assert!(v.cwnd() >= v.ssthresh(), "left slow start");
    }

    #[test]
    fn slow_start_grows_every_other_round_and_ends_when_diff_exceeds_gamma() {
        let mut v = Vegas::new(&CcParams { smss: MSS as u32, initial_cwnd: 4 * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 }, VegasParams::NS2);
        let mut tx = FakeSender::new(MSS);
        let mut windows = vec![v.cwnd() / MSS];
        for _ in 0..5 {
            tx.round(&mut v, ms(100));
            windows.push(v.cwnd() / MSS);
        }
        // Reno slow start doubles per round (one SMSS per ACK of one SMSS); Vegas doubles
        // in every other round and holds in between.
        assert!(v.cwnd() < v.ssthresh(), "no queue, still in slow start");
        assert_eq!(windows, [4, 8, 8, 16, 16, 32]);
        // Now a queue builds: diff = w·(1 − 100/150) = w/3 > γ = 1 for any w > 3.
        let w = v.cwnd();
        tx.round(&mut v, ms(150));
        assert!(v.cwnd() >= v.ssthresh(), "left slow start");
        let expected = (w as f64 * 100.0 / 150.0) as u64 + MSS;
        assert!(v.cwnd() <= expected.max(w), "cwnd {} > target + 1 segment {}", v.cwnd(), expected);
    }

    #[test]
    fn loss_halves_like_reno() {
        let mut v = vegas(VegasParams::NS2, 20);
        v.on_enter_recovery(Instant::ZERO, 20 * MSS);
        v.on_exit_recovery(Instant::ZERO, 10 * MSS);
        assert_eq!((v.cwnd(), v.ssthresh()), (10 * MSS, 10 * MSS));
        v.on_rto(Instant::ZERO, 10 * MSS, true);
        assert_eq!((v.cwnd(), v.ssthresh()), (MSS, 5 * MSS));
    }

    #[test]
    fn does_not_grow_when_not_cwnd_limited() {
        let mut v = vegas(VegasParams::NS2, 20);
        let mut seq = 1;
        for round in 0..4u64 {
            for i in 0..5u64 {
                v.on_packet_sent(&SentEvent { now: Instant::ZERO, seq: seq + i * MSS, bytes: MSS, pipe: (i + 1) * MSS, retransmission: false });
            }
            seq += 5 * MSS;
            for _ in 0..5 {
                let now = Instant::ZERO + ms(100 * (round + 1));
                v.on_ack(&AckEvent { now, bytes_acked: MSS, rtt: Some(ms(100)), srtt: Some(ms(100)), flight_before: 5 * MSS, pipe_before: 5 * MSS, in_recovery: false });
            }
        }
        assert_eq!(v.cwnd(), 20 * MSS, "only 5 of 20 segments were ever in flight");
    }
}
