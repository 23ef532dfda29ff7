//! Congestion control: the [`CongestionControl`] trait every controller implements, the
//! events it receives, and the controllers themselves: [`Reno`] (RFC 5681), [`Vegas`] and
//! Vegas-k (Brakmo & Peterson 1995; ACC paper §III-A), [`Bic`] (Xu et al. 2004, Linux 2.6),
//! [`Cubic`] (RFC 9438, with HyStart++ of RFC 9406), [`Bbr`] (v1) and [`Monaco`] (ACC
//! paper §III-B).
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
pub use vegas::{RoundRtt, Vegas, VegasParams, VegasRules};

use crate::monaco::AccumulationFeedback;
use crate::rate::RateSample;
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
