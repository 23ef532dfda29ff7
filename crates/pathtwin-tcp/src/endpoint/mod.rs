//! The TCP endpoint: connection state (RFC 9293 §3.3.2), timers, and the glue between the
//! scoreboard, loss recovery, RACK-TLP, RTT estimation, congestion control and the receive
//! side.
//!
//! Timers: the retransmission timer (RFC 6298), RACK's reordering timer and the tail loss
//! probe timer (RFC 8985 §6.3, §7.2), the delayed-ACK timer (`crate::delack`), a pacing
//! wake-up and TIME-WAIT;
//! [`Endpoint::poll_timeout`] reports the earliest. Unlike Linux, which keeps the first
//! three in one slot, the retransmission timer keeps running under the other two, so a
//! fired probe re-arms it explicitly (RFC 8985 §7.3).
//!
//! ECN (RFC 3168 §6.1), as Linux does it: a client with `TcpConfig::ecn` sends an ECN-setup
//! SYN (ECE|CWR), and not again when the SYN is retransmitted; a server accepts whenever
//! asked (SYN-ACK with ECE). Then new data segments are ECT(0) and nothing else is; the
//! receiver acknowledges a CE-marked segment at once and sets ECE on everything it sends
//! until a segment with CWR arrives; the sender reduces through
//! [`CongestionControl::on_ecn`] at most once per window of data, retransmits nothing,
//! and sets CWR on its next new data segment.
//!
//! Monaco (ACC paper §III-B): when the controller is Monaco the endpoint sends its control
//! pairs (`crate::monaco::ControlSender`) ahead of anything else and hands the answers to
//! the controller; every endpoint answers control pairs it receives
//! (`crate::monaco::AccumulationEstimator`), so a receiver needs no configuration. Control
//! packets bypass TCP entirely: they occupy no sequence space, are never acknowledged, and
//! are not counted in the segment statistics.
//!
//! This module owns the public [`Endpoint`] API, the handshake, timers and event reporting;
//! segment input is in `input`, segment output in `output`. Call order is in the crate
//! docs: after every input, `poll_event` until `None`, `poll_transmit` until `None`, then
//! `poll_timeout`.
//!
//! Simplifications, each harmless in a simulator whose hosts only talk TCP to each other:
//! no simultaneous open; no Nagle algorithm (as `TCP_NODELAY`); no persist timer, because
//! the advertised window never shrinks (applications read instantly) and a window smaller
//! than one segment is still used when nothing is in flight (so there are no window probes
//! to keep out of ECN); RST segments are not validated against the window; SYNs are retried without limit.

mod input;
mod output;

use crate::cc::{CcParams, CongestionControl, Controller};
use crate::config::TcpConfig;
use crate::delack::DelayedAck;
use crate::monaco::{AccumulationEstimator, AccumulationFeedback, ControlSender};
use crate::rack::{Rack, TlpProbe};
use crate::rcvwin::RcvWindow;
use crate::reassembly::Reassembly;
use crate::recovery::{Flavour, Recovery};
use crate::rtt::RttEstimator;
use crate::segment::TIMESTAMP_OPTION_BYTES;
use crate::scoreboard::Scoreboard;
use crate::segment::{Control, Segment};
use crate::stats::{Event, Stats};
use pathtwin_core::time::{Duration, Instant};
use std::collections::VecDeque;

/// RFC 6298 (5.7): RTO once data flows after the SYN or SYN-ACK timed out.
const RTO_AFTER_SYN_TIMEOUT: Duration = Duration::from_secs(3);
/// RFC 9293 §3.7.1: the MSS to assume when the peer's SYN has no MSS option.
const DEFAULT_PEER_MSS: u32 = 536;

/// The options of a peer's SYN that the handshake settles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PeerSyn {
    mss: Option<u16>,
    sack: bool,
    timestamps: bool,
    window_scale: bool,
}

/// Connection state, RFC 9293 §3.3.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Closed,
    Listen,
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
}

