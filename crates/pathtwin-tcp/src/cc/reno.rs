//! Reno window evolution, RFC 5681 §3.1 (used by both Reno and NewReno: they differ only in
//! loss recovery, which the endpoint runs).
//!
//! - Slow start while cwnd < ssthresh: cwnd += min(N, SMSS) per ACK of N new bytes
//!   (RFC 5681 eq. 2; RFC 3465's L = 1 SMSS, so delayed ACKs make it grow ×1.5 per RTT);
//!   with [`SlowStart::Linux`], cwnd += N up to ssthresh and the rest of N counts towards
//!   congestion avoidance (Linux's `tcp_slow_start` and `tcp_reno_cong_avoid`).
//! - Congestion avoidance: appropriate byte counting (RFC 3465 §2.1, allowed by RFC 5681
//!   §3.1): bytes acked accumulate, and each time they reach cwnd, cwnd grows by one SMSS —
//!   never more than one SMSS per ACK, exactly one per window.
//! - Fast retransmit: ssthresh = max(FlightSize/2, 2·SMSS) (RFC 5681 eq. 4), cwnd =
//!   ssthresh; the endpoint adds the dupack inflation on top.
//! - End of recovery: cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS), RFC 6582 §3.2
//!   step 6 option (1). It equals RFC 5681's cwnd = ssthresh whenever FlightSize ≥
//!   ssthresh (the usual case, and always Reno's on a partial ACK), and avoids a burst
//!   otherwise.
//! - Timeout: ssthresh as above on the first timeout of a segment, held on repeats
//!   (RFC 5681 §3.1); cwnd = LW = 1 SMSS.
//! - The initial ssthresh is "arbitrarily high" (RFC 5681 §3.1): `u64::MAX`.
//!
//! Window validation (RFC 7661 in spirit, as Linux's `tcp_is_cwnd_limited`): cwnd grows only
//! when it limited the sender — in slow start when at least half of it was in use, in
//! congestion avoidance when less than one SMSS of it was unused. A sender held back by the
//! receiver's window, w_max or the application therefore does not build up a cwnd it has
//! never tested.

use super::{AckEvent, CcParams, CongestionControl, SlowStart};
use pathtwin_core::time::Instant;

/// RFC 5681 Reno congestion control.
#[derive(Clone, Debug)]
pub struct Reno {
    smss: u64,
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged since cwnd last grew in congestion avoidance (RFC 3465).
    ca_acked: u64,
    slow_start: SlowStart,
}

impl Reno {
    pub fn new(p: &CcParams) -> Self {
        Reno { smss: p.smss as u64, cwnd: p.initial_cwnd.max(1), ssthresh: u64::MAX, ca_acked: 0, slow_start: p.slow_start }
    }

