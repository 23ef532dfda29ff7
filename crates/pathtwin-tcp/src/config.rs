//! Endpoint configuration: [`TcpConfig`], its validation ([`ConfigError`]), and its reading
//! from the config's TCP settings ([`TcpConfig::from_settings`]).
//!
//! This module owns the defaults and says where each comes from: two sets, one per
//! [`TcpProfile`] ([`TcpConfig::ns2`], the simulator's own, and [`TcpConfig::linux`], Linux
//! 6.x's as the emulator's kernel runs them; `docs/tcp-defaults.md` tabulates both with
//! their sources). It does not own the schema
//! (`pathtwin_core::config`'s `[tcp]`, whose choices such as [`NewRenoTimer`] this struct
//! uses as they are), nor a controller's table: each controller reads its own beside its
//! code (`VegasParams::from_settings`, ...), and [`CcAlgorithm`] maps the name `cc` to it.
//! Errors from settings name the key that caused them, as the config file writes it.

use crate::cc::{CcAlgorithm, CcParamError, CubicParams, SlowStart};
use crate::rtt::RtoStyle;
use pathtwin_core::config::{self as schema, NewRenoTimer, TcpProfile, TcpSettings};
use pathtwin_core::time::Duration;

/// IPv4 header bytes (no options) in front of every segment.
const IPV4_HEADER: u32 = 20;

