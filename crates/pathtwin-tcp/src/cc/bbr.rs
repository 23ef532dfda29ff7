//! BBR v1 congestion control: Cardwell, Cheng, Gunn, Hassas Yeganeh, Jacobson, "BBR:
//! Congestion-Based Congestion Control", ACM Queue 14(5), 2016, and
//! draft-cardwell-iccrg-bbr-congestion-control-00, with the state machine of Linux 4.9–5.x
//! `net/ipv4/tcp_bbr.c`, which is what the draft describes.
//!
//! BBR models the path by two numbers and paces at their product rather than reacting to
//! loss: BtlBw, the bottleneck bandwidth, is the windowed maximum of delivery-rate samples
//! (see [`crate::rate`]) over the last [`BW_FILTER_ROUNDS`] round trips; RTprop, the
//! round-trip propagation time, is the minimum RTT seen over [`MIN_RTT_WINDOW`]. It sends at
//! `pacing_gain · BtlBw` and caps the data in flight at `cwnd_gain · BtlBw · RTprop` plus a
//! small allowance. Four modes set the gains:
//!
//! - **Startup**: pacing and cwnd gain 2/ln 2 ≈ 2.885, the smallest gain that doubles the
//!   sending rate every round trip. Ends when the bandwidth estimate has grown less than
//!   25 % in three consecutive round trips (the pipe is full).
//! - **Drain**: pacing gain ln 2/2, the inverse, until the data in flight is down to one
//!   estimated BDP, which empties the queue Startup built.
//! - **ProbeBW**: an eight-phase cycle of pacing gains 5/4, 3/4, 1, 1, 1, 1, 1, 1, each
//!   phase about one RTprop long, with cwnd gain 2. The 5/4 phase probes for more
//!   bandwidth, the 3/4 phase drains the queue that probing made. The cycle starts at a
//!   random phase other than 3/4.
//! - **ProbeRTT**: when RTprop has not been refreshed for 10 s, cwnd drops to 4 segments
//!   for at least 200 ms and one round trip, so that queues drain and the true RTprop can
//!   be seen; then back to ProbeBW (or Startup if the pipe was never found full).
//!
//! Loss: BBR v1 does not reduce its model on loss. On a recovery episode's first round it
//! uses packet conservation (cwnd = data in flight + data just delivered, never less) and
//! restores the cwnd it had before on leaving recovery; every ACK also takes the bytes it
//! newly deemed lost off cwnd. A retransmission timeout sets cwnd to one segment (Linux's
//! `tcp_enter_loss`: in flight + 1 packet, with everything deemed lost), forgets the
//! bandwidth Startup's full-pipe detection compares with, grows cwnd again by the data each
//! ACK delivers, and restores the saved cwnd once everything outstanding at the timeout is
//! acknowledged. Without SACK the endpoint's NewReno window inflation governs the window
//! during fast recovery instead (see [`super`]); BBR's cwnd is left unchanged on entry.
//!
//! `ssthresh` is not used by BBR. It reports `u64::MAX` ("infinite", Linux's
//! `TCP_INFINITE_SSTHRESH`) until Startup ends and then, as Linux does on entering Drain,
//! the estimated BDP at that moment (target cwnd at gain 1).
//!
//! Units and deviations from Linux:
//! - Bytes instead of packets: BtlBw in bytes per second, windows in bytes. Linux's
//!   packet-based cwnd arithmetic becomes the same arithmetic in whole segments of SMSS.
//! - The target cwnd is `ceil(gain · BtlBw · RTprop)` rounded up to whole segments, plus
//!   the quantization budget of 3 segments (Linux's `3 · tso_segs_goal` with one segment per
//!   transmission, as the simulated endpoint has no TSO), rounded up to an even number of
//!   segments (v1's allowance for delayed ACKs). Gains are fixed point with 8 fractional
//!   bits, as Linux's `BBR_UNIT`, so every gain below has exactly Linux's value.
//! - Before the first RTT sample the pacing rate is the initial window over a nominal 1 ms
//!   RTT at high gain (Linux's value without a handshake RTT); the first ACK re-derives it
//!   from the smoothed RTT, as Linux does when it first sees an RTT. Linux already knows the
//!   handshake RTT when BBR starts; the controller here is told only at the first ACK.
//! - Not modelled: the long-term ("policer") bandwidth sampling `lt_bw` and the ACK
//!   aggregation allowance (Linux ≥ 4.20), both outside the draft; the restart after idle
//!   (`CA_EVENT_TX_START`), which only matters for on/off applications; TSO sizing; the 1 %
//!   pacing margin of Linux ≥ 4.20 (v1 as in 4.9 paces at exactly gain · BtlBw).
//! - The random start phase of ProbeBW comes from a hash of the time and the bytes
//!   delivered, not from a random number generator: the model stays deterministic, and two
//!   flows entering ProbeBW at different times still start at different phases.

use super::{AckEvent, CcParams, CongestionControl, DeliveryEvent};
use pathtwin_core::time::{Duration, Instant};
use std::any::Any;

