//! HyStart++ (RFC 9406): leaving slow start on a rise in the round's minimum RTT, before the
//! buffer overflows, through a few rounds of Conservative Slow Start (CSS).
//!
//! It owns only the detection state; the controller owns the window and asks how much of
//! slow start's usual growth to apply ([`HyStartPlusPlus::growth_divisor`]) and whether to
//! end slow start (the return value of [`HyStartPlusPlus::on_ack`]). Constants are RFC 9406
//! §4.3's recommended values. Following RFC 9406 §4.3, it runs only in the connection's
//! first slow start (while ssthresh is still "arbitrarily high"); the controller drops it at
//! the first congestion event.
//!
//! Why HyStart++ rather than Linux's original HyStart (ACK-train length plus delay
//! increase): RFC 9406 specifies every threshold and state transition, and the ACK-train
//! detector depends on ACK spacing at microsecond scale that a simulator with delayed ACKs
//! reproduces only approximately.

use pathtwin_core::time::Duration;

/// RTT samples per round before a round's minimum is trusted (RFC 9406 N_RTT_SAMPLE).
const N_RTT_SAMPLE: u32 = 8;
/// Bounds on the RTT increase that means a queue is building (MIN_RTT_THRESH,
/// MAX_RTT_THRESH) and the fraction of the last round's minimum used (MIN_RTT_DIVISOR).
const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
const MIN_RTT_DIVISOR: u32 = 8;
/// Slow start's growth is divided by this in CSS (CSS_GROWTH_DIVISOR).
pub(crate) const CSS_GROWTH_DIVISOR: f64 = 4.0;
/// Full rounds spent in CSS before congestion avoidance (CSS_ROUNDS).
const CSS_ROUNDS: u32 = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    SlowStart,
    /// Conservative Slow Start. `rounds_ended` counts round ends since entering, so the
    /// partial round CSS began in is not counted as one of the CSS_ROUNDS.
    Css { baseline: Duration, rounds_ended: u32 },
}

#[derive(Clone, Debug)]
pub(crate) struct HyStartPlusPlus {
    phase: Phase,
    last_round_min: Option<Duration>,
    current_round_min: Option<Duration>,
    samples: u32,
}

impl HyStartPlusPlus {
    pub(crate) fn new() -> Self {
        HyStartPlusPlus { phase: Phase::SlowStart, last_round_min: None, current_round_min: None, samples: 0 }
    }

    /// 1 in standard slow start, CSS_GROWTH_DIVISOR in CSS.
    pub(crate) fn growth_divisor(&self) -> f64 {
        match self.phase {
            Phase::SlowStart => 1.0,
            Phase::Css { .. } => CSS_GROWTH_DIVISOR,
        }
    }

    #[cfg(test)]
    pub(crate) fn in_css(&self) -> bool {
        matches!(self.phase, Phase::Css { .. })
    }

    /// An ACK in slow start with this RTT sample, which ends the current round if
    /// `round_ended`. Returns true when slow start should end (ssthresh = cwnd).
    pub(crate) fn on_ack(&mut self, rtt: Option<Duration>, round_ended: bool) -> bool {
        if let Some(rtt) = rtt {
            self.current_round_min = Some(self.current_round_min.map_or(rtt, |m| m.min(rtt)));
            self.samples += 1;
        }
        if self.samples >= N_RTT_SAMPLE {
            if let (Some(cur), Some(last)) = (self.current_round_min, self.last_round_min) {
                match self.phase {
                    Phase::SlowStart => {
                        let thresh = Duration::from_nanos(last.as_nanos() / MIN_RTT_DIVISOR as u64).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
                        if cur >= last + thresh {
                            self.phase = Phase::Css { baseline: cur, rounds_ended: 0 };
                        }
                    }
                    Phase::Css { baseline, .. } => {
                        // The RTT fell back: the increase was spurious (RFC 9406 §4.2).
                        if cur < baseline {
                            self.phase = Phase::SlowStart;
                        }
                    }
                }
            }
        }
        if round_ended {
            self.last_round_min = self.current_round_min.take();
            self.samples = 0;
            if let Phase::Css { baseline, rounds_ended } = self.phase {
                let rounds_ended = rounds_ended + 1;
                if rounds_ended > CSS_ROUNDS {
                    return true;
                }
                self.phase = Phase::Css { baseline, rounds_ended };
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Feeds a round of `n` samples at `rtt`; returns whether slow start ended.
    fn round(h: &mut HyStartPlusPlus, n: u32, rtt: Duration) -> bool {
        let mut ended = false;
        for i in 0..n {
            ended |= h.on_ack(Some(rtt), i == n - 1);
        }
        ended
    }

    #[test]
    fn rtt_threshold_is_an_eighth_of_the_last_minimum_clamped_to_4_to_16_ms() {
        // 100 ms / 8 = 12.5 ms: 112 ms stays in slow start, 113 ms enters CSS.
        let mut h = HyStartPlusPlus::new();
        round(&mut h, 10, ms(100));
        round(&mut h, 10, ms(112));
        assert!(!h.in_css());
        let mut h = HyStartPlusPlus::new();
        round(&mut h, 10, ms(100));
        round(&mut h, 10, ms(113));
        assert!(h.in_css());
        // 20 ms / 8 = 2.5 ms, clamped to 4 ms.
        let mut h = HyStartPlusPlus::new();
        round(&mut h, 10, ms(20));
        round(&mut h, 10, ms(23));
        assert!(!h.in_css());
        // 400 ms / 8 = 50 ms, clamped to 16 ms.
        let mut h = HyStartPlusPlus::new();
        round(&mut h, 10, ms(400));
        round(&mut h, 10, ms(417));
        assert!(h.in_css());
    }

    #[test]
    fn needs_eight_samples_per_round() {
        let mut h = HyStartPlusPlus::new();
        round(&mut h, 7, ms(100));
        round(&mut h, 7, ms(150));
        assert!(!h.in_css());
    }

    #[test]
    fn css_lasts_five_full_rounds_unless_the_rtt_falls_back() {
        let mut h = HyStartPlusPlus::new();
        round(&mut h, 10, ms(100));
        assert!(!round(&mut h, 10, ms(120)));
        for _ in 0..CSS_ROUNDS - 1 {
            assert!(!round(&mut h, 10, ms(120)));
        }
        assert!(round(&mut h, 10, ms(120)), "the fifth full CSS round ends slow start");

        let mut h = HyStartPlusPlus::new();
        round(&mut h, 10, ms(100));
        round(&mut h, 10, ms(120));
        round(&mut h, 10, ms(110));
        assert!(!h.in_css(), "RTT below the CSS baseline resumes slow start");
    }
}
