//! Segment output: what to send next, in RFC 6675 NextSeg order.
//!
//! Order of preference on each call: a pending RST; the SYN or SYN-ACK; a forced
//! retransmission (fast retransmit, NewReno partial ACK, timeout — sent whatever cwnd says,
//! as RFC 5681 §3.2 step 2, RFC 6582 step 5 and RFC 6298 (5.4) ask); a tail loss probe
//! whose timer fired (RFC 8985 §7.3, also regardless of cwnd); a lost segment (rule 1); new
//! data or our FIN (rule 2); during SACK recovery, an unSACKed segment below the highest
//! SACK (rule 3); finally a pure ACK if one is owed. A client of the `linux` profile sends the
//! ACK of the SYN-ACK alone, ahead of any data (`TcpConfig::linux_handshake`).
//!
//! Pacing. When the controller has a pacing rate, every data or FIN transmission — forced
//! retransmissions and probes included, as with Linux's internal pacing and the fq qdisc —
//! waits until `next_send_at`, and each one moves `next_send_at` on by its length at the
//! rate, from the later of `now` and the previous `next_send_at` (a leaky bucket one segment
//! deep: idle time earns no credit for a burst). An ACK that opens a whole window therefore
//! releases one segment, and the rest follow at the pacing rate from the pacing wake-up that
//! [`Endpoint::poll_timeout`] reports. Pure ACKs are never paced.
//!
//! Application-limited periods (draft-cheng-iccrg-delivery-rate-estimation §3.4). Whenever
//! the sender stops with less than a full segment of unsent data, room in the window and no
//! lost segment waiting for retransmission, the delivery-rate estimator is told that the
//! flight from here on is application-limited.
//!
//! Limits on sending. While no loss is known (RFC 5681's normal state), new data needs
//! `FlightSize + len ≤ cwnd`, plus one SMSS for each of the first two duplicate ACKs when
//! limited transmit (RFC 3042) is on. Once loss is known — in recovery, or with segments
//! deemed lost after a timeout — everything but forced retransmissions needs
//! `pipe + len ≤ window`, where window is the controller's cwnd (inflated during
//! Reno/NewReno recovery), as RFC 6675 §5 step (C) and RFC 5681 §3.2 step 4 say. New data
//! must also lie within `snd_una + min(peer window, max_window)`: the peer's receive window
//! and w_max both bound the sequence range in flight. Sender-side silly-window avoidance
//! (RFC 9293 §3.8.6.2.1, simplified): a segment shorter than a full one (or than the rest of
//! the data) is only sent when nothing is in flight, so that windows that are not a whole
//! number of segments neither stall nor fragment the stream.

use super::{Endpoint, State};
use crate::cc::{CongestionControl, SentEvent};
use crate::rack::TlpProbe;
use crate::recovery::Flavour;
use crate::scoreboard::{Candidate, Retransmit};
use crate::segment::{Control, Ecn, Flags, SackBlocks, Segment};
use pathtwin_core::time::{Duration, Instant};

