//! Segment arrival: the handshake, ACK processing (RTT samples, SACK, duplicate ACKs, loss
//! recovery, the retransmission timer) and data/FIN processing with the delayed-ACK policy.
//!
//! ACK processing follows RFC 5681 §3.2 and RFC 6582 §3.2 without SACK, RFC 6675 §5 with
//! it; the timer follows RFC 6298 §5; acknowledgment generation follows RFC 5681 §4.2 and
//! RFC 1122 §4.2.3.2: in-order data is acknowledged at least every `delayed_ack_every`
//! full-sized segments (in bytes: more than (every − 1)·SMSS unacknowledged, as Linux
//! counts) and within `delayed_ack_timeout`; out-of-order data, data filling a hole,
//! duplicates and FINs are acknowledged at once.

use super::{Endpoint, PeerSyn, State};
use crate::cc::{AckEvent, CongestionControl, DeliveryEvent};
use crate::rack::{pto_deadline, TlpOutcome};
use crate::reassembly::Reassembly;
use crate::recovery::{AckOutcome, Flavour, Prr};
use crate::segment::{Ecn, Flags, Segment};
use crate::stats::Event;
use pathtwin_core::config::NewRenoTimer;
use pathtwin_core::time::{Duration, Instant};

impl Endpoint {
    /// A segment from the peer arrived at `now`. Follow with
    /// [`poll_transmit`](Self::poll_transmit) until `None`.
    pub fn handle_segment(&mut self, now: Instant, seg: &Segment) {
        if let Some(c) = seg.control {
            self.handle_control(now, c);
            return;
        }
        self.stats.segments_received += 1;
        if seg.len > 0 {
            self.control_rx.on_data(now, seg.len);
        }
        if seg.flags.rst() {
            self.on_rst();
            return;
        }
        if seg.timestamps {
            self.note_ts_val(seg);
        }
        match self.state {
            State::Closed => {
                self.reply_rst(seg);
                return;
            }
            State::Listen => {
                if seg.flags.syn() && !seg.flags.ack() {
                    self.peer_isn = seg.seq;
                    self.rx = Reassembly::new(seg.seq + 1).with_sack_covering_fin(self.cfg.sack_covers_fin);
                    self.peer_syn = Some(PeerSyn { mss: seg.mss, sack: seg.sack_permitted, timestamps: seg.timestamps, window_scale: seg.window_scale });
                    self.peer_ecn_setup = is_ecn_setup_syn(seg.flags);
                    self.peer_wnd = seg.wnd;
                    self.state = State::SynReceived;
                    self.syn_pending = true;
                } else {
                    self.reply_rst(seg);
                }
                return;
            }
            State::SynSent => {
                if seg.flags.syn() && seg.flags.ack() && seg.ack == self.isn + 1 {
                    self.peer_isn = seg.seq;
                    self.rx = Reassembly::new(seg.seq + 1).with_sack_covering_fin(self.cfg.sack_covers_fin);
                    self.peer_wnd = seg.wnd;
                    // RFC 3168 §6.1.1: an ECN-setup SYN-ACK has ECE and not CWR.
                    let ecn = self.ecn_requested && seg.flags.contains(Flags::ECE) && !seg.flags.contains(Flags::CWR);
                    self.establish(now, PeerSyn { mss: seg.mss, sack: seg.sack_permitted, timestamps: seg.timestamps, window_scale: seg.window_scale }, ecn, seg.ts_ecr);
                    self.ack_now = true;
                    // Linux acknowledges the SYN-ACK at once, before waking the application
                    // (`tcp_rcv_synsent_state_process` → `tcp_send_ack`; it delays the ACK to
                    // carry data only for a writer already blocked in connect, defer-accept or
                    // ping-pong mode). The client's first request follows in its own segment.
                    self.handshake_ack_alone = self.cfg.linux_handshake;
                }
                return;
            }
            State::SynReceived => {
                if seg.flags.syn() {
                    // The client retransmitted its SYN: our SYN-ACK was lost.
                    if seg.seq == self.peer_isn {
                        self.syn_pending = true;
                        self.syn_retransmitted = true;
                        // A client that gave up on ECN resends its SYN without ECE|CWR.
                        self.peer_ecn_setup = is_ecn_setup_syn(seg.flags);
                    }
                    return;
                }
                if !seg.flags.ack() || seg.ack != self.isn + 1 {
                    return;
                }
                let peer = self.peer_syn.unwrap_or_default();
                self.establish(now, peer, self.peer_ecn_setup, seg.ts_ecr);
                // The ACK may carry data: fall through.
            }
            _ => {}
        }
        if seg.flags.syn() {
            // A retransmitted SYN-ACK: our ACK of it was lost.
            self.ack_now = true;
            return;
        }
        if seg.flags.ack() {
            self.process_ack(now, seg);
        }
        if seg.len > 0 || seg.flags.fin() {
            self.process_data(now, seg);
        }
    }

