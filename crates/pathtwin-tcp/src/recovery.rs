//! Loss-recovery state: duplicate-ACK counting, the recovery point, and — without SACK —
//! the fast-recovery window inflation.
//!
//! Three flavours, chosen once the handshake has said whether SACK is in use:
//!
//! - **Reno** (RFC 5681 §3.2): on the DupThresh-th duplicate ACK, retransmit and inflate
//!   cwnd to ssthresh + DupThresh·SMSS, add one SMSS per further duplicate ACK, and leave
//!   recovery on the first ACK of new data, even one that leaves holes (a partial ACK).
//!   Re-entry is not gated, so several losses in one window cost several halvings.
//! - **NewReno** (RFC 6582 §3.2): as Reno, but a partial ACK (below `recover`, the highest
//!   sequence number sent when recovery began) retransmits the next hole, deflates the
//!   window by the bytes it acknowledged and adds one SMSS back if that was at least one
//!   SMSS (step 5); recovery ends on a full ACK. Fast retransmit is only entered when the
//!   cumulative ACK has passed the last `recover` (step 1), which also stops the dupACKs
//!   of a go-back-N after a timeout from halving again (§4.1 of RFC 6582 calls `recover`
//!   being set on a timeout the careful variant).
//! - **SACK** (RFC 6675 §5): a duplicate ACK is one that SACKs new data; recovery starts
//!   when DupThresh of them arrived or the first unacknowledged segment is deemed lost by
//!   IsLost — with RACK (RFC 8985), when RACK deems it lost — ends when RecoveryPoint is
//!   acknowledged, and the window is the controller's cwnd measured against pipe — no
//!   inflation. The scoreboard does the rest.
//! - **SACK with PRR** (RFC 6937, in Linux's form: `tcp_init_cwnd_reduction`,
//!   `tcp_cwnd_reduction` in `net/ipv4/tcp_input.c`): instead of the controller's reduced
//!   cwnd, the window after each ACK is pipe + sndcnt ([`Prr`]): while pipe exceeds
//!   ssthresh, what may be sent is ssthresh/prior_cwnd of what was delivered (the
//!   reduction spread over the round trip: "proportional"); below it, what was delivered
//!   plus one segment when the cumulative ACK advanced without a new loss, up to ssthresh
//!   ("slow-start reduction bound"); at least the fast retransmission. The controller sets
//!   ssthresh and, at the episode's end, cwnd = ssthresh, as Linux's
//!   `tcp_end_cwnd_reduction`.
//!
//! The inflated window has no bound of its own: during a NewReno episode of N round trips
//! each duplicate ACK of the new data it let out adds one SMSS, and partial ACKs only take
//! back what they acknowledge below `recover`, so it grows by about ssthresh per round trip
//! (megabytes after a long Slow-but-Steady recovery), together with FlightSize; the room
//! left, window − FlightSize, stays about ssthresh, as RFC 6582 step 5 intends. What must not
//! follow from it is the next window reduction, which halves min(FlightSize, cwnd) without
//! SACK (`Endpoint::flight_to_halve`).
//!
//! The endpoint restarts the retransmission timer on every ACK of new data, as RFC 6298
//! (5.3) asks, except on NewReno's partial ACKs after the first of an episode: by default
//! only the first restarts it (RFC 6582 §3.2 step 5, the "Impatient" variant); with
//! `NewRenoTimer::SlowButSteady` every one does. [`AckOutcome::RetransmitFront`] says
//! which partial ACK this is.

/// The loss-recovery algorithm in use on a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavour {
    Reno,
    NewReno,
    Sack,
}

/// What an ACK of new data means for a recovery in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AckOutcome {
    /// Not in recovery, or still in recovery with nothing special to do (SACK partial ACK).
    Continue,
    /// The recovery episode ends with this ACK.
    Exit,
    /// NewReno partial ACK: retransmit the first unacknowledged segment now. `first` is
    /// true for the episode's first partial ACK.
    RetransmitFront { first: bool },
}

