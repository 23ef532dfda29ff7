//! The receive window a Linux receiver advertises, with its buffer autotuning (dynamic right
//! sizing): what the window is, and when its growth makes the receiver acknowledge at once.
//!
//! This module owns Linux's `rcv_ssthresh` (the window it is willing to advertise),
//! `window_clamp` (the ceiling, which follows the buffer), and the per-round-trip measure of
//! what the application read (`rcvq_space`). It does not own reading (simulated applications
//! read everything at once, so the buffer is always empty) nor the ACK itself (`delack`).
//!
//! Linux 6.x (`net/ipv4/tcp_input.c`, `tcp_output.c`), with `tcp_rmem` = 4096 131072 32 MiB:
//!
//! - The SYN and SYN-ACK announce the largest multiple of the MSS up to 65535 (the window
//!   field of a SYN is not scaled; `tcp_select_initial_window`): rcv_ssthresh starts there,
//!   and the ceiling is what the default 128-KiB buffer holds (`tcp_init_buffer_space`,
//!   `window_clamp`; 80896 bytes with the emulator's `scaling_ratio`, below).
//! - Once per receiver round trip the bytes the application read in it (`copied`) are
//!   compared with the last such count (`tcp_rcv_space_adjust`): when more were read, the
//!   ceiling becomes 2·copied + 16·MSS, plus twice that times the relative growth of copied
//!   ("to cope with slow start"), up to what `tcp_rmem[2]` holds. The first count is 10·MSS
//!   (`TCP_INIT_CWND`).
//! - Every in-order or out-of-order segment of at least 128 bytes lets rcv_ssthresh grow by
//!   max(2·MSS, 2·len) towards the ceiling (`tcp_grow_window`), and each growth puts the
//!   receiver in quick-ACK mode for one ACK (`icsk_ack.quick |= 1`): while the window
//!   grows, as in a sender's slow start and a few round trips after, every segment is
//!   acknowledged at once.
//! - The advertised window is rcv_ssthresh (`__tcp_select_window`, with an empty buffer);
//!   it never shrinks.
//!
//! - The receiver's round trip (`rcv_rtt_est`, `tcp_rcv_rtt_measure_ts`) comes from the
//!   timestamps: each full-sized segment echoing a TSecr not used before gives a sample, the
//!   receiver's millisecond clock less that TSecr (the TSval of the receiver's ACK the
//!   sender last heard, so the sample includes the data's wait in the queues). A sample
//!   below the estimate replaces it; one above moves it an eighth of the way
//!   (`tcp_rcv_rtt_update`, Linux 6.16 on: only with the receive queue empty, which it
//!   always is here). While slow start fills a queue the measure of what a round trip read
//!   therefore stretches with the queue's delay, which decides where, against the sender's
//!   rounds, the window stops growing and the receiver ACKs every second segment: at 200 ms
//!   a 2.4-ms gap between two ACKs at a round's start breaks HyStart's ACK train.
//!
//! Approximations: without timestamps the receiver's RTT is the endpoint's SRTT rounded
//! down to a millisecond (Linux measures the time a window's worth of data takes,
//! `tcp_rcv_rtt_measure`); the buffer-to-window ratio is a constant (Linux measures it from
//! each packet's `truesize`); memory pressure and window scaling's rounding are not
//! modelled.

use pathtwin_core::time::{Duration, Instant};

/// The largest window a SYN can announce (unscaled 16-bit field).
const SYN_WINDOW: u64 = 65_535;
/// `TCP_INIT_CWND`: the first measure of what a round trip reads, in segments.
const INIT_SPACE_SEGMENTS: u64 = 10;
/// `tcp_grow_window` skips segments shorter than this.
const MIN_GROW_LEN: u64 = 128;
/// The window a buffer byte holds (`scaling_ratio`/256): Linux measures it from the
/// received packets' `len`/`truesize`; 158/256 is what the emulator's TUN packets give (the
/// first window after the initial one is 131072·158/256 = 80896 bytes in a kernel capture).
const SCALING_RATIO: (u64, u64) = (158, 256);

/// The payload a buffer of `space` bytes of skb truesize holds (Linux's `tcp_win_from_space`).
pub(crate) fn win_from_space(space: u64) -> u64 {
    (space as u128 * SCALING_RATIO.0 as u128 / SCALING_RATIO.1 as u128) as u64
}