/// Everything an endpoint can be configured with. All sizes are bytes unless said otherwise.
/// The field docs give the `ns2` profile's value ([`TcpConfig::ns2`], the [`Default`]);
/// [`TcpConfig::linux`] gives Linux's, each with its source.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpConfig {
    /// Which profile the defaults came from (what `[tcp] profile` said); every behaviour
    /// it selects is one of the fields below.
    pub profile: TcpProfile,
    /// Largest payload this end is willing to receive, announced in the SYN's MSS option;
    /// the connection uses the smaller of both ends' values. 1460 = Ethernet 1500 − 40.
    /// With timestamps, each segment carries 12 bytes less payload (1448).
    pub mss: u32,
    /// Offer TCP timestamps (RFC 7323); used when both ends offer them. They take 12 bytes
    /// of every segment's header, so the payload per segment is the MSS less 12, as Linux's
    /// `tcp_current_mss` makes it; and they give an RTT sample from an ACK of retransmitted
    /// data, where Karn's rule gives none (Linux's `tcp_ack_update_rtt` falls back on the
    /// echoed timestamp), so that the first ACK after a timeout collapses the backed-off RTO.
    /// Off in `ns2`.
    pub timestamps: bool,
    /// Offer SACK (RFC 2018); used when both ends offer it.
    pub sack: bool,
    /// Delay ACKs of in-order data (RFC 5681 §4.2); false acknowledges every segment.
    pub delayed_ack: bool,
    /// Acknowledge at the latest every this many full-sized segments (RFC 5681 §4.2: 2).
    pub delayed_ack_every: u32,
    /// Longest an ACK is delayed. 40 ms is Linux's `TCP_DELACK_MIN`, the delay Linux uses in
    /// steady bulk transfer; RFC 5681 only bounds it by 500 ms. With `adaptive_ato` it is
    /// where the adaptive timeout starts and its floor (Linux's `TCP_ATO_MIN`).
    pub delayed_ack_timeout: Duration,
    /// Adapt the delayed-ACK timeout to the data's inter-arrival gaps as Linux's `ato` does
    /// (`tcp_event_data_recv`, `tcp_send_delayed_ack`, `tcp_delack_timer_handler`): between
    /// `delayed_ack_timeout` and `delayed_ack_max`, and below max(SRTT, 40 ms). Off in `ns2`.
    pub adaptive_ato: bool,
    /// The adaptive timeout's ceiling: Linux's `TCP_DELACK_MAX`, 200 ms.
    pub delayed_ack_max: Duration,
    /// Quick-ACK mode (Linux's `TCP_MAX_QUICKACKS`, 16): when the first data arrives and
    /// again after a gap longer than the RTO, acknowledge every in-order segment at once
    /// for this many ACKs (`tcp_incr_quickack`: at most rcv_wnd/(2·MSS)), so that the
    /// sender's first round trips are not held back by delayed ACKs. 0 in `ns2` (RFC 5681
    /// delayed ACKs from the first segment).
    pub quickacks: u32,
    /// Lower bound on the RTO. RFC 6298 (2.4) says 1 s; 200 ms is Linux's `TCP_RTO_MIN`
    /// and ns-2's `minrto_`, what measured paths are compared with.
    pub min_rto: Duration,
    /// Upper bound on the RTO, including back-off; RFC 6298 (2.5) allows ≥ 60 s.
    pub max_rto: Duration,
    /// RTO before the first RTT sample (RFC 6298 (2.1): 1 s).
    pub initial_rto: Duration,
    /// How the RTO follows the samples: RFC 6298, or Linux's (RTO = SRTT + max(4·mdev,
    /// `min_rto`)), see [`RtoStyle`].
    pub rto_style: RtoStyle,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initial_window: u32,
    /// How slow start turns an ACK into window: at most one SMSS per ACK (RFC 5681), or
    /// every byte acknowledged (Linux's `tcp_slow_start`).
    pub slow_start: SlowStart,
    /// Maximum window w_max: caps the data in flight (as ns-2's `window_`). 4 MiB, Linux's
    /// default `tcp_wmem` maximum.
    pub max_window: u64,
    /// Receive buffer, advertised as the window. Simulated applications read instantly, so
    /// the advertised window is always the whole buffer. 4 MiB, Linux's default `tcp_rmem`
    /// maximum order of magnitude. With `rcv_autotuning`, Linux's `tcp_rmem[2]`, the most
    /// the buffer may grow to.
    pub rcv_buffer: u64,
    /// Linux's receive-window autotuning (`crate::rcvwin`): the window starts at 64 KiB and
    /// follows what the application reads per round trip, and while it grows every segment
    /// is acknowledged at once. Off in `ns2` (a fixed window of `rcv_buffer`).
    pub rcv_autotuning: bool,
    /// With `rcv_autotuning`, the buffer a connection starts with: Linux's `tcp_rmem[1]`,
    /// 128 KiB.
    pub rcv_buffer_initial: u64,
    pub cc: CcAlgorithm,
    /// Duplicate ACKs that trigger fast retransmit (RFC 5681 §3.2: 3).
    pub dupack_threshold: u32,
    /// Limited transmit (RFC 3042): send one new segment on each of the first two
    /// duplicate ACKs. On in Linux and in ns-2 (`singledup_`).
    pub limited_transmit: bool,
    /// NewReno without SACK: when fast recovery restarts the retransmission timer. The
    /// default is what RFC 6582 §3.2 step 5 specifies, the Impatient variant: "For the
    /// first partial ACK that arrives during fast recovery, also reset the retransmit
    /// timer." It is also ns-2's default (`Agent/TCP/Newreno newreno_changes1_ 1`).
    pub newreno_timer: NewRenoTimer,
    /// With SACK, detect losses with RACK (RFC 8985 §6) instead of RFC 6675's DupThresh
    /// rule: a segment is lost once a segment sent after it was delivered and a reordering
    /// window has passed, which also finds lost retransmissions without waiting for the
    /// retransmission timer. On by default, as in Linux since 4.18 (`net.ipv4.tcp_recovery
    /// = 1`); false gives classic RFC 6675 recovery. Without SACK it has no effect.
    pub rack: bool,
    /// With RACK, send a tail loss probe (RFC 8985 §7) when no ACK came for about 2·SRTT,
    /// so that losses at the end of a flight are repaired by fast recovery rather than by a
    /// retransmission timeout. On by default, as in Linux (`net.ipv4.tcp_early_retrans =
    /// 3`). Without RACK (or SACK) it has no effect.
    pub tlp: bool,
    /// With SACK and without RACK, deem a retransmission lost once data first sent after
    /// it is SACKed, and send it again without waiting for the retransmission timer: Linux
    /// 2.6's `tcp_mark_lost_retrans` (2.6.25 to 4.17, before RACK replaced it), which
    /// ns-2.35's `Agent/TCP/Linux` also models. Off by default: classic RFC 6675 recovery
    /// has no such rule. With RACK (which finds lost retransmissions by time) or without
    /// SACK it has no effect.
    pub lost_retransmit: bool,
    /// With SACK, send during fast recovery by Proportional Rate Reduction (RFC 6937, as
    /// Linux's `tcp_cwnd_reduction`): the window falls to ssthresh over the recovery's round
    /// trip in proportion to what is delivered, instead of dropping to ssthresh at once and
    /// waiting for pipe to fall below it. Off in `ns2`.
    pub prr: bool,
    /// As a receiver, let a SACK block that reaches the peer's out-of-order FIN cover it, as
    /// Linux's do (the FIN's segment sits in the out-of-order queue with an end_seq past the
    /// FIN, and SACK blocks are those ends): the sender's last segment is then SACKed whole,
    /// so RACK learns from a tail loss probe that carries the FIN. Off in `ns2`, whose
    /// blocks stop at the data (its replays' results were made so).
    pub sack_covers_fin: bool,
    /// When the application closes while everything it wrote fits in the window at once,
    /// send the FIN in a segment of its own after the data, as the kernel does for a
    /// program that writes and then closes: `write()` transmits what the window allows
    /// before it returns, and `tcp_send_fin` piggybacks the FIN only on an skb not yet sent.
    /// It matters when the last data is lost: the bare FIN may arrive and be SACKed (RACK
    /// then repairs the tail at once), and a tail loss probe is that bare FIN. Off in
    /// `ns2` (the FIN rides on the last data segment whenever it can).
    pub fin_alone_after_sent_data: bool,
    /// Offer the window-scale option (RFC 7323 §2) on the SYN: only its 4 bytes of room are
    /// modelled (windows are already scaled). They matter where the handshake's round trip
    /// is the connection's min_RTT: RACK takes a retransmission SACKed sooner than min_RTT
    /// after it went for an ACK of the original (RFC 8985 §6.2 step 2, `tcp_rack_advance`),
    /// and a bare FIN's round trip is shorter than a 60-byte SYN's by those 4 bytes (Linux
    /// sends wscale: `net.ipv4.tcp_window_scaling = 1`). Off in `ns2`.
    pub window_scale: bool,
    /// Added to TLP's probe timeout of 2·SRTT when more than one segment is in flight:
    /// Linux's `TCP_TIMEOUT_MIN` (`tcp_schedule_loss_probe`), two jiffies: 8 ms with the
    /// emulator's kernel's `CONFIG_HZ` = 250 (a kernel capture shows the probe 2·SRTT +
    /// 7–8 ms after the last ACK); RFC 8985 §7.2 adds nothing (0 in `ns2`). With one
    /// segment both add 200 ms.
    pub pto_slack: Duration,
    /// Linux's jiffy, the tick its RACK reordering timer counts in: the time left is
    /// rounded up to whole ticks and two more are added (`tcp_rack_mark_lost`:
    /// `usecs_to_jiffies(timeout) + TCP_TIMEOUT_MIN`). 4 ms with `CONFIG_HZ` = 250 (a kernel
    /// capture shows the retransmission 8 ms after the SACK that started a 2.5-ms window);
    /// zero in `ns2` (the timer fires when the window runs out). `linux_handshake` counts
    /// the handshake's timers in it too.
    pub rack_timer_tick: Duration,
    /// Restart the retransmission timer whenever the first unacknowledged segment is
    /// retransmitted, as Linux's `tcp_xmit_retransmit_queue` does (`rearm_timer` for
    /// `rtx_head`); RFC 6298 restarts it only on ACKs of new data and at fast retransmit.
    /// Off in `ns2` (where `lost_retransmit` turns the same rule on).
    pub rearm_rto_on_head_retransmit: bool,
    /// The handshake's retransmissions as Linux's. (1) After a SYN or SYN-ACK was
    /// retransmitted, start with one segment only where Linux does (`tcp_init_transfer`:
    /// "we only reset cwnd when more than 1 SYN/SYN-ACK retransmission has occurred",
    /// `total_retrans > 1 && undo_marker`): at least two retransmissions, one of them by our
    /// own timer (`undo_marker` is set when the SYN's timer fires, `tcp_enter_loss`, and for
    /// a server only when its SYN-ACK timed out, `tcp_create_openreq_child`; a SYN-ACK resent
    /// because the client's SYN came again counts in `total_retrans`, `inet_rtx_syn_ack`,
    /// but is no timeout). (2) With timestamps, take the handshake's RTT sample from the
    /// timestamp echo of the SYN (or SYN-ACK) answered (`tcp_synack_rtt_meas` and `tcp_ack_update_rtt`
    /// fall back on `tcp_rtt_tsopt_us`) instead of the 3-s RTO of RFC 6298 (5.7). (3) The
    /// SYN's and SYN-ACK's timers fire where the kernel's timer wheel puts them: a timeout
    /// of 64 jiffies or more is rounded up to its level's granularity (8 jiffies, 32 ms at
    /// HZ = 250, for the first 1-s timeout; 64 for 2-16 s), in `rack_timer_tick` jiffies
    /// (`calc_wheel_index`). When the SYN-ACK is lost, the client's second SYN reaches the
    /// server just as the server's 1-s timer expires; the slack decides which comes first,
    /// and so whether the server sent one retransmission or two, and with (1) its initial
    /// window (seen in the emulator: the client's second SYN 7-17 ms past the second, the
    /// server's timer not yet fired, and ten segments, not one). Off in `ns2`: one
    /// retransmission, by either end, means one segment (RFC 5681 §3.1) and no sample
    /// (Karn), and the timers fire on time. (4) The client acknowledges the SYN-ACK in a pure
    /// ACK of its own, sent before the application's first write (`tcp_rcv_synsent_state_process`
    /// calls `tcp_send_ack`); off, the ACK rides on that write's first segment, which at the
    /// server delays the handshake's completion by the request's serialization (on a dial-up
    /// uplink, 600 bytes are 150 ms, and Monkey See took the handshake's round trip for it).
    pub linux_handshake: bool,
    /// ns-2 mimicry, neither RFC 6298 nor Linux: restart the retransmission timer on every
    /// ACK while data is outstanding, duplicate ACKs included, as ns-2.35's `Agent/TCP/Linux`
    /// does (`LinuxTcpAgent::time_processing` calls `set_rtx_timer()` for each ACK it
    /// accepts). RFC 6298 (5.3) restarts it only on ACKs of new data, and Linux only on those
    /// and when it retransmits the head of the queue; with this on, the timer fires only
    /// after RTO without any ACK. Off by default; for comparisons with ns-2's TCP-Linux.
    pub ns2_rto_restart_every_ack: bool,
    /// Restart the congestion window after an idle period (RFC 2861, RFC 5681 §4.1), as
    /// Linux does with `net.ipv4.tcp_slow_start_after_idle = 1`, its default: when the
    /// application queues new data while nothing is in flight and the last data segment
    /// went out more than one RTO ago, ssthresh becomes max(ssthresh, ¾·cwnd) (outside
    /// recovery) and cwnd is halved once for every further RTO of idle time, but not below
    /// min(initial window, cwnd) (`tcp_slow_start_after_idle_check` in `include/net/tcp.h`,
    /// called from `tcp_skb_entail` in `net/ipv4/tcp.c`; `tcp_cwnd_restart` in
    /// `net/ipv4/tcp_output.c`). Time is counted in `rack_timer_tick` jiffies, as the
    /// kernel's `lsndtime` and `icsk_rto` are. Not for controllers with a `cong_control`
    /// hook of their own (BBR, Monaco), which the kernel skips. Off in `ns2` (the window
    /// stays open however long the connection was idle).
    pub restart_after_idle: bool,
    /// Ask for ECN (RFC 3168) in our SYN. False behaves as Linux's default `net.ipv4.tcp_ecn
    /// = 2`: we never ask, but a server accepts a peer's ECN-setup SYN; true is `tcp_ecn =
    /// 1`: a client asks and a server accepts. ECN is used when the client asked and the
    /// server accepted.
    pub ecn: bool,
    /// How long TIME-WAIT lasts. 60 s is Linux's `TCP_TIMEWAIT_LEN` (RFC 9293's 2·MSL would
    /// be 4 min). [`crate::Event::Closed`] is reported on entering TIME-WAIT, so a driver
    /// need not wait for it.
    pub time_wait: Duration,
}

