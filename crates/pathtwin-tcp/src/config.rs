//! Endpoint configuration: [`TcpConfig`], the choice of congestion controller
//! ([`CcAlgorithm`]) and validation ([`ConfigError`]).
//!
//! This module owns the defaults and says where each comes from. It does not parse config
//! files: the simulator maps its TOML schema onto this struct and calls
//! [`TcpConfig::validate`], so that a user's mistake is reported with the key that caused it.

use crate::cc::{Bbr, Bic, BicParams, CcParams, CongestionControl, Controller, Cubic, CubicParams, Monaco, MonacoParams, Reno, Vegas, VegasParams};
use crate::recovery::Flavour;
use pathtwin_core::time::Duration;
use std::fmt;

/// Builds a congestion controller once the connection's MSS is known.
pub type CcBuilder = fn(&CcParams) -> Box<dyn CongestionControl>;

/// Which congestion controller (and, without SACK, which loss-recovery flavour) to run.
///
/// When both ends permit SACK, loss recovery is RFC 6675 for every algorithm, as in Linux;
/// set [`TcpConfig::sack`] to false to study Reno's or NewReno's own recovery. Without SACK,
/// Vegas, BIC and CUBIC recover as NewReno (as Linux does with SACK off).
#[derive(Clone, Copy)]
pub enum CcAlgorithm {
    /// RFC 5681 window growth; fast recovery ends at the first ACK of new data, even a
    /// partial one (ns-2 `Agent/TCP/Reno`).
    Reno,
    /// RFC 5681 window growth with RFC 6582 fast recovery: partial ACKs retransmit the next
    /// hole and recovery lasts until the `recover` point is acknowledged.
    NewReno,
    /// TCP Vegas, or Vegas-k when [`VegasParams::base_rtt_window`] is set.
    Vegas(VegasParams),
    /// BIC-TCP with Linux 2.6's constants by default.
    Bic(BicParams),
    /// CUBIC, RFC 9438, with HyStart++ by default.
    Cubic(CubicParams),
    /// BBR v1 (see [`Bbr`]), paced; NewReno recovery without SACK.
    Bbr,
    /// Monaco (see [`Monaco`]): the endpoint sends its control packets, the window follows
    /// the receiver's accumulation answers, paced; NewReno recovery without SACK. Its
    /// out-of-band packets need strict-priority queues (`qdisc = "prio"`) on the path.
    Monaco(MonacoParams),
    /// A controller defined outside this crate; it uses NewReno recovery without SACK.
    Custom { name: &'static str, build: CcBuilder },
}

impl CcAlgorithm {
    pub fn name(&self) -> &'static str {
        match self {
            CcAlgorithm::Reno => "reno",
            CcAlgorithm::NewReno => "newreno",
            CcAlgorithm::Vegas(p) if p.base_rtt_window.is_some() => "vegas-k",
            CcAlgorithm::Vegas(_) => "vegas",
            CcAlgorithm::Bic(_) => "bic",
            CcAlgorithm::Cubic(_) => "cubic",
            CcAlgorithm::Bbr => "bbr",
            CcAlgorithm::Monaco(_) => "monaco",
            CcAlgorithm::Custom { name, .. } => name,
        }
    }

    /// Whether the endpoint must run Monaco's control protocol for this controller.
    pub fn uses_control_packets(&self) -> bool {
        matches!(self, CcAlgorithm::Monaco(_))
    }