/// Linux's receive-window state for one connection.
#[derive(Clone, Debug)]
pub(crate) struct RcvWindow {
    mss: u64,
    rcv_ssthresh: u64,
    window_clamp: u64,
    /// The most the ceiling can reach: the window `tcp_rmem[2]` holds (`win_from_space`).
    max_clamp: u64,
    /// `rcvq_space.space`: bytes read in the last round trip that raised the ceiling.
    space: u64,
    /// Bytes delivered to the application when the current round trip's count began.
    space_seq: u64,
    space_time: Instant,
    /// `rcv_rtt_est`: the receiver's round trip from timestamp echoes, once one was sampled.
    rcv_rtt: Option<Duration>,
    /// `rcv_rtt_last_tsecr`: the TSecr of the last sample, which is not sampled again.
    last_tsecr: Option<Instant>,
}

impl RcvWindow {
    /// The window of a connection whose segments carry `mss` bytes, with `initial_buffer`
    /// (`tcp_rmem[1]`) and `max_buffer` (`tcp_rmem[2]`), established at `now`.
    pub fn new(mss: u64, initial_buffer: u64, max_buffer: u64, now: Instant) -> RcvWindow {
        let mss = mss.max(1);
        let initial = (SYN_WINDOW / mss * mss).max(mss);
        RcvWindow {
            mss,
            rcv_ssthresh: initial,
            window_clamp: win_from_space(initial_buffer).max(initial),
            max_clamp: win_from_space(max_buffer).max(initial),
            space: INIT_SPACE_SEGMENTS * mss,
            space_seq: 0,
            space_time: now,
            rcv_rtt: None,
            last_tsecr: None,
        }
    }

    /// The window to advertise.
    pub fn window(&self) -> u64 {
        self.rcv_ssthresh
    }

    /// A data segment of `len` bytes arrived (in order or not); `delivered` is the total the
    /// application has read so far; `echo` the segment's TSecr when the connection has
    /// timestamps, `srtt` the endpoint's estimate for a connection without. Returns true
    /// when the window grew, which asks for an immediate ACK.
    pub fn on_segment(&mut self, now: Instant, len: u64, delivered: u64, echo: Option<Instant>, srtt: Option<Duration>) -> bool {
        // The echo is sampled (`tcp_rcv_rtt_measure_ts`) and the segment grows the window
        // (`tcp_event_data_recv`) before the application reads it and the buffer is resized
        // (`tcp_recvmsg` → `tcp_rcv_space_adjust`).
        if let Some(echo) = echo {
            self.sample_echo(now, len, echo);
        }
        let grew = len >= MIN_GROW_LEN && self.rcv_ssthresh < self.window_clamp;
        if grew {
            let incr = (2 * self.mss).max(2 * len);
            self.rcv_ssthresh += incr.min(self.window_clamp - self.rcv_ssthresh);
        }
        let rtt = match echo {
            Some(_) => self.rcv_rtt,
            None => srtt.map(|r| Duration::from_millis((r.as_nanos() / 1_000_000).max(1))),
        };
        self.adjust_space(now, delivered, rtt);
        grew
    }

    /// `tcp_rcv_rtt_measure_ts` and `tcp_rcv_rtt_update` (`win_dep` = 0): the sample is
    /// the difference of the two millisecond timestamps.
    fn sample_echo(&mut self, now: Instant, len: u64, echo: Instant) {
        if self.last_tsecr == Some(echo) {
            return;
        }
        self.last_tsecr = Some(echo);
        if len < self.mss {
            return;
        }
        let ticks = now.as_nanos() / 1_000_000 - echo.as_nanos().min(now.as_nanos()) / 1_000_000;
        if ticks == 0 {
            return;
        }
        let sample = Duration::from_millis(ticks);
        self.rcv_rtt = Some(match self.rcv_rtt {
            Some(est) if sample >= est => Duration::from_nanos(est.as_nanos() - est.as_nanos() / 8 + sample.as_nanos() / 8),
            _ => sample,
        });
    }

