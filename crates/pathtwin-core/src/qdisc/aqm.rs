//! What every active queue manager (RED, RIO, FRIO) shares beyond RED's equations: the FIFO
//! under it with its hard limit and idle clock ([`AqmQueue`]), its counters by drop
//! precedence ([`AqmStats`]), and — once, for all of them — the [`Qdisc`] implementation:
//! a discipline implements [`ActiveQueue`] (update its averages and judge an arrival) and
//! gets enqueue, dequeue, the limit and the statistics from here.
//!
//! Order of one arrival: `judge` (averages, then the verdict), [`settle`] (drop, ECN mark or
//! admit), the hard limit (DropTail: a forced drop), `account` for what entered.

use super::red_curve::Verdict;
use super::{Backlog, DropTail, Queued};
use crate::packet::{FlowKey, Mark, PacketMeta};
use crate::time::Instant;
use super::Qdisc;
use crate::units::{QueueLimit, Rate};
use crate::Rng;

/// The drop precedence a discipline files an arrival under. RIO treats unmarked traffic as
/// IN (the `Mark` doc: the conservative choice); RED records its arrivals by the same rule,
/// so its per-class counters show how much traffic a marker put in each class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    In,
    Out,
}

impl Class {
    pub fn of(mark: Mark) -> Class {
        match mark {
            Mark::Out => Class::Out,
            Mark::In | Mark::Unmarked => Class::In,
        }
    }
}

/// What one drop precedence saw at an active queue manager (real packets only: the
/// bandwidth queue counts placeholders itself).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClassStats {
    pub arrivals: u64,
    pub early_drops: u64,
    pub forced_drops: u64,
    pub ecn_marks: u64,
}

impl ClassStats {
    pub fn drops(&self) -> u64 {
        self.early_drops + self.forced_drops
    }
}

/// What an active queue manager did, beyond the queue's own counters: totals, and the same
/// split by drop precedence (`in` includes unmarked traffic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AqmStats {
    pub early_drops: u64,
    pub forced_drops: u64,
    pub ecn_marks: u64,
    #[serde(rename = "in")]
    pub in_class: ClassStats,
    #[serde(rename = "out")]
    pub out_class: ClassStats,
}

/// One arrival's outcome, as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Arrival,
    EarlyDrop,
    ForcedDrop,
    EcnMark,
}

impl AqmStats {
    pub fn record(&mut self, class: Class, outcome: Outcome) {
        let c = match class {
            Class::In => &mut self.in_class,
            Class::Out => &mut self.out_class,
        };
        let (total, per_class) = match outcome {
            Outcome::Arrival => {
                c.arrivals += 1;
                return;
            }
            Outcome::EarlyDrop => (&mut self.early_drops, &mut c.early_drops),
            Outcome::ForcedDrop => (&mut self.forced_drops, &mut c.forced_drops),
            Outcome::EcnMark => (&mut self.ecn_marks, &mut c.ecn_marks),
        };
        *total += 1;
        *per_class += 1;
    }

    /// The class's counters.
    pub fn class(&self, class: Class) -> &ClassStats {
        match class {
            Class::In => &self.in_class,
            Class::Out => &self.out_class,
        }
    }
}

/// When a queue last became empty, for ns-2's idle-time estimator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdleClock {
    since: Option<Instant>,
}

impl IdleClock {
    /// A queue that has been empty since time zero.
    pub fn new() -> Self {
        IdleClock { since: Some(Instant::ZERO) }
    }

    /// The queue is empty from `now`.
    pub fn mark_idle(&mut self, now: Instant) {
        self.since = Some(now);
    }

    /// The link found nothing to send at `now`: idle from then, unless already idle.
    pub fn mark_idle_if_busy(&mut self, now: Instant) {
        self.since.get_or_insert(now);
    }

    /// The queue is busy; nothing to decay at the next arrival.
    #[cfg(test)]
    pub fn mark_busy(&mut self) {
        self.since = None;
    }

    /// At an arrival: the number of mean-size packets the link could have sent since the
    /// queue became empty, `m = idle·C/(8·mean packet)` (0 if it was not empty).
    pub fn take_m(&mut self, now: Instant, capacity: Rate, mean_packet: u32) -> f64 {
        match self.since.take() {
            Some(since) => now.saturating_since(since).as_secs_f64() * capacity.bps() as f64 / (8.0 * mean_packet as f64),
            None => 0.0,
        }
    }
}