impl Default for TcpConfig {
    /// The `ns2` profile's ([`TcpConfig::ns2`]).
    fn default() -> Self {
        TcpConfig::ns2()
    }
}

impl TcpConfig {
    /// The defaults of a profile.
    pub fn for_profile(profile: TcpProfile) -> TcpConfig {
        match profile {
            TcpProfile::Ns2 => TcpConfig::ns2(),
            TcpProfile::Linux => TcpConfig::linux(),
        }
    }

    /// The simulator's own TCP, as the ns-2 comparisons and the papers' reproductions run
    /// it: the sources are on each field.
    pub fn ns2() -> TcpConfig {
        TcpConfig {
            profile: TcpProfile::Ns2,
            mss: 1460,
            timestamps: false,
            sack: true,
            delayed_ack: true,
            delayed_ack_every: 2,
            delayed_ack_timeout: Duration::from_millis(40),
            adaptive_ato: false,
            delayed_ack_max: Duration::from_millis(200),
            quickacks: 0,
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            initial_rto: Duration::from_secs(1),
            rto_style: RtoStyle::Rfc6298,
            initial_window: 10,
            slow_start: SlowStart::Rfc5681,
            max_window: 4 << 20,
            rcv_buffer: 4 << 20,
            rcv_autotuning: false,
            rcv_buffer_initial: 128 << 10,
            cc: CcAlgorithm::NewReno,
            dupack_threshold: 3,
            limited_transmit: true,
            newreno_timer: NewRenoTimer::Impatient,
            rack: true,
            tlp: true,
            lost_retransmit: false,
            prr: false,
            sack_covers_fin: false,
            fin_alone_after_sent_data: false,
            window_scale: false,
            pto_slack: Duration::ZERO,
            rack_timer_tick: Duration::ZERO,
            rearm_rto_on_head_retransmit: false,
            linux_handshake: false,
            ns2_rto_restart_every_ack: false,
            restart_after_idle: false,
            ecn: false,
            time_wait: Duration::from_secs(60),
        }
    }

