//! Endpoint configuration: [`TcpConfig`], the choice of congestion controller
//! ([`CcAlgorithm`]) and validation ([`ConfigError`]).
//!
//! This module owns the defaults and says where each comes from. It does not parse config
//! files: the simulator maps its TOML schema onto this struct and calls
//! [`TcpConfig::validate`], so that a user's mistake is reported with the key that caused it.

use crate::cc::{Bbr, CcParams, CongestionControl, Reno};
use crate::recovery::Flavour;
use pathtwin_core::time::Duration;
use std::fmt;

/// Builds a congestion controller once the connection's MSS is known.
pub type CcBuilder = fn(&CcParams) -> Box<dyn CongestionControl>;

/// Which congestion controller (and, without SACK, which loss-recovery flavour) to run.
///
/// When both ends permit SACK, loss recovery is RFC 6675 for every algorithm, as in Linux;
/// set [`TcpConfig::sack`] to false to study Reno's or NewReno's own recovery.
#[derive(Clone, Copy)]
pub enum CcAlgorithm {
    /// RFC 5681 window growth; fast recovery ends at the first ACK of new data, even a
    /// partial one (ns-2 `Agent/TCP/Reno`).
    Reno,
    /// RFC 5681 window growth with RFC 6582 fast recovery: partial ACKs retransmit the next
    /// hole and recovery lasts until the `recover` point is acknowledged.
    NewReno,
    /// BBR v1 (see [`Bbr`]), paced; NewReno recovery without SACK.
    Bbr,
    /// A controller defined outside this crate; it uses NewReno recovery without SACK.
    Custom { name: &'static str, build: CcBuilder },
}

impl CcAlgorithm {
    pub fn name(&self) -> &'static str {
        match self {
            CcAlgorithm::Reno => "reno",
            CcAlgorithm::NewReno => "newreno",
            CcAlgorithm::Bbr => "bbr",
            CcAlgorithm::Custom { name, .. } => name,
        }
    }

    /// Instantiates the controller for a connection whose parameters are now known.
    pub fn build(&self, params: &CcParams) -> Box<dyn CongestionControl> {
        match self {
            CcAlgorithm::Reno | CcAlgorithm::NewReno => Box::new(Reno::new(params)),
            CcAlgorithm::Bbr => Box::new(Bbr::new(params)),
            CcAlgorithm::Custom { build, .. } => build(params),
        }
    }

    /// The recovery flavour used when SACK was not negotiated.
    pub(crate) fn flavour_without_sack(&self) -> Flavour {
        match self {
            CcAlgorithm::Reno => Flavour::Reno,
            CcAlgorithm::NewReno | CcAlgorithm::Bbr | CcAlgorithm::Custom { .. } => Flavour::NewReno,
        }
    }
}

impl fmt::Debug for CcAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Two algorithms are equal when they have the same name: function pointers are not
/// comparable reliably, and names are what configs and results use.
impl PartialEq for CcAlgorithm {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
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
    /// NewReno without SACK: restart the retransmission timer only on the first partial ACK
    /// of a recovery episode (RFC 6582 §3.2 step 5, the "Impatient" variant), so that a
    /// window with many losses ends in a timeout instead of one retransmission per RTT.
    /// Off by default: the timer restarts on every partial ACK ("Slow-but-Steady"), as in
    /// ns-2's default (`newreno_changes1_ 0`) and Linux.
    pub newreno_impatient: bool,
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
            newreno_impatient: false,
            rack: true,
            tlp: true,
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
        Ok(())
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
    fn errors_name_the_field() {
        let c = TcpConfig { mss: 70_000, ..Default::default() };
        assert!(c.validate().unwrap_err().to_string().contains("tcp.mss"));
        let c = TcpConfig { min_rto: Duration::from_secs(2), max_rto: Duration::from_secs(1), ..Default::default() };
        assert!(matches!(c.validate(), Err(ConfigError::RtoBounds { .. })));
        let c = TcpConfig { rcv_buffer: 0, ..Default::default() };
        assert_eq!(c.validate(), Err(ConfigError::RcvBuffer));
    }
}
