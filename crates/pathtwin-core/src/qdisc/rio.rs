//! RIO, RED with IN and OUT (Clark & Fang, "Explicit Allocation of Best-Effort Packet
//! Delivery Service", IEEE/ACM ToN 1998), as ns-2's `dsred` queue runs it, and FRIO, RIO
//! with FRED-style per-flow accounting for OUT packets (Lin & Morris, "Dynamics of Random
//! Early Detection", SIGCOMM 1997).
//!
//! One FIFO, two RED curves ([`RedCurve`], shared with [`Red`](super::Red)):
//!
//! ```text
//! IN arrival   avg_in ← EWMA of the IN packets queued       test (min_in, max_in, max_p_in) on avg_in
//!              avg_total ← EWMA of all packets queued
//! OUT arrival  avg_total ← EWMA of all packets queued       test (min_out, max_out, max_p_out) on
//!              (decoupled: avg_out ← EWMA of OUT queued)    avg_total (decoupled: on avg_out)
//! ```
//!
//! Coupled (RIO-C, Clark & Fang's RIO and ns-2's `rio_c`) is the default: OUT packets see the
//! whole queue, so they are dropped first whenever IN traffic builds one. Decoupled (ns-2's
//! `rio_d`) gives each class its own average of its own packets. Each curve has RED's
//! gentle region, `wait`, byte mode and ECN marking with its own `count`; `w_q` of the IN
//! curve weighs avg_in, that of the OUT curve avg_total and avg_out. When the queue empties
//! all averages decay as RED's does (ns-2's idle estimator, with the IN curve's mean packet
//! size): the link, not a class, was idle. Unmarked packets are IN (the `Mark` doc).
//!
//! Placeholders (NSDI'09 cross traffic) are unmarked, hence IN: they stand for the path's
//! other traffic, which a DiffServ-unaware Internet leaves unmarked, and filing them as OUT
//! would keep them out of avg_in, so IN packets would be judged on a queue emptier than the
//! one they wait in. As in RED they are never dropped early, only by the limit.
//!
//! FRIO ([`FrioParams`]) — **[P] a proposal**: no public definition was found
//! (ALGORITHMS.md §2). For OUT arrivals only, with per-flow queued packets and bytes over all
//! classes, `n` the flows with packets queued and `avgcq = avg/n` (avg the one OUT packets
//! are tested on, in the thresholds' unit):
//! - a flow with `max_q` or more packets queued is dropped (FRED's per-flow cap);
//! - a *strike* is counted when the flow holds more than `2·avgcq` while avg is at or above
//!   the OUT min_th (FRED counts it only in congestion, too); a flow with more than one
//!   strike is dropped whenever it holds at least `avgcq`. Strikes are forgotten when the
//!   flow's last packet leaves, as FRED frees the flow's state;
//! - a flow with at most `min_q` packets queued is never dropped early (forced drops above
//!   the curve still apply, as in FRED);
//! - otherwise RIO's OUT rule.
//!
//! Drops by the first two rules count as forced drops. The IN class is RIO's, unchanged.

use super::red_curve::{in_units, settle, AqmStats, Class, IdleClock, Outcome, RedAverage, RedCurve, Verdict};
use super::{Backlog, DropTail, Qdisc, Queued, RedParams};
use crate::packet::{FlowKey, PacketMeta};
use crate::time::Instant;
use crate::units::{QueueLimit, Rate};
use crate::Rng;
use std::collections::HashMap;

/// RIO's parameters: one RED curve per drop precedence (its `adaptive` is ignored) and the
/// coupling of the OUT average. Both curves' thresholds must be in the same unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RioParams {
    pub in_class: RedParams,
    pub out_class: RedParams,
    /// RIO-C: OUT tested on the average of the whole queue (else on the OUT packets').
    pub coupled: bool,
}

impl RioParams {
    /// ns-2's RIO defaults (ALGORITHMS.md §2): IN 15/30 packets, max_p 0.02; OUT 5/15
    /// packets, max_p 0.2; w_q 0.002; coupled. The rest as [`RedParams::with_thresholds`].
    pub fn ns2_default() -> Self {
        let class = |min, max, max_p| RedParams { max_p, ..RedParams::with_thresholds(QueueLimit::Packets(min), QueueLimit::Packets(max)) };
        RioParams { in_class: class(15, 30, 0.02), out_class: class(5, 15, 0.2), coupled: true }
    }
}

