//! RACK, time-based loss detection (RFC 8985 §6), and the rules of TLP, the tail loss
//! probe (RFC 8985 §7).
//!
//! RACK deems a segment lost once a segment *sent after it* has been delivered (SACKed or
//! cumulatively acknowledged) and a reordering window has passed since then. Because it
//! compares send times, not sequence numbers, it sees a lost retransmission as soon as a
//! segment sent after the retransmission is SACKed; RFC 6675's IsLost never does, and the
//! classic sender waits for the retransmission timer. With RACK on, it replaces IsLost's
//! DupThresh rule, as RFC 8985 §1 intends and Linux does; DupThresh survives as the zero
//! reordering window of [`Rack::reo_wnd`] (RFC 8985 §6.2 step 4).
//!
//! This module owns RACK's variables (RACK.xmit_ts, end_seq, rtt, fack, reordering_seen),
//! the per-ACK [`Delivery`] summary that feeds them (§6.2 steps 2–3) and the reordering
//! window (§6.2 step 4); the walk over the segments that applies them (step 5) is the
//! scoreboard's, which knows the segments, and the endpoint owns the timers and decides what
//! marking a segment lost leads to. RACK runs only when SACK is in use, as in Linux: without
//! SACK the sender cannot tell which later segments arrived.
//!
//! TLP covers what RACK cannot see: when the last segments of a flight are lost, no later
//! segment is delivered. If no ACK comes for a probe timeout (PTO, about 2·SRTT), the
//! sender sends one probe — new data, or the last segment again — whose SACK lets RACK find
//! the losses; the retransmission timer is the fallback. This module owns the PTO
//! ([`pto_deadline`]) and the end of a probe episode ([`TlpProbe::on_ack`]); the endpoint
//! owns the timer, when a probe is allowed (§7.2) and sending it (§7.3).
//!
//! Deviations, each because the simulated peer offers less than RFC 8985 can use: no TCP
//! timestamps, so an ACK of a retransmitted segment is trusted only when it comes at least
//! RACK.min_RTT after the retransmission (the §6.2 step 2 fallback); no D-SACK, so the
//! reordering window never grows beyond min_RTT/4 (RACK.reo_wnd_mult stays 1), and a
//! retransmitted probe is judged by duplicate ACKs instead (as Linux does); RACK.min_RTT is
//! the smallest RTT sample of the connection rather than a windowed minimum.

use pathtwin_core::time::{Duration, Instant};

/// WCDelAckT, the worst-case delayed-ACK time added to the probe timeout when a single
/// segment is in flight, whose ACK the receiver may delay (RFC 8985 §7.2 recommends 200 ms).
pub(crate) const TLP_WC_DEL_ACK: Duration = Duration::from_millis(200);
/// PTO before any RTT sample (RFC 8985 §7.2: 1 s).
pub(crate) const TLP_PTO_NO_SRTT: Duration = Duration::from_secs(1);

/// The tail loss probe outstanding, if any (RFC 8985 §7.3–7.4: TLP.end_seq and
/// TLP.is_retrans).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TlpProbe {
    /// SND.NXT after the probe was sent.
    pub end_seq: u64,
    /// The probe retransmitted the last segment rather than sending new data.
    pub is_retrans: bool,
}

/// What an ACK says about an outstanding probe (TLP_process_ack, RFC 8985 §7.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlpOutcome {
    /// The probe is still outstanding.
    Pending,
    /// The episode ended without evidence of a loss.
    Done,
    /// The probe's retransmission repaired a loss that no other mechanism saw: the
    /// congestion controller must respond as to a loss.
    Repaired,
}

/// TLP_calc_PTO (RFC 8985 §7.2): 2·SRTT, plus WCDelAckT when one segment is in flight,
/// 1 s without an RTT sample; never later than the retransmission timer. `slack` is added
/// when more than one segment is in flight: zero in the RFC, 2 ms (`TCP_TIMEOUT_MIN`) in
/// Linux's `tcp_schedule_loss_probe`, whose one-segment allowance is `TCP_RTO_MIN`, the
/// same 200 ms.
pub(crate) fn pto_deadline(
    now: Instant,
    srtt: Option<Duration>,
    one_segment: bool,
    slack: Duration,
    rto_at: Option<Instant>,
) -> Instant {
    let pto = match srtt {
        Some(s) => s + s + if one_segment { TLP_WC_DEL_ACK } else { slack },
        None => TLP_PTO_NO_SRTT,
    };
    let at = now + pto;
    rto_at.map_or(at, |r| at.min(r))
}

impl TlpProbe {
    /// TLP_process_ack for an ACK of `ack`. Without D-SACK, as in Linux, a retransmitted
    /// probe is shown unnecessary by a pure duplicate ACK for exactly TLP.end_seq (the
    /// receiver's answer to the second copy), and to have repaired a loss by an ACK beyond
    /// TLP.end_seq that came first.
    pub fn on_ack(&self, ack: u64, pure_dupack: bool) -> TlpOutcome {
        if ack < self.end_seq {
            TlpOutcome::Pending
        } else if !self.is_retrans {
            TlpOutcome::Done
        } else if ack > self.end_seq {
            TlpOutcome::Repaired
        } else if pure_dupack {
            TlpOutcome::Done
        } else {
            TlpOutcome::Pending
        }
    }
}

