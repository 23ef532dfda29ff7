//! Congestion control: the [`CongestionControl`] trait every controller implements, the
//! events it receives, and the controllers themselves: [`Reno`] (RFC 5681), [`Vegas`] and
//! Vegas-k (Brakmo & Peterson 1995; ACC paper §III-A), [`Bic`] (Xu et al. 2004, Linux 2.6),
//! [`Cubic`] (RFC 9438, with HyStart++ of RFC 9406), [`Bbr`] (v1) and [`Monaco`] (ACC
//! paper §III-B).
//!
//! [`CcAlgorithm`] is the choice among them. The names a config gives them are one table
//! (`BUILT_IN`), from which both the list of names and the lookup of a name come; each
//! controller reads its own `[tcp.*]` table beside its code (`VegasParams::from_settings`,
//! ...) and checks its ranges there ([`CcParamError`]).
//!
//! Division of labour (the same as Linux's `tcp_congestion_ops` and quinn's `Controller`):
//! a controller owns `cwnd` and `ssthresh` and decides how they react to ACKs, losses and
//! timeouts. The endpoint owns loss *detection* and *recovery* — which segment to
//! retransmit, duplicate-ACK counting, the RFC 6675 scoreboard and pipe, and Reno/NewReno's
//! temporary window inflation during fast recovery, which is added on top of the
//! controller's `cwnd` and never stored in it. A controller therefore sees one congestion
//! event per recovery episode ([`CongestionControl::on_enter_recovery`]) however many
//! segments were lost, and never has to know whether SACK is in use.
//!
//! Windows and byte counts are in sequence-space bytes (payload plus SYN/FIN, which are
//! rare enough not to matter). Flight sizes are RFC 5681's FlightSize — data sent and not
//! cumulatively acknowledged — except [`AckEvent::pipe_before`], RFC 6675's estimate of what
//! is actually in the network.
//!
//! Rate-based controllers (BBR) also need delivery-rate samples (see [`crate::rate`]) on
//! every ACK that delivers data, including SACK-only ones during recovery, which
//! [`CongestionControl::on_ack`] does not see. They get them from a separate method,
//! [`CongestionControl::on_delivery`], with a default that ignores them, rather than from a
//! field of [`AckEvent`]: window-based controllers keep their one-ACK-one-event contract,
//! and the sample arrives after the ACK's loss detection has run, as Linux's
//! `cong_control` hook does.
//!
//! Hooks the window-based controllers use: Vegas and CUBIC's HyStart++ act once per round
//! trip, counted from `on_packet_sent` and ACKed bytes (`round.rs`), on `on_ack`'s RTT
//! samples; BIC and CUBIC apply their own β in `on_enter_recovery`, CUBIC reads `now` and
//! SRTT in `on_ack`. Monaco's window moves only on the receiver's answers to its control
//! packets, which the endpoint runs (`crate::monaco`) and hands over through
//! [`CongestionControl::on_accumulation`]; it paces through `pacing_rate`.

pub mod bbr;
mod bic;
mod controller;
mod cubic;
mod hystart;
mod monaco;
mod reno;
mod round;
mod vegas;

pub use bbr::{Bbr, BbrMode};
pub use bic::{Bic, BicParams};
pub use controller::Controller;
pub use cubic::{Cubic, CubicParams};
pub use monaco::{Monaco, MonacoParams};
pub use reno::Reno;
pub use vegas::{Vegas, VegasParams};

use crate::monaco::AccumulationFeedback;
use crate::rate::RateSample;
use crate::recovery::Flavour;
use pathtwin_core::config::TcpSettings;
use pathtwin_core::time::{Duration, Instant};
use std::any::Any;
use std::fmt;

/// What a controller is told when it is built, once the handshake has fixed the MSS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcParams {
    /// Sender maximum segment size in bytes (RFC 5681's SMSS).
    pub smss: u32,
    /// Initial window in bytes: min(initial_window·SMSS, max_window), or one SMSS if the
    /// SYN had to be retransmitted (RFC 5681 §3.1).
    pub initial_cwnd: u64,
    /// The configured maximum window w_max; controllers may use it to stop growing a
    /// window that could never be used.
    pub max_window: u64,
    /// How slow start turns an ACK into window.
    pub slow_start: SlowStart,
}