/// Proportional Rate Reduction state of one SACK recovery episode (RFC 6937's
/// prr_delivered, prr_out and RecoverFS; Linux's `prior_cwnd` stands for RecoverFS), in
/// bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Prr {
    /// cwnd before the reduction (Linux's `prior_cwnd`).
    prior_cwnd: u64,
    /// The controller's ssthresh for the episode.
    ssthresh: u64,
    /// Bytes delivered (cumulatively or by SACK) during the episode.
    delivered: u64,
    /// Bytes sent during the episode.
    out: u64,
    /// pipe + sndcnt as of the last ACK: the window until the next.
    window: u64,
}

impl Prr {
    /// `tcp_init_cwnd_reduction`: an episode starts from `prior_cwnd` towards `ssthresh`;
    /// until the first ACK is counted, only the fast retransmission may go.
    pub fn new(prior_cwnd: u64, ssthresh: u64, pipe: u64) -> Prr {
        Prr { prior_cwnd: prior_cwnd.max(1), ssthresh, delivered: 0, out: 0, window: pipe }
    }

    /// `tcp_cwnd_reduction` for an ACK (or a RACK timer) that delivered `delivered` bytes,
    /// leaving `pipe` in the network; `una_advanced` and `newly_lost` as Linux's
    /// `FLAG_SND_UNA_ADVANCED` and `rs->losses`.
    pub fn on_ack(&mut self, delivered: u64, pipe: u64, una_advanced: bool, newly_lost: bool, smss: u64) {
        if delivered == 0 {
            return;
        }
        self.delivered += delivered;
        let (ssthresh, out) = (self.ssthresh as i128, self.out as i128);
        let sndcnt = if (pipe as i128) > ssthresh {
            // PRR-SSRB's proportional part: ceil(ssthresh·delivered/prior_cwnd) − out.
            // Linux counts all four in packets, so the ceiling is a whole segment: rounded
            // up to one here (in bytes, a fraction of a segment would be lost to the
            // whole-segment sending and the reduction would lag by one segment).
            let (prior, seg) = (self.prior_cwnd as i128, smss.max(1) as i128);
            let allowed = (ssthresh * self.delivered as i128 + prior - 1) / prior;
            (allowed + seg - 1) / seg * seg - out
        } else {
            let mut n = (self.delivered as i128 - out).max(delivered as i128);
            if una_advanced && !newly_lost {
                n += smss as i128;
            }
            n.min(ssthresh - pipe as i128)
        };
        // "Force a fast retransmit upon entering fast recovery."
        let sndcnt = if self.out == 0 { sndcnt.max(smss as i128) } else { sndcnt };
        self.window = pipe + sndcnt.max(0) as u64;
    }

    /// Bytes were sent during the episode (`prr_out`).
    pub fn on_sent(&mut self, bytes: u64) {
        self.out += bytes;
    }

