//! Leaving slow start before the buffer overflows: HyStart++ (RFC 9406) for CUBIC's RFC 9438
//! form, and Linux's original HyStart ([`HyStartLinux`], `tcp_cubic.c`) for its Linux form.
//!
//! **HyStart++** ends slow start on a rise in the round's minimum RTT, through a few rounds
//! of Conservative Slow Start (CSS). It owns only the detection state; the controller owns the window and asks how much of
//! slow start's usual growth to apply ([`HyStartPlusPlus::growth_divisor`]) and whether to
//! end slow start (the return value of [`HyStartPlusPlus::on_ack`]). Constants are RFC 9406
//! §4.3's recommended values. Following RFC 9406 §4.3, it runs only in the connection's
//! first slow start (while ssthresh is still "arbitrarily high"); the controller drops it at
//! the first congestion event.
//!
//! Why HyStart++ in the RFC form: RFC 9406 specifies every threshold and state transition.
//!
//! **Linux's HyStart** (Ha & Rhee 2008; `hystart_update` and `cubictcp_acked` in Linux 6.x's
//! `net/ipv4/tcp_cubic.c`) is what the kernel runs, in every slow start (it is reset with the
//! rest of CUBIC's state on a timeout), not HyStart++, which Linux does not have: a simulator
//! that stands in for the kernel must leave slow start where the kernel does. Two detectors,
//! both setting ssthresh = cwnd at once (no CSS), from a window of `hystart_low_window` = 16
//! segments on, on every ACK that carries an RTT sample:
//!
//! - *ACK train*: ACKs of a round that arrive within `hystart_ack_delta_us` = 2 ms of each
//!   other form a train; once the train has lasted longer than (delay_min +
//!   `hystart_ack_delay`)/2 (the sender is not paced), the window has filled the path. The
//!   train starts at the round's first ACK; a gap longer than 2 ms breaks it for the rest of
//!   the round. `hystart_ack_delay` is min(1 ms, 4·GSO max size / pacing rate), with
//!   Linux's slow-start pacing rate of 2·cwnd·MSS/SRTT (`tcp_update_pacing_rate`) and a GSO
//!   max size of 64 KiB (`GSO_LEGACY_MAX_SIZE`): 1 ms below about 2 Gbit/s.
//! - *Delay*: the round's minimum RTT over its first `HYSTART_MIN_SAMPLES` = 8 samples and
//!   on, once it exceeds delay_min + clamp(delay_min/8, 4 ms, 16 ms).
//!
//! A round ends with the first ACK beyond the SND.NXT at its start (`after(snd_una,
//! end_seq)`). delay_min is CUBIC's, the connection's smallest RTT sample (kept by the
//! controller, which also skips samples in the first second of an epoch).

use pathtwin_core::time::{Duration, Instant};

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

/// `hystart_low_window`: HyStart runs once cwnd is at least this many segments.
const LINUX_LOW_WINDOW: f64 = 16.0;
/// `hystart_ack_delta_us`: ACKs closer than this belong to one train.
const LINUX_ACK_DELTA: Duration = Duration::from_millis(2);
/// `HYSTART_MIN_SAMPLES`: RTT samples of a round before the delay detector decides.
const LINUX_MIN_SAMPLES: u32 = 8;
/// `HYSTART_DELAY_MIN` and `HYSTART_DELAY_MAX`, the clamp on delay_min/8.
const LINUX_DELAY_MIN: Duration = Duration::from_millis(4);
const LINUX_DELAY_MAX: Duration = Duration::from_millis(16);
/// `hystart_ack_delay`'s cap (`USEC_PER_MSEC`) and the GSO size it scales (64 KiB).
const LINUX_ACK_DELAY_CAP: Duration = Duration::from_millis(1);
const LINUX_GSO_MAX_SIZE: f64 = 65_536.0;

/// Linux's HyStart state (`struct bictcp`'s round_start, end_seq, last_ack, curr_rtt,
/// sample_cnt, found).
#[derive(Clone, Debug, Default)]
pub(crate) struct HyStartLinux {
    round_start: Instant,
    last_ack: Instant,
    /// SND.NXT at the round's start; `None` before the first round (Linux's end_seq is
    /// SND.NXT at `cubictcp_init`, before any data).
    end_seq: Option<u64>,
    curr_rtt: Option<Duration>,
    sample_cnt: u32,
    found: bool,
}

/// What [`HyStartLinux::on_ack`] needs of the connection, at an ACK with an RTT sample.
pub(crate) struct LinuxAck {
    pub now: Instant,
    pub rtt: Duration,
    /// SND.UNA after the ACK and SND.NXT.
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// cwnd in segments before this ACK's growth.
    pub cwnd: f64,
    pub smss: f64,
    pub srtt: Option<Duration>,
    /// CUBIC's delay_min, already updated with this sample.
    pub delay_min: Duration,
}

