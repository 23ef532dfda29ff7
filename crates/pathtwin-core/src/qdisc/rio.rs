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
//! curve weighs avg_in, that of the OUT curve avg_total and avg_out. While the link is idle
//! all averages decay as RED's does (ns-2's idle estimator, with the IN curve's mean packet
//! size): the link, not a class, was idle. (ns-2's dsRED starts that idle time when the last
//! packet leaves the queue rather than when the link finishes sending it; pathtwin keeps
//! RED's rule for both, so that RIO with IN traffic only is exactly RED.) Unmarked packets
//! are IN (the `Mark` doc).
//!
//! Placeholders (NSDI'09 cross traffic) are unmarked, hence IN: they stand for the path's
//! other traffic, which a DiffServ-unaware Internet leaves unmarked, and filing them as OUT
//! would keep them out of avg_in, so IN packets would be judged on a queue emptier than the
//! one they wait in. As in RED they are never dropped early, only by the limit.
//!
//! FRIO ([`FrioParams`]) — **[P] a proposal**: no public definition was found
//! (ALGORITHMS.md §2). For OUT arrivals only, with per-flow queued packets and bytes over all
//! classes, `n` the flows with packets queued (this arrival's flow included) and
//! `avgcq = avg/n` (avg the one OUT packets are tested on, in the thresholds' unit), the
//! first rule that applies decides:
//! 1. a flow with `max_q` or more packets queued is dropped (FRED's per-flow cap);
//! 2. a flow with more than one *strike* is dropped while it holds at least `avgcq`. A
//!    strike is counted at an arrival that finds the flow holding more than `2·avgcq` while
//!    avg is at or above the OUT min_th (FRED: at or above max_th, and only when it drops);
//!    strikes are forgotten when the flow's last packet leaves, as FRED frees its state;
//! 3. a flow with at most `min_q` packets queued is admitted unless avg is beyond the
//!    curve (forced drop, as in FRED): never an early drop;
//! 4. otherwise RIO's OUT rule.
//!
//! Proposed here, beyond ALGORITHMS.md's sketch: strikes from min_th on (earlier than FRED,
//! so that "repeatedly exceeded" can happen below max_th, where RIO's OUT curve works); the
//! per-flow counts include the flow's IN packets (its share of the buffer is what FRED
//! bounds); the placeholders' aggregate counts as one flow; `max_q` defaults to FRED's
//! maxq = min_th (config). Drops by rules 1 and 2 count as forced drops. The IN class is
//! RIO's, unchanged.