impl State {
    /// States in which data (or our FIN) may still be sent or retransmitted.
    fn may_send(self) -> bool {
        matches!(self, State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck)
    }
    /// States past the handshake in which arriving data and FINs are processed.
    fn may_receive(self) -> bool {
        matches!(
            self,
            State::Established
                | State::FinWait1
                | State::FinWait2
                | State::CloseWait
                | State::Closing
                | State::LastAck
                | State::TimeWait
        )
    }
}

/// One end of a TCP connection, sans-IO: see the crate docs for how to drive it.
#[derive(Debug)]
pub struct Endpoint {
    cfg: TcpConfig,
    state: State,
    /// Sender MSS after negotiation: min(ours, peer's).
    smss: u32,
    isn: u64,
    /// Both SYNs carried SACK-permitted.
    sack_ok: bool,
    /// Both SYNs carried the window-scale option (only its room is modelled: windows are
    /// bytes; a capture writes them scaled once it is in effect).
    wscale_ok: bool,
    /// Both SYNs carried the timestamp option (RFC 7323).
    ts_ok: bool,
    /// RFC 7323 §4.3's TS.Recent, echoed as TSecr: the peer's TSval from its SYN, then from
    /// each segment at or below `last_ack_sent` (Linux's `tcp_replace_ts_recent`: not after
    /// `rcv_wup`), so that an ACK echoes the transmission that advanced our cumulative point
    /// (a retransmission that filled a hole, or the original of a spuriously retransmitted
    /// segment) and the sender's RTT sample from it is a true one.
    ts_recent: Option<Instant>,
    /// RCV.NXT as of the last segment we sent (RFC 7323's Last.ACK.sent, Linux's `rcv_wup`).
    last_ack_sent: u64,

    // Handshake.
    /// A SYN (or SYN-ACK) must be (re)sent.
    syn_pending: bool,
    syn_sent_at: Option<Instant>,
    /// Our SYN or SYN-ACK was sent more than once: no RTT sample from it (Karn), and the
    /// initial window is one segment (RFC 5681 §3.1).
    syn_retransmitted: bool,
    /// SYN (or SYN-ACK) retransmissions, and how many of them our timer made
    /// (`linux_handshake`).
    syn_retransmits: u32,
    syn_timeouts: u32,
    peer_isn: u64,
    /// The options of the peer's SYN, kept until the handshake ends.
    peer_syn: Option<PeerSyn>,

    // Send side. Data occupies [data_start, data_start + written); our FIN follows it.
    snd_una: u64,
    /// One past the highest sequence number sent.
    snd_max: u64,
    data_start: u64,
    written: u64,
    close_requested: bool,
    /// The close came when everything written could go at once: the FIN goes alone
    /// (`TcpConfig::fin_alone_after_sent_data`).
    fin_alone: bool,
    fin_sent: bool,
    peer_wnd: u64,
    sb: Scoreboard,
    rtt: RttEstimator,
    rto_at: Option<Instant>,
    /// Timer expiries since the cumulative ACK last advanced.
    rto_repeats: u32,
    /// After a timeout: one past the highest sequence number sent when it fired, until the
    /// cumulative ACK reaches it (what controllers see as `in_timeout_recovery`).
    timeout_recover: Option<u64>,
    cc: Controller,
    recovery: Recovery,
    /// RACK loss detection, when SACK is in use and `TcpConfig::rack` is on.
    rack: Option<Rack>,
    /// The RACK reordering timer (RFC 8985 §6.2 step 5).
    rack_at: Option<Instant>,
    /// Tail loss probes are in use (RACK and `TcpConfig::tlp`).
    tlp: bool,
    /// The probe timeout (RFC 8985 §7.2).
    pto_at: Option<Instant>,
    /// The PTO fired: the next transmission is the probe.
    tlp_pending: bool,
    /// The probe outstanding (TLP.end_seq, TLP.is_retrans).
    tlp_probe: Option<TlpProbe>,
    /// The next transmission is a retransmission of the first lost segment that ignores
    /// cwnd and pacing (fast retransmit, NewReno partial ACK, timeout).
    force_retx: bool,
    next_send_at: Instant,
    pacing_wakeup: Option<Instant>,
    /// New data sent by limited transmit since the cumulative ACK last advanced; RFC 5681
    /// §3.2 step 2 excludes it from the FlightSize that sets ssthresh.
    limited_transmit_bytes: u64,
    /// Value of `written` when AllAcked was last reported.
    all_acked_reported: u64,