/// How slow start turns an ACK of N new bytes into window: RFC 3465 §2.2's limit L.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SlowStart {
    /// cwnd += min(N, SMSS) (RFC 5681 eq. 2, RFC 3465's L = 1): with delayed ACKs the
    /// window grows ×1.5 per round trip.
    #[default]
    Rfc5681,
    /// cwnd += N, up to ssthresh, the rest of N going to congestion avoidance: Linux's
    /// `tcp_slow_start` (`net/ipv4/tcp_cong.c`), which every Linux controller calls; the
    /// window doubles per round trip whatever the ACK ratio.
    Linux,
}

impl SlowStart {
    /// The growth slow start takes from an ACK of `acked` bytes, in bytes.
    pub fn increase(self, acked: u64, smss: u64) -> u64 {
        match self {
            SlowStart::Rfc5681 => acked.min(smss),
            SlowStart::Linux => acked,
        }
    }
}

/// An ACK that advanced the cumulative acknowledgment point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckEvent {
    pub now: Instant,
    /// Bytes newly acknowledged cumulatively by this ACK.
    pub bytes_acked: u64,
    /// A valid RTT sample from this ACK (none when Karn's rule forbids one).
    pub rtt: Option<Duration>,
    /// The endpoint's smoothed RTT after taking the sample, if any.
    pub srtt: Option<Duration>,
    /// FlightSize before this ACK.
    pub flight_before: u64,
    /// RFC 6675 pipe before this ACK: what the sender believed was in the network. A
    /// controller uses it to tell whether it was limited by `cwnd` (RFC 7661) or by the
    /// application or the receiver's window.
    pub pipe_before: u64,
    /// True while in fast recovery, including the ACK that ends it.
    pub in_recovery: bool,
}

/// A segment carrying data (or a FIN) that has just been put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentEvent {
    pub now: Instant,
    /// Sequence number of its first byte.
    pub seq: u64,
    /// Sequence-space length (payload plus FIN).
    pub bytes: u64,
    /// RFC 6675 pipe after sending it.
    pub pipe: u64,
    pub retransmission: bool,
}

/// An ACK that newly delivered data, cumulatively or by SACK, with its delivery-rate sample;
/// given to [`CongestionControl::on_delivery`] after all of the ACK's other processing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryEvent {
    pub now: Instant,
    pub sample: RateSample,
    /// Sequence numbers newly deemed lost while this ACK was processed.
    pub newly_lost: u64,
    /// Data in the network before this ACK (Linux's `prior_in_flight`): RFC 6675 pipe, less,
    /// without SACK, the segments that duplicate ACKs have reported delivered.
    pub pipe_before: u64,
    /// The same after this ACK, its loss detection and any recovery entry.
    pub pipe: u64,
    /// In fast recovery after this ACK (false on the ACK that ends it).
    pub in_recovery: bool,
    /// After a retransmission timeout, until everything outstanding at the timeout is
    /// cumulatively acknowledged (Linux's `TCP_CA_Loss` state).
    pub in_timeout_recovery: bool,
}

/// A congestion controller. Called by the endpoint only after the handshake.
///
/// Call order per ACK: [`on_ack`](Self::on_ack) first, then, if the ACK ends recovery,
/// [`on_exit_recovery`](Self::on_exit_recovery). A duplicate ACK that starts recovery calls
/// [`on_enter_recovery`](Self::on_enter_recovery) before the fast retransmission is sent.
pub trait CongestionControl: fmt::Debug + Send + Sync {
    /// Short lowercase name for results, e.g. `"reno"`.
    fn name(&self) -> &'static str;

    /// An ACK advanced the cumulative acknowledgment point.
    fn on_ack(&mut self, ev: &AckEvent);

    /// Fast retransmit: loss was detected by duplicate ACKs or SACK and a recovery episode
    /// starts. `flight` is FlightSize at that moment. Set `ssthresh` and `cwnd`.
    fn on_enter_recovery(&mut self, now: Instant, flight: u64);

    /// The recovery episode ended (a full ACK for NewReno and SACK, the first new ACK for
    /// Reno). `flight` is FlightSize after that ACK.
    fn on_exit_recovery(&mut self, now: Instant, flight: u64);

    /// The retransmission timer expired. `flight` is FlightSize before the timeout;
    /// `first` is false when the same segment has already been retransmitted by the timer
    /// (RFC 5681 §3.1: ssthresh is then held constant).
    fn on_rto(&mut self, now: Instant, flight: u64, first: bool);

