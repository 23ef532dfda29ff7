//! The receiver's acknowledgment policy for in-order data: acknowledge at once, or wait for
//! more data or the delayed-ACK timer (RFC 5681 §4.2, RFC 1122 §4.2.3.2), with Linux's
//! quick-ACK mode and adaptive timeout when the config asks for them.
//!
//! This module owns the bytes received since the last ACK, the quick ACKs left, the adaptive
//! timeout (`ato`), the last data arrival and the timer's deadline. It does not own the
//! segments that are acknowledged at once whatever it says (out-of-order data, data filling
//! a hole, FINs, CE marks: the endpoint's `input`), nor sending the ACK.
//!
//! The rule of both profiles: an ACK at the latest once more than (`delayed_ack_every` − 1)
//! full segments are unacknowledged (Linux's `__tcp_ack_snd_check`: "more than one full
//! frame received") and within the timeout.
//!
//! Linux's additions (`net/ipv4/tcp_input.c`, Linux 6.x), each behind its own setting:
//!
//! - *Quick-ACK mode* (`TcpConfig::quickacks`, `TCP_MAX_QUICKACKS` = 16): the first data of
//!   a connection, data after a gap longer than the RTO (`tcp_event_data_recv`) and a
//!   duplicate segment (`tcp_data_queue`'s `tcp_enter_quickack_mode`) grant min(16,
//!   rcv_wnd/(2·MSS)) quick ACKs (`tcp_incr_quickack`); while any are left, every in-order
//!   segment is acknowledged at once, and each ACK sent while one was owed uses one up
//!   (`tcp_dec_quickack_mode`). A sender's first round trips then see an ACK per segment.
//! - *Window growth* (`rcvwin`): each segment that grows Linux's receive window asks for
//!   one quick ACK.
//! - *Adaptive timeout* (`TcpConfig::adaptive_ato`): `ato` starts at `TCP_ATO_MIN` (40 ms)
//!   and follows the gaps m between data arrivals (`tcp_event_data_recv`: m ≤ 20 ms gives
//!   ato/2 + 20 ms, m < ato gives ato/2 + m, at most the RTO); a timer that fires doubles it
//!   (`tcp_delack_timer_handler`, at most the RTO); leaving quick-ACK mode resets it to
//!   40 ms. The timer is armed at min(ato, max(SRTT, 40 ms), 200 ms) (`tcp_send_delayed_ack`,
//!   `TCP_DELACK_MAX`), keeps an earlier deadline, and an ACK goes out at once when the
//!   pending deadline is within ato/4.
//!
//! Not modelled: Linux's ping-pong (interactive) mode, in which a receiver that answers with
//! data leaves quick-ACK mode off; the `ICSK_ACK_PUSHED` bound on the timeout.

use crate::config::TcpConfig;
use pathtwin_core::time::{Duration, Instant};

/// The receiver's delayed-ACK state for one connection.
#[derive(Clone, Debug, Default)]
pub(crate) struct DelayedAck {
    /// In-order bytes received since the last ACK we sent.
    unacked: u64,
    /// Quick ACKs left (Linux's `icsk_ack.quick`).
    quick: u32,
    /// The adaptive timeout (Linux's `icsk_ack.ato`); zero before the first data.
    ato: Duration,
    /// When in-order data last arrived (Linux's `icsk_ack.lrcvtime`).
    last_data: Option<Instant>,
    /// When the delayed ACK is due.
    deadline: Option<Instant>,
}

impl DelayedAck {
    /// When the delayed-ACK timer fires, if armed.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether an ACK is owed for in-order data (Linux's `inet_csk_ack_scheduled`).
    fn scheduled(&self) -> bool {
        self.unacked > 0 || self.deadline.is_some()
    }

    /// `tcp_incr_quickack`: at least min(max, rcv_wnd/(2·MSS)) quick ACKs (2 when that is 0).
    fn grant_quick_acks(&mut self, cfg: &TcpConfig, mss: u64) {
        let by_window = match cfg.rcv_buffer / (2 * mss.max(1)) {
            0 => 2,
            n => n,
        };
        let quick = by_window.min(cfg.quickacks as u64) as u32;
        self.quick = self.quick.max(quick);
    }