    /// `tcp_rcv_space_adjust`, at most once per receiver round trip `rtt` (none before the
    /// receiver has one).
    fn adjust_space(&mut self, now: Instant, delivered: u64, rtt: Option<Duration>) {
        let Some(rtt) = rtt else { return };
        if now.saturating_since(self.space_time) < rtt {
            return;
        }
        let copied = delivered.saturating_sub(self.space_seq);
        if copied > self.space {
            let mut rcvwin = 2 * copied + 16 * self.mss;
            let grow = (rcvwin as u128 * (copied - self.space) as u128 / self.space.max(1) as u128) as u64;
            rcvwin = rcvwin.saturating_add(2 * grow);
            self.window_clamp = self.window_clamp.max(rcvwin.min(self.max_clamp));
            self.space = copied;
        }
        self.space_seq = delivered;
        self.space_time = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn starts_at_the_syn_window_and_grows_only_once_the_buffer_has() {
        let rtt = Some(Duration::from_millis(100));
        let mut w = RcvWindow::new(MSS, 131_072, 32 << 20, t(0));
        assert_eq!(w.window(), 45 * MSS); // 65160, as Linux's SYN-ACK
        // The default buffer holds 80896 bytes: six growths, then none until it grows.
        for i in 1..=6 {
            assert!(w.on_segment(t(10 + i), MSS, i * MSS, None, rtt));
        }
        assert_eq!(w.window(), 80_896);
        assert!(!w.on_segment(t(17), MSS, 7 * MSS, None, rtt));
        // A round trip later 20 segments were read, more than the 10 assumed: once that
        // segment is read the ceiling becomes (2·20 + 16)·MSS, tripled for the doubling, and
        // every segment grows the window (and is acknowledged at once) again.
        assert!(!w.on_segment(t(110), MSS, 20 * MSS, None, rtt));
        assert_eq!(w.window_clamp, 3 * (2 * 20 + 16) * MSS);
        let before = w.window();
        assert!(w.on_segment(t(111), MSS, 21 * MSS, None, rtt));
        assert_eq!(w.window(), before + 2 * MSS);
    }

    #[test]
    fn a_steady_rate_stops_the_growth_within_a_few_round_trips() {
        // 100 segments per 100-ms round trip, after a slow start that doubled. As in a
        // kernel capture (10 Mbit/s, 200 ms): the second round does not grow the window (the
        // first count, 11 segments, asks for less than the initial ceiling), the next rounds
        // grow it with every segment.
        let rtt = Some(Duration::from_millis(100));
        let mut w = RcvWindow::new(MSS, 131_072, 32 << 20, t(0));
        let (mut now, mut delivered, mut grew) = (0, 0, Vec::new());
        for round in 0..12 {
            let n = if round < 4 { 10 << round } else { 100 };
            let mut g = 0;
            for i in 0..n {
                delivered += MSS;
                g += w.on_segment(t(now + i * 100 / n), MSS, delivered, None, rtt) as u64;
            }
            now += 100;
            grew.push(g);
        }
        assert_eq!((grew[0], grew[1]), (6, 0), "{grew:?}");
        assert!(grew[2..5].iter().all(|&g| g > 0), "{grew:?}");
        assert_eq!(grew[11], 0, "{grew:?}");
    }

    #[test]
    fn the_receivers_round_trip_follows_the_echoes_up_by_an_eighth_and_down_at_once() {
        let mut w = RcvWindow::new(MSS, 131_072, 32 << 20, t(0));
        // No estimate yet: the buffer is not resized, whatever was read.
        w.on_segment(t(5), MSS, 50 * MSS, None, None);
        assert_eq!(w.rcv_rtt, None);
        // TSecr 10 ms echoed at 210.9 ms: 200 ticks of the millisecond clock.
        w.on_segment(t(210) + Duration::from_micros(900), MSS, MSS, Some(t(10)), None);
        assert_eq!(w.rcv_rtt, Some(Duration::from_millis(200)));
        // The same echo is not sampled again, nor one on a segment shorter than the MSS.
        w.on_segment(t(400), MSS, MSS, Some(t(10)), None);
        w.on_segment(t(500), MSS - 1, MSS, Some(t(20)), None);
        assert_eq!(w.rcv_rtt, Some(Duration::from_millis(200)));
        // 240 ms (a queue of 40): 7/8 · 200 + 240/8 = 205 ms; 150 ms replaces it.
        w.on_segment(t(550), MSS, MSS, Some(t(310)), None);
        assert_eq!(w.rcv_rtt, Some(Duration::from_millis(205)));
        w.on_segment(t(700), MSS, MSS, Some(t(550)), None);
        assert_eq!(w.rcv_rtt, Some(Duration::from_millis(150)));
    }

    #[test]
    fn with_timestamps_the_buffer_is_resized_once_per_echoed_round_trip() {
        // 240-ms echoes: the ceiling moves 240 ms after the last measure, not 200.
        let mut w = RcvWindow::new(MSS, 131_072, 32 << 20, t(0));
        w.on_segment(t(240), MSS, MSS, Some(t(0)), None);
        let clamp = w.window_clamp;
        w.on_segment(t(479), MSS, 40 * MSS, Some(t(239)), None);
        assert_eq!(w.window_clamp, clamp);
        w.on_segment(t(480), MSS, 41 * MSS, Some(t(240)), None);
        assert!(w.window_clamp > clamp);
    }
}
