//! Reactivity tables and shared-bottleneck ABW (NSDI'09 §2.3, §3.2).
//!
//! A bandwidth queue with reactivity owns a [`FlowMonitor`] and, for each path that crosses
//! it (one for a private bottleneck, several for a shared one), a table ABW(n) indexed by
//! the number of active foreground flows on that path. The queue's ABW is the flow-weighted
//! mean of its paths' ABW (ALGORITHMS.md §1): ABW = Σ_p n_p·ABW_p(n_p) / Σ_p n_p, and the
//! plain mean of ABW_p(1) while no flow is active. Between table entries ABW is interpolated
//! linearly and beyond the last entry it stays at the last value — a proposal, as the paper
//! only measured integer flow counts.
//!
//! A `[[shared]] paths` class's queue is crossed *after* its members' own queues, whose
//! tables already hold what each member achieved measured alone — through the class's link
//! too. So a class binds (holds its members to the ABW they carried loaded together, or else
//! the flow-weighted mean) only where two or more members load it together, and it binds
//! with hysteresis ([`PathsClass`]): at once when a second member starts carrying flows, and
//! free again only once fewer than two have done so for [`PATHS_CLASS_HOLD`].

use crate::bounds::{self, PathBoundsInput};
use crate::monitor::FlowMonitor;
use crate::packet::PacketMeta;
use crate::time::{Duration, Instant};
use crate::units::{QueueLimit, Rate};

/// ABW as a function of the number of active foreground flows.
#[derive(Clone, Debug, PartialEq)]
pub struct AbwTable {
    /// (flows, abw), sorted by flows, flows ≥ 1, at least one entry.
    points: Vec<(u32, Rate)>,
}

impl AbwTable {
    pub fn constant(abw: Rate) -> Self {
        AbwTable { points: vec![(1, abw)] }
    }

    /// Builds a table; returns `None` if it is empty or has a zero flow count.
    pub fn new(mut points: Vec<(u32, Rate)>) -> Option<Self> {
        if points.is_empty() || points.iter().any(|&(n, _)| n == 0) {
            return None;
        }
        points.sort_by_key(|&(n, _)| n);
        points.dedup_by_key(|&mut (n, _)| n);
        Some(AbwTable { points })
    }

    /// ABW with `flows` active flows (0 counts as 1: an idle path offers its one-flow ABW).
    pub fn at(&self, flows: u32) -> Rate {
        let n = flows.max(1);
        let (first, last) = (self.points[0], *self.points.last().unwrap());
        if n <= first.0 {
            return first.1;
        }
        if n >= last.0 {
            return last.1;
        }
        let i = self.points.partition_point(|&(k, _)| k <= n);
        let (n0, r0) = self.points[i - 1];
        let (n1, r1) = self.points[i];
        if n0 == n {
            return r0;
        }
        let t = (n - n0) as f64 / (n1 - n0) as f64;
        Rate::from_bps((r0.as_f64() + t * (r1.as_f64() - r0.as_f64())).round() as u64)
    }

    pub fn points(&self) -> &[(u32, Rate)] {
        &self.points
    }

    pub fn is_constant(&self) -> bool {
        self.points.len() == 1
    }
}

/// How a reactive queue re-derives its size when its ABW changes.
#[derive(Clone, Debug)]
pub enum QueueRule {
    /// A fixed, configured size.
    Fixed(QueueLimit),
    /// Eq. 2/4 for this direction, given the other direction's ABW (held at its one-flow
    /// value) — see [`bounds::derive`].
    Derived { inputs: PathBoundsInput, direction: usize, max_queue: u64 },
}

impl QueueRule {
    /// The limit for this direction when its ABW is `abw` with `flows` active flows.
    pub fn limit_for(&self, abw: Rate, flows: u32) -> QueueLimit {
        match self {
            QueueRule::Fixed(l) => *l,
            QueueRule::Derived { inputs, direction, max_queue } => {
                let mut i = *inputs;
                i.abw[*direction] = abw;
                i.flows[*direction] = flows.max(1);
                QueueLimit::Bytes(bounds::derive(&i, *max_queue).queue[*direction])
            }
        }
    }
}

/// How long a `[[shared]] paths` class stays bound after fewer than two of its members
/// carry flows. A member's flow counts as inactive after the monitor's idle timeout (1 s by
/// default) without payload, yet a TCP sender whose retransmissions are lost stays silent
/// longer while it is still there: Linux backs its retransmission timer off from 200 ms,
/// doubling (RFC 6298 §5.5), to silences of 1.6 and 3.2 s after the fourth and fifth
/// timeouts in a row. Were the class freed then, the member left would take its own path's
/// ABW and fill the class's queue, which drops the silent member's next retransmission too
/// (an 8-Mbit/s class carried 7.0 + 3.0 Mbit/s of kernel TCP so). Held 3 s beyond the idle
/// timeout, the class rides out silences up to 4 s, that fifth timeout's included.
pub const PATHS_CLASS_HOLD: Duration = Duration::from_secs(3);

/// Whether a paths class binds ([`PathsClass::update`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binding {
    Free,
    /// Two or more members carry flows.
    Bound,
    /// Fewer than two do since this time less [`PathsClass::hold`]; bound until then.
    Until(Instant),
}

