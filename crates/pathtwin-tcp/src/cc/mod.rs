//! Congestion control: the [`CongestionControl`] trait every controller implements, the
//! events it receives, and the controllers themselves: [`Reno`] (RFC 5681), [`Vegas`] and
//! Vegas-k (Brakmo & Peterson 1995; ACC paper §III-A), [`Bic`] (Xu et al. 2004, Linux 2.6)
//! and [`Cubic`] (RFC 9438, with HyStart++ of RFC 9406).
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
//! Hooks the controllers use: Vegas and CUBIC's HyStart++ act once per round trip, counted
//! from `on_packet_sent` and ACKed bytes (`round.rs`), on `on_ack`'s RTT samples; BIC and
//! CUBIC apply their own β in `on_enter_recovery`, CUBIC reads `now` and SRTT in `on_ack`.
//! Planned: Monaco (`on_ack`, `pacing_rate` for its leaky bucket; its out-of-band control
//! packets will need an endpoint extension beyond this trait).

mod bic;
mod cubic;
mod hystart;
mod reno;
mod round;
mod vegas;

pub use bic::{Bic, BicParams};
pub use cubic::{Cubic, CubicParams};
pub use reno::Reno;
pub use vegas::{Vegas, VegasParams};

use pathtwin_core::time::{Duration, Instant};
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

    /// A data segment or FIN was sent.
    fn on_packet_sent(&mut self, _ev: &SentEvent) {}

    /// Congestion window in bytes.
    fn cwnd(&self) -> u64;

    /// Slow-start threshold in bytes.
    fn ssthresh(&self) -> u64;

    /// Pacing rate in bytes per second; `None` sends as the window allows (ACK clocking).
    fn pacing_rate(&self) -> Option<u64> {
        None
    }
}
