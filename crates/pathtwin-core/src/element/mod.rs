//! Elements: the building blocks that routes chain together (DESIGN.md "Elements").
//!
//! [`Element`] is a closed enum rather than a trait object so that the per-packet path of both
//! engines is statically dispatched. Every element follows one protocol:
//! `push(at, pkt, slot)` with non-decreasing `at`; `next_wakeup()` says when it next has a
//! packet to release; `poll_output(now)` returns released packets with their model departure
//! time. `slot` tells a shared bandwidth queue which path a packet belongs to.

mod delay;
mod loss;
mod passthrough;
mod queue;
pub mod reactivity;
mod reorder;
mod trace_loss;

pub use delay::DelayLine;
pub use loss::RandomLoss;
pub use passthrough::Passthrough;
pub use queue::{BandwidthQueue, Occupancy, QueueStats, PLACEHOLDER_LEN};
pub use reactivity::{AbwTable, PathsClass, QueueRule, Reactivity, PATHS_CLASS_HOLD};
pub use reorder::Reorder;
pub use trace_loss::TraceLoss;

use crate::marker::Marker;
use crate::packet::PacketMeta;
use crate::time::Instant;

pub enum Element<P> {
    Delay(DelayLine<P>),
    Queue(BandwidthQueue<P>),
    Loss(RandomLoss<P>),
    /// Drops the transmissions a capture showed lost, by stream offset (a pipe's `drop`).
    TraceLoss(TraceLoss<P>),
    /// Holds a share of packets an extra delay, so later ones overtake them.
    Reorder(Reorder<P>),
    /// A DiffServ marker (zero delay; see [`crate::marker`]).
    Marker(Marker<P>),
}

impl<P: PacketMeta + Send + Sync + 'static> Element<P> {
    /// Offers a packet; returns it if the element dropped it on arrival (the only time any
    /// element drops a real packet), so a driver can count it and recycle its buffer.
    #[inline]
    pub fn push(&mut self, at: Instant, pkt: P, slot: u16) -> Option<P> {
        match self {
            Element::Delay(e) => {
                e.push(at, pkt);
                None
            }
            Element::Queue(e) => e.push(at, pkt, slot),
            Element::Loss(e) => e.push(at, pkt),
            Element::TraceLoss(e) => e.push(at, pkt),
            Element::Reorder(e) => {
                e.push(at, pkt);
                None
            }
            Element::Marker(e) => {
                e.push(at, pkt);
                None
            }
        }
    }

    #[inline]
    pub fn next_wakeup(&self) -> Option<Instant> {
        match self {
            Element::Delay(e) => e.next_wakeup(),
            Element::Queue(e) => e.next_wakeup(),
            Element::Loss(e) => e.next_wakeup(),
            Element::TraceLoss(e) => e.next_wakeup(),
            Element::Reorder(e) => e.next_wakeup(),
            Element::Marker(e) => e.next_wakeup(),
        }
    }

    #[inline]
    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        match self {
            Element::Delay(e) => e.poll_output(now),
            Element::Queue(e) => e.poll_output(now),
            Element::Loss(e) => e.poll_output(now),
            Element::TraceLoss(e) => e.poll_output(now),
            Element::Reorder(e) => e.poll_output(now),
            Element::Marker(e) => e.poll_output(now),
        }
    }

    pub fn as_marker(&self) -> Option<&Marker<P>> {
        match self {
            Element::Marker(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_queue(&self) -> Option<&BandwidthQueue<P>> {
        match self {
            Element::Queue(q) => Some(q),
            _ => None,
        }
    }

    pub fn as_queue_mut(&mut self) -> Option<&mut BandwidthQueue<P>> {
        match self {
            Element::Queue(q) => Some(q),
            _ => None,
        }
    }
}