    /// Linux 6.x's TCP with its default sysctls, as the emulator's kernel runs it
    /// (`docs/tcp-defaults.md` gives the source of each value). Not modelled: the sender's
    /// buffer autotuning (`max_window` stands for the data `tcp_wmem[2]` holds), pacing
    /// (CUBIC and Reno are not paced without the fq qdisc), SACK compression
    /// (`tcp_comp_sack_nr`), undo of spurious recoveries (F-RTO, D-SACK, Eifel) and the
    /// receiver's ping-pong mode.
    pub fn linux() -> TcpConfig {
        TcpConfig {
            profile: TcpProfile::Linux,
            // The MSS option: Ethernet's 1500 − 40 (`tcp_advertise_mss`); 1448 per segment
            // with timestamps (`tcp_current_mss`).
            mss: 1460,
            // net.ipv4.tcp_timestamps = 1.
            timestamps: true,
            // net.ipv4.tcp_sack = 1.
            sack: true,
            delayed_ack: true,
            // `__tcp_ack_snd_check`: more than one full segment received unacknowledged.
            delayed_ack_every: 2,
            // TCP_ATO_MIN = TCP_DELACK_MIN = HZ/25 (40 ms); TCP_DELACK_MAX = HZ/5 (200 ms).
            delayed_ack_timeout: Duration::from_millis(40),
            adaptive_ato: true,
            delayed_ack_max: Duration::from_millis(200),
            // TCP_MAX_QUICKACKS = 16 (`include/net/tcp.h`).
            quickacks: 16,
            // TCP_RTO_MIN = HZ/5 (net.ipv4.tcp_rto_min_us = 200000), TCP_RTO_MAX = 120 s,
            // TCP_TIMEOUT_INIT = 1 s.
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(120),
            initial_rto: Duration::from_secs(1),
            rto_style: RtoStyle::Linux,
            // TCP_INIT_CWND = 10.
            initial_window: 10,
            slow_start: SlowStart::Linux,
            // net.ipv4.tcp_wmem[2] = 4 MiB of skb truesize (`sk_wmem_queued` counts every
            // queued skb's truesize against `sk_sndbuf`): at the payload-to-truesize ratio
            // of the receive side's segments (`rcvwin`'s 158/256, measured in a kernel
            // capture), 2.59 MB of data, sent or unacknowledged. The grid's 100 Mbit/s,
            // 200 ms cells are held to it in the kernel: BBR's long-lived flow under 0.5 %
            // loss gets 44 Mbit/s there, the simulator 68 with 4 MiB and 44 with this.
            max_window: crate::rcvwin::win_from_space(4 << 20),
            // net.ipv4.tcp_rmem = 4096 131072 33554432 (Linux 6.18; tcp_rmem[2] was 6 MiB
            // in earlier 6.x), net.ipv4.tcp_moderate_rcvbuf = 1.
            rcv_buffer: 32 << 20,
            rcv_autotuning: true,
            rcv_buffer_initial: 128 << 10,
            // CONFIG_DEFAULT_TCP_CONG = "cubic", `tcp_cubic.c` with its module defaults.
            cc: CcAlgorithm::Cubic(CubicParams::LINUX),
            // net.ipv4.tcp_reordering = 3.
            dupack_threshold: 3,
            // Linux sends new data on the first duplicate ACKs (Disorder state).
            limited_transmit: true,
            // Without SACK, Linux restarts the timer on every ACK of new data.
            newreno_timer: NewRenoTimer::SlowButSteady,
            // net.ipv4.tcp_recovery = 1 (RACK), net.ipv4.tcp_early_retrans = 3 (TLP).
            rack: true,
            tlp: true,
            lost_retransmit: false,
            // `tcp_cwnd_reduction` (PRR, RFC 6937) in the Recovery state.
            prr: true,
            sack_covers_fin: true,
            fin_alone_after_sent_data: true,
            window_scale: true,
            // TCP_TIMEOUT_MIN = 2 jiffies.
            // TCP_TIMEOUT_MIN = 2 jiffies at CONFIG_HZ = 250.
            pto_slack: Duration::from_millis(8),
            rack_timer_tick: Duration::from_millis(4),
            rearm_rto_on_head_retransmit: true,
            linux_handshake: true,
            ns2_rto_restart_every_ack: false,
            // net.ipv4.tcp_slow_start_after_idle = 1: `tcp_cwnd_restart` (RFC 2861).
            restart_after_idle: true,
            // net.ipv4.tcp_ecn = 2.
            ecn: false,
            // TCP_TIMEWAIT_LEN = 60 s.
            time_wait: Duration::from_secs(60),
        }
    }
}

