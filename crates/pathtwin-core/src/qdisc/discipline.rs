//! The discipline a bandwidth queue holds: DropTail by value, every other one as a trait
//! object. DropTail serves nearly every queue of a simulation (every access link of a
//! dumbbell), and a call through `Box<dyn Qdisc>` can neither be inlined nor avoid moving
//! each 70-byte [`Queued`] item in and out by value; profiling the 600-s dumbbell put those
//! calls at about a tenth of the run.

use super::{AqmStats, Backlog, DropTail, FrioParams, Qdisc, Queued, Red, RedParams, Rio, RioParams, StrictPriority};
use crate::config::{QdiscKind, QdiscSpec};
use crate::packet::PacketMeta;
use crate::time::{Duration, Instant};
use crate::units::{QueueLimit, Rate};
use crate::Rng;

pub enum Discipline<P> {
    DropTail(DropTail<P>),
    Other(Box<dyn Qdisc<P>>),
}

impl<P: PacketMeta + Send + Sync + 'static> Discipline<P> {
    /// The discipline an entry's `qdisc` key asks for, with its `red`, `rio` and `frio`
    /// tables (validated with the config), holding at most `limit` before a link of
    /// `capacity` and one-way `delay` (RED's automatic settings use both).
    pub fn from_spec(q: QdiscSpec<'_>, limit: QueueLimit, capacity: Rate, delay: Duration) -> Self {
        let other = |q: Box<dyn Qdisc<P>>| Discipline::Other(q);
        match (q.kind, q.red) {
            (QdiscKind::Red, r) => other(Box::new(Red::new(RedParams::from_settings(r, capacity, delay), limit, capacity))),
            (QdiscKind::Rio, _) => other(Box::new(Rio::new(RioParams::from_settings(q.rio), None, limit, capacity))),
            (QdiscKind::Frio, _) => {
                let rio = RioParams::from_settings(q.rio);
                let frio = FrioParams::from_settings(q.frio, &rio);
                other(Box::new(Rio::new(rio, Some(frio), limit, capacity)))
            }
            (QdiscKind::Prio, _) => other(Box::new(StrictPriority::new(limit))),
            _ => Discipline::DropTail(DropTail::new(limit)),
        }
    }
}

impl<P> From<DropTail<P>> for Discipline<P> {
    fn from(q: DropTail<P>) -> Self {
        Discipline::DropTail(q)
    }
}

impl<P> From<Box<dyn Qdisc<P>>> for Discipline<P> {
    fn from(q: Box<dyn Qdisc<P>>) -> Self {
        Discipline::Other(q)
    }
}

/// Calls `$call` on whichever discipline is inside.
macro_rules! on_inner {
    ($self:expr, $q:ident => $call:expr) => {
        match $self {
            Discipline::DropTail($q) => $call,
            Discipline::Other($q) => $call,
        }
    };
}

impl<P: Send + Sync> Qdisc<P> for Discipline<P> {
    #[inline]
    fn enqueue(&mut self, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<(), Queued<P>> {
        on_inner!(self, q => q.enqueue(now, item, rng))
    }
    #[inline]
    fn dequeue(&mut self, now: Instant) -> Option<Queued<P>> {
        on_inner!(self, q => q.dequeue(now))
    }
    #[inline]
    fn pass_through(&mut self, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<Queued<P>, Queued<P>> {
        on_inner!(self, q => q.pass_through(now, item, rng))
    }
    #[inline]
    fn admits_when_empty(&self, len: u32) -> Option<bool> {
        on_inner!(self, q => q.admits_when_empty(len))
    }
    #[inline]
    fn backlog(&self) -> Backlog {
        on_inner!(self, q => q.backlog())
    }
    #[inline]
    fn fifo_head_real(&self) -> Option<(u64, u32)> {
        on_inner!(self, q => q.fifo_head_real())
    }
    fn set_limit(&mut self, limit: QueueLimit) {
        on_inner!(self, q => q.set_limit(limit))
    }
    fn limit(&self) -> QueueLimit {
        on_inner!(self, q => q.limit())
    }
    fn name(&self) -> &'static str {
        on_inner!(self, q => q.name())
    }
    fn average(&self) -> Option<f64> {
        on_inner!(self, q => q.average())
    }
    fn aqm_stats(&self) -> Option<AqmStats> {
        on_inner!(self, q => q.aqm_stats())
    }
}