impl Default for IdleClock {
    fn default() -> Self {
        Self::new()
    }
}

/// Carries out `verdict` on `item` of drop precedence `class`: admitted items come back as
/// `Ok` (for the caller's FIFO and limit), early drops of ECN-capable packets are marked CE
/// instead when `ecn` is on, other drops come back as `Err`. Placeholders ignore verdicts
/// (see the `red` module doc) and are not counted.
pub fn settle<P: PacketMeta>(verdict: Verdict, mut item: Queued<P>, class: Class, ecn: bool, stats: &mut AqmStats) -> Result<Queued<P>, Queued<P>> {
    if item.is_placeholder() {
        return Ok(item);
    }
    stats.record(class, Outcome::Arrival);
    match verdict {
        Verdict::Admit => Ok(item),
        Verdict::EarlyDrop => match &mut item.packet {
            Some(pkt) if ecn && pkt.ecn_capable() => {
                pkt.set_ce();
                stats.record(class, Outcome::EcnMark);
                Ok(item)
            }
            _ => {
                stats.record(class, Outcome::EarlyDrop);
                Err(item)
            }
        },
        Verdict::ForcedDrop => {
            stats.record(class, Outcome::ForcedDrop);
            Err(item)
        }
    }
}

/// The FIFO under an active queue manager, the link rate its idle decay needs, and its
/// counters.
pub struct AqmQueue<P> {
    pub fifo: DropTail<P>,
    pub idle: IdleClock,
    pub capacity: Rate,
    pub stats: AqmStats,
}

impl<P> AqmQueue<P> {
    pub fn new(limit: QueueLimit, capacity: Rate) -> Self {
        AqmQueue { fifo: DropTail::new(limit), idle: IdleClock::new(), capacity, stats: AqmStats::default() }
    }

    /// At an arrival: the empty arrivals the idle link could have seen (see [`IdleClock`]).
    pub fn idle_m(&mut self, now: Instant, mean_packet: u32) -> f64 {
        self.idle.take_m(now, self.capacity, mean_packet)
    }
}

impl<P: Send + Sync> AqmQueue<P> {
    /// Everything queued, placeholders included.
    pub fn backlog(&self) -> Backlog {
        Qdisc::backlog(&self.fifo)
    }
}

/// An active queue manager's own part; [`Qdisc`] follows (see the module doc).
pub trait ActiveQueue<P>: Send + Sync {
    fn queue(&self) -> &AqmQueue<P>;
    fn queue_mut(&mut self) -> &mut AqmQueue<P>;
    /// Updates the averages for an arrival at `now` and decides on it: the verdict, the
    /// class it is counted in, and whether an early drop becomes an ECN mark.
    fn judge(&mut self, now: Instant, item: &Queued<P>, rng: &mut Rng) -> (Verdict, Class, bool);
    /// `len` bytes of `class` and `flow` entered (`add`) or left the FIFO.
    fn account(&mut self, _class: Class, _flow: FlowKey, _len: u32, _add: bool) {}
    /// A short name for results ([`Qdisc::name`]).
    fn kind_name(&self) -> &'static str;
    /// The average reported as the queue's ([`Qdisc::average`]: the one RED would act on).
    fn reported_average(&self) -> f64;
}