/// FRIO's per-flow limits, in packets (Lin & Morris's minq and maxq).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrioParams {
    /// OUT packets of a flow with at most this many packets queued are never dropped early
    /// (FRED: 2; 4 for large buffers).
    pub min_q: u32,
    /// A flow's OUT packets are dropped while it has this many packets queued.
    pub max_q: u32,
}

/// What one flow has queued (FRIO).
#[derive(Clone, Copy, Debug, Default)]
struct FlowState {
    backlog: Backlog,
    strikes: u32,
}

pub struct Rio<P> {
    in_curve: RedCurve,
    out_curve: RedCurve,
    coupled: bool,
    avg_in: RedAverage,
    avg_out: RedAverage,
    avg_total: RedAverage,
    idle: IdleClock,
    fifo: DropTail<P>,
    in_backlog: Backlog,
    out_backlog: Backlog,
    capacity: Rate,
    frio: Option<FrioParams>,
    /// FRIO: flows with packets queued (only looked up, never iterated).
    flows: HashMap<FlowKey, FlowState>,
    stats: AqmStats,
}

impl<P: Send + Sync> Rio<P> {
    /// A RIO queue (FRIO with `frio`) with hard limit `limit` on a link of `capacity`.
    pub fn new(p: RioParams, frio: Option<FrioParams>, limit: QueueLimit, capacity: Rate) -> Self {
        Rio {
            in_curve: RedCurve::new(p.in_class),
            out_curve: RedCurve::new(p.out_class),
            coupled: p.coupled,
            avg_in: RedAverage::default(),
            avg_out: RedAverage::default(),
            avg_total: RedAverage::default(),
            idle: IdleClock::new(),
            fifo: DropTail::new(limit),
            in_backlog: Backlog::default(),
            out_backlog: Backlog::default(),
            capacity,
            frio,
            flows: HashMap::new(),
            stats: AqmStats::default(),
        }
    }

    /// The average of the IN packets queued.
    pub fn avg_in(&self) -> f64 {
        self.avg_in.avg
    }

    /// The average OUT packets are tested on: of the whole queue (coupled) or of the OUT
    /// packets (decoupled).
    pub fn avg_out_test(&self) -> f64 {
        if self.coupled {
            self.avg_total.avg
        } else {
            self.avg_out.avg
        }
    }

    pub fn stats(&self) -> AqmStats {
        self.stats
    }

    fn class_backlog(&mut self, class: Class) -> &mut Backlog {
        match class {
            Class::In => &mut self.in_backlog,
            Class::Out => &mut self.out_backlog,
        }
    }

    /// Updates the averages an arrival of `class` moves, after the idle decay.
    fn update_averages(&mut self, now: Instant, class: Class) {
        let (w_in, w_out) = (self.in_curve.p.w_q, self.out_curve.p.w_q);
        let m = self.idle.take_m(now, self.capacity, self.in_curve.p.mean_packet);
        if m > 0.0 {
            self.avg_in.decay(w_in, m);
            self.avg_out.decay(w_out, m);
            self.avg_total.decay(w_out, m);
        }
        let unit = self.in_curve.p.min_th;
        self.avg_total.update(w_out, in_units(unit, self.fifo.backlog()));
        match class {
            Class::In => self.avg_in.update(w_in, in_units(unit, self.in_backlog)),
            Class::Out => self.avg_out.update(w_out, in_units(unit, self.out_backlog)),
        }
    }