    /// Every controller name the simulator accepts in a config (Vegas-k is `"vegas"` with a
    /// base-RTT window set, so it has no name of its own here).
    pub fn simulator_names() -> &'static [&'static str] {
        &["reno", "newreno", "vegas", "bic", "cubic", "bbr", "monaco"]
    }

    /// Checks the parameters of the built-in controllers; errors name the key as
    /// `tcp.<algorithm>.<field>`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn check(ok: bool, key: &'static str, value: impl fmt::Display, why: &'static str) -> Result<(), ConfigError> {
            if ok { Ok(()) } else { Err(ConfigError::CcParam { key, value: value.to_string(), why }) }
        }
        let fraction = |x: f64| x > 0.0 && x < 1.0;
        match self {
            CcAlgorithm::Vegas(p) => {
                check(p.alpha.is_finite() && p.alpha >= 0.0, "tcp.vegas.alpha", p.alpha, "must be a number of segments >= 0")?;
                check(p.beta.is_finite() && p.beta >= p.alpha, "tcp.vegas.beta", p.beta, "must be a number of segments >= alpha")?;
                check(p.gamma.is_finite() && p.gamma >= 0.0, "tcp.vegas.gamma", p.gamma, "must be a number of segments >= 0")?;
                let k = p.base_rtt_window.unwrap_or(1);
                check(k >= 1, "tcp.vegas.base_rtt_window", k, "must be at least 1 round trip")
            }
            CcAlgorithm::Bic(p) => {
                check(fraction(p.beta), "tcp.bic.beta", p.beta, "must be between 0 and 1 (exclusive)")?;
                check(p.b >= 2, "tcp.bic.b", p.b, "must be at least 2")?;
                check(p.max_increment >= 1, "tcp.bic.max_increment", p.max_increment, "must be at least 1 segment")?;
                check(p.smooth_part >= 1, "tcp.bic.smooth_part", p.smooth_part, "must be at least 1")
            }
            CcAlgorithm::Cubic(p) => {
                check(p.c.is_finite() && p.c > 0.0, "tcp.cubic.c", p.c, "must be a positive number of segments per second cubed")?;
                check(fraction(p.beta), "tcp.cubic.beta", p.beta, "must be between 0 and 1 (exclusive)")
            }
            CcAlgorithm::Monaco(p) => {
                check(p.k.is_finite() && p.k > 0.0 && p.k <= 1.0, "tcp.monaco.k", p.k, "must be a gain in (0, 1]")?;
                check(p.target.is_finite() && p.target > 0.0, "tcp.monaco.target", p.target, "must be a positive number of segments")
            }
            CcAlgorithm::Reno | CcAlgorithm::NewReno | CcAlgorithm::Bbr | CcAlgorithm::Custom { .. } => Ok(()),
        }
    }

    /// Instantiates the controller for a connection whose parameters are now known.
    pub fn build(&self, params: &CcParams) -> Box<dyn CongestionControl> {
        match self {
            CcAlgorithm::Reno | CcAlgorithm::NewReno => Box::new(Reno::new(params)),
            CcAlgorithm::Vegas(p) => Box::new(Vegas::new(params, *p)),
            CcAlgorithm::Bic(p) => Box::new(Bic::new(params, *p)),
            CcAlgorithm::Cubic(p) => Box::new(Cubic::new(params, *p)),
            CcAlgorithm::Bbr => Box::new(Bbr::new(params)),
            CcAlgorithm::Monaco(p) => Box::new(Monaco::new(params, *p)),
            CcAlgorithm::Custom { build, .. } => build(params),
        }
    }

    /// The controller as an endpoint holds it: Reno by value (see [`Controller`]).
    pub(crate) fn controller(&self, params: &CcParams) -> Controller {
        match self {
            CcAlgorithm::Reno | CcAlgorithm::NewReno => Controller::Reno(Reno::new(params)),
            _ => Controller::Other(self.build(params)),
        }
    }

    /// The recovery flavour used when SACK was not negotiated.
    pub(crate) fn flavour_without_sack(&self) -> Flavour {
        match self {
            CcAlgorithm::Reno => Flavour::Reno,
            CcAlgorithm::NewReno
            | CcAlgorithm::Vegas(_)
            | CcAlgorithm::Bic(_)
            | CcAlgorithm::Cubic(_)
            | CcAlgorithm::Bbr
            | CcAlgorithm::Monaco(_)
            | CcAlgorithm::Custom { .. } => Flavour::NewReno,
        }
    }
}