/// Fixed-point unit of gains (Linux `BBR_UNIT`, 8 fractional bits).
pub const GAIN_UNIT: u64 = 256;
/// Startup gain 2/ln 2 ≈ 2.885 (ACM Queue 2016; Linux `bbr_high_gain = BBR_UNIT * 2885 /
/// 1000 + 1`).
pub const HIGH_GAIN: u64 = GAIN_UNIT * 2885 / 1000 + 1;
/// Drain gain ln 2/2, the inverse of [`HIGH_GAIN`] (Linux `bbr_drain_gain`).
pub const DRAIN_GAIN: u64 = GAIN_UNIT * 1000 / 2885;
/// ProbeBW cwnd gain 2 (Linux `bbr_cwnd_gain`): room for ACK aggregation and the 5/4 phase.
pub const PROBE_BW_CWND_GAIN: u64 = GAIN_UNIT * 2;
/// ProbeBW pacing gains, one phase per RTprop (Linux `bbr_pacing_gain`).
pub const PACING_GAIN_CYCLE: [u64; 8] =
    [GAIN_UNIT * 5 / 4, GAIN_UNIT * 3 / 4, GAIN_UNIT, GAIN_UNIT, GAIN_UNIT, GAIN_UNIT, GAIN_UNIT, GAIN_UNIT];
/// The cycle starts at one of the last 7 phases before the one entered (Linux
/// `bbr_cycle_rand`), so never in the 3/4 phase.
const CYCLE_RAND: u64 = 7;
/// BtlBw filter window in round trips (Linux `bbr_bw_rtts = CYCLE_LEN + 2`).
pub const BW_FILTER_ROUNDS: u64 = 10;
/// RTprop filter window (Linux `bbr_min_rtt_win_sec`).
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// Least time in ProbeRTT (Linux `bbr_probe_rtt_mode_ms`).
pub const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// Startup's bandwidth must grow by this factor per round to continue (Linux
/// `bbr_full_bw_thresh`: 5/4).
const FULL_BW_THRESH: u64 = GAIN_UNIT * 5 / 4;
/// Rounds without that growth after which the pipe is full (Linux `bbr_full_bw_cnt`).
const FULL_BW_ROUNDS: u32 = 3;
/// Least cwnd, and the cwnd of ProbeRTT, in segments (Linux `bbr_cwnd_min_target`).
pub const MIN_CWND_SEGMENTS: u64 = 4;
/// Quantization budget in segments (Linux `3 · tso_segs_goal`, one segment per send here).
const QUANTIZATION_SEGMENTS: u64 = 3;
/// Linux's `TCP_INIT_CWND`: the target before any RTT is known, and the data below which
/// cwnd grows regardless of the target.
const INIT_CWND_SEGMENTS: u64 = 10;
/// RTT assumed for the initial pacing rate before any sample (Linux `USEC_PER_MSEC`).
const NOMINAL_RTT: Duration = Duration::from_millis(1);

/// BBR's operating mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BbrMode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// The endpoint's loss-recovery state as BBR tracks it (Linux's `icsk_ca_state`, ordered
/// as there: Open < Recovery < Loss).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LossState {
    Open,
    Recovery,
    Loss,
}

/// One sample of a windowed max filter: value `v` at time `t` (here a round count).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct MaxSample {
    t: u64,
    v: u64,
}

/// Kathleen Nichols' windowed max filter (Linux `lib/win_minmax.c`): the best, second-best
/// and third-best samples in distinct sub-windows of the window, so that the maximum over
/// the last `win` time units is known in O(1) without keeping every sample.
#[derive(Clone, Copy, Debug, Default)]
struct WindowedMax {
    s: [MaxSample; 3],
}

impl WindowedMax {
    fn get(&self) -> u64 {
        self.s[0].v
    }

    fn reset(&mut self, t: u64, v: u64) -> u64 {
        self.s = [MaxSample { t, v }; 3];
        v
    }

    /// Adds the sample `v` taken at `t`; returns the maximum over (t − win, t].
    fn update(&mut self, win: u64, t: u64, v: u64) -> u64 {
        let val = MaxSample { t, v };
        if v >= self.s[0].v || t - self.s[2].t > win {
            return self.reset(t, v);
        }
        if v >= self.s[1].v {
            self.s[1] = val;
            self.s[2] = val;
        } else if v >= self.s[2].v {
            self.s[2] = val;
        }
        // Let the best sample expire, and keep the others spread over the window.
        let dt = t - self.s[0].t;
        if dt > win {
            self.s = [self.s[1], self.s[2], val];
            if t - self.s[0].t > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].v
    }
}

/// BBR v1.
#[derive(Clone, Debug)]
pub struct Bbr {
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    mode: BbrMode,
    pacing_rate: u64,
    pacing_gain: u64,
    cwnd_gain: u64,
    /// BtlBw filter over round counts, bytes per second.
    bw: WindowedMax,
    /// Round trips counted so far (Linux `rtt_cnt`).
    round_count: u64,
    /// Delivered count that ends the current round (Linux `next_rtt_delivered`).
    next_round_delivered: u64,
    /// This ACK started a new round.
    round_start: bool,
    /// RTprop and when it was last refreshed.
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    /// ProbeRTT ends after this time (once the flight is down to the minimum) ...
    probe_rtt_done_stamp: Option<Instant>,
    /// ... and after one round trip at the minimum.
    probe_rtt_round_done: bool,
    /// First round of fast recovery: cwnd follows packet conservation.
    packet_conservation: bool,
    /// cwnd before recovery or ProbeRTT, restored after them.
    prior_cwnd: u64,
    restore_cwnd: bool,
    prev_state: LossState,
    /// Startup's full-pipe detection: the bandwidth reached and the rounds since it grew by
    /// a quarter.
    full_bw: u64,
    full_bw_count: u32,
    /// ProbeBW phase and when it began.
    cycle_index: usize,
    cycle_stamp: Instant,
    /// The pacing rate has been derived from a measured RTT.
    has_seen_rtt: bool,
    /// Samples of what is sent now should be marked application-limited (ProbeRTT).
    mark_app_limited: bool,
}

