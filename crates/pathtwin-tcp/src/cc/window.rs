//! Pieces of window arithmetic that every loss-based controller shares: slow start, the
//! "grow only when the window was the limit" rule, and round-trip rounds counted in bytes.
//!
//! This module owns no controller state beyond [`Rounds`]; each controller keeps its own
//! `cwnd` and calls these where its algorithm says "as Reno".

use super::{AckEvent, SentEvent};

/// RFC 5681 slow start with RFC 3465's L = 1 SMSS: the increase for one ACK, or `None` when
/// the window was not the limit (less than half of it in use, as Linux's
/// `tcp_is_cwnd_limited` in slow start) and so must not grow (RFC 7661).
pub fn slow_start_increase(ev: &AckEvent, cwnd: u64, smss: u64) -> Option<u64> {
    (2 * ev.pipe_before >= cwnd).then(|| ev.bytes_acked.min(smss))
}

/// Whether an ACK in congestion avoidance may grow the window: less than one SMSS of it was
/// unused before the ACK (RFC 7661 in spirit, as Linux's `tcp_is_cwnd_limited`).
pub fn cwnd_limited(ev: &AckEvent, cwnd: u64, smss: u64) -> bool {
    ev.pipe_before + smss > cwnd
}

/// Round trips, counted as Linux's Vegas and HyStart do (`beg_snd_nxt`): a round ends when
/// the data that was the newest sent at its start is cumulatively acknowledged. The
/// controller sees sequence space only as byte counts, so both ends are counted in bytes
/// from the first data byte: new data sent (retransmissions excluded) and bytes acknowledged.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rounds {
    sent: u64,
    acked: u64,
    /// `sent` when the current round began; the round ends once `acked` reaches it.
    end: u64,
}

impl Rounds {
    pub fn on_sent(&mut self, ev: &SentEvent) {
        if !ev.retransmission {
            self.sent += ev.bytes;
        }
    }

    /// Counts an ACK; true when it ends the current round (and a new one begins).
    pub fn on_ack(&mut self, bytes_acked: u64) -> bool {
        self.acked += bytes_acked;
        if self.acked >= self.end {
            self.end = self.sent.max(self.acked + 1);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pathtwin_core::time::Instant;

    fn sent(bytes: u64) -> SentEvent {
        SentEvent { now: Instant::ZERO, seq: 0, bytes, pipe: 0, retransmission: false }
    }

    #[test]
    fn a_round_ends_when_the_data_sent_at_its_start_is_acknowledged() {
        let mut r = Rounds::default();
        r.on_sent(&sent(1000));
        assert!(r.on_ack(0), "the first ACK opens round 1");
        // Round 1 ends when the 1000 bytes outstanding at its start are acknowledged, even
        // though more was sent meanwhile.
        r.on_sent(&sent(1000));
        r.on_sent(&sent(1000));
        assert!(!r.on_ack(500));
        assert!(r.on_ack(500));
        // The next round covers the 2000 bytes sent during round 1.
        assert!(!r.on_ack(1000));
        assert!(r.on_ack(1000));
    }

    #[test]
    fn retransmissions_do_not_extend_a_round() {
        let mut r = Rounds::default();
        r.on_sent(&sent(1000));
        r.on_ack(0);
        r.on_sent(&SentEvent { retransmission: true, ..sent(1000) });
        assert!(r.on_ack(1000));
    }
}