    /// RFC 7323 §4.3 (Linux's `tcp_store_ts_recent` on a SYN, `tcp_replace_ts_recent`
    /// after): TS.Recent takes the TSval of a SYN and of a segment that does not start above
    /// Last.ACK.sent, unless older than the one held.
    fn note_ts_val(&mut self, seg: &Segment) {
        let in_window = seg.flags.syn() || seg.seq <= self.last_ack_sent;
        if in_window && self.ts_recent.is_none_or(|r| seg.ts_val >= r) {
            self.ts_recent = Some(seg.ts_val);
        }
    }

    fn on_rst(&mut self) {
        match self.state {
            State::Closed | State::Listen => return,
            State::TimeWait => {}
            _ => self.push_event(Event::Reset),
        }
        self.state = State::Closed;
        self.rto_at = None;
        self.rack_at = None;
        self.pto_at = None;
        self.tlp_pending = false;
        self.delack.clear();
        self.time_wait_at = None;
        self.pacing_wakeup = None;
        self.ack_now = false;
    }

    /// RFC 9293 §3.10.7.1: answer a segment that belongs to no connection with a reset.
    fn reply_rst(&mut self, seg: &Segment) {
        let rst = if seg.flags.ack() {
            Segment { seq: seg.ack, flags: Flags::RST, ..Segment::default() }
        } else {
            Segment { seq: 0, ack: seg.seq_end(), flags: Flags::RST | Flags::ACK, ..Segment::default() }
        };
        self.rst_pending = Some(rst);
    }