    // Restart after idle (`TcpConfig::restart_after_idle`).
    /// When the last segment carrying data went out (Linux's `lsndtime`; the handshake's
    /// end before any).
    last_data_sent_at: Option<Instant>,
    /// The application wrote while nothing was in flight: the next transmission first
    /// checks how long the connection was idle (`tcp_skb_entail` runs the check; the
    /// endpoint learns the time at `poll_transmit`, the instant of the write).
    idle_check_pending: bool,
    /// `close` came with that check pending: whether the FIN goes alone is decided after
    /// it, with the window the data will really have.
    fin_alone_deferred: bool,

    // ECN (RFC 3168).
    /// Our SYN asked for ECN (ECE|CWR); a retransmitted SYN no longer does.
    ecn_requested: bool,
    /// The peer's SYN asked for ECN.
    peer_ecn_setup: bool,
    /// Both ends agreed: data goes out ECT(0) and ECE/CWR are meaningful.
    ecn_ok: bool,
    /// Sender: we reduced for an ECN-Echo and the next new data segment carries CWR.
    cwr_pending: bool,
    /// Sender: `snd_max` at the last ECN reduction; ECN-Echo on ACKs up to it belongs to the
    /// window already reduced for (RFC 3168 §6.1.2: once per window).
    ecn_high_seq: u64,
    /// Receiver: a CE mark arrived and no CWR since: every ACK carries ECE (§6.1.3).
    ece_pending: bool,

    // Monaco's control protocol.
    /// Sends control pairs; present when the controller is Monaco and the handshake is over.
    control_tx: Option<ControlSender>,
    /// Answers the peer's control pairs.
    control_rx: AccumulationEstimator,

    // Receive side.
    rx: Reassembly,
    /// Linux's receive-window autotuning, once established (`TcpConfig::rcv_autotuning`).
    rcvwin: Option<RcvWindow>,
    ack_now: bool,
    /// The ACK of a SYN-ACK, owed as a segment of its own (`linux_handshake`): sent before
    /// any data the application wrote on being told it is connected.
    handshake_ack_alone: bool,
    /// When in-order data is acknowledged (the delayed-ACK timer is its deadline).
    delack: DelayedAck,
    time_wait_at: Option<Instant>,
    rst_pending: Option<Segment>,

    // Reporting.
    events: VecDeque<Event>,
    /// Delivered bytes not yet reported in an [`Event::Received`].
    unreported: u64,
    closed_reported: bool,
    stats: Stats,
}