/// RACK's variables for one connection (RFC 8985 §6.1).
#[derive(Clone, Debug, Default)]
pub(crate) struct Rack {
    /// RACK.xmit_ts and, in place of RACK.end_seq, the transmission number of the most
    /// recently sent segment that has been delivered; `None` before the first delivery.
    latest: Option<(Instant, u64)>,
    /// RACK.rtt: the RTT measured from that segment.
    rtt: Duration,
    /// RACK.fack: the highest end sequence number delivered so far.
    fack: u64,
    /// RACK.reordering_seen: a never-retransmitted segment was delivered below RACK.fack.
    reordering_seen: bool,
}

/// RACK_sent_after (RFC 8985 §6.2) on (send time, transmission number) pairs. The RFC
/// breaks ties of send times by end sequence number; on a simulated clock many segments
/// leave in the same nanosecond, and a retransmission sent right after new data would then
/// count as sent before it. The scoreboard numbers every transmission instead, an order
/// that agrees with the send times and has no ties.
pub(crate) fn sent_after(a: (Instant, u64), b: (Instant, u64)) -> bool {
    a.1 > b.1
}

/// What one ACK delivered, collected by the scoreboard as it marks segments SACKed or
/// acknowledged (RFC 8985 §6.2 steps 2 and 3).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Delivery {
    /// ACK arrival minus RACK.min_RTT: a retransmitted segment sent after this is taken to
    /// be acknowledged through its original transmission and does not count (step 2).
    ambiguous_after: Instant,
    /// RACK.fack before this ACK.
    fack_before: u64,
    /// Latest-sent delivered segment that counts, as (send time, transmission number).
    latest: Option<(Instant, u64)>,
    /// Highest end sequence delivered by this ACK.
    max_end: u64,
    /// A never-retransmitted segment ending below RACK.fack was delivered (step 3).
    reordering: bool,
}

impl Delivery {
    /// Called by the scoreboard for every segment this ACK newly delivers.
    /// `order` numbers the segment's latest transmission.
    pub fn note(&mut self, sent_at: Instant, order: u64, end: u64, ever_retransmitted: bool) {
        self.max_end = self.max_end.max(end);
        if ever_retransmitted {
            if sent_at > self.ambiguous_after {
                return;
            }
        } else if end < self.fack_before {
            self.reordering = true;
        }
        if self.latest.is_none_or(|l| sent_after((sent_at, order), l)) {
            self.latest = Some((sent_at, order));
        }
    }
}

impl Rack {
    /// Starts the summary of an ACK arriving at `now`.
    pub fn delivery(&self, now: Instant, min_rtt: Duration) -> Delivery {
        Delivery { ambiguous_after: now - min_rtt, fack_before: self.fack, latest: None, max_end: 0, reordering: false }
    }

    /// RFC 8985 §6.2 steps 2 and 3: takes what the ACK delivered. Returns whether RACK.xmit_ts
    /// advanced, i.e. whether loss detection can find anything new.
    pub fn on_delivery(&mut self, now: Instant, d: &Delivery) -> bool {
        self.fack = self.fack.max(d.max_end);
        self.reordering_seen |= d.reordering;
        let Some(seg) = d.latest else { return false };
        self.rtt = now.saturating_since(seg.0);
        if self.latest.is_none_or(|l| sent_after(seg, l)) {
            self.latest = Some(seg);
            return true;
        }
        false
    }

    /// RACK.xmit_ts and the transmission number standing in for RACK.end_seq.
    pub fn latest(&self) -> Option<(Instant, u64)> {
        self.latest
    }

    /// RACK_update_reo_wnd (RFC 8985 §6.2 step 4) without D-SACK: zero while no reordering
    /// has been seen and either recovery is under way or DupThresh segments are SACKed (the
    /// DupThresh rule kept inside RACK, as in Linux), else min_RTT/4 capped at SRTT.
    pub fn reo_wnd(
        &self,
        in_recovery: bool,
        sacked_segments: u64,
        dupthresh: u32,
        min_rtt: Duration,
        srtt: Duration,
    ) -> Duration {
        if !self.reordering_seen && (in_recovery || sacked_segments >= dupthresh as u64) {
            return Duration::ZERO;
        }
        Duration::from_nanos(min_rtt.as_nanos() / 4).min(srtt)
    }

    /// How long after its transmission a segment sent before RACK.xmit_ts is deemed lost:
    /// RACK.rtt + RACK.reo_wnd (§6.2 step 5).
    pub fn loss_delay(&self, reo_wnd: Duration) -> Duration {
        self.rtt + reo_wnd
    }