    fn process_ack(&mut self, now: Instant, seg: &Segment) {
        let ack = seg.ack;
        if ack > self.snd_max {
            // RFC 9293 §3.10.7.4: it acknowledges something not yet sent.
            self.ack_now = true;
            return;
        }
        if ack < self.snd_una {
            return; // older than what we know: reordered, carries nothing new
        }
        let smss = self.smss as u64;
        let dupthresh = self.cfg.dupack_threshold;
        let old_wnd = self.peer_wnd;
        self.peer_wnd = seg.wnd;
        let flight_before = self.sb.outstanding();
        let pipe_before = self.sb.pipe();
        let in_flight_before = self.in_flight();
        let in_recovery = self.recovery.in_recovery();
        let lost_before = self.sb.lost_total();
        let mut delivery = self.rack.as_ref().map(|r| r.delivery(now, self.stats.rtt_min.unwrap_or(Duration::ZERO)));
        let lost_retx_before = self.sb.lost_retransmissions();
        let newly_sacked = if self.sack_ok && !seg.sack.is_empty() {
            self.sb.sack(&seg.sack, self.snd_una, self.snd_max, dupthresh, smss, delivery.as_mut())
        } else {
            0
        };
        self.stats.lost_retransmissions += self.sb.lost_retransmissions() - lost_retx_before;
        let advanced = ack > self.snd_una;
        let mut cum_delivered = 0;
        if advanced {
            let cum = self.sb.ack(ack, delivery.as_mut());
            cum_delivered = cum.delivered;
            self.snd_una = ack;
            self.rto_repeats = 0;
            if self.timeout_recover.is_some_and(|r| ack >= r) {
                self.timeout_recover = None;
            }
            self.limited_transmit_bytes = 0;
            // Karn's rule; with timestamps, an ACK of retransmitted data still measures from
            // the transmission it echoes (Linux's `tcp_ack_update_rtt` falls back on
            // `tcp_rtt_tsopt_us` when the sequence-based sample is invalid). The echo is the
            // peer's TS.Recent, not our guess of which transmission arrived: after a
            // spurious retransmission the original arrived first, and measuring from the
            // retransmission gave samples below the path's RTT (and BBR a min_rtt far too
            // small: a quarter of the kernel's goodput under 2 % loss).
            let echo = if self.ts_ok { seg.ts_ecr } else { None };
            let sent_at = cum.rtt_sent_at.or(echo);
            let rtt = sent_at.map(|t| now.saturating_since(t));
            if let Some(r) = rtt {
                self.take_rtt_sample(r);
            }
            self.stats.bytes_acked = self.snd_una.min(self.data_end()).saturating_sub(self.data_start);
            self.cc.on_ack(&AckEvent {
                now,
                bytes_acked: cum.acked,
                rtt,
                srtt: self.rtt.srtt(),
                flight_before,
                pipe_before,
                in_recovery,
            });
            let mut restart_timer = true;
            match self.recovery.on_cumulative_ack(ack, cum.acked, smss) {
                AckOutcome::Continue => {}
                AckOutcome::Exit => self.cc.on_exit_recovery(now, self.sb.outstanding()),
                AckOutcome::RetransmitFront { first } => {
                    self.sb.mark_front_lost();
                    self.force_retx = true;
                    restart_timer = first || self.cfg.newreno_timer == NewRenoTimer::SlowButSteady;
                }
            }
            // RFC 6298 (5.2)/(5.3).
            if self.sb.is_empty() {
                self.rto_at = None;
            } else if restart_timer {
                self.rto_at = Some(now + self.rtt.rto());
            }
        }
        let is_dupack = if self.sack_ok {
            // RFC 6675 §2: an ACK that SACKs data not SACKed before.
            newly_sacked > 0
        } else {
            // RFC 5681 §2: same ACK number, no data, no SYN/FIN, same window, data outstanding.
            !advanced
                && seg.len == 0
                && !seg.flags.intersects(Flags::SYN | Flags::FIN)
                && seg.wnd == old_wnd
                && !self.sb.is_empty()
        };
        let mut dupacks = 0;
        if is_dupack {
            self.stats.dupacks_received += 1;
            if !self.sack_ok {
                let outstanding = self.sb.outstanding();
                self.sb.rate_mut().on_duplicate_ack(smss, outstanding);
            }
            dupacks = self.recovery.on_dupack(smss);
        }
        if let (Some(rack), Some(d)) = (self.rack.as_mut(), delivery) {
            rack.on_delivery(now, &d);
            self.rack_detect_loss(now);
        }
        if let Some(probe) = self.tlp_probe {
            let pure_dupack = !advanced && newly_sacked == 0 && seg.len == 0 && !seg.flags.fin();
            match probe.on_ack(ack, pure_dupack) {
                TlpOutcome::Pending => {}
                TlpOutcome::Done => self.tlp_probe = None,
                TlpOutcome::Repaired => {
                    // RFC 8985 §7.4.2: a loss was repaired by the probe alone; respond to
                    // it as to one fast recovery episode (Linux: enter and leave CWR).
                    self.tlp_probe = None;
                    let flight = self.sb.outstanding();
                    self.cc.on_enter_recovery(now, flight);
                    self.cc.on_exit_recovery(now, flight);
                }
            }
        }
        self.maybe_enter_recovery(now, is_dupack, dupacks);
        // PRR sets the window from what this ACK delivered, after its loss detection and any
        // recovery entry (Linux's `tcp_cong_control` after `tcp_fastretrans_alert`).
        let newly_lost = self.sb.lost_total() > lost_before;
        let pipe = self.sb.pipe();
        if let Some(prr) = self.recovery.prr_mut() {
            // What this ACK delivered, each byte once: previously SACKed bytes that the
            // cumulative ACK now covers were counted when SACKed (counting them again let a
            // hole's repair release the whole SACKed range at once).
            prr.on_ack(cum_delivered + newly_sacked, pipe, advanced, newly_lost, smss);
        }
        // ns-2's Agent/TCP/Linux restarts the timer on every ACK it accepts (see
        // `TcpConfig::ns2_rto_restart_every_ack`); RFC 6298 (5.3) only on new data (above).
        if self.cfg.ns2_rto_restart_every_ack && !self.sb.is_empty() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        if self.ecn_ok && seg.flags.contains(Flags::ECE) {
            self.on_ecn_echo(now, ack);
        }
        if let Some(sample) = self.sb.rate_mut().generate(now, self.stats.rtt_min) {
            self.cc.on_delivery(&DeliveryEvent {
                now,
                sample,
                newly_lost: self.sb.lost_total() - lost_before,
                pipe_before: in_flight_before,
                pipe: self.in_flight(),
                in_recovery: self.recovery.in_recovery(),
                in_timeout_recovery: self.timeout_recover.is_some(),
            });
            if self.cc.samples_app_limited() {
                let in_flight = self.in_flight();
                self.sb.rate_mut().mark_app_limited(in_flight);
            }
        }
        if self.tlp {
            if advanced {
                self.arm_pto(now);
            } else if self.pto_at.is_some() && !self.tlp_allowed() {
                self.pto_at = None;
            }
        }
        self.after_ack(now);
    }