impl Bbr {
    pub fn new(p: &CcParams) -> Self {
        let smss = p.smss as u64;
        let cwnd = p.initial_cwnd.max(1);
        let mut bbr = Bbr {
            smss,
            cwnd,
            ssthresh: u64::MAX,
            mode: BbrMode::Startup,
            pacing_rate: 0,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            bw: WindowedMax::default(),
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            packet_conservation: false,
            prior_cwnd: 0,
            restore_cwnd: false,
            prev_state: LossState::Open,
            full_bw: 0,
            full_bw_count: 0,
            cycle_index: 0,
            cycle_stamp: Instant::ZERO,
            has_seen_rtt: false,
            mark_app_limited: false,
        };
        bbr.init_pacing_rate(None);
        bbr
    }

    pub fn mode(&self) -> BbrMode {
        self.mode
    }
    /// The BtlBw estimate in bytes per second (0 before the first valid sample).
    pub fn btl_bw(&self) -> u64 {
        self.bw.get()
    }
    /// The RTprop estimate.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }
    /// Current pacing gain, in units of [`GAIN_UNIT`].
    pub fn pacing_gain(&self) -> u64 {
        self.pacing_gain
    }
    /// Current cwnd gain, in units of [`GAIN_UNIT`].
    pub fn cwnd_gain(&self) -> u64 {
        self.cwnd_gain
    }
    /// Index of the current ProbeBW phase in [`PACING_GAIN_CYCLE`].
    pub fn cycle_phase(&self) -> usize {
        self.cycle_index
    }
    /// Round trips counted so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }
    /// Startup has found the pipe full.
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_count >= FULL_BW_ROUNDS
    }

    /// The cwnd BBR aims for at `gain` (Linux `bbr_target_cwnd`): gain · BtlBw · RTprop in
    /// whole segments, plus the quantization budget, rounded up to an even segment count.
    pub fn target_cwnd(&self, gain: u64) -> u64 {
        let Some(min_rtt) = self.min_rtt else { return INIT_CWND_SEGMENTS * self.smss };
        let scaled = self.bw.get() as u128 * min_rtt.as_nanos() as u128 * gain as u128;
        let per_segment = 1_000_000_000u128 * GAIN_UNIT as u128 * self.smss as u128;
        let segments = scaled.div_ceil(per_segment) as u64 + QUANTIZATION_SEGMENTS;
        segments.next_multiple_of(2) * self.smss
    }

    fn min_cwnd(&self) -> u64 {
        MIN_CWND_SEGMENTS * self.smss
    }

    /// Linux `bbr_init_pacing_rate_from_rtt`: high gain times cwnd over the RTT.
    fn init_pacing_rate(&mut self, srtt: Option<Duration>) {
        let rtt = match srtt {
            Some(r) => {
                self.has_seen_rtt = true;
                r.max(Duration::from_nanos(1))
            }
            None => NOMINAL_RTT,
        };
        let bw = self.cwnd as u128 * 1_000_000_000 / rtt.as_nanos() as u128;
        self.pacing_rate = (bw * HIGH_GAIN as u128 / GAIN_UNIT as u128).min(u64::MAX as u128) as u64;
    }

    /// Linux `bbr_set_pacing_rate`: in Startup the rate only grows, so that a low early
    /// sample does not slow the ramp. A zero estimate (every sample in the window delivered
    /// nothing new) carries no information and leaves the rate alone; Linux stops pacing
    /// then.
    fn set_pacing_rate(&mut self, gain: u64) {
        let rate = (self.bw.get() as u128 * gain as u128 / GAIN_UNIT as u128).min(u64::MAX as u128) as u64;
        if rate > 0 && (self.full_bw_reached() || rate > self.pacing_rate) {
            self.pacing_rate = rate;
        }
    }

    /// Linux `bbr_save_cwnd`: remember the cwnd to restore after recovery or ProbeRTT; if
    /// one of those already cut it, keep the larger.
    fn save_cwnd(&mut self) {
        if self.prev_state < LossState::Recovery && self.mode != BbrMode::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    fn update_bw(&mut self, ev: &DeliveryEvent) {
        self.round_start = false;
        let rs = &ev.sample;
        let Some(bw) = rs.delivery_rate() else { return };
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.total_delivered;
            self.round_count += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        // An application-limited sample only says the path can do at least that much.
        if !rs.is_app_limited || bw >= self.bw.get() {
            self.bw.update(BW_FILTER_ROUNDS, self.round_count, bw);
        }
    }

    fn advance_cycle_phase(&mut self, now: Instant) {
        self.cycle_index = (self.cycle_index + 1) % PACING_GAIN_CYCLE.len();
        self.cycle_stamp = now;
        self.pacing_gain = PACING_GAIN_CYCLE[self.cycle_index];
    }

    /// Linux `bbr_is_next_cycle_phase`: each phase lasts about RTprop; the probing phase
    /// lasts until the flight reached 5/4 of the BDP (or loss), the draining phase ends
    /// early once the flight is down to one BDP.
    fn is_next_cycle_phase(&self, ev: &DeliveryEvent) -> bool {
        let full_length = ev.now.saturating_since(self.cycle_stamp) > self.min_rtt.unwrap_or(Duration::ZERO);
        if self.pacing_gain == GAIN_UNIT {
            return full_length;
        }
        let inflight = ev.pipe_before;
        if self.pacing_gain > GAIN_UNIT {
            full_length && (ev.newly_lost > 0 || inflight >= self.target_cwnd(self.pacing_gain))
        } else {
            full_length || inflight <= self.target_cwnd(GAIN_UNIT)
        }
    }

    fn check_full_bw_reached(&mut self, ev: &DeliveryEvent) {
        if self.full_bw_reached() || !self.round_start || ev.sample.is_app_limited {
            return;
        }
        let bw = self.bw.get();
        if bw as u128 >= self.full_bw as u128 * FULL_BW_THRESH as u128 / GAIN_UNIT as u128 {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
    }

    fn enter_startup(&mut self) {
        self.mode = BbrMode::Startup;
        self.pacing_gain = HIGH_GAIN;
        self.cwnd_gain = HIGH_GAIN;
    }

    /// Enters ProbeBW at a pseudo-random phase other than the draining one.
    fn enter_probe_bw(&mut self, ev: &DeliveryEvent) {
        self.mode = BbrMode::ProbeBw;
        self.pacing_gain = GAIN_UNIT;
        self.cwnd_gain = PROBE_BW_CWND_GAIN;
        let r = splitmix64(ev.now.as_nanos() ^ ev.sample.total_delivered.rotate_left(32)) % CYCLE_RAND;
        self.cycle_index = PACING_GAIN_CYCLE.len() - 1 - r as usize;
        self.advance_cycle_phase(ev.now);
    }

    fn reset_mode(&mut self, ev: &DeliveryEvent) {
        if self.full_bw_reached() {
            self.enter_probe_bw(ev);
        } else {
            self.enter_startup();
        }
    }

    fn check_drain(&mut self, ev: &DeliveryEvent) {
        if self.mode == BbrMode::Startup && self.full_bw_reached() {
            self.mode = BbrMode::Drain;
            self.pacing_gain = DRAIN_GAIN;
            self.cwnd_gain = HIGH_GAIN;
            self.ssthresh = self.target_cwnd(GAIN_UNIT);
        }
        if self.mode == BbrMode::Drain && ev.pipe <= self.target_cwnd(GAIN_UNIT) {
            self.enter_probe_bw(ev);
        }
    }

    /// Linux `bbr_update_min_rtt`: refresh RTprop, and enter, hold or leave ProbeRTT.
    fn update_min_rtt(&mut self, ev: &DeliveryEvent) {
        let now = ev.now;
        let expired = self.min_rtt.is_some() && now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if let Some(rtt) = ev.sample.rtt {
            if self.min_rtt.is_none_or(|m| rtt <= m) || expired {
                self.min_rtt = Some(rtt);
                self.min_rtt_stamp = now;
            }
        }
        if expired && self.mode != BbrMode::ProbeRtt {
            self.mode = BbrMode::ProbeRtt;
            self.pacing_gain = GAIN_UNIT;
            self.cwnd_gain = GAIN_UNIT;
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
        }
        self.mark_app_limited = self.mode == BbrMode::ProbeRtt;
        if self.mode != BbrMode::ProbeRtt {
            return;
        }
        match self.probe_rtt_done_stamp {
            None if ev.pipe <= self.min_cwnd() => {
                // The flight is down to the minimum: hold it for 200 ms and one round.
                self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = ev.sample.total_delivered;
            }
            None => {}
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now > done {
                    self.min_rtt_stamp = now;
                    self.restore_cwnd = true;
                    self.reset_mode(ev);
                }
            }
        }
    }

    /// Linux `bbr_set_cwnd_to_recover_or_restore`; returns the cwnd to use and whether
    /// packet conservation decided it.
    fn recover_or_restore(&mut self, ev: &DeliveryEvent, acked: u64) -> (u64, bool) {
        let state = if ev.in_recovery {
            LossState::Recovery
        } else if ev.in_timeout_recovery {
            LossState::Loss
        } else {
            LossState::Open
        };
        // An ACK for P bytes releases at most 2·P: first take what was lost off cwnd.
        let mut cwnd = self.cwnd;
        if ev.newly_lost > 0 {
            cwnd = cwnd.saturating_sub(ev.newly_lost).max(self.smss);
        }
        if state == LossState::Recovery && self.prev_state != LossState::Recovery {
            // First round of recovery: packet conservation, and this round starts now.
            self.packet_conservation = true;
            self.next_round_delivered = ev.sample.total_delivered;
            cwnd = ev.pipe + acked;
        } else if self.prev_state >= LossState::Recovery && state < LossState::Recovery {
            self.restore_cwnd = true;
            self.packet_conservation = false;
        }
        self.prev_state = state;
        if self.restore_cwnd {
            cwnd = cwnd.max(self.prior_cwnd);
            self.restore_cwnd = false;
        }
        if self.packet_conservation {
            return (cwnd.max(ev.pipe + acked), true);
        }
        (cwnd, false)
    }

    /// Linux `bbr_set_cwnd`.
    fn set_cwnd(&mut self, ev: &DeliveryEvent) {
        let acked = ev.sample.newly_delivered;
        if acked > 0 {
            let (mut cwnd, conserving) = self.recover_or_restore(ev, acked);
            if !conserving {
                let target = self.target_cwnd(self.cwnd_gain);
                if self.full_bw_reached() {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || ev.sample.total_delivered < INIT_CWND_SEGMENTS * self.smss {
                    cwnd += acked;
                }
                cwnd = cwnd.max(self.min_cwnd());
            }
            self.cwnd = cwnd;
        }
        if self.mode == BbrMode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_cwnd());
        }
    }
}