/// Why a [`TcpConfig`] cannot be used. Each variant names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `mss` must fit the 16-bit MSS option and leave room for a useful payload.
    #[error("tcp.mss = {0}: must be between 64 and 65535 bytes")]
    Mss(u32),
    /// `initial_window` of zero segments would never send anything.
    #[error("tcp.initial_window = 0: must be at least 1 segment")]
    InitialWindow,
    /// `max_window` of zero bytes would never send anything.
    #[error("tcp.max_window = 0: must be at least 1 byte")]
    MaxWindow,
    /// `rcv_buffer` of zero bytes would advertise a zero window forever.
    #[error("tcp.rcv_buffer = 0: must be at least 1 byte")]
    RcvBuffer,
    /// `delayed_ack_every` of zero has no meaning; 1 acknowledges every segment.
    #[error("tcp.delayed_ack_every = 0: must be at least 1")]
    DelayedAckEvery,
    /// `dupack_threshold` of zero would retransmit on every ACK.
    #[error("tcp.dupack_threshold = 0: must be at least 1")]
    DupackThreshold,
    /// RTO bounds must be positive and ordered.
    #[error("tcp.min_rto = {min}, tcp.max_rto = {max}: need 0 < min_rto <= max_rto")]
    RtoBounds { min: Duration, max: Duration },
    /// The initial RTO must be positive.
    #[error("tcp.initial_rto = 0: must be positive")]
    InitialRto,
    /// A congestion controller's parameter is out of its range.
    #[error(transparent)]
    CcParam(#[from] CcParamError),
}

