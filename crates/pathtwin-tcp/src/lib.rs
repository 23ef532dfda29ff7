//! pathtwin-tcp: a sans-IO TCP endpoint and its congestion controllers.
//!
//! This crate owns the TCP state machine the simulator runs on its virtual clock: the
//! three-way handshake with MSS and SACK-permitted negotiation, cumulative and SACK
//! acknowledgments, delayed ACKs, the RFC 6298 retransmission timer, loss recovery (Reno,
//! NewReno, RFC 6675 SACK) with RACK-TLP loss detection (RFC 8985) when SACK is in use, the
//! peer's receive window, a maximum window, and congestion
//! control behind the [`CongestionControl`] trait. It does not own packets on a wire, queues,
//! links, applications or a clock: segments are header fields plus a payload byte count, and
//! time is always an argument.
//!
//! # Driving an [`Endpoint`]
//!
//! An endpoint never reads a clock and never blocks. The driver (the simulator's event loop)
//! calls it in this order:
//!
//! 1. Create it with [`Endpoint::connect`] (active open) or [`Endpoint::listen`].
//! 2. Whenever something happens at time `now` — a segment arrives
//!    ([`Endpoint::handle_segment`]) or the deadline from [`Endpoint::poll_timeout`] is
//!    reached ([`Endpoint::handle_timeout`]) — make that one call, then
//! 3. call [`Endpoint::poll_event`] until it returns `None`, letting the application react
//!    with [`Endpoint::send`] / [`Endpoint::close`], then
//! 4. call [`Endpoint::poll_transmit`] until it returns `None`, putting each segment on the
//!    wire, then
//! 5. re-read [`Endpoint::poll_timeout`] and (re)schedule the endpoint's single timer.
//!
//! An application call made at any other time (a bulk sender starting, a server's think
//! time ending) is followed by steps 4 and 5. Step 4 must follow *every* input: the endpoint
//! answers each out-of-order segment with its own ACK, and duplicate ACKs only count if
//! each one reaches the wire. `handle_timeout` may be called early or late; it fires what is
//! due at `now` and nothing else.
//!
//! ```
//! use pathtwin_core::time::{Duration, Instant};
//! use pathtwin_tcp::{Endpoint, Event, TcpConfig};
//!
//! let t0 = Instant::ZERO;
//! let mut client = Endpoint::connect(TcpConfig::default(), t0, 0);
//! let mut server = Endpoint::listen(TcpConfig::default(), 1_000);
//! let syn = client.poll_transmit(t0).unwrap();
//! let t1 = t0 + Duration::from_millis(10);
//! server.handle_segment(t1, &syn);
//! let syn_ack = server.poll_transmit(t1).unwrap();
//! let t2 = t1 + Duration::from_millis(10);
//! client.handle_segment(t2, &syn_ack);
//! assert_eq!(client.poll_event(), Some(Event::Connected));
//! ```
//!
//! # Module map
//!
//! - [`segment`]: the segment header model and its size on the wire.
//! - [`config`]: [`TcpConfig`], its two profiles of defaults (`ns2`, `linux`) and its reading
//!   from the config's `[tcp]` settings.
//! - [`rtt`]: round-trip estimation and the retransmission timeout (RFC 6298, or Linux's).
//! - [`cc`]: the congestion-control trait, the choice of controller ([`CcAlgorithm`], with
//!   the names a config gives them), Reno (RFC 5681), Vegas and Vegas-k, BIC, CUBIC (RFC
//!   9438 with HyStart++, or Linux's with its HyStart), BBR v1 and Monaco, each reading its
//!   own `[tcp.*]` table.
//! - [`monaco`]: Monaco's control packets and the receiver's accumulation estimator.
//! - [`rate`]: delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation).
//! - `recovery`: which loss-recovery flavour runs and its state (RFC 5681, 6582, 6675).
//! - `rack`: RACK time-based loss detection (RFC 8985 §6), which finds lost
//!   retransmissions, and the tail loss probe's state (RFC 8985 §7).
//! - `scoreboard`: the sender's record of segments in flight (RFC 6675 scoreboard).
//! - `reassembly`: the receiver's out-of-order ranges and SACK blocks (RFC 2018).
//! - `rcvwin`: the window a Linux receiver advertises, with its buffer autotuning.
//! - `delack`: when the receiver acknowledges in-order data (RFC 5681 §4.2, with Linux's
//!   quick-ACK mode and adaptive delayed-ACK timeout).
//! - [`endpoint`]: the state machine tying these together.

pub mod cc;
pub mod config;
mod delack;
pub mod endpoint;
pub mod monaco;
mod rack;
mod ranges;
pub mod rate;
mod rcvwin;
mod reassembly;
mod recovery;
pub mod rtt;
mod scoreboard;
pub mod segment;
mod stats;

pub use cc::{
    AckEvent, Bbr, BbrMode, Bic, BicParams, CcAlgorithm, CcParamError, CcParams, CongestionControl, Cubic, CubicParams, DeliveryEvent,
    Monaco, MonacoParams, Reno, SentEvent, SlowStart, Vegas, VegasParams,
};
pub use monaco::AccumulationFeedback;
pub use config::{ConfigError, TcpConfig};
/// The config schema's choices that [`TcpConfig`] and [`VegasParams`] hold as they are
/// (declared once, in `pathtwin_core::config`).
pub use pathtwin_core::config::{NewRenoTimer, RoundRtt, TcpProfile, VegasRules};
pub use rate::RateSample;
pub use rtt::RtoStyle;
pub use endpoint::{Endpoint, State};
pub use segment::{Control, Ecn, Flags, SackBlocks, Segment};
pub use stats::{Event, Stats};