/// A queue that its member paths cross after their own (a `[[shared]] paths` class).
///
/// Each member's own queue follows the table measured with that member loaded alone, and
/// that test's flows crossed the class's link as well: with one member active, the class
/// applying the member's ABW again would count the same link twice (two queues in series at
/// one rate, the second loaded at exactly its capacity). So the class is transparent (ABW =
/// its capacity, no placeholders) while free and holds its members to `together`, the ABW
/// they achieved loaded together (or without one NSDI'09 §2.3's flow-weighted mean) while
/// bound. It binds the moment a second member carries flows (the members then share the
/// link, §2.3) and is freed once fewer than two have carried flows for `hold`
/// ([`PATHS_CLASS_HOLD`]): a member whose flows went quiet for a few retransmission
/// timeouts is still sharing the link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathsClass {
    pub together: Option<Rate>,
    pub capacity: Rate,
    pub hold: Duration,
    binding: Binding,
}

impl PathsClass {
    /// A free class (no member carries flows yet), held for [`PATHS_CLASS_HOLD`].
    pub fn new(together: Option<Rate>, capacity: Rate) -> Self {
        PathsClass { together, capacity, hold: PATHS_CLASS_HOLD, binding: Binding::Free }
    }

    /// Whether the class holds its members to its ABW.
    pub fn bound(&self) -> bool {
        self.binding != Binding::Free
    }

    /// When a bound class with fewer than two members active is freed, if it is.
    pub fn release_at(&self) -> Option<Instant> {
        match self.binding {
            Binding::Until(t) => Some(t),
            _ => None,
        }
    }

    /// Re-decides the binding at `now` with `members` of the class carrying flows; returns
    /// true if it changed between bound and free.
    pub fn update(&mut self, now: Instant, members: usize) -> bool {
        let was = self.bound();
        self.binding = match self.binding {
            _ if members >= 2 => Binding::Bound,
            Binding::Bound => Binding::Until(now + self.hold),
            Binding::Until(t) if now >= t => Binding::Free,
            same => same,
        };
        was != self.bound()
    }
}

/// What a reactive bandwidth queue needs to re-set its placeholder rate and size.
#[derive(Clone, Debug)]
pub struct Reactivity {
    pub monitor: FlowMonitor,
    /// One table per path slot sharing the queue.
    pub tables: Vec<AbwTable>,
    pub queue_rule: QueueRule,
    /// Set for a `[[shared]] paths` class's queue.
    pub paths_class: Option<PathsClass>,
}

impl Reactivity {
    pub fn new(tables: Vec<AbwTable>, queue_rule: QueueRule, idle_timeout: Duration) -> Self {
        Reactivity { monitor: FlowMonitor::new(tables.len(), idle_timeout), tables, queue_rule, paths_class: None }
    }

    /// The controller of a `[[shared]] paths` class's queue (see [`PathsClass`]).
    pub fn for_paths_class(mut self, class: PathsClass) -> Self {
        self.paths_class = Some(class);
        self
    }

    /// Counts one packet of path `slot` (the monitor) and re-decides a class's binding;
    /// returns true if the ABW may have changed.
    pub fn observe<P: PacketMeta>(&mut self, now: Instant, pkt: &P, slot: u16) -> bool {
        let counts = self.monitor.observe(now, pkt, slot);
        self.update_class(now) || counts
    }

    /// Retires idle flows and frees a class whose hold ran out; returns true if the ABW may
    /// have changed.
    pub fn expire(&mut self, now: Instant) -> bool {
        let counts = self.monitor.expire(now);
        self.update_class(now) || counts
    }

    /// When [`Self::expire`] could next change something without a packet arriving.
    pub fn next_check(&self) -> Option<Instant> {
        let release = self.paths_class.and_then(|c| c.release_at());
        match (self.monitor.next_expiry_check(), release) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn update_class(&mut self, now: Instant) -> bool {
        let Some(class) = &mut self.paths_class else { return false };
        let members = self.monitor.active().iter().filter(|&&n| n > 0).count();
        class.update(now, members)
    }

    /// The queue's ABW for the monitor's current counts.
    pub fn current_abw(&self) -> Rate {
        let active = self.monitor.active();
        if let Some(class) = self.paths_class {
            if !class.bound() {
                return class.capacity;
            }
            if let Some(abw) = class.together {
                return abw;
            }
        }
        let total: u32 = active.iter().sum();
        if total == 0 {
            let sum: f64 = self.tables.iter().map(|t| t.at(1).as_f64()).sum();
            return Rate::from_bps((sum / self.tables.len() as f64).round() as u64);
        }
        let weighted: f64 = self.tables.iter().zip(active).map(|(t, &n)| n as f64 * t.at(n).as_f64()).sum();
        Rate::from_bps((weighted / total as f64).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::DEFAULT_IDLE_TIMEOUT;

    #[test]
    fn table_interpolates_between_measured_counts() {
        let t = AbwTable::new(vec![(1, Rate::from_mbps(2)), (2, Rate::from_mbps(3)), (4, Rate::from_mbps(4))]).unwrap();
        assert_eq!(t.at(0), Rate::from_mbps(2));
        assert_eq!(t.at(2), Rate::from_mbps(3));
        assert_eq!(t.at(3), Rate::from_kbps(3_500));
        assert_eq!(t.at(9), Rate::from_mbps(4));
    }

    #[test]
    fn shared_abw_is_the_flow_weighted_mean() {
        let r = Reactivity::new(
            vec![AbwTable::constant(Rate::from_mbps(4)), AbwTable::constant(Rate::from_mbps(10))],
            QueueRule::Fixed(QueueLimit::Packets(100)),
            DEFAULT_IDLE_TIMEOUT,
        );
        assert_eq!(r.current_abw(), Rate::from_mbps(7), "idle: plain mean");
    }
}