    /// FRIO's rules for an OUT arrival of `flow` (see the module doc), tested on `avg`.
    fn frio_verdict(&mut self, f: FrioParams, flow: FlowKey, wire_len: u32, avg: f64, rng: &mut Rng) -> Verdict {
        let unit = self.out_curve.p.min_th;
        let st = self.flows.get(&flow).copied().unwrap_or_default();
        // The arriving flow is active from this packet on, if it was not already.
        let n = self.flows.len() + usize::from(st.backlog.packets == 0);
        let avgcq = avg / n as f64;
        let held = in_units(unit, st.backlog);
        let congested = self.out_curve.base_probability(avg) != Some(0.0);
        if congested && held > 2.0 * avgcq {
            if let Some(s) = self.flows.get_mut(&flow) {
                s.strikes += 1;
            }
        }
        let strikes = self.flows.get(&flow).map_or(0, |s| s.strikes);
        if st.backlog.packets >= f.max_q as u64 || (strikes > 1 && held >= avgcq) {
            return Verdict::ForcedDrop;
        }
        if st.backlog.packets <= f.min_q as u64 && self.out_curve.base_probability(avg).is_some() {
            return Verdict::Admit;
        }
        self.out_curve.judge(avg, wire_len, rng)
    }

    /// Per-class (and for FRIO per-flow) occupancy as `len` bytes of `class` and `flow`
    /// enter (`add`) or leave the FIFO.
    fn account(&mut self, class: Class, flow: FlowKey, len: u32, add: bool) {
        let b = self.class_backlog(class);
        if add {
            b.add(len)
        } else {
            b.remove(len)
        }
        if self.frio.is_none() {
            return;
        }
        if add {
            self.flows.entry(flow).or_default().backlog.add(len);
        } else if let Some(st) = self.flows.get_mut(&flow) {
            st.backlog.remove(len);
            if st.backlog.packets == 0 {
                self.flows.remove(&flow);
            }
        }
    }
}

impl<P: PacketMeta + Send + Sync> Rio<P> {
    /// RIO's (or FRIO's) decision for one arrival, then the hard limit.
    fn admit(&mut self, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<(), Queued<P>> {
        let class = Class::of(item.mark);
        self.update_averages(now, class);
        let (verdict, ecn) = match class {
            Class::In => (self.in_curve.judge(self.avg_in.avg, item.wire_len, rng), self.in_curve.p.ecn),
            Class::Out => {
                let avg = self.avg_out_test();
                let v = match self.frio {
                    Some(f) => self.frio_verdict(f, item.flow, item.wire_len, avg, rng),
                    None => self.out_curve.judge(avg, item.wire_len, rng),
                };
                (v, self.out_curve.p.ecn)
            }
        };
        let item = settle(verdict, item, class, ecn, &mut self.stats)?;
        let real = !item.is_placeholder();
        let (len, flow) = (item.wire_len, item.flow);
        match self.fifo.enqueue(now, item, rng) {
            Ok(()) => {
                self.account(class, flow, len, true);
                Ok(())
            }
            Err(item) => {
                if real {
                    self.stats.record(class, Outcome::ForcedDrop);
                }
                Err(item)
            }
        }
    }
}

impl<P: PacketMeta + Send + Sync> Qdisc<P> for Rio<P> {
    fn enqueue(&mut self, now: Instant, item: Queued<P>, rng: &mut Rng) -> Result<(), Queued<P>> {
        let admitted = self.admit(now, item, rng);
        if admitted.is_err() && self.fifo.backlog().packets == 0 {
            // As in RED: a drop at an empty queue must not stop the idle decay.
            self.idle.mark_idle(now);
        }
        admitted
    }

    fn dequeue(&mut self, now: Instant) -> Option<Queued<P>> {
        let item = self.fifo.dequeue(now)?;
        self.account(Class::of(item.mark), item.flow, item.wire_len, false);
        if self.fifo.backlog().packets == 0 {
            self.idle.mark_idle(now);
        }
        Some(item)
    }

    fn fifo_head_real(&self) -> Option<(u64, u32)> {
        self.fifo.fifo_head_real()
    }

    fn backlog(&self) -> Backlog {
        self.fifo.backlog()
    }

    fn set_limit(&mut self, limit: QueueLimit) {
        self.fifo.set_limit(limit);
    }

    fn limit(&self) -> QueueLimit {
        self.fifo.limit()
    }

    fn name(&self) -> &'static str {
        if self.frio.is_some() {
            "frio"
        } else {
            "rio"
        }
    }

    /// The average of the whole queue (what RED would act on), in both modes.
    fn average(&self) -> Option<f64> {
        Some(self.avg_total.avg)
    }

    fn aqm_stats(&self) -> Option<AqmStats> {
        Some(self.stats)
    }
}
