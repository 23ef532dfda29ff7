//! Round-trip counting for controllers that act once per round trip (Vegas, HyStart++).
//!
//! A round ends when the cumulative ACK passes the highest sequence number that had been
//! sent when the round began (Linux's `beg_snd_nxt` in `tcp_vegas.c`, RFC 9406 §4.2's
//! "windowEnd"). The trait gives no sequence numbers with ACKs, so `snd_una` is rebuilt from
//! the first segment sent plus the bytes acknowledged since; the controller is built after
//! the handshake, so the first segment it sees starts at the first unacknowledged byte.
//! ns-2's Vegas counts rounds one ACK later ([`RoundCounter::ns2`]). It owns no congestion
//! state.

use super::SentEvent;

#[derive(Clone, Debug, Default)]
pub(crate) struct RoundCounter {
    /// First unacknowledged byte; `None` until the first segment is sent.
    snd_una: Option<u64>,
    /// One past the highest byte sent.
    snd_nxt: u64,
    /// The round ends once `snd_una` reaches this; set by the first ACK to everything sent
    /// by then, so the first round is the initial window (and likewise after a round that
    /// left nothing outstanding).
    round_end: Option<u64>,
    /// ns-2's rounds (see `ns2`).
    ns2: bool,
}

impl RoundCounter {
    /// ns-2's Vegas rounds (`tcp-vegas.cc`, `v_begseq_`): a round ends with the ACK that
    /// covers the first segment sent after the previous round ended, one ACK after a Linux
    /// round; the first round ends with the first ACK.
    pub(crate) fn ns2() -> Self {
        RoundCounter { ns2: true, ..RoundCounter::default() }
    }

    pub(crate) fn on_sent(&mut self, ev: &SentEvent) {
        if self.snd_una.is_none() {
            self.snd_una = Some(ev.seq);
            if self.ns2 {
                self.round_end = Some(ev.seq);
            }
        }
        self.snd_nxt = self.snd_nxt.max(ev.seq + ev.bytes);
    }

    /// SND.UNA as rebuilt from the ACKs, once something was sent.
    pub(crate) fn snd_una(&self) -> Option<u64> {
        self.snd_una
    }

    /// One past the highest byte sent (SND.NXT).
    pub(crate) fn snd_nxt(&self) -> u64 {
        self.snd_nxt
    }

    /// Bytes of new data sent since the current round began (ns-2's `t_seqno_ − v_begseq_`).
    pub(crate) fn sent_this_round(&self) -> u64 {
        self.round_end.map_or(0, |start| self.snd_nxt.saturating_sub(start))
    }

    /// Takes an ACK of `bytes_acked` new bytes; true when it ends the current round, in which
    /// case the next round ends with everything sent so far.
    pub(crate) fn on_ack(&mut self, bytes_acked: u64) -> bool {
        let Some(una) = self.snd_una.as_mut() else { return false };
        *una += bytes_acked;
        let una = *una;
        match self.round_end {
            None => {
                self.round_end = Some(self.snd_nxt);
                una >= self.snd_nxt && self.end_round(una)
            }
            // ns-2: the segment that starts at `end` (the first sent after the last round
            // ended) is covered once una passes its first byte.
            Some(end) if self.ns2 => {
                let ended = una > end && bytes_acked > 0;
                if ended {
                    self.round_end = Some(self.snd_nxt);
                }
                ended
            }
            Some(end) if una >= end && bytes_acked > 0 => self.end_round(una),
            Some(_) => false,
        }
    }

    fn end_round(&mut self, una: u64) -> bool {
        // With nothing outstanding, the next round is the next flight: its first ACK sets
        // the end, as at the start.
        self.round_end = (self.snd_nxt > una).then_some(self.snd_nxt);
        true
    }
}

/// A fake sender for unit tests: sends a window of full segments, then acknowledges them
/// one per ACK an RTT later, calling the controller as the endpoint would.
#[cfg(test)]
pub(crate) mod testing {
    use super::super::{AckEvent, CongestionControl, SentEvent};
    use pathtwin_core::time::{Duration, Instant};

    pub(crate) struct FakeSender {
        pub now: Instant,
        pub smss: u64,
        next_seq: u64,
    }

    impl FakeSender {
        pub(crate) fn new(smss: u64) -> Self {
            FakeSender { now: Instant::ZERO, smss, next_seq: 1 }
        }

        /// One round trip: sends floor(cwnd/SMSS) segments (at least one) and acknowledges
        /// each with RTT sample `rtt`, the sender cwnd-limited throughout.
        pub(crate) fn round(&mut self, cc: &mut dyn CongestionControl, rtt: Duration) {
            let n = (cc.cwnd() / self.smss).max(1);
            let start = self.next_seq;
            for i in 0..n {
                let ev = SentEvent { now: self.now, seq: start + i * self.smss, bytes: self.smss, pipe: (i + 1) * self.smss, retransmission: false };
                cc.on_packet_sent(&ev);
            }
            self.next_seq = start + n * self.smss;
            self.now += rtt;
            for i in 0..n {
                let in_flight = (n - i) * self.smss;
                let ev = AckEvent {
                    now: self.now,
                    bytes_acked: self.smss,
                    rtt: Some(rtt),
                    srtt: Some(rtt),
                    flight_before: in_flight,
                    pipe_before: cc.cwnd().max(in_flight),
                    in_recovery: false,
                };
                cc.on_ack(&ev);
            }
        }
    }
}