use super::aqm::{active_queue_qdisc, ActiveQueue, AqmQueue, AqmStats, Class};
use super::red_curve::{in_units, RedAverage, RedCurve, Verdict};
use super::{Backlog, Queued, RedParams};
use crate::config::{FrioSettings, RioClassSettings, RioSettings};
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

    /// The parameters of an entry's `rio` table: [`RioParams::ns2_default`] for what it
    /// leaves out (a missing class, or a class's missing `max_p`).
    pub fn from_settings(r: Option<&RioSettings>) -> Self {
        let d = RioParams::ns2_default();
        let Some(r) = r else { return d };
        let class = |c: &Option<RioClassSettings>, d: RedParams| {
            let base = match c {
                Some(c) => RedParams { max_p: c.max_p.unwrap_or(d.max_p), ..RedParams::with_thresholds(c.min_th, c.max_th) },
                None => d,
            };
            RedParams {
                w_q: r.w_q.unwrap_or(base.w_q),
                gentle: r.gentle.unwrap_or(base.gentle),
                wait: r.wait.unwrap_or(base.wait),
                byte_mode: r.byte_mode.unwrap_or(base.byte_mode),
                mean_packet: r.mean_packet.map_or(base.mean_packet, |m| m.bytes() as u32),
                ecn: r.ecn.unwrap_or(base.ecn),
                ..base
            }
        };
        RioParams { in_class: class(&r.in_class, d.in_class), out_class: class(&r.out_class, d.out_class), coupled: r.coupled.unwrap_or(d.coupled) }
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

impl FrioParams {
    /// The limits of an entry's `frio` table beside RIO parameters `rio`: min_q 2 (Lin &
    /// Morris), max_q FRED's maxq = the OUT min_th in packets (bytes over the mean packet
    /// size, rounded up).
    pub fn from_settings(f: Option<&FrioSettings>, rio: &RioParams) -> Self {
        let out = rio.out_class;
        let default_max = match out.min_th {
            QueueLimit::Packets(n) => n,
            QueueLimit::Bytes(b) => b.div_ceil(out.mean_packet as u64),
        };
        let f = f.cloned().unwrap_or_default();
        FrioParams { min_q: f.min_q.unwrap_or(2), max_q: f.max_q.unwrap_or(default_max.min(u32::MAX as u64) as u32) }
    }
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
    queue: AqmQueue<P>,
    in_backlog: Backlog,
    out_backlog: Backlog,
    frio: Option<FrioParams>,
    /// FRIO: flows with packets queued (only looked up, never iterated).
    flows: HashMap<FlowKey, FlowState>,
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
            queue: AqmQueue::new(limit, capacity),
            in_backlog: Backlog::default(),
            out_backlog: Backlog::default(),
            frio,
            flows: HashMap::new(),
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
        self.queue.stats
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
        let m = self.queue.idle_m(now, self.in_curve.p.mean_packet);
        if m > 0.0 {
            self.avg_in.decay(w_in, m);
            self.avg_out.decay(w_out, m);
            self.avg_total.decay(w_out, m);
        }
        let unit = self.in_curve.p.min_th;
        self.avg_total.update(w_out, in_units(unit, self.queue.backlog()));
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
}

impl<P: PacketMeta + Send + Sync> ActiveQueue<P> for Rio<P> {
    fn queue(&self) -> &AqmQueue<P> {
        &self.queue
    }

    fn queue_mut(&mut self) -> &mut AqmQueue<P> {
        &mut self.queue
    }

    /// RIO's (or FRIO's) decision for one arrival.
    fn judge(&mut self, now: Instant, item: &Queued<P>, rng: &mut Rng) -> (Verdict, Class, bool) {
        let class = Class::of(item.mark);
        self.update_averages(now, class);
        match class {
            Class::In => (self.in_curve.judge(self.avg_in.avg, item.wire_len, rng), class, self.in_curve.p.ecn),
            Class::Out => {
                let avg = self.avg_out_test();
                let v = match self.frio {
                    Some(f) => self.frio_verdict(f, item.flow, item.wire_len, avg, rng),
                    None => self.out_curve.judge(avg, item.wire_len, rng),
                };
                (v, class, self.out_curve.p.ecn)
            }
        }
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

    fn kind_name(&self) -> &'static str {
        if self.frio.is_some() {
            "frio"
        } else {
            "rio"
        }
    }

    /// The average of the whole queue (what RED would act on), in both modes.
    fn reported_average(&self) -> f64 {
        self.avg_total.avg
    }
}

active_queue_qdisc!(Rio);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Mark;
    use crate::qdisc::testing::{packet, placeholder, Pkt};
    use crate::qdisc::{Qdisc, Red};
    use crate::time::Duration;
    use rand::{Rng as _, SeedableRng};

    const T0: Instant = Instant::ZERO;

    /// ns-2's RIO thresholds (IN 15/30 max_p 0.02, OUT 5/15 max_p 0.2), without `wait` so
    /// that p_a is Floyd & Jacobson's, and with `w_q` as given (0 holds the averages).
    fn params(w_q: f64, coupled: bool) -> RioParams {
        let d = RioParams::ns2_default();
        let class = |p: RedParams| RedParams { w_q, wait: false, ..p };
        RioParams { in_class: class(d.in_class), out_class: class(d.out_class), coupled }
    }

    fn rio(p: RioParams, frio: Option<FrioParams>) -> Rio<Pkt> {
        Rio::new(p, frio, QueueLimit::Packets(1000), Rate::from_mbps(10))
    }

    /// |frac − expect| within 4 binomial standard deviations of n draws (RED's `count` makes
    /// the drops more regular than independent draws, so this bound is conservative).
    fn assert_rate(drops: u64, n: u64, expect: f64) {
        let frac = drops as f64 / n as f64;
        let sd = (expect * (1.0 - expect) / n as f64).sqrt();
        assert!((frac - expect).abs() < 4.0 * sd, "drop rate {frac} vs {expect} ± {}", 4.0 * sd);
    }

    /// With avg held fixed, RED's `count` spaces early drops uniformly over 1 … 1/p_b
    /// arrivals (Floyd & Jacobson §7), so the drop rate is 2·p_b (see the `red` tests).
    #[test]
    fn in_is_never_dropped_below_min_in_while_out_follows_the_red_curve_on_the_total_average() {
        let mut q = rio(params(0.0, true), None);
        q.avg_total.avg = 10.0; // between OUT's 5 and 15
        q.avg_in.avg = 12.0; // below IN's min_th 15
        let mut rng = Rng::seed_from_u64(11);
        let n = 100_000;
        for _ in 0..n {
            for mark in [Mark::In, Mark::Out, Mark::Unmarked] {
                if q.enqueue(T0, packet(1, mark, false), &mut rng).is_ok() {
                    q.dequeue(T0);
                }
            }
        }
        let s = q.stats();
        assert_eq!(s.in_class.arrivals, 2 * n, "unmarked packets are IN");
        assert_eq!(s.in_class.drops(), 0);
        assert_eq!(s.out_class.arrivals, n);
        let p_b = 0.2 * (10.0 - 5.0) / (15.0 - 5.0);
        assert_rate(s.out_class.early_drops, n, 2.0 * p_b);
        assert_eq!(s.out_class.forced_drops, 0);
    }

    #[test]
    fn in_packets_follow_their_own_curve_on_avg_in() {
        let mut q = rio(params(0.0, true), None);
        q.avg_in.avg = 24.0;
        q.avg_total.avg = 2.0; // OUT below its min_th: never dropped
        let mut rng = Rng::seed_from_u64(12);
        let n = 200_000;
        for _ in 0..n {
            for mark in [Mark::In, Mark::Out] {
                if q.enqueue(T0, packet(1, mark, false), &mut rng).is_ok() {
                    q.dequeue(T0);
                }
            }
        }
        let s = q.stats();
        assert_eq!(s.out_class.drops(), 0);
        let p_b = 0.02 * (24.0 - 15.0) / (30.0 - 15.0);
        assert_rate(s.in_class.early_drops, n, 2.0 * p_b);
    }

    /// Averages against the EWMA written out: IN arrivals move avg_in with the IN packets
    /// queued, every arrival moves avg_total with the whole queue, OUT arrivals move avg_out
    /// with the OUT packets queued.
    #[test]
    fn in_arrivals_move_avg_in_and_every_arrival_moves_avg_total() {
        let w = 0.5;
        let mut q = rio(params(w, false), None);
        let mut rng = Rng::seed_from_u64(1);
        let marks = [Mark::In, Mark::Out, Mark::In, Mark::Out, Mark::Out, Mark::In];
        let (mut avg_in, mut avg_out, mut avg_total) = (0.0, 0.0, 0.0);
        let (mut n_in, mut n_out) = (0.0, 0.0);
        for m in marks {
            avg_total = (1.0 - w) * avg_total + w * (n_in + n_out);
            if m == Mark::In {
                avg_in = (1.0 - w) * avg_in + w * n_in;
                n_in += 1.0;
            } else {
                avg_out = (1.0 - w) * avg_out + w * n_out;
                n_out += 1.0;
            }
            q.enqueue(T0, packet(1, m, false), &mut rng).expect("far below every threshold");
        }
        assert!((q.avg_in() - avg_in).abs() < 1e-12, "{} vs {avg_in}", q.avg_in());
        assert!((q.avg_out.avg - avg_out).abs() < 1e-12);
        assert!((q.average().unwrap() - avg_total).abs() < 1e-12);
        assert_eq!(q.avg_out_test(), q.avg_out.avg, "decoupled: OUT tested on its own average");
    }

    /// A queue full of IN packets: coupled RIO drops OUT packets (the total average is
    /// between OUT's thresholds), decoupled RIO does not (no OUT packet is queued).
    #[test]
    fn coupled_out_sees_the_in_backlog_and_decoupled_does_not() {
        let drops = |coupled: bool| {
            let mut q = rio(params(1.0, coupled), None);
            let mut rng = Rng::seed_from_u64(3);
            // w_q = 1: each average is the queue its arrival sees. Every OUT arrival finds
            // 12 IN packets and no OUT packet queued.
            for _ in 0..20_000 {
                while q.dequeue(T0).is_some() {}
                for _ in 0..12 {
                    q.enqueue(T0, packet(1, Mark::In, false), &mut rng).expect("avg_in stays below min_in");
                }
                let _ = q.enqueue(T0, packet(2, Mark::Out, false), &mut rng);
            }
            q.stats().out_class.drops()
        };
        let p_b = 0.2 * (12.0 - 5.0) / (15.0 - 5.0);
        assert_rate(drops(true), 20_000, 2.0 * p_b);
        assert_eq!(drops(false), 0);
    }

    /// Only IN (or unmarked) traffic: RIO is RED with RIO's IN parameters, decision for
    /// decision, average for average, on the same RNG.
    #[test]
    fn rio_with_only_in_traffic_is_red_with_the_in_parameters() {
        let p = RioParams { coupled: true, ..RioParams::ns2_default() };
        let mut q = rio(p, None);
        let mut red: Red<Pkt> = Red::new(p.in_class, QueueLimit::Packets(1000), Rate::from_mbps(10));
        let (mut r1, mut r2) = (Rng::seed_from_u64(5), Rng::seed_from_u64(5));
        let mut pattern = Rng::seed_from_u64(6);
        let mut t = T0;
        for _ in 0..50_000 {
            t += Duration::from_micros(pattern.gen_range(0..900));
            let a = q.enqueue(t, packet(1, Mark::Unmarked, false), &mut r1).is_ok();
            let b = red.enqueue(t, packet(1, Mark::Unmarked, false), &mut r2).is_ok();
            assert_eq!(a, b);
            if pattern.gen_bool(0.45) {
                assert_eq!(q.dequeue(t).is_some(), red.dequeue(t).is_some());
            }
            assert_eq!(q.average(), Qdisc::<Pkt>::average(&red));
        }
        assert_eq!(q.stats(), red.red_stats());
        assert!(q.stats().early_drops > 100, "the curve was exercised: {:?}", q.stats());
    }

    #[test]
    fn placeholders_are_in_and_never_dropped_early() {
        let mut q = rio(params(0.5, true), None);
        let mut rng = Rng::seed_from_u64(4);
        for _ in 0..200 {
            q.enqueue(T0, placeholder(), &mut rng).expect("only the limit drops placeholders");
        }
        assert!(q.avg_in() > 30.0, "placeholders raise avg_in: {}", q.avg_in());
        assert_eq!(q.stats(), AqmStats::default(), "placeholders are counted by the bandwidth queue");
    }

    #[test]
    fn ecn_marks_and_byte_mode_apply_per_class() {
        let mut p = params(0.0, true);
        p.out_class.ecn = true;
        p.out_class.byte_mode = true;
        let mut q = rio(p, None);
        q.avg_total.avg = 10.0;
        let mut rng = Rng::seed_from_u64(8);
        let n = 100_000;
        let mut ce = 0;
        for _ in 0..n {
            // 250-byte packets: byte mode halves p_b relative to the 500-byte mean.
            let mut item = packet(1, Mark::Out, true);
            item.wire_len = 250;
            q.enqueue(T0, item, &mut rng).expect("ECN-capable: marked, not dropped");
            ce += u64::from(q.dequeue(T0).unwrap().packet.unwrap().ce);
        }
        let s = q.stats();
        assert_eq!((s.out_class.early_drops, s.out_class.ecn_marks, s.ecn_marks), (0, ce, ce));
        assert_rate(ce, n, 2.0 * 0.1 * 0.5);
    }

    /// FRIO: a flow with at most min_q packets queued keeps every OUT packet where RIO drops
    /// them at the curve's rate; a flow holding far more than its share collects strikes and
    /// loses its OUT packets outright.
    #[test]
    fn frio_never_early_drops_a_flow_with_at_most_min_q_queued() {
        let frio = FrioParams { min_q: 2, max_q: 50 };
        let run = |frio: Option<FrioParams>| {
            let mut q = rio(params(0.0, true), frio);
            q.avg_total.avg = 12.0;
            let mut rng = Rng::seed_from_u64(9);
            let (mut small_drops, mut big_drops) = (0, 0);
            for i in 0..30_000 {
                // Every third round the queue starts over with the big flow's 20 IN packets,
                // so the small flow holds 0, 1 or 2 packets when its next one arrives.
                if i % 3 == 0 {
                    while q.dequeue(T0).is_some() {}
                    for _ in 0..20 {
                        q.enqueue(T0, packet(7, Mark::In, false), &mut rng).unwrap();
                    }
                }
                small_drops += u64::from(q.enqueue(T0, packet(3, Mark::Out, false), &mut rng).is_err());
                big_drops += u64::from(q.enqueue(T0, packet(7, Mark::Out, false), &mut rng).is_err());
            }
            (small_drops, big_drops, q.stats())
        };
        let (small, big, s) = run(Some(frio));
        assert_eq!(small, 0, "{s:?}");
        // The big flow holds 20 > 2·avgcq = 12 packets at each of its arrivals: a strike each
        // time, and from the second strike after each restart (which frees its state) a drop.
        assert_eq!(s.out_class.forced_drops, 20_000, "{s:?}");
        assert!(big > 20_000, "{big}");
        let (small, _, _) = run(None);
        assert!(small > 1000, "RIO alone drops the small flow's OUT packets: {small}");
    }

    #[test]
    fn frio_caps_a_flow_at_max_q_even_without_congestion() {
        let mut q = rio(params(0.0, true), Some(FrioParams { min_q: 2, max_q: 4 }));
        let mut rng = Rng::seed_from_u64(2);
        let results: Vec<bool> = (0..6).map(|_| q.enqueue(T0, packet(5, Mark::Out, false), &mut rng).is_ok()).collect();
        assert_eq!(results, [true, true, true, true, false, false], "avg 0: only the cap drops");
        assert!(q.enqueue(T0, packet(5, Mark::In, false), &mut rng).is_ok(), "IN is RIO's, uncapped");
        assert!(q.enqueue(T0, packet(6, Mark::Out, false), &mut rng).is_ok(), "per flow, not per class");
        assert_eq!(q.stats().out_class.forced_drops, 2);
    }
}