    /// In-order data of `bytes` arrived at `now` (`mss` the largest segment the connection
    /// carries, `rto` and `srtt` this end's). Returns true when it must be acknowledged at
    /// once; otherwise the timer is armed.
    pub fn on_in_order_data(&mut self, cfg: &TcpConfig, now: Instant, bytes: u64, mss: u64, rto: Duration, srtt: Option<Duration>) -> bool {
        self.on_arrival(cfg, now, mss, rto);
        self.unacked += bytes;
        let limit = (cfg.delayed_ack_every as u64 - 1) * mss;
        if self.unacked > limit || self.quick > 0 {
            return true;
        }
        if !cfg.adaptive_ato {
            if self.deadline.is_none() {
                self.deadline = Some(now + cfg.delayed_ack_timeout);
            }
            return false;
        }
        // `tcp_send_delayed_ack`.
        let mut ato = self.ato;
        if ato > cfg.delayed_ack_timeout {
            let rtt = srtt.map_or(Duration::MAX, |s| s.max(cfg.delayed_ack_timeout));
            ato = ato.min(rtt).min(Duration::from_millis(500));
        }
        ato = ato.min(cfg.delayed_ack_max);
        let due = now + ato;
        match self.deadline {
            Some(d) if d <= now + Duration::from_nanos(ato.as_nanos() / 4) => true,
            Some(d) => {
                self.deadline = Some(d.min(due));
                false
            }
            None => {
                self.deadline = Some(due);
                false
            }
        }
    }

    /// `tcp_event_data_recv`'s quick-ACK and `ato` bookkeeping, with Linux's settings only.
    fn on_arrival(&mut self, cfg: &TcpConfig, now: Instant, mss: u64, rto: Duration) {
        if cfg.quickacks == 0 && !cfg.adaptive_ato {
            return;
        }
        let ato_min = cfg.delayed_ack_timeout;
        match self.last_data {
            None => {
                self.grant_quick_acks(cfg, mss);
                self.ato = ato_min;
            }
            Some(t) => {
                let m = now.saturating_since(t);
                if cfg.adaptive_ato && m <= Duration::from_nanos(ato_min.as_nanos() / 2) {
                    self.ato = Duration::from_nanos(self.ato.as_nanos() / 2 + ato_min.as_nanos() / 2);
                } else if cfg.adaptive_ato && m < self.ato {
                    self.ato = (Duration::from_nanos(self.ato.as_nanos() / 2) + m).min(rto);
                } else if m > rto {
                    // "Too long gap": the sender restarted, so ACK its window quickly.
                    self.grant_quick_acks(cfg, mss);
                }
            }
        }
        self.last_data = Some(now);
    }

    /// A segment that duplicates data already received arrived: Linux's
    /// `tcp_enter_quickack_mode` for a retransmission, with Linux's settings only.
    pub fn on_duplicate(&mut self, cfg: &TcpConfig, mss: u64) {
        if cfg.quickacks > 0 {
            self.grant_quick_acks(cfg, mss);
            self.ato = cfg.delayed_ack_timeout;
        }
    }

    /// The receive window grew: the next ACK goes at once (`tcp_grow_window`'s
    /// `icsk_ack.quick |= 1`).
    pub fn quick_once(&mut self) {
        self.quick = self.quick.max(1);
    }