    /// An ACK carried ECN-Echo (RFC 3168 §6.1.2): a queue marked one of our segments
    /// instead of dropping it. The endpoint calls this at most once per window of data and
    /// not during loss recovery, and retransmits nothing. `flight` is FlightSize. The
    /// default reacts as to a fast retransmit whose recovery ends at once (RFC 3168 §6.1.2:
    /// "as in Fast Retransmit/Fast Recovery"), which is what Linux does through its CWR
    /// state with every controller's own `ssthresh`.
    fn on_ecn(&mut self, now: Instant, flight: u64) {
        self.on_enter_recovery(now, flight);
        self.on_exit_recovery(now, flight);
    }

    /// The connection was idle and the endpoint restarted the window (Linux's
    /// `tcp_cwnd_restart`, RFC 2861; see `TcpConfig::restart_after_idle`): set cwnd and
    /// ssthresh to these, in bytes (`u64::MAX`: no threshold yet). The endpoint computes
    /// them, as the kernel does outside the controller, and calls this only for controllers
    /// without a `cong_control` hook of their own ([`CcAlgorithm::restarts_after_idle`]);
    /// the default ignores it, for a controller that owns its window some other way.
    fn on_cwnd_restart(&mut self, _now: Instant, _cwnd: u64, _ssthresh: u64) {}

    /// A data segment or FIN was sent.
    fn on_packet_sent(&mut self, _ev: &SentEvent) {}

    /// An ACK delivered data (cumulatively or by SACK): its delivery-rate sample. Called
    /// once per such ACK, after [`on_ack`](Self::on_ack), recovery entry or exit and loss
    /// detection. Window-based controllers ignore it.
    fn on_delivery(&mut self, _ev: &DeliveryEvent) {}

    /// The receiver answered one of Monaco's control pairs (see `crate::monaco`); only
    /// controllers built with [`CcAlgorithm::uses_control_packets`](crate::CcAlgorithm)
    /// receive these.
    fn on_accumulation(&mut self, _now: Instant, _fb: &AccumulationFeedback) {}

    /// Whether data sent from now on should count as application-limited in delivery-rate
    /// samples, although the application has data (BBR's ProbeRTT, whose deliberately low
    /// rate must not lower its bandwidth estimate). Asked after each
    /// [`on_delivery`](Self::on_delivery).
    fn samples_app_limited(&self) -> bool {
        false
    }

    /// Congestion window in bytes.
    fn cwnd(&self) -> u64;

    /// Slow-start threshold in bytes.
    fn ssthresh(&self) -> u64;

    /// Pacing rate in bytes per second; `None` sends as the window allows (ACK clocking).
    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    /// The controller itself, for reading controller-specific state (e.g. BBR's bandwidth
    /// estimate) in results and tests by downcasting; `None` if it offers none.
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }
}

/// Builds a congestion controller once the connection's MSS is known.
pub type CcBuilder = fn(&CcParams) -> Box<dyn CongestionControl>;

