//! TCP Vegas's congestion avoidance (Brakmo & Peterson, "TCP Vegas: End to End Congestion
//! Avoidance on a Global Internet", IEEE JSAC 1995), and the Vegas-k variant of the ACC paper
//! (`shared/papers/acc-monaco-accumulation-congestion-control.txt` §III-A, after Mo et al.).
//!
//! Once per round trip, Vegas estimates its backlog in the network — the ACC paper's
//! accumulation, eq. (10) —
//!
//! ```text
//! diff = (cwnd/baseRTT − cwnd/RTT) · baseRTT      (packets)
//! ```
//!
//! and moves cwnd by one segment towards the band [α, β]: +1 if diff < α, −1 if diff > β,
//! unchanged inside. baseRTT is the smallest RTT ever seen (Vegas-k: the smallest of the last
//! k per-round minima). RTT is the smallest sample of the round that just ended, as Linux's
//! and ns-3's Vegas take it: the minimum filters out delayed-ACK and scheduling noise that
//! B&P's per-round average would count as queueing (a deviation from the paper, which
//! averages).
//!
//! Slow start (B&P §3.3): exponential growth only every other round trip, so that the RTT
//! of a round at constant window can be compared; slow start ends, with cwnd set to the
//! window the path carries without queueing plus one segment, as soon as diff > γ. Losses
//! are handled as Reno (halve on fast retransmit, one segment after a timeout), as Linux's
//! `tcp_vegas.c` does.
//!
//! Presets: [`VegasParams::NS2`] (α = 1, β = 3, γ = 1: Brakmo & Peterson and ns-2) and
//! [`VegasParams::LINUX`] (α = 2, β = 4, γ = 1: Linux and ns-3).

use super::window::{cwnd_limited, slow_start_increase, Rounds};
use super::{AckEvent, CcParams, CongestionControl, SentEvent};
use pathtwin_core::time::{Duration, Instant};
use std::collections::VecDeque;

/// Vegas's thresholds, in packets of backlog.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VegasParams {
    /// Grow when the backlog is below α packets.
    pub alpha: f64,
    /// Shrink when the backlog is above β packets.
    pub beta: f64,
    /// Leave slow start when the backlog exceeds γ packets.
    pub gamma: f64,
    /// Vegas-k: the base RTT is the minimum of the last k per-round RTT minima instead of the
    /// minimum ever seen. A round's minimum is the sample unit because the ACC paper reads
    /// Vegas-k's window as "k RTTs" (§II-A: it "cannot guarantee queue drain … within k RTTs").
    pub base_rtt_window: Option<u32>,
}

impl VegasParams {
    /// Brakmo & Peterson's and ns-2's `Agent/TCP/Vegas` values.
    pub const NS2: VegasParams = VegasParams { alpha: 1.0, beta: 3.0, gamma: 1.0, base_rtt_window: None };
    /// Linux's `tcp_vegas.c` and ns-3's `TcpVegas` values.
    pub const LINUX: VegasParams = VegasParams { alpha: 2.0, beta: 4.0, gamma: 1.0, base_rtt_window: None };
}

impl Default for VegasParams {
    fn default() -> Self {
        VegasParams::NS2
    }
}

/// TCP Vegas (and Vegas-k).
#[derive(Clone, Debug)]
pub struct Vegas {
    p: VegasParams,
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    rounds: Rounds,
    /// Smallest RTT sample of the current round.
    round_min: Option<Duration>,
    /// RTT samples taken in the current round (a round with fewer than three is not judged,
    /// as Linux: with delayed ACKs one sample says little).
    round_samples: u32,
    /// Smallest RTT ever (Vegas) or per-round minima of the last k rounds (Vegas-k).
    base_rtt: Option<Duration>,
    recent_minima: VecDeque<Duration>,
    /// Slow start grows only in every other round.
    grow_this_round: bool,
    /// The backlog (packets) estimated at the end of the last judged round.
    backlog: Option<f64>,
}

impl Vegas {
    pub fn new(p: &CcParams, params: VegasParams) -> Self {
        Vegas {
            p: params,
            smss: p.smss as u64,
            cwnd: p.initial_cwnd.max(1),
            ssthresh: u64::MAX,
            rounds: Rounds::default(),
            round_min: None,
            round_samples: 0,
            base_rtt: None,
            recent_minima: VecDeque::new(),
            grow_this_round: true,
            backlog: None,
        }
    }

    /// The base RTT in use.
    pub fn base_rtt(&self) -> Option<Duration> {
        self.base_rtt
    }