impl HyStartLinux {
    /// `bictcp_hystart_reset`.
    fn reset(&mut self, now: Instant, snd_nxt: u64) {
        self.round_start = now;
        self.last_ack = now;
        self.end_seq = Some(snd_nxt);
        self.curr_rtt = None;
        self.sample_cnt = 0;
    }

    /// `hystart_update` for an ACK in slow start; returns true when slow start must end
    /// (ssthresh = cwnd).
    pub(crate) fn on_ack(&mut self, a: &LinuxAck) -> bool {
        if self.found {
            return false;
        }
        if self.end_seq.is_none_or(|e| a.snd_una > e) {
            self.reset(a.now, a.snd_nxt);
        }
        if a.cwnd < LINUX_LOW_WINDOW {
            return false;
        }
        if a.now.saturating_since(self.last_ack) <= LINUX_ACK_DELTA {
            self.last_ack = a.now;
            let threshold = Duration::from_nanos((a.delay_min + ack_delay(a)).as_nanos() / 2);
            if a.now.saturating_since(self.round_start) > threshold {
                self.found = true;
            }
        }
        let curr = self.curr_rtt.map_or(a.rtt, |c| c.min(a.rtt));
        self.curr_rtt = Some(curr);
        if self.sample_cnt < LINUX_MIN_SAMPLES {
            self.sample_cnt += 1;
        } else if curr > a.delay_min + Duration::from_nanos(a.delay_min.as_nanos() / 8).clamp(LINUX_DELAY_MIN, LINUX_DELAY_MAX) {
            self.found = true;
        }
        self.found
    }
}

/// `hystart_ack_delay`: min(1 ms, 4·GSO size / pacing rate), the pacing rate being Linux's
/// slow-start one, 2·cwnd·MSS/SRTT (`tcp_update_pacing_rate`, `tcp_pacing_ss_ratio` = 200).
fn ack_delay(a: &LinuxAck) -> Duration {
    let Some(srtt) = a.srtt.filter(|s| *s > Duration::ZERO) else { return Duration::ZERO };
    let rate = 2.0 * a.cwnd * a.smss / srtt.as_secs_f64();
    if rate <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(4.0 * LINUX_GSO_MAX_SIZE / rate).min(LINUX_ACK_DELAY_CAP)
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

    fn at(ms_: f64) -> Instant {
        Instant::ZERO + Duration::from_secs_f64(ms_ / 1000.0)
    }

    fn linux_ack(now: Instant, rtt_ms: u64, una: u64, nxt: u64, cwnd: f64) -> LinuxAck {
        LinuxAck { now, rtt: ms(rtt_ms), snd_una: una, snd_nxt: nxt, cwnd, smss: 1448.0, srtt: Some(ms(60)), delay_min: ms(60) }
    }

    #[test]
    fn linux_ack_train_longer_than_half_the_min_rtt_ends_slow_start() {
        // 60 ms path: threshold (60 + 1)/2 = 30.5 ms. ACKs 1.2 ms apart (delayed ACKs at
        // 20 Mbit/s): the round's train passes 30.5 ms at its 27th ACK.
        let mut h = HyStartLinux::default();
        let mut n = 0;
        loop {
            let now = at(100.0 + 1.2 * n as f64);
            if h.on_ack(&linux_ack(now, 60, 1 + n, 1_000_000, 64.0)) {
                break;
            }
            n += 1;
            assert!(n < 100);
        }
        assert_eq!(n, 26, "train of {:.1} ms", 1.2 * n as f64);
        // Below 16 segments nothing is detected.
        let mut h = HyStartLinux::default();
        for n in 0..100 {
            assert!(!h.on_ack(&linux_ack(at(1.2 * n as f64), 60, 1 + n, 1_000_000, 15.0)));
        }
    }

    #[test]
    fn linux_a_gap_breaks_the_train_until_the_next_round() {
        let mut h = HyStartLinux::default();
        // ACKs 3 ms apart (10 Mbit/s with delayed ACKs): never a train; the RTT stays put.
        for n in 0..200 {
            assert!(!h.on_ack(&linux_ack(at(3.0 * n as f64), 60, 1 + n, 1_000_000, 64.0)));
        }
    }

    #[test]
    fn linux_delay_detector_fires_past_an_eighth_of_delay_min_clamped() {
        // delay_min 60 ms: threshold 60 + 7.5 ms; the 9th sample of a round decides.
        let run = |rtt: u64| {
            let mut h = HyStartLinux::default();
            (0..12).any(|n| h.on_ack(&linux_ack(at(10.0 * n as f64), rtt, 1 + n, 1_000_000, 20.0)))
        };
        assert!(!run(67));
        assert!(run(68));
        // A new round (SND.UNA past end_seq) starts counting samples again.
        let mut h = HyStartLinux::default();
        for n in 0..8 {
            assert!(!h.on_ack(&linux_ack(at(10.0 * n as f64), 80, 1 + n, 100, 20.0)));
        }
        assert!(!h.on_ack(&linux_ack(at(90.0), 80, 101, 200, 20.0)), "first ACK of the next round");
    }
}
