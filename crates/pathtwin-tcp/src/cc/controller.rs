//! The controller an endpoint runs: [`Reno`] by value, every other one as a trait object.
//!
//! Reno serves Reno, NewReno and SACK, the senders of most runs (and of every ns-2
//! benchmark). The sender asks its controller for `cwnd` and `pacing_rate` and tells it of
//! every packet sent and delivered several times per packet; through `Box<dyn>` none of
//! these one-line calls could be inlined, and profiling the 600-s dumbbell put them at about
//! a twentieth of the run.

use super::{AckEvent, CongestionControl, DeliveryEvent, Reno, SentEvent};
use crate::monaco::AccumulationFeedback;
use pathtwin_core::time::Instant;
use std::any::Any;

#[derive(Debug)]
pub enum Controller {
    Reno(Reno),
    Other(Box<dyn CongestionControl>),
}

/// Calls `$call` on whichever controller is inside.
macro_rules! on_inner {
    ($self:expr, $c:ident => $call:expr) => {
        match $self {
            Controller::Reno($c) => $call,
            Controller::Other($c) => $call,
        }
    };
}

impl CongestionControl for Controller {
    fn name(&self) -> &'static str {
        on_inner!(self, c => c.name())
    }
    #[inline]
    fn on_ack(&mut self, ev: &AckEvent) {
        on_inner!(self, c => c.on_ack(ev))
    }
    fn on_enter_recovery(&mut self, now: Instant, flight: u64) {
        on_inner!(self, c => c.on_enter_recovery(now, flight))
    }
    fn on_exit_recovery(&mut self, now: Instant, flight: u64) {
        on_inner!(self, c => c.on_exit_recovery(now, flight))
    }
    fn on_rto(&mut self, now: Instant, flight: u64, first: bool) {
        on_inner!(self, c => c.on_rto(now, flight, first))
    }
    fn on_ecn(&mut self, now: Instant, flight: u64) {
        on_inner!(self, c => c.on_ecn(now, flight))
    }
    fn on_cwnd_restart(&mut self, now: Instant, cwnd: u64, ssthresh: u64) {
        on_inner!(self, c => c.on_cwnd_restart(now, cwnd, ssthresh))
    }
    #[inline]
    fn on_packet_sent(&mut self, ev: &SentEvent) {
        on_inner!(self, c => c.on_packet_sent(ev))
    }
    #[inline]
    fn on_delivery(&mut self, ev: &DeliveryEvent) {
        on_inner!(self, c => c.on_delivery(ev))
    }
    fn on_accumulation(&mut self, now: Instant, fb: &AccumulationFeedback) {
        on_inner!(self, c => c.on_accumulation(now, fb))
    }
    #[inline]
    fn samples_app_limited(&self) -> bool {
        on_inner!(self, c => c.samples_app_limited())
    }
    #[inline]
    fn cwnd(&self) -> u64 {
        on_inner!(self, c => c.cwnd())
    }
    #[inline]
    fn ssthresh(&self) -> u64 {
        on_inner!(self, c => c.ssthresh())
    }
    #[inline]
    fn pacing_rate(&self) -> Option<u64> {
        on_inner!(self, c => c.pacing_rate())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        on_inner!(self, c => c.as_any())
    }
}