    /// The backlog (packets) estimated at the end of the last judged round.
    pub fn backlog(&self) -> Option<f64> {
        self.backlog
    }

    /// diff = (cwnd/base − cwnd/rtt)·base, in packets of SMSS.
    pub fn estimate_backlog(cwnd: u64, smss: u64, base: Duration, rtt: Duration) -> f64 {
        let w = cwnd as f64 / smss as f64;
        let (b, r) = (base.as_secs_f64(), rtt.as_secs_f64());
        (w / b - w / r) * b
    }

    fn end_round(&mut self) {
        let Some(rtt) = self.round_min.take() else { return };
        let samples = std::mem::take(&mut self.round_samples);
        match self.p.base_rtt_window {
            None => self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt))),
            Some(k) => {
                self.recent_minima.push_back(rtt);
                while self.recent_minima.len() > k as usize {
                    self.recent_minima.pop_front();
                }
                self.base_rtt = self.recent_minima.iter().copied().min();
            }
        }
        let base = self.base_rtt.expect("set above");
        if samples < 3 {
            return;
        }
        let diff = Self::estimate_backlog(self.cwnd, self.smss, base, rtt);
        self.backlog = Some(diff);
        if self.cwnd < self.ssthresh {
            if diff > self.p.gamma {
                // Leave slow start at the window the path carries without our backlog, plus
                // one segment (Linux: min(cwnd, target_cwnd + 1)).
                let target = (self.cwnd as f64 * base.as_secs_f64() / rtt.as_secs_f64()) as u64 + self.smss;
                self.cwnd = self.cwnd.min(target).max(2 * self.smss);
                self.ssthresh = self.cwnd.saturating_sub(self.smss).max(2 * self.smss);
            }
            self.grow_this_round = !self.grow_this_round;
        } else if diff > self.p.beta {
            self.cwnd = self.cwnd.saturating_sub(self.smss).max(2 * self.smss);
            self.ssthresh = self.ssthresh.min(self.cwnd);
        } else if diff < self.p.alpha {
            self.cwnd += self.smss;
        }
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        if self.p.base_rtt_window.is_some() {
            "vegas-k"
        } else {
            "vegas"
        }
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        if let Some(rtt) = ev.rtt {
            self.round_min = Some(self.round_min.map_or(rtt, |m| m.min(rtt)));
            self.round_samples += 1;
        }
        let round_over = self.rounds.on_ack(ev.bytes_acked);
        if ev.in_recovery {
            return;
        }
        if round_over {
            // A round in which the window did not limit the sender says nothing about the
            // path's capacity; judge only those in which it did.
            if cwnd_limited(ev, self.cwnd, self.smss) || self.cwnd < self.ssthresh {
                self.end_round();
            } else {
                self.round_min = None;
                self.round_samples = 0;
            }
        }
        if self.cwnd < self.ssthresh && self.grow_this_round {
            if let Some(inc) = slow_start_increase(ev, self.cwnd, self.smss) {
                self.cwnd += inc;
            }
        }
    }

    fn on_enter_recovery(&mut self, _now: Instant, flight: u64) {
        self.ssthresh = (flight / 2).max(2 * self.smss);
        self.cwnd = self.ssthresh;
    }

    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {
        self.cwnd = self.ssthresh;
        self.round_min = None;
        self.round_samples = 0;
    }

    fn on_rto(&mut self, _now: Instant, flight: u64, first: bool) {
        if first {
            self.ssthresh = (flight / 2).max(2 * self.smss);
        }
        self.cwnd = self.smss;
        self.grow_this_round = true;
        self.round_min = None;
        self.round_samples = 0;
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

    fn params(cwnd_pkts: u64) -> CcParams {
        CcParams { smss: MSS as u32, initial_cwnd: cwnd_pkts * MSS, max_window: u64::MAX }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Drives one round: sends `cwnd` bytes, then acknowledges them in `MSS` steps, each
    /// with an RTT sample of `rtt`, with the window fully used.
    fn round(v: &mut Vegas, rtt: Duration) {
        let cwnd = v.cwnd();
        v.on_packet_sent(&SentEvent { now: Instant::ZERO, seq: 0, bytes: cwnd, pipe: cwnd, retransmission: false });
        let mut left = cwnd;
        while left > 0 {
            let b = left.min(MSS);
            v.on_ack(&AckEvent {
                now: Instant::ZERO,
                bytes_acked: b,
                rtt: Some(rtt),
                srtt: Some(rtt),
                flight_before: cwnd,
                pipe_before: cwnd,
                in_recovery: false,
            });
            left -= b;
        }
    }

    /// A Vegas in congestion avoidance with its base RTT learnt at 100 ms.
    fn in_avoidance(p: VegasParams, cwnd_pkts: u64) -> Vegas {
        let mut v = Vegas::new(&params(cwnd_pkts), p);
        v.ssthresh = 0;
        round(&mut v, ms(100)); // opens round 1
        round(&mut v, ms(100)); // ends it: base RTT = 100 ms, backlog 0 → +1
        v.cwnd = cwnd_pkts * MSS;
        v
    }

    #[test]
    fn backlog_is_eq_10_of_the_acc_paper() {
        // 20 packets, base 100 ms, RTT 125 ms: (20/0.1 − 20/0.125)·0.1 = 4 packets.
        let d = Vegas::estimate_backlog(20 * MSS, MSS, ms(100), ms(125));
        assert!((d - 4.0).abs() < 1e-9, "{d}");
    }

    #[test]
    fn window_moves_one_segment_toward_the_band() {
        // cwnd 20, base 100 ms. RTT 102 ms → backlog 0.39 < α = 1: grow.
        let mut v = in_avoidance(VegasParams::NS2, 20);
        round(&mut v, ms(102));
        assert_eq!(v.cwnd(), 21 * MSS);
        // RTT 110 ms → backlog 1.8 in [1, 3]: hold.
        let mut v = in_avoidance(VegasParams::NS2, 20);
        round(&mut v, ms(110));
        assert_eq!(v.cwnd(), 20 * MSS);
        // RTT 125 ms → backlog 4 > β = 3: shrink.
        let mut v = in_avoidance(VegasParams::NS2, 20);
        round(&mut v, ms(125));
        assert_eq!(v.cwnd(), 19 * MSS);
    }

    #[test]
    fn linux_preset_holds_a_larger_backlog() {
        // Backlog 1.8 packets: inside [1, 3] for ns-2's preset, below α = 2 for Linux's.
        let mut v = in_avoidance(VegasParams::LINUX, 20);
        round(&mut v, ms(110));
        assert_eq!(v.cwnd(), 21 * MSS);
        // Backlog 3.5 (RTT ~121 ms): above ns-2's β = 3, inside Linux's [2, 4].
        let mut v = in_avoidance(VegasParams::LINUX, 20);
        round(&mut v, Duration::from_micros(121_212));
        assert_eq!(v.cwnd(), 20 * MSS);
    }

    #[test]
    fn base_rtt_is_the_minimum_ever_but_vegas_k_forgets_after_k_rounds() {
        let mut plain = in_avoidance(VegasParams::NS2, 20);
        let mut k = in_avoidance(VegasParams { base_rtt_window: Some(3), ..VegasParams::NS2 }, 20);
        for _ in 0..5 {
            round(&mut plain, ms(150));
            round(&mut k, ms(150));
        }
        assert_eq!(plain.base_rtt(), Some(ms(100)), "Vegas keeps the old minimum");
        assert_eq!(k.base_rtt(), Some(ms(150)), "Vegas-k forgot the 100 ms rounds");
        assert_eq!(k.name(), "vegas-k");
    }

    #[test]
    fn slow_start_grows_every_other_round_and_ends_above_gamma() {
        let mut v = Vegas::new(&params(2), VegasParams::NS2);
        round(&mut v, ms(100)); // round 1 opens: growth round
        let w1 = v.cwnd();
        assert_eq!(w1, 4 * MSS, "doubled in the growth round");
        round(&mut v, ms(100)); // judged (no backlog), next round holds
        round(&mut v, ms(100));
        let held = v.cwnd();
        round(&mut v, ms(100));
        assert!(v.cwnd() > held, "grows again a round later");
        // A round with a backlog above γ ends slow start near the uncongested window.
        let w = v.cwnd();
        round(&mut v, ms(150));
        assert!(v.ssthresh() < u64::MAX && v.cwnd() < w, "{} {}", v.cwnd(), v.ssthresh());
        let expected = (w as f64 * 100.0 / 150.0) as u64 + MSS;
        assert!(v.cwnd() <= expected.max(2 * MSS));
    }

    #[test]
    fn loss_halves_as_reno() {
        let mut v = in_avoidance(VegasParams::NS2, 20);
        v.on_enter_recovery(Instant::ZERO, 20 * MSS);
        v.on_exit_recovery(Instant::ZERO, 10 * MSS);
        assert_eq!((v.cwnd(), v.ssthresh()), (10 * MSS, 10 * MSS));
        v.on_rto(Instant::ZERO, 10 * MSS, true);
        assert_eq!((v.cwnd(), v.ssthresh()), (MSS, 5 * MSS));
    }
}