    /// RFC 8985 §7.2: a probe may be scheduled with data outstanding, nothing SACKed, no
    /// loss known (not in recovery) and no probe outstanding.
    pub(super) fn tlp_allowed(&self) -> bool {
        !self.sb.is_empty()
            && self.tlp_probe.is_none()
            && !self.recovery.in_recovery()
            && self.sb.is_open()
            && self.sb.sacked_segments() == 0
    }

    /// (Re)arms the probe timer from `now`, or stops it when no probe is allowed; called
    /// after new data is sent and on ACKs that advance SND.UNA (RFC 8985 §7.2).
    pub(super) fn arm_pto(&mut self, now: Instant) {
        self.pto_at = self.tlp_allowed().then(|| {
            let one_segment = self.sb.outstanding() <= self.smss as u64;
            pto_deadline(now, self.rtt.srtt(), one_segment, self.cfg.pto_slack, self.rto_at)
        });
    }

    /// Starts fast recovery when loss is known and RFC 6582/6675 allow a new episode. With
    /// RACK that is when RACK has deemed the first unacknowledged segment lost (RFC 8985
    /// §6.2 step 5 leading to RFC 6675 §5 step 4), from an ACK or the RACK timer; without
    /// it, on the DupThresh-th duplicate ACK or, with SACK, when IsLost holds for it.
    pub(super) fn maybe_enter_recovery(&mut self, now: Instant, is_dupack: bool, dupacks: u32) {
        let lost = self.sack_ok && self.sb.front_is_lost();
        let start =
            if self.rack.is_some() { lost } else { is_dupack && (dupacks >= self.cfg.dupack_threshold || lost) };
        if start && self.recovery.may_enter(self.snd_una) {
            self.enter_recovery(now);
        }
    }

    /// Runs RACK's loss detection (RFC 8985 §6.2 steps 4–5) and re-arms its timer. Returns
    /// whether a segment was newly deemed lost; NextSeg rule (1) then retransmits it as
    /// pipe allows.
    pub(super) fn rack_detect_loss(&mut self, now: Instant) -> bool {
        let Some(rack) = &self.rack else { return false };
        let Some(latest) = rack.latest() else { return false };
        if !self.sb.rack_has_candidates() {
            self.rack_at = None;
            return false;
        }
        // "Fast or RTO recovery": a recovery episode, or segments still deemed lost or being
        // retransmitted after a timeout.
        let recovering = self.recovery.in_recovery() || !self.sb.is_open();
        let reo_wnd = rack.reo_wnd(
            recovering,
            self.sb.sacked_segments(),
            self.cfg.dupack_threshold,
            self.stats.rtt_min.unwrap_or(Duration::ZERO),
            self.rtt.srtt().unwrap_or(Duration::MAX),
        );
        let scan = self.sb.rack_detect_loss(now, latest, rack.loss_delay(reo_wnd));
        let tick = self.cfg.rack_timer_tick.as_nanos();
        self.rack_at = scan.deadline.map(|d| {
            if tick == 0 {
                return d;
            }
            // Linux's `usecs_to_jiffies(timeout) + TCP_TIMEOUT_MIN`.
            let ticks = d.saturating_since(now).as_nanos().div_ceil(tick) + 2;
            now + Duration::from_nanos(ticks * tick)
        });
        self.stats.lost_retransmissions += scan.lost_retransmissions;
        scan.lost
    }