impl Endpoint {
    fn new(cfg: TcpConfig, state: State, isn: u64) -> Self {
        debug_assert_eq!(cfg.validate(), Ok(()), "TcpConfig must be validated by the caller");
        let params = CcParams {
            smss: cfg.mss,
            initial_cwnd: (cfg.initial_window as u64 * cfg.mss as u64).min(cfg.max_window),
            max_window: cfg.max_window,
            slow_start: cfg.slow_start,
        };
        Endpoint {
            smss: cfg.mss,
            isn,
            sack_ok: false,
            wscale_ok: false,
            ts_ok: false,
            ts_recent: None,
            last_ack_sent: 0,
            syn_pending: state == State::SynSent,
            syn_sent_at: None,
            syn_retransmitted: false,
            syn_retransmits: 0,
            syn_timeouts: 0,
            peer_isn: 0,
            peer_syn: None,
            snd_una: isn,
            snd_max: isn,
            data_start: isn + 1,
            written: 0,
            close_requested: false,
            fin_alone: false,
            fin_sent: false,
            peer_wnd: 0,
            sb: Scoreboard::new(),
            rtt: RttEstimator::with_style(cfg.rto_style, cfg.initial_rto, cfg.min_rto, cfg.max_rto),
            rto_at: None,
            rto_repeats: 0,
            timeout_recover: None,
            cc: cfg.cc.controller(&params),
            recovery: Recovery::new(cfg.cc.flavour_without_sack()),
            rack: None,
            rack_at: None,
            tlp: false,
            pto_at: None,
            tlp_pending: false,
            tlp_probe: None,
            force_retx: false,
            next_send_at: Instant::ZERO,
            pacing_wakeup: None,
            limited_transmit_bytes: 0,
            all_acked_reported: 0,
            last_data_sent_at: None,
            idle_check_pending: false,
            fin_alone_deferred: false,
            ecn_requested: false,
            peer_ecn_setup: false,
            ecn_ok: false,
            cwr_pending: false,
            ecn_high_seq: 0,
            ece_pending: false,
            control_tx: None,
            control_rx: AccumulationEstimator::default(),
            rx: Reassembly::new(0),
            rcvwin: None,
            ack_now: false,
            handshake_ack_alone: false,
            delack: DelayedAck::default(),
            time_wait_at: None,
            rst_pending: None,
            events: VecDeque::with_capacity(4),
            unreported: 0,
            closed_reported: false,
            stats: Stats::default(),
            state,
            cfg,
        }
    }

    /// Active open: the first [`poll_transmit`](Self::poll_transmit) yields the SYN.
    /// `isn` is the initial sequence number; `isn` plus everything ever sent must fit in a
    /// `u64` (draw it below 2^32, as real stacks do).
    pub fn connect(cfg: TcpConfig, now: Instant, isn: u64) -> Endpoint {
        let mut ep = Endpoint::new(cfg, State::SynSent, isn);
        ep.next_send_at = now;
        ep
    }

    /// Passive open: waits for a SYN.
    pub fn listen(cfg: TcpConfig, isn: u64) -> Endpoint {
        Endpoint::new(cfg, State::Listen, isn)
    }

    /// The application writes `bytes` more bytes. The send buffer is unbounded; a huge value
    /// such as `u64::MAX / 2` models an endless bulk transfer. Writes after
    /// [`close`](Self::close) are discarded.
    pub fn send(&mut self, bytes: u64) {
        if !self.close_requested && !matches!(self.state, State::Closed | State::TimeWait) {
            // `tcp_skb_entail` runs `tcp_slow_start_after_idle_check` for new data queued
            // while nothing is in flight (`packets_out` = 0).
            let idle = matches!(self.state, State::Established | State::CloseWait) && self.sb.is_empty();
            if bytes > 0 && self.cfg.restart_after_idle && idle {
                self.idle_check_pending = true;
            }
            self.written = self.written.saturating_add(bytes);
        }
    }

    /// The application closes its sending direction: a FIN follows all queued data.
    pub fn close(&mut self) {
        match self.state {
            State::Listen => self.state = State::Closed,
            State::Closed | State::TimeWait => {}
            _ => {
                if !self.close_requested && self.cfg.fin_alone_after_sent_data {
                    if self.idle_check_pending {
                        self.fin_alone_deferred = true;
                    } else {
                        self.fin_alone = self.unsent_fits_the_window();
                    }
                }
                self.close_requested = true;
            }
        }
    }

    /// Whether all written data not yet sent would go at once: what Linux's `write()`
    /// sends before it returns (cwnd, the peer's window and the send buffer allow it all).
    fn unsent_fits_the_window(&self) -> bool {
        if !matches!(self.state, State::Established | State::CloseWait) || self.recovery.in_recovery() || !self.sb.is_open() {
            return false;
        }
        let unsent = self.data_end().saturating_sub(self.snd_max);
        let room = self.cc.cwnd().saturating_sub(self.sb.outstanding());
        let edge = self.snd_una.saturating_add(self.peer_wnd.min(self.cfg.max_window));
        unsent <= room && self.snd_max + unsent <= edge
    }