/// SplitMix64's finaliser: a well-mixed hash of a 64-bit value.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    /// Only the first RTT matters here: it sets the initial pacing rate. Everything else
    /// happens in [`on_delivery`](CongestionControl::on_delivery).
    fn on_ack(&mut self, ev: &AckEvent) {
        if !self.has_seen_rtt && ev.srtt.is_some() {
            self.init_pacing_rate(ev.srtt);
        }
    }

    /// Linux `bbr_main`: update the model, then the pacing rate and cwnd.
    fn on_delivery(&mut self, ev: &DeliveryEvent) {
        self.update_bw(ev);
        if self.mode == BbrMode::ProbeBw && self.is_next_cycle_phase(ev) {
            self.advance_cycle_phase(ev.now);
        }
        self.check_full_bw_reached(ev);
        self.check_drain(ev);
        self.update_min_rtt(ev);
        self.set_pacing_rate(self.pacing_gain);
        self.set_cwnd(ev);
    }

    fn samples_app_limited(&self) -> bool {
        self.mark_app_limited
    }

    /// Linux `bbr_ssthresh`: only remembers cwnd; the first ACK of the episode sets cwnd
    /// by packet conservation.
    fn on_enter_recovery(&mut self, _now: Instant, _flight: u64) {
        self.save_cwnd();
    }

    /// The ACK that ends recovery restores cwnd in `on_delivery`.
    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {}

    /// BBR v1 ignores ECN (Linux's `tcp_bbr.c` has no `cwnd_event` for CA_EVENT_ECN and
    /// sets no `ssthresh` that CWR could apply): a CE mark changes nothing.
    fn on_ecn(&mut self, _now: Instant, _flight: u64) {}

    /// Linux `tcp_enter_loss` and `bbr_set_state(TCP_CA_Loss)`.
    fn on_rto(&mut self, _now: Instant, _flight: u64, first: bool) {
        if first {
            self.save_cwnd();
        }
        self.cwnd = self.smss;
        self.prev_state = LossState::Loss;
        self.full_bw = 0;
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate)
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::RateSample;

    const MSS: u64 = 1000;
    const RTT: Duration = Duration::from_millis(40);

    /// Drives a [`Bbr`] with synthetic per-ACK delivery events.
    struct Feed {
        bbr: Bbr,
        now: Instant,
        delivered: u64,
    }

    /// One ACK's inputs; `rate` is the sample's delivery rate in bytes per second.
    #[derive(Clone, Copy)]
    struct Ack {
        acked: u64,
        rate: u64,
        rtt: Duration,
        new_round: bool,
        pipe: u64,
        in_recovery: bool,
        in_timeout_recovery: bool,
    }

    fn ack(rate: u64) -> Ack {
        Ack { acked: 2 * MSS, rate, rtt: RTT, new_round: true, pipe: 0, in_recovery: false, in_timeout_recovery: false }
    }

    impl Feed {
        fn new() -> Feed {
            let bbr = Bbr::new(&CcParams { smss: MSS as u32, initial_cwnd: 10 * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 });
            Feed { bbr, now: Instant::ZERO, delivered: 0 }
        }

        /// An ACK `dt` after the previous one. A sample over one RTT whose rate is `a.rate`;
        /// it starts a round when `a.new_round` (its segment was sent after the last round
        /// began), otherwise it comes from a segment sent before.
        fn ack(&mut self, dt: Duration, a: Ack) {
            self.now += dt;
            let prior_delivered = if a.new_round { self.delivered } else { 0 };
            self.delivered += a.acked;
            let sample = RateSample {
                delivered: (a.rate as u128 * a.rtt.as_nanos() as u128 / 1_000_000_000) as u64,
                interval: Some(a.rtt),
                send_elapsed: a.rtt,
                ack_elapsed: a.rtt,
                prior_delivered,
                is_app_limited: false,
                rtt: Some(a.rtt),
                newly_delivered: a.acked,
                total_delivered: self.delivered,
            };
            self.bbr.on_delivery(&DeliveryEvent {
                now: self.now,
                sample,
                newly_lost: 0,
                pipe_before: a.pipe,
                pipe: a.pipe,
                in_recovery: a.in_recovery,
                in_timeout_recovery: a.in_timeout_recovery,
            });
        }

        /// Startup at a constant 1 MB/s until the pipe is found full, then, with little in
        /// flight, straight through Drain into ProbeBW.
        fn reach_probe_bw(&mut self) {
            for _ in 0..4 {
                self.ack(RTT, ack(1_000_000));
            }
            assert_eq!(self.bbr.mode(), BbrMode::ProbeBw);
        }
    }

    #[test]
    fn gains_are_the_papers() {
        let g = |x: u64| x as f64 / GAIN_UNIT as f64;
        assert!((g(HIGH_GAIN) - 2.0 / std::f64::consts::LN_2).abs() < 1.0 / 256.0);
        assert!((g(DRAIN_GAIN) - std::f64::consts::LN_2 / 2.0).abs() < 1.0 / 256.0);
        assert_eq!(PACING_GAIN_CYCLE.map(g), [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(g(PROBE_BW_CWND_GAIN), 2.0);
        let bbr = Feed::new().bbr;
        assert_eq!((bbr.mode(), bbr.pacing_gain(), bbr.cwnd_gain()), (BbrMode::Startup, HIGH_GAIN, HIGH_GAIN));
        assert_eq!(bbr.name(), "bbr");
        assert_eq!(bbr.ssthresh(), u64::MAX);
        // Before any RTT: the initial window over 1 ms at high gain.
        assert_eq!(bbr.pacing_rate(), Some(10 * MSS * 1000 * HIGH_GAIN / GAIN_UNIT));
    }

    #[test]
    fn target_cwnd_is_gain_times_bdp_plus_three_segments_rounded_to_even() {
        let mut f = Feed::new();
        f.ack(RTT, ack(1_250_000));
        // BDP = 1.25 MB/s · 40 ms = 50 000 B = 50 segments.
        assert_eq!(f.bbr.target_cwnd(GAIN_UNIT), (50 + 3 + 1) * MSS);
        assert_eq!(f.bbr.target_cwnd(2 * GAIN_UNIT), (100 + 3 + 1) * MSS);
        // 2.885 · 50 = 144.3 → 145 segments, + 3 = 148, already even.
        assert_eq!(f.bbr.target_cwnd(HIGH_GAIN), 148 * MSS);
    }

    #[test]
    fn bandwidth_filter_forgets_a_maximum_after_ten_rounds() {
        let mut f = Feed::new();
        f.ack(RTT, ack(2_000_000));
        let peak_round = f.bbr.round_count();
        for k in 1..=12 {
            f.ack(RTT, ack(1_000_000));
            let want = if f.bbr.round_count() - peak_round <= BW_FILTER_ROUNDS { 2_000_000 } else { 1_000_000 };
            assert_eq!(f.bbr.btl_bw(), want, "{k} rounds after the peak");
        }
        assert_eq!(f.bbr.round_count() - peak_round, 12);
        // Samples that do not end a round do not age the filter.
        let mut f = Feed::new();
        f.ack(RTT, ack(2_000_000));
        for _ in 0..30 {
            f.ack(RTT, Ack { new_round: false, ..ack(1_000_000) });
        }
        assert_eq!(f.bbr.btl_bw(), 2_000_000);
    }

    #[test]
    fn windowed_max_keeps_the_best_of_the_window() {
        let mut w = WindowedMax::default();
        let samples = [5, 9, 3, 7, 4, 8, 2, 6, 1, 5, 3, 4, 2, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
        for (t, &v) in samples.iter().enumerate() {
            let got = w.update(10, t as u64, v);
            // Brute force: maximum over (t − 10, t].
            let lo = (t as i64 - 10).max(0) as usize;
            let want = *samples[lo..=t].iter().max().unwrap();
            // Never an expired sample nor more than the true maximum; exact until the first
            // expiry, and after that it may report a lesser sample of the window for a
            // while, because it keeps only three.
            assert!(got <= want && samples[lo..=t].contains(&got), "t={t}: {got} vs {want}");
            if !(11..=20).contains(&t) {
                assert_eq!(got, want, "t={t}");
            }
        }
    }

    #[test]
    fn startup_ends_after_three_rounds_without_a_quarter_more_bandwidth() {
        let mut f = Feed::new();
        // Doubling every round: the pipe is not full.
        for r in [1_000_000, 2_000_000, 4_000_000, 8_000_000] {
            f.ack(RTT, Ack { pipe: 1_000_000, ..ack(r) });
        }
        assert_eq!(f.bbr.mode(), BbrMode::Startup);
        // Less than 25 % above 8 MB/s twice, then a round with 25 % more restarts the count.
        for r in [9_000_000, 9_900_000, 10_000_000] {
            f.ack(RTT, Ack { pipe: 1_000_000, ..ack(r) });
            assert_eq!(f.bbr.mode(), BbrMode::Startup);
        }
        for r in [12_000_000, 12_400_000] {
            f.ack(RTT, Ack { pipe: 1_000_000, ..ack(r) });
            assert_eq!(f.bbr.mode(), BbrMode::Startup);
        }
        f.ack(RTT, Ack { pipe: 1_000_000, ..ack(12_000_000) });
        assert_eq!(f.bbr.mode(), BbrMode::Drain, "third round below 1.25 · 10 MB/s");
        assert!(f.bbr.full_bw_reached());
        assert_eq!(f.bbr.pacing_gain(), DRAIN_GAIN);
        // Linux sets ssthresh to the BDP on entering Drain: 12.4 MB/s · 40 ms = 496 segments.
        assert_eq!(f.bbr.ssthresh(), (496 + 3 + 1) * MSS);
        // Drain lasts until the flight is down to one BDP.
        f.ack(RTT, Ack { pipe: 501 * MSS, ..ack(12_000_000) });
        assert_eq!(f.bbr.mode(), BbrMode::Drain);
        f.ack(RTT, Ack { pipe: 500 * MSS, ..ack(12_000_000) });
        assert_eq!(f.bbr.mode(), BbrMode::ProbeBw);
        assert_eq!(f.bbr.cwnd_gain(), PROBE_BW_CWND_GAIN);
    }

    #[test]
    fn probe_bw_cycles_through_the_gains_one_rtprop_per_phase() {
        let mut f = Feed::new();
        f.reach_probe_bw();
        assert_ne!(f.bbr.cycle_phase(), 1, "never starts in the draining phase");
        // ACKs every 10 ms with a full pipe: each phase ends at the first ACK more than
        // RTprop = 40 ms after it began, i.e. after 5 ACKs.
        let full = 10 * f.bbr.target_cwnd(GAIN_UNIT);
        let mut gains = Vec::new();
        let mut phases = Vec::new();
        for _ in 0..5 * 20 {
            f.ack(Duration::from_millis(10), Ack { pipe: full, ..ack(1_000_000) });
            gains.push(f.bbr.pacing_gain());
            phases.push(f.bbr.cycle_phase());
        }
        // Skip to the first phase change, then every phase is 5 ACKs and phases follow
        // the cycle in order.
        let first = phases.iter().position(|&p| p != phases[0]).unwrap();
        for (i, chunk) in phases[first..].chunks(5).enumerate() {
            if chunk.len() < 5 {
                break;
            }
            let p = (phases[first] + i) % 8;
            assert!(chunk.iter().all(|&x| x == p), "phase {i}: {chunk:?}");
            assert_eq!(gains[first + 5 * i], PACING_GAIN_CYCLE[p]);
        }
    }

    #[test]
    fn probe_bw_phases_end_on_the_flight_not_only_the_clock() {
        let mut f = Feed::new();
        f.reach_probe_bw();
        // Walk to the probing phase with a small flight: the 3/4 phase then ends at once.
        let mut guard = 0;
        while f.bbr.cycle_phase() != 0 {
            f.ack(Duration::from_millis(50), ack(1_000_000));
            guard += 1;
            assert!(guard < 20);
        }
        // The 5/4 phase outlasts RTprop while the flight is below 5/4 of the BDP...
        let probe_target = f.bbr.target_cwnd(PACING_GAIN_CYCLE[0]);
        f.ack(Duration::from_millis(100), Ack { pipe: probe_target - MSS, ..ack(1_000_000) });
        assert_eq!(f.bbr.cycle_phase(), 0);
        // ... and ends once it reaches it.
        f.ack(Duration::from_millis(1), Ack { pipe: probe_target, ..ack(1_000_000) });
        assert_eq!(f.bbr.cycle_phase(), 1);
        // The 3/4 phase ends before RTprop once the flight is down to the BDP.
        f.ack(Duration::from_millis(1), Ack { pipe: f.bbr.target_cwnd(GAIN_UNIT), ..ack(1_000_000) });
        assert_eq!(f.bbr.cycle_phase(), 2);
    }

    /// Runs ProbeBW with RTT samples above RTprop until ProbeRTT starts; checks it starts
    /// at the first ACK more than 10 s after RTprop was last refreshed. Returns the cwnd
    /// before.
    fn run_into_probe_rtt(f: &mut Feed) -> u64 {
        f.reach_probe_bw();
        let last_min = f.now;
        let longer = Duration::from_millis(45);
        // A full pipe: cwnd climbs to its ProbeBW target.
        let step = Duration::from_millis(20);
        while f.now + step <= last_min + MIN_RTT_WINDOW {
            f.ack(step, Ack { rtt: longer, pipe: 60 * MSS, ..ack(1_000_000) });
            assert_ne!(f.bbr.mode(), BbrMode::ProbeRtt, "at {}", f.now);
        }
        let cwnd_before = f.bbr.cwnd();
        assert!(cwnd_before > 50 * MSS);
        assert_eq!(f.bbr.min_rtt(), Some(RTT));
        f.ack(step, Ack { rtt: longer, pipe: 60 * MSS, ..ack(1_000_000) });
        assert_eq!(f.bbr.mode(), BbrMode::ProbeRtt);
        assert_eq!(f.bbr.cwnd(), MIN_CWND_SEGMENTS * MSS);
        assert_eq!(f.bbr.min_rtt(), Some(longer), "an expired filter takes the next sample");
        assert_eq!(f.bbr.pacing_gain(), GAIN_UNIT);
        assert!(f.bbr.samples_app_limited(), "ProbeRTT's samples must not count against BtlBw");
        cwnd_before
    }

    #[test]
    fn probe_rtt_holds_four_segments_for_200_ms_and_a_round() {
        // A round ends early; ProbeRTT still lasts 200 ms from when the flight drained.
        let mut f = Feed::new();
        run_into_probe_rtt(&mut f);
        let at_min = Ack { pipe: 4 * MSS, new_round: false, ..ack(1_000_000) };
        f.ack(Duration::from_millis(10), at_min);
        let t0 = f.now;
        f.ack(Duration::from_millis(10), Ack { new_round: true, ..at_min });
        while f.now + Duration::from_millis(10) <= t0 + PROBE_RTT_DURATION {
            f.ack(Duration::from_millis(10), at_min);
            assert_eq!((f.bbr.mode(), f.bbr.cwnd()), (BbrMode::ProbeRtt, 4 * MSS));
        }
        f.ack(Duration::from_millis(10), at_min);
        assert_eq!(f.bbr.mode(), BbrMode::ProbeBw);

        // 200 ms pass without a round ending: ProbeRTT lasts until one does.
        let mut f = Feed::new();
        let cwnd_before = run_into_probe_rtt(&mut f);
        f.ack(Duration::from_millis(10), at_min);
        let t0 = f.now;
        while f.now <= t0 + PROBE_RTT_DURATION + PROBE_RTT_DURATION {
            f.ack(Duration::from_millis(10), at_min);
            assert_eq!((f.bbr.mode(), f.bbr.cwnd()), (BbrMode::ProbeRtt, 4 * MSS));
        }
        f.ack(Duration::from_millis(10), Ack { new_round: true, ..at_min });
        assert_eq!(f.bbr.mode(), BbrMode::ProbeBw);
        assert!(f.bbr.cwnd() >= cwnd_before, "cwnd restored: {} < {cwnd_before}", f.bbr.cwnd());
        // The filter restarted when ProbeRTT ended: no new ProbeRTT for another 10 s.
        f.ack(Duration::from_secs(9), Ack { rtt: Duration::from_millis(45), ..ack(1_000_000) });
        assert_eq!(f.bbr.mode(), BbrMode::ProbeBw);
        assert!(!f.bbr.samples_app_limited());
        f.ack(Duration::from_millis(1100), Ack { rtt: Duration::from_millis(45), ..ack(1_000_000) });
        assert_eq!(f.bbr.mode(), BbrMode::ProbeRtt);
    }

    #[test]
    fn recovery_conserves_packets_for_a_round_then_restores_cwnd() {
        let mut f = Feed::new();
        f.reach_probe_bw();
        for _ in 0..100 {
            f.ack(Duration::from_millis(10), Ack { pipe: 60 * MSS, ..ack(1_000_000) });
        }
        let before = f.bbr.cwnd();
        assert_eq!(before, f.bbr.target_cwnd(PROBE_BW_CWND_GAIN), "ProbeBW cwnd sits at 2·BDP + budget");
        f.bbr.on_enter_recovery(f.now, 60 * MSS);
        // First recovery ACK: cwnd = pipe + delivered.
        let rec = Ack { pipe: 30 * MSS, in_recovery: true, new_round: false, ..ack(1_000_000) };
        f.ack(Duration::from_millis(1), rec);
        assert_eq!(f.bbr.cwnd(), 32 * MSS);
        // Within the round: never below pipe + delivered, never grown otherwise.
        f.ack(Duration::from_millis(1), Ack { pipe: 20 * MSS, ..rec });
        assert_eq!(f.bbr.cwnd(), 32 * MSS);
        f.ack(Duration::from_millis(1), Ack { pipe: 35 * MSS, ..rec });
        assert_eq!(f.bbr.cwnd(), 37 * MSS);
        // A round later conservation ends and cwnd grows by what is delivered.
        f.ack(Duration::from_millis(1), Ack { pipe: 35 * MSS, new_round: true, ..rec });
        assert_eq!(f.bbr.cwnd(), 39 * MSS);
        // Leaving recovery restores the cwnd from before.
        f.ack(Duration::from_millis(1), Ack { pipe: 35 * MSS, ..ack(1_000_000) });
        assert_eq!(f.bbr.cwnd(), before);
        assert_eq!(f.bbr.mode(), BbrMode::ProbeBw);
        assert_eq!(f.bbr.btl_bw(), 1_000_000, "loss leaves the model alone");
    }

    #[test]
    fn timeout_drops_to_one_segment_regrows_and_restores_when_repaired() {
        let mut f = Feed::new();
        f.reach_probe_bw();
        for _ in 0..100 {
            f.ack(Duration::from_millis(10), Ack { pipe: 60 * MSS, ..ack(1_000_000) });
        }
        let before = f.bbr.cwnd();
        f.bbr.on_rto(f.now, 60 * MSS, true);
        assert_eq!(f.bbr.cwnd(), MSS);
        let lossy = Ack { pipe: MSS, in_timeout_recovery: true, new_round: false, ..ack(1_000_000) };
        f.ack(Duration::from_millis(1), lossy);
        assert_eq!(f.bbr.cwnd(), 4 * MSS, "at least the minimum cwnd");
        f.ack(Duration::from_millis(1), lossy);
        assert_eq!(f.bbr.cwnd(), 6 * MSS, "grows by what is delivered");
        f.ack(Duration::from_millis(1), ack(1_000_000));
        assert_eq!(f.bbr.cwnd(), before);
    }
}