impl TcpConfig {
    /// Payload and IPv4 bytes of a full-sized data segment between two endpoints of this
    /// config: timestamps take 12 bytes of the MSS's room (Linux's `tcp_current_mss`: 1448 of
    /// 1460), and the packet is the MSS plus the IP and TCP base headers either way.
    pub fn full_segment(&self) -> (u32, u32) {
        let options = if self.timestamps { crate::segment::TIMESTAMP_OPTION_BYTES } else { 0 };
        (self.mss - options, self.mss + crate::segment::TCP_BASE_HEADER + IPV4_HEADER)
    }

    /// Checks the values an endpoint relies on. [`crate::Endpoint::connect`] and
    /// [`crate::Endpoint::listen`] assume a validated config.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(64..=65535).contains(&self.mss) {
            return Err(ConfigError::Mss(self.mss));
        }
        if self.initial_window == 0 {
            return Err(ConfigError::InitialWindow);
        }
        if self.max_window == 0 {
            return Err(ConfigError::MaxWindow);
        }
        if self.rcv_buffer == 0 {
            return Err(ConfigError::RcvBuffer);
        }
        if self.delayed_ack_every == 0 {
            return Err(ConfigError::DelayedAckEvery);
        }
        if self.dupack_threshold == 0 {
            return Err(ConfigError::DupackThreshold);
        }
        if self.min_rto == Duration::ZERO || self.min_rto > self.max_rto {
            return Err(ConfigError::RtoBounds { min: self.min_rto, max: self.max_rto });
        }
        if self.initial_rto == Duration::ZERO {
            return Err(ConfigError::InitialRto);
        }
        Ok(self.cc.validate()?)
    }

    /// The endpoint config for merged settings (`[tcp]` overridden by a flow's) whose `cc`
    /// was written under `cc_key` (`"tcp"`, `"flow[3].tcp"`, or `"flow[3]"` for the flow's
    /// `cc` shortcut); what they leave out keeps their profile's default
    /// ([`TcpConfig::for_profile`], `ns2` when they name none). Check each
    /// section's controller tables with [`TcpConfig::check_tables`] first, so that their
    /// errors name the section.
    pub fn from_settings(s: &TcpSettings, cc_key: &str) -> Result<TcpConfig, schema::ConfigError> {
        let mut c = TcpConfig::for_profile(s.profile.unwrap_or_default());
        if let Some(v) = s.mss {
            c.mss = v;
        }
        if let Some(v) = s.sack {
            c.sack = v;
        }
        if let Some(v) = s.delayed_ack {
            c.delayed_ack = v;
        }
        if let Some(v) = s.delayed_ack_timeout {
            c.delayed_ack_timeout = v;
        }
        if let Some(v) = s.min_rto {
            c.min_rto = v;
        }
        if let Some(v) = s.initial_window {
            c.initial_window = v;
        }
        if let Some(v) = s.max_window {
            c.max_window = v.bytes();
        }
        if let Some(v) = s.rcv_window {
            c.rcv_buffer = v.bytes();
        }
        if let Some(v) = s.rack {
            c.rack = v;
        }
        if let Some(v) = s.tlp {
            c.tlp = v;
        }
        if let Some(v) = s.lost_retransmit {
            c.lost_retransmit = v;
        }
        if let Some(v) = s.ns2_rto_restart_every_ack {
            c.ns2_rto_restart_every_ack = v;
        }
        if let Some(v) = s.dupack_threshold {
            c.dupack_threshold = v;
        }
        if let Some(v) = s.ecn {
            c.ecn = v;
        }
        if let Some(v) = s.slow_start_after_idle {
            c.restart_after_idle = v;
        }
        if let Some(v) = s.newreno_timer {
            c.newreno_timer = v;
        }
        if let Some(name) = &s.cc {
            c.cc = cc_algorithm(name, s, cc_key)?;
        }
        Ok(c)
    }

    /// Checks the controller tables written in one section (`[tcp]` or a flow's `tcp`,
    /// named by `key`), so that a bad parameter is reported where it was written.
    pub fn check_tables(s: &TcpSettings, key: &str) -> Result<(), schema::ConfigError> {
        for (name, present) in s.controller_tables() {
            if present {
                // A table is named after the controller that reads it.
                cc_algorithm(name, s, key)?;
            }
        }
        Ok(())
    }
}