    fn halve(&mut self, flight: u64) {
        self.ssthresh = (flight / 2).max(2 * self.smss);
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn on_ack(&mut self, ev: &AckEvent) {
        if ev.in_recovery {
            return;
        }
        let mut acked = ev.bytes_acked;
        if self.cwnd < self.ssthresh {
            if 2 * ev.pipe_before < self.cwnd {
                return;
            }
            let grow = self.slow_start.increase(acked, self.smss);
            if self.slow_start == SlowStart::Rfc5681 {
                self.cwnd += grow;
                return;
            }
            let grown = (self.cwnd + grow).min(self.ssthresh);
            acked -= grown - self.cwnd;
            self.cwnd = grown;
            if acked == 0 {
                return;
            }
        } else if ev.pipe_before + self.smss <= self.cwnd {
            return;
        }
        self.ca_acked += acked;
        if self.ca_acked >= self.cwnd {
            self.ca_acked -= self.cwnd;
            self.cwnd += self.smss;
        }
    }

    fn on_enter_recovery(&mut self, _now: Instant, flight: u64) {
        self.halve(flight);
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
    }

    /// RFC 6582 §3.2 step 3 offers two deflations; this is option 2, cwnd = ssthresh, as in
    /// ns-2's NewReno and Linux. Option 1, min(ssthresh, FlightSize + SMSS), collapses cwnd to
    /// a few segments whenever the flight was capped by the receive window or w_max during
    /// recovery (no new data may pass snd_una + window), and a window-limited flow then
    /// slow-starts after every loss — measured at 16 % below ABW on NSDI'09 Table 2 row 5.
    fn on_exit_recovery(&mut self, _now: Instant, _flight: u64) {
        self.cwnd = self.ssthresh;
        self.ca_acked = 0;
    }

    fn on_rto(&mut self, _now: Instant, flight: u64, first: bool) {
        if first {
            self.halve(flight);
        }
        self.cwnd = self.smss;
        self.ca_acked = 0;
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
    use super::*;

    const MSS: u64 = 1000;

    fn reno() -> Reno {
        Reno::new(&CcParams { smss: MSS as u32, initial_cwnd: 10 * MSS, max_window: u64::MAX, slow_start: crate::cc::SlowStart::Rfc5681 })
    }

    fn ack(bytes: u64, pipe_before: u64) -> AckEvent {
        AckEvent {
            now: Instant::ZERO,
            bytes_acked: bytes,
            rtt: None,
            srtt: None,
            flight_before: pipe_before,
            pipe_before,
            in_recovery: false,
        }
    }

    #[test]
    fn slow_start_adds_at_most_one_smss_per_ack() {
        let mut r = reno();
        r.on_ack(&ack(2 * MSS, 10 * MSS)); // a delayed ACK for two segments
        assert_eq!(r.cwnd(), 11 * MSS);
        r.on_ack(&ack(500, 11 * MSS));
        assert_eq!(r.cwnd(), 11 * MSS + 500);
    }

    #[test]
    fn linux_slow_start_takes_every_acknowledged_byte_up_to_ssthresh() {
        let mut r = Reno::new(&CcParams { smss: MSS as u32, initial_cwnd: 10 * MSS, max_window: u64::MAX, slow_start: SlowStart::Linux });
        r.on_ack(&ack(2 * MSS, 10 * MSS)); // a delayed ACK for two segments: +2
        assert_eq!(r.cwnd(), 12 * MSS);
        r.ssthresh = 13 * MSS;
        r.on_ack(&ack(2 * MSS, 12 * MSS)); // one to ssthresh, one to congestion avoidance
        assert_eq!((r.cwnd(), r.ca_acked), (13 * MSS, MSS));
    }

    #[test]
    fn congestion_avoidance_grows_one_smss_per_window() {
        let mut r = reno();
        r.on_enter_recovery(Instant::ZERO, 20 * MSS);
        r.on_exit_recovery(Instant::ZERO, 20 * MSS);
        assert_eq!((r.cwnd(), r.ssthresh()), (10 * MSS, 10 * MSS));
        for _ in 0..9 {
            r.on_ack(&ack(MSS, 10 * MSS));
        }
        assert_eq!(r.cwnd(), 10 * MSS);
        r.on_ack(&ack(MSS, 10 * MSS));
        assert_eq!(r.cwnd(), 11 * MSS);
    }

    #[test]
    fn window_does_not_grow_when_not_cwnd_limited() {
        let mut r = reno();
        r.on_ack(&ack(MSS, 4 * MSS)); // less than half of cwnd in flight
        assert_eq!(r.cwnd(), 10 * MSS);
        r.on_enter_recovery(Instant::ZERO, 20 * MSS);
        for _ in 0..20 {
            r.on_ack(&ack(MSS, 5 * MSS)); // half the window unused
        }
        assert_eq!(r.cwnd(), 10 * MSS);
    }

    #[test]
    fn loss_halves_flight_with_two_segment_floor() {
        let mut r = reno();
        r.on_enter_recovery(Instant::ZERO, 3 * MSS);
        assert_eq!(r.ssthresh(), 2 * MSS);
        r.on_exit_recovery(Instant::ZERO, 0);
        // min(ssthresh, max(0, SMSS) + SMSS)
        assert_eq!(r.cwnd(), 2 * MSS);
    }

    #[test]
    fn repeated_timeout_keeps_ssthresh() {
        let mut r = reno();
        r.on_rto(Instant::ZERO, 40 * MSS, true);
        assert_eq!((r.cwnd(), r.ssthresh()), (MSS, 20 * MSS));
        r.on_rto(Instant::ZERO, MSS, false);
        assert_eq!((r.cwnd(), r.ssthresh()), (MSS, 20 * MSS));
    }

    #[test]
    fn no_growth_during_recovery() {
        let mut r = reno();
        r.on_enter_recovery(Instant::ZERO, 20 * MSS);
        let mut ev = ack(MSS, 10 * MSS);
        ev.in_recovery = true;
        r.on_ack(&ev);
        assert_eq!(r.cwnd(), 10 * MSS);
    }
}