/// [`Qdisc::enqueue`] of every active queue manager.
pub fn enqueue<P: PacketMeta + Send + Sync, A: ActiveQueue<P>>(a: &mut A, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<(), Queued<P>> {
    let (verdict, class, ecn) = a.judge(now, &item, rng);
    let (flow, len) = (item.flow, item.wire_len);
    let q = a.queue_mut();
    let admitted = settle(verdict, item, class, ecn, &mut q.stats).and_then(|item| {
        let real = !item.is_placeholder();
        q.fifo.enqueue(now, item, rng).inspect_err(|_| {
            if real {
                q.stats.record(class, Outcome::ForcedDrop);
            }
        })
    });
    match admitted {
        Ok(()) => a.account(class, flow, len, true),
        Err(_) if q.fifo.backlog().packets == 0 => {
            // A dropped arrival leaves an idle queue idle: the decay must keep counting from
            // now, or an average left high by a burst would outlive the burst and drop every
            // packet of the flows it stalled.
            q.idle.mark_idle(now);
        }
        Err(_) => {}
    }
    admitted
}

/// [`Qdisc::dequeue`] of every active queue manager.
pub fn dequeue<P: PacketMeta + Send + Sync, A: ActiveQueue<P>>(a: &mut A, now: Instant) -> Option<Queued<P>> {
    let q = a.queue_mut();
    // The idle time that decays the average starts when the link, done sending, finds the
    // queue empty (Floyd & Jacobson's idle link; ns-2's `queue/red.cc`, whose `deque`
    // returns nothing), not when the last packet leaves the queue for the link (ns-2's
    // `diffserv/dsredq.cc`): one transmission time per idle period apart, which on a
    // lightly queued link lowered the average by a quarter against ns-2's RED.
    let Some(item) = q.fifo.dequeue(now) else {
        q.idle.mark_idle_if_busy(now);
        return None;
    };
    a.account(Class::of(item.mark), item.flow, item.wire_len, false);
    Some(item)
}

/// Implements [`Qdisc`] for an [`ActiveQueue`] type `$t<P>` with this module's functions (a
/// macro because a blanket impl over `ActiveQueue` would overlap DropTail's in coherence).
macro_rules! active_queue_qdisc {
    ($t:ident) => {
        impl<P: crate::packet::PacketMeta + Send + Sync> crate::qdisc::Qdisc<P> for $t<P> {
            fn enqueue(&mut self, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<(), Queued<P>> {
                crate::qdisc::aqm::enqueue(self, now, item, rng)
            }
            fn dequeue(&mut self, now: Instant) -> Option<Queued<P>> {
                crate::qdisc::aqm::dequeue(self, now)
            }
            fn fifo_head_real(&self) -> Option<(u64, u32)> {
                ActiveQueue::queue(self).fifo.fifo_head_real()
            }
            fn backlog(&self) -> crate::qdisc::Backlog {
                ActiveQueue::queue(self).fifo.backlog()
            }
            fn set_limit(&mut self, limit: QueueLimit) {
                self.queue_mut().fifo.set_limit(limit);
            }
            fn limit(&self) -> QueueLimit {
                ActiveQueue::queue(self).fifo.limit()
            }
            fn name(&self) -> &'static str {
                self.kind_name()
            }
            fn average(&self) -> Option<f64> {
                Some(self.reported_average())
            }
            fn aqm_stats(&self) -> Option<crate::qdisc::AqmStats> {
                Some(ActiveQueue::queue(self).stats)
            }
        }
    };
}
pub(crate) use active_queue_qdisc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_count_per_class_and_in_total() {
        let mut s = AqmStats::default();
        let events = [
            (Class::In, Outcome::Arrival),
            (Class::Out, Outcome::Arrival),
            (Class::Out, Outcome::EarlyDrop),
            (Class::In, Outcome::EcnMark),
            (Class::Out, Outcome::ForcedDrop),
        ];
        for (class, outcome) in events {
            s.record(class, outcome);
        }
        assert_eq!((s.early_drops, s.forced_drops, s.ecn_marks), (1, 1, 1));
        assert_eq!(*s.class(Class::In), ClassStats { arrivals: 1, early_drops: 0, forced_drops: 0, ecn_marks: 1 });
        assert_eq!(s.class(Class::Out).drops(), 2);
        assert_eq!(Class::of(Mark::Unmarked), Class::In, "unmarked traffic is IN");
    }

    /// The emulator's snapshot serializes these as they are; Python's `aqm_columns` reads
    /// the classes under "in" and "out".
    #[test]
    fn stats_serialize_the_classes_under_in_and_out() {
        let mut s = AqmStats::default();
        s.record(Class::Out, Outcome::Arrival);
        let v = serde_json::to_value(s).unwrap();
        assert_eq!(v["out"]["arrivals"], 1);
        assert_eq!(v["in"]["early_drops"], 0);
        assert_eq!(v["early_drops"], 0);
    }
}