    /// The FlightSize that a window reduction (fast retransmit or timeout) halves, RFC 5681
    /// eq. (4), given the sequence range outstanding.
    ///
    /// RFC 5681's FlightSize stands for "the amount of outstanding data in the network".
    /// Without SACK the outstanding range also covers what the receiver holds above a hole:
    /// during NewReno recovery the inflated window lets new data follow the holes for as
    /// many round trips as the recovery lasts, so when the retransmission timer fires in it
    /// (Impatient) or the next episode starts after it (Slow-but-Steady) that range is
    /// several windows long. Halving it set ssthresh above what the path holds, and the
    /// slow start or the window after the episode then overflowed the queue with hundreds of
    /// segments in a row: a cycle of timeouts (one per second on a one-BDP-buffer path, 57 %
    /// utilisation) or a recovery of hundreds of round trips. The controller's cwnd (never
    /// inflated) bounds what was sent per round trip, so the smaller of the two is halved;
    /// ns-2, BSD and Linux halve cwnd itself. With SACK every hole is repaired within a
    /// round trip or two and the range stays about a window.
    pub(super) fn flight_to_halve(&self, outstanding: u64) -> u64 {
        if self.recovery.flavour() == Flavour::Sack {
            outstanding
        } else {
            outstanding.min(self.cc.cwnd())
        }
    }

    /// An ACK with ECN-Echo (RFC 3168 §6.1.2): reduce the window as for a fast retransmit,
    /// retransmit nothing, and say so with CWR on the next new data segment. Once per window
    /// of data: echoes on ACKs that do not go beyond what was sent at the last reduction
    /// belong to marks already reacted to (Linux's CWR state, which ends at `high_seq`).
    /// During loss recovery (fast or after a timeout) the window has been reduced already
    /// for this window of data; only CWR is sent, so that the receiver stops echoing, as
    /// Linux queues CWR on entering recovery.
    fn on_ecn_echo(&mut self, now: Instant, ack: u64) {
        if ack <= self.ecn_high_seq {
            return;
        }
        self.ecn_high_seq = self.snd_max;
        self.cwr_pending = true;
        if !self.recovery.in_recovery() && self.timeout_recover.is_none() {
            self.cc.on_ecn(now, self.sb.outstanding());
            self.stats.ecn_reductions += 1;
        }
    }

    /// Fast retransmit: RFC 5681 §3.2 steps 2–4, RFC 6582 §3.2 step 2, RFC 6675 §5 step 4.
    fn enter_recovery(&mut self, now: Instant) {
        // The episode's window reduction covers any loss a probe outstanding would reveal
        // (Linux ends the TLP episode here too).
        self.pto_at = None;
        self.tlp_probe = None;
        let smss = self.smss as u64;
        let flight = self.flight_to_halve(self.sb.outstanding() - self.limited_transmit_bytes);
        let prior_cwnd = self.cc.cwnd();
        self.cc.on_enter_recovery(now, flight);
        self.recovery.enter(self.snd_max, self.cc.cwnd(), self.cfg.dupack_threshold, smss);
        self.sb.mark_front_lost();
        self.force_retx = true;
        if self.cfg.prr && self.cfg.cc.reduces_by_prr() {
            self.recovery.start_prr(Prr::new(prior_cwnd, self.cc.ssthresh(), self.sb.pipe()));
        }
        // The fast retransmission of the first unacknowledged segment restarts the timer.
        // RFC 6298 (5.1) only starts a timer that is not running, so the one running since
        // the last ACK of new data would otherwise expire about one RTO after that ACK: when
        // the DupThresh duplicate ACKs take longer to arrive than RTO − RTT (an RTT near the
        // minimum RTO, or a small window with sparse ACKs) it fires before the retransmission
        // can be acknowledged, a spurious timeout and go-back-N. ns-2 restarts the timer on
        // fast retransmit (`reset_rtx_timer` in every variant's `dupack_action`), as Linux
        // and FreeBSD do whenever they retransmit the first unacknowledged segment.
        self.rto_at = Some(now + self.rtt.rto());
        self.stats.fast_retransmits += 1;
    }

