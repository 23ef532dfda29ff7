//! Reactivity tables and shared-bottleneck ABW (NSDI'09 §2.3, §3.2).
//!
//! A bandwidth queue with reactivity owns a [`FlowMonitor`] and, for each path that crosses
//! it (one for a private bottleneck, several for a shared one), a table ABW(n) indexed by
//! the number of active foreground flows on that path. The queue's ABW is the flow-weighted
//! mean of its paths' ABW (ALGORITHMS.md §1): ABW = Σ_p n_p·ABW_p(n_p) / Σ_p n_p, and the
//! plain mean of ABW_p(1) while no flow is active. Between table entries ABW is interpolated
//! linearly and beyond the last entry it stays at the last value — a proposal, as the paper
//! only measured integer flow counts.

use crate::bounds::{self, PathBoundsInput};
use crate::monitor::FlowMonitor;
use crate::time::Duration;
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

/// What a reactive bandwidth queue needs to re-set its placeholder rate and size.
#[derive(Clone, Debug)]
pub struct Reactivity {
    pub monitor: FlowMonitor,
    /// One table per path slot sharing the queue.
    pub tables: Vec<AbwTable>,
    pub queue_rule: QueueRule,
}

impl Reactivity {
    pub fn new(tables: Vec<AbwTable>, queue_rule: QueueRule, idle_timeout: Duration) -> Self {
        Reactivity { monitor: FlowMonitor::new(tables.len(), idle_timeout), tables, queue_rule }
    }

    /// The queue's ABW for the monitor's current counts.
    pub fn current_abw(&self) -> Rate {
        let active = self.monitor.active();
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
