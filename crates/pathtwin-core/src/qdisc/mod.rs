//! Queue disciplines: what a bandwidth queue holds while its link is busy, and what it drops.
//!
//! A discipline sees [`Queued`] items, which are either real packets or the bandwidth queue's
//! virtual placeholder packets (NSDI'09 §3.2): placeholders occupy space and can be dropped
//! exactly like real packets, so they carry the same metadata. The discipline decides
//! admission at arrival ([`Qdisc::enqueue`]) and order at departure ([`Qdisc::dequeue`]);
//! the bandwidth queue owns the link and the clock.
//!
//! Disciplines: [`DropTail`], [`Red`] (gentle, wait, byte mode, ECN, adaptive), [`Rio`]
//! (RIO and FRIO, DiffServ IN/OUT drop precedence) and [`StrictPriority`]. They receive
//! `now` (RED's idle-time decay) and the element's seeded RNG (random early drops). RED's
//! average and drop curve live once, in `red_curve`, for RED and RIO alike.

mod aqm;
mod discipline;
mod droptail;
mod prio;
mod red;
mod red_curve;
mod rio;
#[cfg(test)]
mod testing;

pub use discipline::Discipline;
pub use droptail::DropTail;
pub use prio::{StrictPriority, BANDS};
pub use red::{Red, RedParams};
pub use aqm::{ActiveQueue, AqmQueue, AqmStats, Class, ClassStats};
pub use red_curve::{RedAverage, RedCurve, Verdict};
pub use rio::{FrioParams, Rio, RioParams};

use crate::packet::{FlowKey, Mark, PacketMeta};
use crate::time::Instant;
use crate::units::QueueLimit;
use crate::Rng;

/// One item waiting for the link: a real packet or a virtual placeholder.
#[derive(Debug)]
pub struct Queued<P> {
    /// `None` for a placeholder packet, which exists only as length and time.
    pub packet: Option<P>,
    pub wire_len: u32,
    pub flow: FlowKey,
    pub mark: Mark,
    pub priority: u8,
    pub enqueued_at: Instant,
}

impl<P: PacketMeta> Queued<P> {
    /// A real packet arriving at `at`, with what the disciplines read of it.
    pub fn real(pkt: P, at: Instant) -> Self {
        Queued { wire_len: pkt.wire_len(), flow: pkt.flow_key(), mark: pkt.mark(), priority: pkt.priority(), enqueued_at: at, packet: Some(pkt) }
    }
}

impl<P> Queued<P> {
    pub fn is_placeholder(&self) -> bool {
        self.packet.is_none()
    }
}

/// Occupancy of a discipline, real and placeholder together (what limits apply to).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    pub packets: u64,
    pub bytes: u64,
}

impl Backlog {
    pub fn add(&mut self, len: u32) {
        self.packets += 1;
        self.bytes += len as u64;
    }
    pub fn remove(&mut self, len: u32) {
        self.packets -= 1;
        self.bytes -= len as u64;
    }
    /// Whether one more item of `len` bytes would exceed `limit`.
    pub fn would_exceed(&self, limit: QueueLimit, len: u32) -> bool {
        match limit {
            QueueLimit::Packets(p) => self.packets + 1 > p,
            QueueLimit::Bytes(b) => self.bytes + len as u64 > b,
        }
    }
}

/// A queue discipline. Call order: `enqueue` for each arrival at its arrival time, `dequeue`
/// whenever the link becomes free; `now` never decreases between calls.
pub trait Qdisc<P>: Send + Sync {
    /// Offers an item; returns it back as `Err` if the discipline drops it.
    fn enqueue(&mut self, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<(), Queued<P>>;
    /// Takes the next item to transmit, if any.
    fn dequeue(&mut self, now: Instant) -> Option<Queued<P>>;
    /// Offers an item while the link is idle and the discipline holds nothing: returns it to
    /// transmit at once, or as `Err` if dropped. The default is `enqueue` then `dequeue`;
    /// disciplines override it to skip the round trip (the common case on lightly loaded
    /// links).
    fn pass_through(&mut self, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<Queued<P>, Queued<P>> {
        self.enqueue(now, item, rng)?;
        Ok(self.dequeue(now).expect("an empty discipline returns what it just admitted"))
    }
    /// The verdict on an item of `len` bytes arriving while the link is idle and the
    /// discipline holds nothing, when it depends on nothing else (no randomness, no state
    /// to update): the bandwidth queue then puts the packet on the link without building
    /// the item twice. `None` (the default) sends it through [`Qdisc::pass_through`].
    fn admits_when_empty(&self, _len: u32) -> Option<bool> {
        None
    }
    /// Items currently held.
    fn backlog(&self) -> Backlog;
    /// For first-in-first-out disciplines: the bytes queued ahead of the oldest real packet
    /// and that packet's length, which fix when it will leave (later arrivals queue behind
    /// it). `None` when there is no real packet or the order is not FIFO; the bandwidth queue
    /// then wakes its driver at every service completion instead.
    fn fifo_head_real(&self) -> Option<(u64, u32)> {
        None
    }
    /// Changes the capacity at run time (reactivity re-derives queue sizes). Items already
    /// queued stay; only later arrivals see the new limit.
    fn set_limit(&mut self, limit: QueueLimit);
    /// The current capacity.
    fn limit(&self) -> QueueLimit;
    /// A short name for results ("droptail", "red", ...).
    fn name(&self) -> &'static str;
    /// The average queue an active queue manager acts on (RED's avg, in its thresholds'
    /// unit), or `None` for disciplines without one.
    fn average(&self) -> Option<f64> {
        None
    }
    /// Early drops, forced drops and ECN marks of an active queue manager, in total and per
    /// drop precedence.
    fn aqm_stats(&self) -> Option<AqmStats> {
        None
    }
}