/// The controller called `name`, with its table's parameters from `s`; `key` is the section
/// `cc` or the table was written in.
fn cc_algorithm(name: &str, s: &TcpSettings, key: &str) -> Result<CcAlgorithm, schema::ConfigError> {
    match CcAlgorithm::from_settings(name, s) {
        // The controller's own range check names its field `tcp.<table>.<field>`; the key
        // moves to the section the table was written in.
        Some(cc) => cc.map_err(|e| schema::ConfigError::invalid(format!("{key}{}", e.key.trim_start_matches("tcp")), format!("{} {}", e.value, e.why))),
        None => Err(schema::ConfigError::invalid(
            format!("{key}.cc"),
            format!("the simulator has no congestion control {name:?} (it has: {})", CcAlgorithm::simulator_names().join(", ")),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{BicParams, CubicParams, VegasParams};
    use pathtwin_core::config::{VegasPreset, VegasSettings};

    #[test]
    fn default_is_valid_and_matches_documented_sources() {
        let c = TcpConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.initial_window, 10);
        assert_eq!(c.cc, CcAlgorithm::NewReno);
        assert_eq!(c.newreno_timer, NewRenoTimer::Impatient, "RFC 6582 §3.2 step 5");
    }

    #[test]
    fn errors_name_the_field() {
        let c = TcpConfig { mss: 70_000, ..Default::default() };
        assert!(c.validate().unwrap_err().to_string().contains("tcp.mss"));
        let c = TcpConfig { min_rto: Duration::from_secs(2), max_rto: Duration::from_secs(1), ..Default::default() };
        assert!(matches!(c.validate(), Err(ConfigError::RtoBounds { .. })));
        let c = TcpConfig { rcv_buffer: 0, ..Default::default() };
        assert_eq!(c.validate(), Err(ConfigError::RcvBuffer));
        let bad = [
            (CcAlgorithm::Vegas(VegasParams { beta: 0.5, ..VegasParams::NS2 }), "tcp.vegas.beta = 0.5"),
            (CcAlgorithm::Vegas(VegasParams::NS2.with_base_rtt_window(0)), "tcp.vegas.base_rtt_window = 0"),
            (CcAlgorithm::Bic(BicParams { beta: 1.0, ..Default::default() }), "tcp.bic.beta = 1"),
            (CcAlgorithm::Bic(BicParams { b: 1, ..Default::default() }), "tcp.bic.b = 1"),
            (CcAlgorithm::Cubic(CubicParams { c: 0.0, ..CubicParams::RFC9438 }), "tcp.cubic.c = 0"),
            (CcAlgorithm::Cubic(CubicParams { beta: f64::NAN, ..CubicParams::RFC9438 }), "tcp.cubic.beta = NaN"),
        ];
        for (cc, msg) in bad {
            let err = TcpConfig { cc, ..Default::default() }.validate().unwrap_err().to_string();
            assert!(err.starts_with(msg), "{err}");
        }
        for cc in [CcAlgorithm::Vegas(VegasParams::LINUX), CcAlgorithm::Bic(BicParams::default()), CcAlgorithm::Cubic(CubicParams::LINUX_2_6)] {
            assert_eq!(TcpConfig { cc, ..Default::default() }.validate(), Ok(()));
        }
    }

    #[test]
    fn settings_override_the_defaults_and_name_their_controller() {
        let vegas = VegasSettings { preset: Some(VegasPreset::Linux), alpha: Some(3.0), ..Default::default() };
        let s = TcpSettings {
            cc: Some("vegas".into()),
            vegas: Some(vegas),
            mss: Some(1000),
            sack: Some(false),
            newreno_timer: Some(NewRenoTimer::SlowButSteady),
            ..Default::default()
        };
        let c = TcpConfig::from_settings(&s, "tcp").unwrap();
        assert_eq!((c.mss, c.sack, c.newreno_timer), (1000, false, NewRenoTimer::SlowButSteady));
        assert_eq!(c.cc, CcAlgorithm::Vegas(VegasParams { alpha: 3.0, ..VegasParams::LINUX }));
        assert_eq!(c.initial_window, TcpConfig::default().initial_window);
        assert_eq!(TcpConfig::from_settings(&TcpSettings::default(), "tcp").unwrap(), TcpConfig::default());
    }

    #[test]
    fn restart_after_idle_is_the_linux_profiles_and_follows_slow_start_after_idle() {
        let linux = TcpSettings { profile: Some(TcpProfile::Linux), ..Default::default() };
        assert!(TcpConfig::from_settings(&linux, "tcp").unwrap().restart_after_idle);
        assert!(!TcpConfig::from_settings(&TcpSettings::default(), "tcp").unwrap().restart_after_idle);
        let off = TcpSettings { slow_start_after_idle: Some(false), ..linux };
        assert!(!TcpConfig::from_settings(&off, "tcp").unwrap().restart_after_idle);
        let on = TcpSettings { slow_start_after_idle: Some(true), ..Default::default() };
        assert!(TcpConfig::from_settings(&on, "tcp").unwrap().restart_after_idle);
    }

    #[test]
    fn settings_errors_name_the_key_they_were_written_under() {
        let err = |s: &TcpSettings, key: &str| TcpConfig::from_settings(s, key).unwrap_err().to_string();
        let named = |cc: &str| TcpSettings { cc: Some(cc.into()), ..Default::default() };
        assert_eq!(
            err(&named("hybla"), "flow[3]"),
            "flow[3].cc: the simulator has no congestion control \"hybla\" (it has: reno, newreno, vegas, bic, cubic, bbr, monaco)"
        );
        let bad_vegas = TcpSettings { vegas: Some(VegasSettings { alpha: Some(4.0), beta: Some(2.0), ..Default::default() }), ..named("vegas") };
        assert_eq!(err(&bad_vegas, "flow[3].tcp"), "flow[3].tcp.vegas.beta: 2 must be a number of segments >= alpha");
        // A table is checked where it was written, whichever controller the flow runs.
        let unused = TcpSettings { cc: Some("reno".into()), ..bad_vegas };
        assert!(TcpConfig::from_settings(&unused, "tcp").is_ok());
        assert_eq!(TcpConfig::check_tables(&unused, "tcp").unwrap_err().to_string(), "tcp.vegas.beta: 2 must be a number of segments >= alpha");
        assert_eq!(TcpConfig::check_tables(&named("vegas"), "tcp"), Ok(()));
    }
}