    pub fn window(&self) -> u64 {
        self.window
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Recovery {
    flavour: Flavour,
    in_recovery: bool,
    /// RFC 6582 `recover` / RFC 6675 RecoveryPoint, as the sequence number one past the
    /// highest byte sent (so "covers recover" is `ack >= recover`).
    recover: u64,
    dupacks: u32,
    /// Partial ACKs in the current episode.
    partial_acks: u32,
    /// Reno/NewReno: the inflated window during fast recovery.
    inflated: u64,
    /// SACK with PRR: the episode's PRR state.
    prr: Option<Prr>,
}

impl Recovery {
    pub fn new(flavour: Flavour) -> Self {
        Recovery { flavour, in_recovery: false, recover: 0, dupacks: 0, partial_acks: 0, inflated: 0, prr: None }
    }

    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Duplicate ACKs since the cumulative ACK last advanced.
    pub fn dupacks(&self) -> u32 {
        self.dupacks
    }

    /// The window the sender may fill: the inflated one during Reno/NewReno fast recovery,
    /// the controller's `cwnd` otherwise.
    pub fn window(&self, cc_cwnd: u64) -> u64 {
        if !self.in_recovery {
            return cc_cwnd;
        }
        match (self.flavour, &self.prr) {
            (Flavour::Sack, Some(prr)) => prr.window(),
            (Flavour::Sack, None) => cc_cwnd,
            _ => self.inflated,
        }
    }

    /// Starts PRR for the episode just entered (SACK only).
    pub fn start_prr(&mut self, prr: Prr) {
        if self.in_recovery && self.flavour == Flavour::Sack {
            self.prr = Some(prr);
        }
    }

    /// The episode's PRR state, while one runs.
    pub fn prr_mut(&mut self) -> Option<&mut Prr> {
        if self.in_recovery {
            self.prr.as_mut()
        } else {
            None
        }
    }

    /// An ACK advanced the cumulative point to `ack`, acknowledging `acked` new bytes.
    pub fn on_cumulative_ack(&mut self, ack: u64, acked: u64, smss: u64) -> AckOutcome {
        self.dupacks = 0;
        if !self.in_recovery {
            return AckOutcome::Continue;
        }
        if ack >= self.recover {
            self.in_recovery = false;
            self.prr = None;
            return AckOutcome::Exit;
        }
        match self.flavour {
            Flavour::Reno => {
                self.in_recovery = false;
                AckOutcome::Exit
            }
            Flavour::NewReno => {
                self.inflated = self.inflated.saturating_sub(acked);
                if acked >= smss {
                    self.inflated += smss;
                }
                self.partial_acks += 1;
                AckOutcome::RetransmitFront { first: self.partial_acks == 1 }
            }
            Flavour::Sack => AckOutcome::Continue,
        }
    }

    /// A duplicate ACK arrived; returns how many in a row. During Reno/NewReno recovery
    /// each one means a segment left the network, so the window inflates by one SMSS.
    pub fn on_dupack(&mut self, smss: u64) -> u32 {
        self.dupacks += 1;
        if self.in_recovery && self.flavour != Flavour::Sack {
            self.inflated += smss;
        }
        self.dupacks
    }

    /// Whether fast retransmit may start now, with the cumulative ACK at `una`.
    ///
    /// NewReno needs an ACK that "covers more than recover" (RFC 6582 §3.2 step 1), i.e.
    /// beyond the highest byte sent when recover was set, strictly: duplicate ACKs that a
    /// go-back-N after a timeout provokes carry exactly that ACK (§4). SACK needs the
    /// cumulative point to be beyond RecoveryPoint, the highest byte sent (RFC 6675 §5); its
    /// duplicate ACKs only count when they SACK new data, so the strictness is not needed.
    pub fn may_enter(&self, una: u64) -> bool {
        if self.in_recovery {
            return false;
        }
        match self.flavour {
            Flavour::Reno => true,
            Flavour::NewReno => una > self.recover,
            Flavour::Sack => una >= self.recover,
        }
    }

    /// Starts an episode. `snd_max` is one past the highest sequence number sent;
    /// `cwnd` is the controller's window after its reduction.
    pub fn enter(&mut self, snd_max: u64, cwnd: u64, dupthresh: u32, smss: u64) {
        self.in_recovery = true;
        self.recover = snd_max;
        self.partial_acks = 0;
        // RFC 5681 §3.2 step 4: the DupThresh segments that left the network.
        self.inflated = cwnd + dupthresh as u64 * smss;
    }

    /// The retransmission timer expired: recovery is abandoned and no fast retransmit
    /// may start until everything sent so far is acknowledged (RFC 6582 §3.2 step 4,
    /// RFC 6675 §5.1).
    pub fn on_rto(&mut self, snd_max: u64) {
        self.in_recovery = false;
        self.prr = None;
        self.recover = snd_max;
        self.dupacks = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    #[test]
    fn newreno_partial_ack_deflates_and_adds_back_one_smss() {
        let mut r = Recovery::new(Flavour::NewReno);
        r.enter(100_000, 10 * MSS, 3, MSS);
        assert_eq!(r.window(10 * MSS), 13 * MSS);
        r.on_dupack(MSS);
        assert_eq!(r.window(10 * MSS), 14 * MSS);
        // Partial ACK of 3 segments: 14 - 3 + 1 = 12.
        assert_eq!(r.on_cumulative_ack(50_000, 3 * MSS, MSS), AckOutcome::RetransmitFront { first: true });
        assert_eq!(r.window(10 * MSS), 12 * MSS);
        // Less than one SMSS: no add-back.
        assert_eq!(r.on_cumulative_ack(50_500, 500, MSS), AckOutcome::RetransmitFront { first: false });
        assert_eq!(r.window(10 * MSS), 11 * MSS + 500);
        assert_eq!(r.on_cumulative_ack(100_000, 1, MSS), AckOutcome::Exit);
        assert!(!r.in_recovery());
        assert_eq!(r.window(10 * MSS), 10 * MSS);
    }

    #[test]
    fn reno_exits_on_partial_ack_and_may_reenter() {
        let mut r = Recovery::new(Flavour::Reno);
        r.enter(100_000, 10 * MSS, 3, MSS);
        assert_eq!(r.on_cumulative_ack(50_000, MSS, MSS), AckOutcome::Exit);
        assert!(r.may_enter(50_000));
        let mut n = Recovery::new(Flavour::NewReno);
        n.enter(100_000, 10 * MSS, 3, MSS);
        n.on_cumulative_ack(100_000, MSS, MSS);
        assert!(!n.may_enter(100_000), "must cover more than recover");
        assert!(n.may_enter(100_001));
        n.on_rto(200_000);
        assert!(!n.may_enter(150_000));
        let mut s = Recovery::new(Flavour::Sack);
        s.on_rto(200_000);
        assert!(!s.may_enter(199_999));
        assert!(s.may_enter(200_000));
    }

    #[test]
    fn prr_spreads_the_reduction_over_the_round_trip_then_conserves_packets() {
        // 20 segments in flight, cwnd 20 → ssthresh 14 (β = 0.7), one segment lost.
        let mut r = Recovery::new(Flavour::Sack);
        r.enter(100_000, 14 * MSS, 3, MSS);
        r.start_prr(Prr::new(20 * MSS, 14 * MSS, 19 * MSS));
        // The entering ACK SACKed one segment: sndcnt = ceil(14·1/20) − 0 = 1, the fast
        // retransmission.
        let prr = r.prr_mut().unwrap();
        prr.on_ack(MSS, 18 * MSS, false, false, MSS);
        assert_eq!(r.window(14 * MSS), 19 * MSS);
        r.prr_mut().unwrap().on_sent(MSS);
        // Ten more SACKs, one per ACK: RFC 6937's sndcnt = ceil(delivered·14/20) − out, in
        // segments as Linux's `tcp_cwnd_reduction` counts: after 11 delivered ceil(7.7) = 8
        // may have gone, the fast retransmission and 7 more (one on every ACK but the 3rd,
        // 6th and 9th, where the ceiling stays put: 2.8, 4.9, 7.0).
        let mut sent = 0;
        let mut pipe = 19 * MSS;
        for _ in 0..10 {
            pipe -= MSS;
            let prr = r.prr_mut().unwrap();
            prr.on_ack(MSS, pipe, false, false, MSS);
            while pipe + MSS <= r.window(14 * MSS) {
                r.prr_mut().unwrap().on_sent(MSS);
                pipe += MSS;
                sent += 1;
            }
        }
        assert_eq!(sent, 7);
        // Once pipe is below ssthresh: what is delivered, plus one when SND.UNA advances.
        let prr = r.prr_mut().unwrap();
        prr.on_ack(3 * MSS, 10 * MSS, true, false, MSS);
        assert_eq!(r.window(14 * MSS), 14 * MSS, "capped at ssthresh");
        assert_eq!(r.on_cumulative_ack(100_000, MSS, MSS), AckOutcome::Exit);
        assert_eq!(r.window(14 * MSS), 14 * MSS, "the controller's cwnd after the episode");
    }

    #[test]
    fn sack_window_is_never_inflated() {
        let mut r = Recovery::new(Flavour::Sack);
        r.enter(100_000, 10 * MSS, 3, MSS);
        r.on_dupack(MSS);
        assert_eq!(r.window(10 * MSS), 10 * MSS);
        assert_eq!(r.on_cumulative_ack(50_000, MSS, MSS), AckOutcome::Continue);
        assert!(r.in_recovery());
    }
}