impl fmt::Debug for CcAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CcAlgorithm::Vegas(p) => f.debug_tuple(self.name()).field(p).finish(),
            CcAlgorithm::Bic(p) => f.debug_tuple(self.name()).field(p).finish(),
            CcAlgorithm::Cubic(p) => f.debug_tuple(self.name()).field(p).finish(),
            CcAlgorithm::Monaco(p) => f.debug_tuple(self.name()).field(p).finish(),
            _ => f.write_str(self.name()),
        }
    }
}

/// Built-in algorithms are equal when they are the same variant with the same parameters;
/// custom ones when they have the same name (function pointers are not comparable
/// reliably, and names are what configs and results use).
impl PartialEq for CcAlgorithm {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CcAlgorithm::Vegas(a), CcAlgorithm::Vegas(b)) => a == b,
            (CcAlgorithm::Bic(a), CcAlgorithm::Bic(b)) => a == b,
            (CcAlgorithm::Cubic(a), CcAlgorithm::Cubic(b)) => a == b,
            (CcAlgorithm::Monaco(a), CcAlgorithm::Monaco(b)) => a == b,
            _ => self.name() == other.name(),
        }
    }
}

/// When NewReno's fast recovery (no SACK) restarts the retransmission timer; RFC 6582
/// names the two variants (the timer discussion that §3.2 step 5 refers to, first in RFC
/// 2582 and RFC 3782 §4).
///
/// With many losses in one window, recovery repairs one hole per round trip. Impatient lets
/// the timer run out after about one RTO, so the window is repaired by a timeout and slow
/// start (go-back-N) instead; Slow-but-Steady keeps repairing one hole per RTT for as many
/// round trips as there are holes, while the inflated window lets new data follow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NewRenoTimer {
    /// Restart the timer on the first partial ACK of an episode only (RFC 6582 §3.2 step
    /// 5; ns-2 `newreno_changes1_ 1`, its default since 2003).
    #[default]
    Impatient,
    /// Restart it on every partial ACK, as RFC 6298 (5.3) does for any ACK of new data
    /// (the variant of Fall & Floyd's 1996 simulations; ns-2 `newreno_changes1_ 0`; Linux).
    SlowButSteady,
}

/// Everything an endpoint can be configured with. All sizes are bytes unless said otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct TcpConfig {
    /// Largest payload this end is willing to receive, announced in the SYN's MSS option;
    /// the connection uses the smaller of both ends' values. 1460 = Ethernet 1500 − 40.
    pub mss: u32,
    /// Offer SACK (RFC 2018); used when both ends offer it.
    pub sack: bool,
    /// Delay ACKs of in-order data (RFC 5681 §4.2); false acknowledges every segment.
    pub delayed_ack: bool,
    /// Acknowledge at the latest every this many full-sized segments (RFC 5681 §4.2: 2).
    pub delayed_ack_every: u32,
    /// Longest an ACK is delayed. 40 ms is Linux's `TCP_DELACK_MIN`, the delay Linux uses in
    /// steady bulk transfer; RFC 5681 only bounds it by 500 ms.
    pub delayed_ack_timeout: Duration,
    /// Lower bound on the RTO. RFC 6298 (2.4) says 1 s; 200 ms is Linux's `TCP_RTO_MIN`
    /// and ns-2's `minrto_`, what measured paths are compared with.
    pub min_rto: Duration,
    /// Upper bound on the RTO, including back-off; RFC 6298 (2.5) allows ≥ 60 s.
    pub max_rto: Duration,
    /// RTO before the first RTT sample (RFC 6298 (2.1): 1 s).
    pub initial_rto: Duration,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initial_window: u32,
    /// Maximum window w_max: caps the data in flight (as ns-2's `window_`). 4 MiB, Linux's
    /// default `tcp_wmem` maximum.
    pub max_window: u64,
    /// Receive buffer, advertised as the window. Simulated applications read instantly, so
    /// the advertised window is always the whole buffer. 4 MiB, Linux's default `tcp_rmem`
    /// maximum order of magnitude.
    pub rcv_buffer: u64,
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
    /// ns-2 mimicry, neither RFC 6298 nor Linux: restart the retransmission timer on every
    /// ACK while data is outstanding, duplicate ACKs included, as ns-2.35's `Agent/TCP/Linux`
    /// does (`LinuxTcpAgent::time_processing` calls `set_rtx_timer()` for each ACK it
    /// accepts). RFC 6298 (5.3) restarts it only on ACKs of new data, and Linux only on those
    /// and when it retransmits the head of the queue; with this on, the timer fires only
    /// after RTO without any ACK. Off by default; for comparisons with ns-2's TCP-Linux.
    pub ns2_rto_restart_every_ack: bool,
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
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            sack: true,
            delayed_ack: true,
            delayed_ack_every: 2,
            delayed_ack_timeout: Duration::from_millis(40),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            initial_rto: Duration::from_secs(1),
            initial_window: 10,
            max_window: 4 << 20,
            rcv_buffer: 4 << 20,
            cc: CcAlgorithm::NewReno,
            dupack_threshold: 3,
            limited_transmit: true,
            newreno_timer: NewRenoTimer::Impatient,
            rack: true,
            tlp: true,
            lost_retransmit: false,
            ns2_rto_restart_every_ack: false,
            ecn: false,
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
    /// A congestion controller's parameter is out of its range. `key` names it as the
    /// config file does, e.g. `tcp.vegas.beta`.
    #[error("{key} = {value}: {why}")]
    CcParam { key: &'static str, value: String, why: &'static str },
}