    /// A segment carrying our ACK was sent (`tcp_event_ack_sent`, `tcp_dec_quickack_mode`).
    pub fn on_ack_sent(&mut self, cfg: &TcpConfig, ack_owed: bool) {
        if self.quick > 0 && (ack_owed || self.scheduled()) {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato = cfg.delayed_ack_timeout;
            }
        }
        self.unacked = 0;
        self.deadline = None;
    }

    /// The timer fired; returns true if an ACK is owed. With the adaptive timeout the next
    /// one is longer (`tcp_delack_timer_handler`: "Delayed ACK missed: inflate ATO").
    pub fn on_timer(&mut self, cfg: &TcpConfig, now: Instant, rto: Duration) -> bool {
        if self.deadline.is_none_or(|d| d > now) {
            return false;
        }
        self.deadline = None;
        if cfg.adaptive_ato {
            self.ato = Duration::from_nanos(self.ato.as_nanos().saturating_mul(2)).min(rto);
        }
        true
    }

    /// The connection was reset: nothing more is owed.
    pub fn clear(&mut self) {
        self.deadline = None;
    }

    #[cfg(test)]
    pub fn quick_acks_left(&self) -> u32 {
        self.quick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn run(cfg: &TcpConfig, d: &mut DelayedAck, now: Instant) -> bool {
        let at_once = d.on_in_order_data(cfg, now, MSS, MSS, Duration::from_millis(260), Some(Duration::from_millis(60)));
        if at_once {
            d.on_ack_sent(cfg, true);
        }
        at_once
    }

    #[test]
    fn rfc5681_acks_every_second_segment_from_the_first() {
        let cfg = TcpConfig::ns2();
        let mut d = DelayedAck::default();
        let acks: Vec<bool> = (0..6).map(|i| run(&cfg, &mut d, t(i))).collect();
        assert_eq!(acks, [false, true, false, true, false, true]);
        assert!(!run(&cfg, &mut d, t(10)));
        assert_eq!(d.deadline(), Some(t(50)));
    }

    #[test]
    fn linux_acks_the_first_sixteen_segments_at_once_then_every_second() {
        let cfg = TcpConfig::linux();
        let mut d = DelayedAck::default();
        let acks: Vec<bool> = (0..20).map(|i| run(&cfg, &mut d, t(i))).collect();
        assert!(acks[..16].iter().all(|&a| a), "{acks:?}");
        assert_eq!(acks[16..], [false, true, false, true]);
        // A gap longer than the RTO (260 ms) restarts quick-ACK mode.
        assert!(run(&cfg, &mut d, t(400)));
        assert_eq!(d.quick_acks_left(), 15);
        // A tiny receive buffer grants fewer: rcv_wnd/(2·MSS).
        let small = TcpConfig { rcv_buffer: 5 * MSS, ..TcpConfig::linux() };
        let mut d = DelayedAck::default();
        let acks: Vec<bool> = (0..4).map(|i| run(&small, &mut d, t(i))).collect();
        assert_eq!(acks, [true, true, false, true]);
        // rcv_wnd/(2·MSS) = 1 grants one; only 0 becomes 2 (`if (quickacks == 0) quickacks = 2`).
        for (buffer, quick) in [(3 * MSS, 1), (MSS, 2)] {
            let cfg = TcpConfig { rcv_buffer: buffer, ..TcpConfig::linux() };
            let mut d = DelayedAck::default();
            d.on_in_order_data(&cfg, t(0), 100, MSS, Duration::from_millis(260), None);
            assert_eq!(d.quick_acks_left(), quick, "buffer {buffer}");
        }
    }

    #[test]
    fn linux_ato_follows_arrival_gaps_and_is_bounded_by_srtt() {
        let cfg = TcpConfig::linux();
        let mut d = DelayedAck::default();
        for i in 0..16 {
            run(&cfg, &mut d, t(i));
        }
        // Gaps of 30 ms (between 20 ms and ato): ato → ato/2 + 30, towards 60 ms; the timer
        // is bounded by SRTT (60 ms).
        let mut now = 15;
        for _ in 0..10 {
            now += 30;
            d.on_in_order_data(&cfg, t(now), 100, MSS, Duration::from_millis(260), Some(Duration::from_millis(60)));
            d.on_ack_sent(&cfg, true);
        }
        now += 30;
        assert!(!d.on_in_order_data(&cfg, t(now), 100, MSS, Duration::from_millis(260), Some(Duration::from_millis(60))));
        let wait = d.deadline().unwrap().saturating_since(t(now));
        assert!(wait > Duration::from_millis(55) && wait <= Duration::from_millis(60), "{wait:?}");
        // The timer firing doubles ato (at most the RTO); the next wait is then SRTT-bound.
        assert!(d.on_timer(&cfg, d.deadline().unwrap(), Duration::from_millis(260)));
    }
}