    /// Events and state changes that follow from the cumulative ACK point.
    fn after_ack(&mut self, now: Instant) {
        if self.written > self.all_acked_reported && self.snd_una >= self.data_end() {
            self.all_acked_reported = self.written;
            self.push_event(Event::AllAcked);
        }
        if self.fin_sent && self.snd_una > self.data_end() {
            match self.state {
                State::FinWait1 => self.state = State::FinWait2,
                State::Closing => self.enter_time_wait(now),
                State::LastAck => {
                    self.state = State::Closed;
                    self.rto_at = None;
                    self.report_closed();
                }
                _ => {}
            }
        }
    }

    fn process_data(&mut self, now: Instant, seg: &Segment) {
        if !self.state.may_receive() {
            return;
        }
        // RFC 3168 §6.1.3: CWR ends the echo of earlier marks; a CE mark on this very
        // segment starts it again.
        let mut ce = false;
        if self.ecn_ok {
            if seg.flags.contains(Flags::CWR) {
                self.ece_pending = false;
            }
            if seg.ecn == Ecn::Ce {
                self.stats.ce_received += 1;
                self.ece_pending = true;
                ce = true;
            }
        }
        let fin = seg.flags.fin();
        let duplicate = seg.len > 0 && seg.seq_end() <= self.rx.rcv_nxt();
        let a = self.rx.on_segment(seg.seq, seg.len as u64, fin, self.cfg.rcv_buffer);
        if a.delivered > 0 {
            self.stats.bytes_delivered += a.delivered;
            self.unreported += a.delivered;
        }
        let in_order_only = a.delivered > 0 && !a.filled_gap && !a.out_of_order && !fin;
        let mss = self.smss as u64;
        if duplicate {
            // A retransmission of data we hold: our ACK of it was lost or late.
            self.delack.on_duplicate(&self.cfg, mss);
        }
        let srtt = self.rtt.srtt();
        let echo = if self.ts_ok { seg.ts_ecr } else { None };
        if let Some(w) = self.rcvwin.as_mut().filter(|_| seg.len > 0 && !duplicate) {
            if w.on_segment(now, seg.len as u64, self.stats.bytes_delivered, echo, srtt) {
                self.delack.quick_once();
            }
        }
        if in_order_only && self.cfg.delayed_ack {
            if self.delack.on_in_order_data(&self.cfg, now, a.delivered, mss, self.rtt.rto(), self.rtt.srtt()) {
                self.ack_now = true;
            }
        } else {
            self.ack_now = true;
        }
        if ce {
            // The sender should hear of the mark without the delayed-ACK wait, as Linux's
            // quick-ACK mode on CE (`tcp_ecn_check_ce`).
            self.ack_now = true;
        }
        if a.fin {
            self.push_event(Event::PeerClosed);
            match self.state {
                State::Established => self.state = State::CloseWait,
                State::FinWait1 => self.state = State::Closing,
                State::FinWait2 => self.enter_time_wait(now),
                _ => {}
            }
        } else if fin && self.state == State::TimeWait {
            // A retransmitted FIN: our last ACK was lost. RFC 9293 §3.10.7.4 restarts the timer.
            self.time_wait_at = Some(now + self.cfg.time_wait);
        }
    }
}

/// RFC 3168 §6.1.1: an ECN-setup SYN carries both ECE and CWR.
fn is_ecn_setup_syn(flags: Flags) -> bool {
    flags.contains(Flags::ECE | Flags::CWR)
}