impl TcpConfig {
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
        self.cc.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_matches_documented_sources() {
        let c = TcpConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.initial_window, 10);
        assert_eq!(c.cc, CcAlgorithm::NewReno);
        assert_eq!(c.newreno_timer, NewRenoTimer::Impatient, "RFC 6582 §3.2 step 5");
    }

    #[test]
    fn bbr_is_named_and_built_with_newreno_recovery_without_sack() {
        let params = CcParams { smss: 1000, initial_cwnd: 10_000, max_window: 1 << 20 };
        assert_eq!(CcAlgorithm::Bbr.name(), "bbr");
        let cc = CcAlgorithm::Bbr.build(&params);
        assert_eq!(cc.name(), "bbr");
        assert!(cc.pacing_rate().is_some(), "BBR is always paced");
        assert_eq!(CcAlgorithm::Bbr.flavour_without_sack(), Flavour::NewReno);
    }

    #[test]
    fn every_simulator_name_is_a_built_in_algorithm_and_back() {
        let built_in = [
            CcAlgorithm::Reno,
            CcAlgorithm::NewReno,
            CcAlgorithm::Vegas(VegasParams::default()),
            CcAlgorithm::Bic(BicParams::default()),
            CcAlgorithm::Cubic(CubicParams::default()),
            CcAlgorithm::Bbr,
            CcAlgorithm::Monaco(MonacoParams::default()),
        ];
        let names: Vec<&str> = built_in.iter().map(|a| a.name()).collect();
        assert_eq!(names, CcAlgorithm::simulator_names());
        assert_eq!(CcAlgorithm::Vegas(VegasParams::NS2.with_base_rtt_window(8)).name(), "vegas-k");
        let params = CcParams { smss: 1460, initial_cwnd: 14600, max_window: 1 << 22 };
        for a in built_in {
            // NewReno shares Reno's window evolution (it differs only in recovery).
            let controller = if a == CcAlgorithm::NewReno { "reno" } else { a.name() };
            assert_eq!(a.build(&params).name(), controller);
            let recovery = if a == CcAlgorithm::Reno { Flavour::Reno } else { Flavour::NewReno };
            assert_eq!(a.flavour_without_sack(), recovery, "{a:?}");
        }
        assert_ne!(CcAlgorithm::Vegas(VegasParams::NS2), CcAlgorithm::Vegas(VegasParams::LINUX));
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
}