    #[cfg(test)]
    pub fn reordering_seen(&self) -> bool {
        self.reordering_seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn pto_is_two_srtt_plus_delayed_ack_allowance_capped_by_rto() {
        let srtt = Some(Duration::from_millis(30));
        let z = Duration::ZERO;
        assert_eq!(pto_deadline(t(100), srtt, false, z, None), t(160));
        assert_eq!(pto_deadline(t(100), srtt, true, z, None), t(360));
        assert_eq!(pto_deadline(t(100), srtt, true, z, Some(t(300))), t(300));
        assert_eq!(pto_deadline(t(100), None, false, z, None), t(1100));
        // Linux: + TCP_TIMEOUT_MIN with several segments in flight.
        assert_eq!(pto_deadline(t(100), srtt, false, Duration::from_millis(2), None), t(162));
        assert_eq!(pto_deadline(t(100), srtt, true, Duration::from_millis(2), None), t(360));
    }

    #[test]
    fn tlp_episode_outcomes_follow_rfc8985_section_7_4() {
        let new_data = TlpProbe { end_seq: 5000, is_retrans: false };
        assert_eq!(new_data.on_ack(4000, false), TlpOutcome::Pending);
        assert_eq!(new_data.on_ack(5000, false), TlpOutcome::Done);
        let retx = TlpProbe { end_seq: 5000, is_retrans: true };
        // The original arrived: the ACK reaches end_seq; then the probe's duplicate ACK.
        assert_eq!(retx.on_ack(5000, false), TlpOutcome::Pending);
        assert_eq!(retx.on_ack(5000, true), TlpOutcome::Done);
        // The original was lost and the probe filled the hole: no duplicate ACK comes,
        // and the next ACK is beyond.
        assert_eq!(retx.on_ack(6460, false), TlpOutcome::Repaired);
    }

    #[test]
    fn latest_delivery_sets_xmit_ts_and_rtt() {
        let mut r = Rack::default();
        let mut d = r.delivery(t(100), Duration::from_millis(50));
        d.note(t(10), 1, 2000, false);
        d.note(t(30), 3, 4000, false);
        d.note(t(20), 2, 3000, false);
        assert!(r.on_delivery(t(100), &d));
        assert_eq!(r.latest(), Some((t(30), 3)));
        assert_eq!(r.loss_delay(Duration::ZERO), Duration::from_millis(70));
        // An older delivery leaves RACK.xmit_ts alone.
        let mut d = r.delivery(t(110), Duration::from_millis(50));
        d.note(t(25), 2, 3500, false);
        assert!(!r.on_delivery(t(110), &d));
        assert_eq!(r.latest(), Some((t(30), 3)));
    }

    #[test]
    fn ack_of_a_fresh_retransmission_is_ambiguous() {
        let mut r = Rack::default();
        // Retransmitted 20 ms before the ACK, min RTT 50 ms: the ACK is for the original.
        let mut d = r.delivery(t(100), Duration::from_millis(50));
        d.note(t(80), 5, 1000, true);
        assert!(!r.on_delivery(t(100), &d));
        assert_eq!(r.latest(), None);
        // Retransmitted 60 ms before: it counts.
        let mut d = r.delivery(t(140), Duration::from_millis(50));
        d.note(t(80), 5, 1000, true);
        assert!(r.on_delivery(t(140), &d));
    }

    #[test]
    fn reordering_is_a_never_retransmitted_delivery_below_fack() {
        let mut r = Rack::default();
        let mut d = r.delivery(t(100), Duration::ZERO);
        d.note(t(10), 3, 3000, false);
        r.on_delivery(t(100), &d);
        let mut d = r.delivery(t(101), Duration::ZERO);
        d.note(t(5), 4, 2000, true);
        r.on_delivery(t(101), &d);
        assert!(!r.reordering_seen(), "a retransmission filling the hole is not reordering");
        let mut d = r.delivery(t(102), Duration::ZERO);
        d.note(t(6), 2, 2500, false);
        r.on_delivery(t(102), &d);
        assert!(r.reordering_seen());
    }

    #[test]
    fn reordering_window_follows_rfc8985_step4() {
        let min_rtt = Duration::from_millis(40);
        let srtt = Duration::from_millis(100);
        let mut r = Rack::default();
        assert_eq!(r.reo_wnd(false, 2, 3, min_rtt, srtt), Duration::from_millis(10));
        assert_eq!(r.reo_wnd(false, 3, 3, min_rtt, srtt), Duration::ZERO);
        assert_eq!(r.reo_wnd(true, 0, 3, min_rtt, srtt), Duration::ZERO);
        assert_eq!(r.reo_wnd(false, 0, 3, min_rtt, Duration::from_millis(4)), Duration::from_millis(4));
        r.reordering_seen = true;
        assert_eq!(r.reo_wnd(true, 10, 3, min_rtt, srtt), Duration::from_millis(10));
    }
}