impl Endpoint {
    /// The next segment to put on the wire, if any. Call until `None` after every input.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Segment> {
        // Checked before taking: `take` copies the whole (segment-sized) option on every
        // call, which was a third of this function's time.
        if self.rst_pending.is_some() {
            let rst = self.rst_pending.take().expect("checked");
            self.count_sent(&rst);
            return Some(rst);
        }
        if let Some(c) = self.transmit_control(now) {
            // Not TCP: not counted in the segment statistics.
            return Some(Segment { control: Some(c), ..Segment::default() });
        }
        let mut seg = match self.state {
            State::Closed | State::Listen => None,
            State::SynSent | State::SynReceived => self.transmit_syn(now),
            _ if std::mem::take(&mut self.handshake_ack_alone) => self.transmit_pure_ack(),
            _ => match self.transmit_data(now) {
                Some(seg) => Some(seg),
                None => {
                    self.check_app_limited();
                    self.transmit_pure_ack()
                }
            },
        };
        if let Some(s) = &mut seg {
            if s.timestamps {
                s.ts_val = now;
                s.ts_ecr = self.ts_recent;
            }
            if s.flags.ack() {
                self.last_ack_sent = s.ack;
            }
            self.count_sent(s);
        }
        seg
    }

    /// Monaco: an answer we owe the peer, else the next packet of our own control pair.
    /// Neither waits for cwnd or the pacer.
    fn transmit_control(&mut self, now: Instant) -> Option<Control> {
        if let Some(answer) = self.control_rx.poll_transmit() {
            return Some(answer);
        }
        let active = self.state.may_send() && self.data_end() > self.snd_una;
        let (bytes_sent, rto) = (self.stats.bytes_sent, self.rtt.rto());
        self.control_tx.as_mut()?.poll_transmit(now, active, bytes_sent, rto)
    }

    fn count_sent(&mut self, seg: &Segment) {
        self.stats.segments_sent += 1;
        if seg.len == 0 && !seg.flags.intersects(Flags::SYN | Flags::FIN | Flags::RST) {
            self.stats.pure_acks_sent += 1;
        }
    }

    fn transmit_syn(&mut self, now: Instant) -> Option<Segment> {
        if !self.syn_pending {
            return None;
        }
        self.syn_pending = false;
        if self.syn_sent_at.is_some() {
            self.syn_retransmitted = true;
            self.syn_retransmits += 1;
        }
        self.syn_sent_at = Some(now);
        // Restarted on every (re)transmission, including a SYN-ACK resent because the
        // client's SYN came again.
        self.rto_at = Some(if self.cfg.linux_handshake {
            Self::timer_wheel_expiry(now, self.rtt.rto(), self.cfg.rack_timer_tick)
        } else {
            now + self.rtt.rto()
        });
        let mss = Some(self.cfg.mss.min(u16::MAX as u32) as u16);
        let seg = if self.state == State::SynSent {
            // RFC 3168 §6.1.1 ECN-setup SYN. A retransmitted SYN goes without it, as Linux
            // does (`tcp_ecn_clear_syn`), in case a middlebox drops ECN-setup SYNs.
            self.ecn_requested = self.cfg.ecn && !self.syn_retransmitted;
            let ecn_setup = if self.ecn_requested { Flags::ECE | Flags::CWR } else { Flags::EMPTY };
            Segment {
                seq: self.isn,
                flags: Flags::SYN | ecn_setup,
                wnd: self.syn_window(),
                mss,
                sack_permitted: self.cfg.sack,
                timestamps: self.cfg.timestamps,
                window_scale: self.cfg.window_scale,
                ..Segment::default()
            }
        } else {
            let peer = self.peer_syn.unwrap_or_default();
            // A server accepts ECN whenever asked (Linux's `tcp_ecn` 1 and 2 alike).
            let ecn_setup = if self.peer_ecn_setup { Flags::ECE } else { Flags::EMPTY };
            Segment {
                seq: self.isn,
                ack: self.rx.rcv_nxt(),
                flags: Flags::SYN | Flags::ACK | ecn_setup,
                wnd: self.syn_window(),
                mss,
                sack_permitted: self.cfg.sack && peer.sack,
                timestamps: self.cfg.timestamps && peer.timestamps,
                window_scale: self.cfg.window_scale && peer.window_scale,
                ..Segment::default()
            }
        };
        Some(seg)
    }

    /// Linux's `tcp_rate_check_app_limited`: the application, not the window, is what
    /// stops the sender.
    fn check_app_limited(&mut self) {
        let unsent = self.data_end().saturating_sub(self.snd_max);
        let in_flight = self.in_flight();
        if unsent < self.smss as u64 && in_flight < self.cwnd() && !self.sb.has_lost_unretransmitted() {
            self.sb.rate_mut().mark_app_limited(in_flight);
        }
    }

    fn transmit_data(&mut self, now: Instant) -> Option<Segment> {
        if !self.state.may_send() {
            return None;
        }
        if std::mem::take(&mut self.idle_check_pending) {
            self.restart_window_after_idle(now);
            if std::mem::take(&mut self.fin_alone_deferred) {
                self.fin_alone = self.unsent_fits_the_window();
            }
        }
        if self.cc.pacing_rate().is_some() && now < self.next_send_at {
            self.pacing_wakeup = Some(self.next_send_at);
            return None;
        }
        if self.force_retx {
            self.force_retx = false;
            if let Some(Candidate::Lost(i)) = self.sb.next_retransmission() {
                return Some(self.send_retransmission(i, now));
            }
        }
        if self.tlp_pending {
            self.tlp_pending = false;
            if let Some(seg) = self.send_probe(now) {
                return Some(seg);
            }
        }
        let open = !self.recovery.in_recovery() && self.sb.is_open();
        let (in_flight, limit) = if open {
            let lt = if self.cfg.limited_transmit { self.recovery.dupacks().min(2) as u64 } else { 0 };
            (self.sb.outstanding(), self.cc.cwnd() + lt * self.smss as u64)
        } else {
            (self.sb.pipe(), self.recovery.window(self.cc.cwnd()))
        };
        let room = limit.saturating_sub(in_flight);
        // With no loss known there is nothing to retransmit: skip the scoreboard lookup.
        let candidate = if open { None } else { self.sb.next_retransmission() };
        let rule3 = match candidate {
            Some(Candidate::Lost(i)) => {
                let r = self.sb.get(i);
                // Lost data goes before new data: if it does not fit, nothing does.
                return (r.end - r.start <= room || in_flight == 0).then(|| self.send_retransmission(i, now));
            }
            Some(Candidate::Rule3(i)) => Some(i),
            None => None,
        };
        if let Some(seg) = self.send_new_data(now, room, in_flight) {
            if open && self.sb.outstanding() > self.cc.cwnd() {
                self.limited_transmit_bytes += seg.len as u64;
            }
            return Some(seg);
        }
        let sack_recovery = self.recovery.in_recovery() && self.recovery.flavour() == Flavour::Sack;
        match rule3 {
            Some(i) if sack_recovery => {
                let r = self.sb.get(i);
                (r.end - r.start <= room).then(|| self.send_retransmission(i, now))
            }
            _ => None,
        }
    }

    /// Rule (2): the next new data segment (with our FIN if it ends the stream), or the FIN
    /// alone once all data is sent.
    fn send_new_data(&mut self, now: Instant, room: u64, in_flight: u64) -> Option<Segment> {
        let data_end = self.data_end();
        let start = self.snd_max;
        let (len, fin) = if start < data_end {
            let edge = self.snd_una.saturating_add(self.peer_wnd.min(self.cfg.max_window));
            let want = (data_end - start).min(self.smss as u64);
            let len = want.min(room).min(edge.saturating_sub(start));
            if len == 0 || (len < want && in_flight > 0) {
                return None;
            }
            (len, self.close_requested && !self.fin_alone && start + len == data_end)
        } else if self.close_requested && !self.fin_sent {
            (0, true)
        } else {
            return None;
        };
        let end = start + len + fin as u64;
        self.sb.push(start, end, fin, now);
        self.snd_max = end;
        if fin {
            self.fin_sent = true;
            match self.state {
                State::Established => self.state = State::FinWait1,
                State::CloseWait => self.state = State::LastAck,
                _ => {}
            }
        }
        self.stats.bytes_sent += len;
        if len > 0 {
            self.stats.data_segments_sent += 1;
            self.last_data_sent_at = Some(now);
        }
        self.after_data_sent(now, start, end - start, false);
        if self.tlp {
            self.arm_pto(now);
        }
        let mut flags = if fin { Flags::FIN } else { Flags::EMPTY };
        let mut seg_ecn = Ecn::NotEct;
        if self.ecn_ok && len > 0 {
            // RFC 3168 §6.1.2: CWR on the first new data after a reduction; §6.1.5–6.1.6:
            // only new data is ECT, not pure ACKs, retransmissions or a bare FIN (Linux's
            // `tcp_ecn_send`).
            seg_ecn = Ecn::Ect0;
            if std::mem::take(&mut self.cwr_pending) {
                flags |= Flags::CWR;
            }
        }
        let mut seg = self.header(start, flags, len as u32);
        seg.ecn = seg_ecn;
        Some(seg)
    }

    /// TLP_send_probe (RFC 8985 §7.3): one new segment if the receive window allows,
    /// otherwise the last segment again; cwnd is not consulted.
    fn send_probe(&mut self, now: Instant) -> Option<Segment> {
        let in_flight = self.sb.outstanding();
        let (seg, is_retrans) = match self.send_new_data(now, u64::MAX, in_flight) {
            Some(seg) => (seg, false),
            None => {
                let r = self.sb.probe_retransmitted(now)?;
                (self.emit_retransmission(r, now), true)
            }
        };
        self.stats.tail_loss_probes += 1;
        self.tlp_probe = Some(TlpProbe { end_seq: self.snd_max, is_retrans });
        self.pto_at = None;
        Some(seg)
    }

    fn send_retransmission(&mut self, idx: usize, now: Instant) -> Segment {
        let r = self.sb.retransmitted(idx, now);
        // With Linux 2.6's lost-retransmission rule (`lost_retransmit`), fast recovery
        // retransmits the first unacknowledged segment again when its retransmission was
        // lost; Linux restarts the retransmission timer whenever it retransmits the head of
        // the queue (`tcp_xmit_retransmit_queue`: `if (skb == tcp_write_queue_head(sk))
        // inet_csk_reset_xmit_timer(..., icsk_rto, ...)`), so the repair is not cut short
        // by the timer that has run since the episode began.
        // Linux does so whenever it retransmits the head (`rearm_rto_on_head_retransmit`).
        let rearm = self.cfg.rearm_rto_on_head_retransmit || (self.recovery.in_recovery() && self.sb.detects_lost_retransmissions());
        if r.start == self.snd_una && rearm {
            self.rto_at = Some(now + self.rtt.rto());
        }
        self.emit_retransmission(r, now)
    }

    fn emit_retransmission(&mut self, r: Retransmit, now: Instant) -> Segment {
        let payload = r.payload();
        self.stats.retransmits += 1;
        self.stats.bytes_sent += payload;
        self.stats.bytes_retransmitted += payload;
        if payload > 0 {
            self.stats.data_segments_sent += 1;
            self.last_data_sent_at = Some(now);
        }
        self.after_data_sent(now, r.start, r.end - r.start, true);
        self.header(r.start, if r.fin { Flags::FIN } else { Flags::EMPTY }, payload as u32)
    }

    /// Bookkeeping shared by every data or FIN transmission.
    fn after_data_sent(&mut self, now: Instant, seq: u64, units: u64, retransmission: bool) {
        // RFC 6298 (5.1): start the timer if it is not running.
        if self.rto_at.is_none() {
            self.rto_at = Some(now + self.rtt.rto());
        }
        if let Some(rate) = self.cc.pacing_rate() {
            // Leaky bucket with a depth of one segment: credit does not accumulate.
            let gap = (units as u128 * 1_000_000_000 / rate.max(1) as u128).min(u64::MAX as u128) as u64;
            self.next_send_at = self.next_send_at.max(now) + Duration::from_nanos(gap);
        }
        self.cc.on_packet_sent(&SentEvent { now, seq, bytes: units, pipe: self.sb.pipe(), retransmission });
        if let Some(prr) = self.recovery.prr_mut() {
            prr.on_sent(units);
        }
    }

    fn transmit_pure_ack(&mut self) -> Option<Segment> {
        if !self.ack_now {
            return None;
        }
        Some(self.header(self.snd_max, Flags::EMPTY, 0))
    }

    /// A segment after the handshake: it always acknowledges, carries SACK blocks when SACK
    /// is in use, and discharges any ACK we owe.
    fn header(&mut self, seq: u64, flags: Flags, len: u32) -> Segment {
        let owed = std::mem::take(&mut self.ack_now);
        self.delack.on_ack_sent(&self.cfg, owed);
        // RFC 3168 §6.1.3: ECE on every segment we send until the peer's CWR arrives.
        let ece = if self.ecn_ok && self.ece_pending { Flags::ECE } else { Flags::EMPTY };
        Segment {
            seq,
            ack: self.rx.rcv_nxt(),
            flags: flags | Flags::ACK | ece,
            len,
            wnd: self.advertised_window(),
            sack: match (self.sack_ok, self.ts_ok) {
                (false, _) => SackBlocks::EMPTY,
                (true, false) => self.rx.sack_blocks(SackBlocks::MAX),
                (true, true) => self.rx.sack_blocks(SackBlocks::MAX_WITH_TIMESTAMPS),
            },
            mss: None,
            sack_permitted: false,
            window_scale: false,
            timestamps: self.ts_ok,
            // Stamped in `poll_transmit`, which knows the time.
            ts_val: Instant::ZERO,
            ts_ecr: None,
            ecn: Ecn::NotEct,
            control: None,
        }
    }
}