/// Which congestion controller (and, without SACK, which loss-recovery flavour) to run.
///
/// When both ends permit SACK, loss recovery is RFC 6675 for every algorithm, as in Linux;
/// set [`TcpConfig::sack`](crate::TcpConfig::sack) to false to study Reno's or NewReno's own
/// recovery. Without SACK, Vegas, BIC and CUBIC recover as NewReno (as Linux does with SACK
/// off).
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

    /// Whether PRR (`TcpConfig::prr`) shapes this controller's window in fast recovery.
    /// Linux runs `tcp_cwnd_reduction` only for controllers without a `cong_control` hook
    /// of their own; BBR has one (it sets cwnd from its model, packet-conserving in
    /// recovery), and Monaco's window follows its receiver's answers.
    pub fn reduces_by_prr(&self) -> bool {
        !matches!(self, CcAlgorithm::Bbr | CcAlgorithm::Monaco(_))
    }

    /// Whether the window restarts after idle (`TcpConfig::restart_after_idle`) apply to
    /// this controller. Linux's `tcp_slow_start_after_idle_check` returns early for a
    /// controller with a `cong_control` hook (BBR, whose model sets cwnd; Monaco's window
    /// follows its receiver's answers).
    pub fn restarts_after_idle(&self) -> bool {
        !matches!(self, CcAlgorithm::Bbr | CcAlgorithm::Monaco(_))
    }

    /// Whether the endpoint must run Monaco's control protocol for this controller.
    pub fn uses_control_packets(&self) -> bool {
        matches!(self, CcAlgorithm::Monaco(_))
    }

    /// Every controller name the simulator accepts in a config (Vegas-k is `"vegas"` with a
    /// base-RTT window set, so it has no name of its own here).
    pub fn simulator_names() -> &'static [&'static str] {
        &NAMES
    }

    /// The built-in controller a config calls `name`, with the parameters of its `[tcp.*]`
    /// table in `s`; `None` when no controller has that name.
    pub fn from_settings(name: &str, s: &TcpSettings) -> Option<Result<CcAlgorithm, CcParamError>> {
        BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, make)| make(s))
    }

    /// The name a config gives this controller, which is also its `[tcp.*]` table's: its
    /// [`name`](Self::name), but `"vegas"` for Vegas-k.
    pub fn config_name(&self) -> &'static str {
        match self {
            CcAlgorithm::Vegas(_) => "vegas",
            other => other.name(),
        }
    }

    /// Checks the parameters of the built-in controllers; errors name the key as
    /// `tcp.<algorithm>.<field>`.
    pub fn validate(&self) -> Result<(), CcParamError> {
        match self {
            CcAlgorithm::Vegas(p) => p.validate(),
            CcAlgorithm::Bic(p) => p.validate(),
            CcAlgorithm::Cubic(p) => p.validate(),
            CcAlgorithm::Monaco(p) => p.validate(),
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

/// How `[tcp]` settings make one built-in controller, with its table's parameters.
type FromSettings = fn(&TcpSettings) -> Result<CcAlgorithm, CcParamError>;

/// The controllers a config can name, in the order the simulator lists them, each with how
/// `[tcp]` settings make it: one table for both the list of names and the lookup of a name,
/// so that the two cannot disagree.
const BUILT_IN: [(&str, FromSettings); 7] = [
    ("reno", |_| Ok(CcAlgorithm::Reno)),
    ("newreno", |_| Ok(CcAlgorithm::NewReno)),
    ("vegas", |s| VegasParams::from_settings(s.vegas.as_ref()).map(CcAlgorithm::Vegas)),
    ("bic", |s| BicParams::from_settings(s.bic.as_ref()).map(CcAlgorithm::Bic)),
    ("cubic", |s| CubicParams::from_settings(s.cubic.as_ref(), s.profile.unwrap_or_default()).map(CcAlgorithm::Cubic)),
    ("bbr", |_| Ok(CcAlgorithm::Bbr)),
    ("monaco", |s| MonacoParams::from_settings(s.monaco.as_ref()).map(CcAlgorithm::Monaco)),
];

/// The names of [`BUILT_IN`], in its order.
const NAMES: [&str; BUILT_IN.len()] = {
    let mut names = [""; BUILT_IN.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = BUILT_IN[i].0;
        i += 1;
    }
    names
};

/// A controller's parameter is out of its range. `key` names it as the config file does,
/// e.g. `tcp.vegas.beta`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value}: {why}")]
pub struct CcParamError {
    pub key: &'static str,
    pub value: String,
    pub why: &'static str,
}

impl CcParamError {
    /// `Ok` when `ok`, else the error for `key` holding `value`.
    fn check(ok: bool, key: &'static str, value: impl fmt::Display, why: &'static str) -> Result<(), CcParamError> {
        if ok {
            Ok(())
        } else {
            Err(CcParamError { key, value: value.to_string(), why })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bbr_is_named_and_built_with_newreno_recovery_without_sack() {
        let params = CcParams { smss: 1000, initial_cwnd: 10_000, max_window: 1 << 20, slow_start: crate::cc::SlowStart::Rfc5681 };
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
        let settings = TcpSettings::default();
        for (a, name) in built_in.iter().zip(CcAlgorithm::simulator_names()) {
            assert_eq!(CcAlgorithm::from_settings(name, &settings), Some(Ok(*a)));
            assert_eq!(a.config_name(), *name);
        }
        let vegas_k = CcAlgorithm::Vegas(VegasParams::NS2.with_base_rtt_window(8));
        assert_eq!((vegas_k.name(), vegas_k.config_name()), ("vegas-k", "vegas"));
        assert_eq!(CcAlgorithm::from_settings("vegas-k", &settings), None);
        let params = CcParams { smss: 1460, initial_cwnd: 14600, max_window: 1 << 22, slow_start: crate::cc::SlowStart::Rfc5681 };
        for a in built_in {
            // NewReno shares Reno's window evolution (it differs only in recovery).
            let controller = if a == CcAlgorithm::NewReno { "reno" } else { a.name() };
            assert_eq!(a.build(&params).name(), controller);
            let recovery = if a == CcAlgorithm::Reno { Flavour::Reno } else { Flavour::NewReno };
            assert_eq!(a.flavour_without_sack(), recovery, "{a:?}");
        }
        assert_ne!(CcAlgorithm::Vegas(VegasParams::NS2), CcAlgorithm::Vegas(VegasParams::LINUX));
    }
}