    /// The earliest instant at which [`handle_timeout`](Self::handle_timeout) has work:
    /// retransmission, RACK reordering timer, tail loss probe, delayed ACK, pacing or
    /// TIME-WAIT.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let control = self.control_tx.as_ref().and_then(ControlSender::poll_timeout);
        [self.rto_at, self.delack.deadline(), self.time_wait_at, self.pacing_wakeup, self.rack_at, self.pto_at, control]
            .into_iter()
            .flatten()
            .min()
    }

    /// Fires every timer due at `now`; calling it early or late is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.pacing_wakeup.is_some_and(|t| t <= now) {
            self.pacing_wakeup = None;
        }
        if self.delack.on_timer(&self.cfg, now, self.rtt.rto()) {
            self.ack_now = true;
        }
        if self.rack_at.is_some_and(|t| t <= now) {
            self.rack_at = None;
            // RFC 8985 §6.3: the reordering window of a segment ran out.
            if self.rack_detect_loss(now) {
                let was = self.recovery.in_recovery();
                self.maybe_enter_recovery(now, false, 0);
                // Linux's `tcp_rack_reo_timeout` counts one delivered segment for PRR on
                // entering recovery (`tcp_cwnd_reduction(sk, 1, 0, 0)`).
                let (pipe, smss) = (self.sb.pipe(), self.smss as u64);
                if let Some(prr) = self.recovery.prr_mut().filter(|_| !was) {
                    prr.on_ack(smss, pipe, false, false, smss);
                }
            }
        }
        if self.pto_at.is_some_and(|t| t <= now) {
            self.pto_at = None;
            // RFC 8985 §7.3: the probe goes out with the next transmission; the
            // retransmission timer is re-armed behind it, so a probe that is the same
            // instant as the RTO takes its place.
            if self.state.may_send() && !self.sb.is_empty() {
                self.tlp_pending = true;
                self.rto_at = Some(now + self.rtt.rto());
            }
        }
        if self.rto_at.is_some_and(|t| t <= now) {
            self.rto_at = None;
            self.on_rto(now);
        }
        if self.time_wait_at.is_some_and(|t| t <= now) {
            self.time_wait_at = None;
            self.state = State::Closed;
        }
        if let Some(tx) = &mut self.control_tx {
            tx.handle_timeout(now);
        }
    }

    /// The next event for the application, in the order things happened.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        if self.unreported > 0 {
            let bytes = std::mem::take(&mut self.unreported);
            return Some(Event::Received { bytes });
        }
        None
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// The window the sender may fill, in bytes: the controller's cwnd, inflated during
    /// Reno/NewReno fast recovery.
    pub fn cwnd(&self) -> u64 {
        self.recovery.window(self.cc.cwnd())
    }
    pub fn ssthresh(&self) -> u64 {
        self.cc.ssthresh()
    }
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }
    /// The current retransmission timeout, back-off included.
    pub fn rto(&self) -> Duration {
        self.rtt.rto()
    }
    /// RFC 5681 FlightSize: sequence numbers sent and not cumulatively acknowledged.
    pub fn flight_size(&self) -> u64 {
        self.sb.outstanding()
    }
    /// RFC 6675 pipe: the sender's estimate of what is in the network.
    pub fn pipe(&self) -> u64 {
        self.sb.pipe()
    }
    pub fn state(&self) -> State {
        self.state
    }
    /// The negotiated sender MSS (the configured one before the handshake completes).
    pub fn mss(&self) -> u32 {
        self.smss
    }
    /// Whether both ends agreed to use SACK.
    pub fn sack_enabled(&self) -> bool {
        self.sack_ok
    }
    /// Whether both ends offered the window-scale option (RFC 7323 §2.2: windows after the
    /// handshake are then sent scaled).
    pub fn window_scale_enabled(&self) -> bool {
        self.wscale_ok
    }
    /// Whether ECN was negotiated (RFC 3168 §6.1.1).
    pub fn ecn_enabled(&self) -> bool {
        self.ecn_ok
    }
    pub fn in_recovery(&self) -> bool {
        self.recovery.in_recovery()
    }
    /// The receive window the peer last advertised.
    pub fn peer_window(&self) -> u64 {
        self.peer_wnd
    }
    /// The congestion controller, for controller-specific state in results.
    pub fn congestion_control(&self) -> &dyn CongestionControl {
        &self.cc
    }
    pub fn config(&self) -> &TcpConfig {
        &self.cfg
    }

    /// What is really in the network, as Linux's `tcp_packets_in_flight` counts it: RFC
    /// 6675 pipe, less, without SACK, the segments duplicate ACKs reported delivered (which
    /// pipe without SACK cannot know of). What rate-based controllers and the app-limited
    /// check use.
    fn in_flight(&self) -> u64 {
        self.sb.pipe().saturating_sub(self.sb.rate().dupack_credit())
    }

    /// The receive window we advertise: Linux's autotuned one, or the whole buffer.
    fn advertised_window(&self) -> u64 {
        self.rcvwin.as_ref().map_or(self.cfg.rcv_buffer, RcvWindow::window)
    }

    /// The window our SYN or SYN-ACK announces: with autotuning, the largest multiple of the
    /// MSS up to 65535, as Linux's `tcp_select_initial_window`.
    fn syn_window(&self) -> u64 {
        if self.cfg.rcv_autotuning {
            let mss = self.cfg.mss as u64;
            65_535 / mss * mss
        } else {
            self.cfg.rcv_buffer
        }
    }

    /// End of the application's data in sequence space (where our FIN goes).
    fn data_end(&self) -> u64 {
        self.data_start.saturating_add(self.written)
    }

    fn push_event(&mut self, e: Event) {
        if self.unreported > 0 {
            let bytes = std::mem::take(&mut self.unreported);
            self.events.push_back(Event::Received { bytes });
        }
        self.events.push_back(e);
    }

    /// The handshake completed (on the SYN-ACK for the client, on the ACK of our SYN-ACK
    /// for the server): fix the MSS, SACK and timestamp use and initial window, and take
    /// the handshake's RTT sample. With timestamps every segment carries 12 bytes of options
    /// that the MSS option does not count, so the payload per segment is 12 less (Linux's
    /// `tcp_current_mss`: 1448 for an MSS of 1460).
    /// `echo` is the TSecr of the segment that completed it.
    fn establish(&mut self, now: Instant, peer: PeerSyn, ecn: bool, echo: Option<Instant>) {
        self.ts_ok = self.cfg.timestamps && peer.timestamps;
        let ts_room = if self.ts_ok { TIMESTAMP_OPTION_BYTES } else { 0 };
        self.smss = self.cfg.mss.min(peer.mss.map_or(DEFAULT_PEER_MSS, u32::from)).saturating_sub(ts_room).max(1);
        self.sack_ok = self.cfg.sack && peer.sack;
        self.wscale_ok = self.cfg.window_scale && peer.window_scale;
        self.ecn_ok = ecn;
        let linux = self.cfg.linux_handshake;
        if !self.syn_retransmitted {
            if let Some(sent) = self.syn_sent_at {
                self.take_rtt_sample(now.saturating_since(sent));
            }
        } else if let (true, true, Some(sent)) = (linux, self.ts_ok, echo) {
            // Karn forbids the sequence sample; the echo says which SYN was answered.
            self.take_rtt_sample(now.saturating_since(sent));
        } else {
            self.rtt.restart_after_syn_timeout(RTO_AFTER_SYN_TIMEOUT);
        }
        let smss = self.smss as u64;
        let loss_window = if linux { self.syn_retransmits > 1 && self.syn_timeouts > 0 } else { self.syn_retransmitted };
        let initial_cwnd = if loss_window {
            smss
        } else {
            (self.cfg.initial_window as u64 * smss).min(self.cfg.max_window)
        };
        self.cc = self.cfg.cc.controller(&CcParams { smss: self.smss, initial_cwnd, max_window: self.cfg.max_window, slow_start: self.cfg.slow_start });
        if self.cfg.cc.uses_control_packets() {
            self.control_tx = Some(ControlSender::default());
        }
        let flavour = if self.sack_ok { Flavour::Sack } else { self.cfg.cc.flavour_without_sack() };
        self.recovery = Recovery::new(flavour);
        if self.sack_ok && self.cfg.rack {
            self.rack = Some(Rack::default());
            self.sb.use_rack();
            self.tlp = self.cfg.tlp;
        } else if self.sack_ok && self.cfg.lost_retransmit {
            self.sb.use_lost_retransmit();
        }
        if self.cfg.rcv_autotuning {
            self.rcvwin = Some(RcvWindow::new(self.smss as u64, self.cfg.rcv_buffer_initial, self.cfg.rcv_buffer, now));
        }
        self.snd_una = self.isn + 1;
        self.snd_max = self.isn + 1;
        self.rto_at = None;
        self.next_send_at = now;
        // `tcp_finish_connect` and the SYN-RECV branch of `tcp_rcv_state_process` set
        // `lsndtime` when the connection is established.
        self.last_data_sent_at = Some(now);
        self.state = State::Established;
        self.push_event(Event::Connected);
    }

    /// A Monaco control packet arrived: the peer's pair for our estimator, or its answer to
    /// ours for the controller.
    fn handle_control(&mut self, now: Instant, c: Control) {
        match c {
            Control::Feedback { seq, accumulation, loss } => {
                if let Some(loop_rtt) = self.control_tx.as_mut().and_then(|tx| tx.on_feedback(now, seq)) {
                    let loop_rtt = Some(loop_rtt);
                    self.cc.on_accumulation(now, &AccumulationFeedback { accumulation, loss, loop_rtt });
                }
            }
            Control::Probe { .. } | Control::Count { .. } => self.control_rx.on_control(now, c),
        }
    }

    /// When a timer of `timeout` set at `now` fires in Linux's timer wheel (HZ = 1 s /
    /// `jiffy`): at its jiffy when under 63 jiffies away (level 0), otherwise at the next
    /// multiple of its level's granularity, 8^level jiffies (`calc_wheel_index`,
    /// `calc_index`: `((expires >> shift) + 1) << shift`; `LVL_START(n)` = 63·8^(n−1)).
    fn timer_wheel_expiry(now: Instant, timeout: Duration, jiffy: Duration) -> Instant {
        let j = jiffy.as_nanos();
        if j == 0 {
            return now + timeout;
        }
        let delta = timeout.as_nanos().div_ceil(j);
        let expires = now.as_nanos() / j + delta;
        let mut level = 0u32;
        while level < 8 && delta >= 63u64 << (3 * level) {
            level += 1;
        }
        if level == 0 {
            return Instant::from_nanos(expires * j);
        }
        let shift = 3 * level;
        Instant::from_nanos((((expires >> shift) + 1) << shift) * j)
    }

    /// The window's restart after idle (`TcpConfig::restart_after_idle`), when the
    /// application wrote with nothing in flight; `now` is the write's instant. Linux 6.x:
    /// `tcp_slow_start_after_idle_check` (`include/net/tcp.h`) skips controllers with a
    /// `cong_control` hook and connections with `packets_out`, and calls
    /// `tcp_cwnd_restart(sk, delta)` (`net/ipv4/tcp_output.c`) when delta = `tcp_jiffies32`
    /// − `lsndtime` exceeds `icsk_rto`, both in jiffies:
    ///
    /// ```text
    /// restart_cwnd = tcp_init_cwnd(tp, dst);         /* TCP_INIT_CWND, 10 */
    /// tp->snd_ssthresh = tcp_current_ssthresh(sk);   /* max(ssthresh, cwnd/2 + cwnd/4) */
    /// restart_cwnd = min(restart_cwnd, cwnd);
    /// while ((delta -= inet_csk(sk)->icsk_rto) > 0 && cwnd > restart_cwnd)
    ///         cwnd >>= 1;
    /// tcp_snd_cwnd_set(tp, max(cwnd, restart_cwnd));
    /// ```
    ///
    /// in whole segments; `tcp_current_ssthresh` keeps ssthresh as it is in recovery (or
    /// CWR). The initial window is the configured one, not the one-segment window after a
    /// lost SYN (`tcp_init_cwnd` is the route's `initcwnd` or 10).
    fn restart_window_after_idle(&mut self, now: Instant) {
        if !self.cfg.cc.restarts_after_idle() || !self.sb.is_empty() {
            return;
        }
        let Some(last) = self.last_data_sent_at else { return };
        let tick = self.cfg.rack_timer_tick.as_nanos();
        let rto = self.rtt.rto().as_nanos();
        let (idle, rto) = if tick == 0 {
            (now.saturating_since(last).as_nanos(), rto)
        } else {
            ((now.as_nanos() / tick).saturating_sub(last.as_nanos() / tick), rto.div_ceil(tick).max(1))
        };
        if idle <= rto {
            return;
        }
        let smss = self.smss as u64;
        let cwnd_bytes = self.cc.cwnd();
        let cwnd = (cwnd_bytes / smss).max(1);
        let ssthresh = self.cc.ssthresh();
        let ssthresh = if self.recovery.in_recovery() { ssthresh } else { ssthresh.max(((cwnd >> 1) + (cwnd >> 2)) * smss) };
        let restart = (self.cfg.initial_window as u64).min(cwnd);
        let (mut w, mut left) = (cwnd, idle);
        while left > rto && w > restart {
            left -= rto;
            w >>= 1;
        }
        let w = w.max(restart);
        // Unhalved, the window keeps its fraction of a segment.
        let new_cwnd = if w == cwnd { cwnd_bytes } else { w * smss };
        self.cc.on_cwnd_restart(now, new_cwnd, ssthresh);
    }

    fn take_rtt_sample(&mut self, r: Duration) {
        self.rtt.on_sample(r, self.snd_una, self.snd_max);
        self.stats.on_rtt_sample(r, self.rtt.srtt());
    }

    /// The retransmission timer expired (RFC 6298 (5.4)–(5.6)).
    fn on_rto(&mut self, now: Instant) {
        match self.state {
            State::SynSent | State::SynReceived => {
                self.stats.timeouts += 1;
                self.rtt.on_timeout();
                self.syn_pending = true;
                self.syn_retransmitted = true;
                self.syn_timeouts += 1;
            }
            _ if !self.sb.is_empty() => {
                self.stats.timeouts += 1;
                let first = self.rto_repeats == 0;
                self.rto_repeats += 1;
                self.cc.on_rto(now, self.flight_to_halve(self.sb.outstanding()), first);
                self.rtt.on_timeout();
                self.recovery.on_rto(self.snd_max);
                self.timeout_recover = Some(self.snd_max);
                self.sb.on_rto();
                self.rack_at = None;
                self.pto_at = None;
                self.tlp_pending = false;
                self.tlp_probe = None;
                self.force_retx = true;
            }
            _ => {}
        }
    }

    fn enter_time_wait(&mut self, now: Instant) {
        self.report_closed();
        self.rto_at = None;
        if self.cfg.time_wait == Duration::ZERO {
            self.state = State::Closed;
        } else {
            self.state = State::TimeWait;
            self.time_wait_at = Some(now + self.cfg.time_wait);
        }
    }

    fn report_closed(&mut self) {
        if !self.closed_reported {
            self.closed_reported = true;
            self.push_event(Event::Closed);
        }
    }
}
