//! Queue-size bounds of the path model (NSDI'09 §2.2.2, Eq. 1–4) and the rule that picks
//! queue sizes from them.
//!
//! - Eq. 2 (lower, per direction): q ≥ Σ_f min(w_f, w_max), where w_f is the flow's
//!   bandwidth-delay product. With `n` flows sharing the direction's ABW equally,
//!   w_f = (ABW/n)·RTT_base.
//! - Eq. 3: the RTT a flow tolerates before it becomes window-limited is w_max/ABW.
//! - Eq. 4 (upper, both directions together): q_f + q_r ≤ C·(w_max/ABW_f − RTT_base), with
//!   "forward" the direction of higher ABW.
//!
//! Split rule: the paper's implementation split the Eq. 4 total equally; when an equal split
//! would break a direction's Eq. 2 bound but the total still covers both lower bounds, each
//! direction gets its lower bound plus an equal share of the rest. The implementation also
//! capped queues at 1 MB; [`DEFAULT_MAX_QUEUE`] keeps that cap. When no queue satisfies both
//! bounds, [`Derivation::compromise`] scales the lower bounds down to the upper bound (so the
//! RTT stays tolerable and only bursts suffer), never below [`MIN_QUEUE`] — a proposal, as the
//! paper prescribes nothing for that case.
//!
//! Measured queues ([`fit_measured`], for paths inferred from a capture): NSDI'09 derives
//! queues because the bottleneck's queue is hard to measure from the ends (§2.2.2); where a
//! capture does show it (the RTT spread × C), the measurement is kept as far as the bounds
//! allow: raised to Eq. 2 where it is below, the part above Eq. 2 scaled down where both
//! together exceed Eq. 4; a direction without a measurement takes the derived queue, or
//! what Eq. 4 leaves beside the measured one if that is less. \[P\]

use crate::time::Duration;
use crate::units::Rate;

/// The NSDI'09 implementation's queue cap.
pub const DEFAULT_MAX_QUEUE: u64 = 1_000_000;
/// Floor for a compromise queue: two full-size packets, so one burst of two is not dropped.
pub const MIN_QUEUE: u64 = 3_000;

/// Inputs of Eq. 2 and Eq. 4 for one path.
#[derive(Clone, Copy, Debug)]
pub struct PathBoundsInput {
    /// ABW in the two directions, in the order the path was given (a→b, b→a).
    pub abw: [Rate; 2],
    /// Bottleneck capacity in the two directions.
    pub capacity: [Rate; 2],
    pub rtt_base: Duration,
    /// Maximum TCP window in bytes.
    pub wmax: u64,
    /// Foreground flows expected in each direction (Eq. 2 sums over them); at least 1.
    pub flows: [u32; 2],
}

/// The bounds for one path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// Eq. 2 per direction, bytes.
    pub lower: [u64; 2],
    /// Eq. 4: the largest total q_a→b + q_b→a in bytes; negative when even an empty queue
    /// makes the RTT exceed w_max/ABW_f.
    pub upper_total: f64,
    /// Index of the paper's "forward" direction (higher ABW).
    pub forward: usize,
}

/// Queue sizes chosen from the bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Derivation {
    pub bounds: Bounds,
    /// Bytes per direction.
    pub queue: [u64; 2],
    /// Whether `queue` satisfies both Eq. 2 and Eq. 4.
    pub feasible: bool,
    /// Whether the 1 MB cap (or the configured cap) lowered a queue.
    pub capped: bool,
}

impl Derivation {
    /// True when the bounds could not both be met and `queue` is the best compromise.
    pub fn compromise(&self) -> bool {
        !self.feasible
    }
}

/// Eq. 2 for one direction: Σ_f min(w_f, w_max) with n flows sharing `abw`.
pub fn lower_bound(abw: Rate, rtt_base: Duration, wmax: u64, flows: u32) -> u64 {
    let n = flows.max(1) as u64;
    let bdp_total = abw.bytes_in(rtt_base);
    let per_flow = (bdp_total / n).min(wmax);
    per_flow * n
}

/// Eq. 4 with C the capacity of the forward direction (the paper sets both equal).
pub fn upper_total(abw_forward: Rate, capacity: Rate, rtt_base: Duration, wmax: u64) -> f64 {
    if abw_forward.bps() == 0 {
        return f64::INFINITY;
    }
    let tolerable = wmax as f64 * 8.0 / abw_forward.as_f64();
    capacity.as_f64() / 8.0 * (tolerable - rtt_base.as_secs_f64())
}

pub fn bounds(input: &PathBoundsInput) -> Bounds {
    let forward = if input.abw[1] > input.abw[0] { 1 } else { 0 };
    let lower = [0, 1].map(|d| lower_bound(input.abw[d], input.rtt_base, input.wmax, input.flows[d]));
    let upper_total = upper_total(input.abw[forward], input.capacity[forward], input.rtt_base, input.wmax);
    Bounds { lower, upper_total, forward }
}

/// Picks the queue size of each direction; `max_queue` caps each direction (1 MB in the paper).
pub fn derive(input: &PathBoundsInput, max_queue: u64) -> Derivation {
    let b = bounds(input);
    // Each lower bound may approach u64::MAX (billions of flows of a huge window): sums are
    // taken in f64 or saturate.
    let lower_sum = b.lower[0] as f64 + b.lower[1] as f64;
    let (mut queue, feasible) = if b.upper_total >= lower_sum {
        let half = b.upper_total / 2.0;
        if half >= b.lower[0] as f64 && half >= b.lower[1] as f64 {
            ([half as u64, half as u64], true)
        } else {
            let spare = (b.upper_total - lower_sum) / 2.0;
            ([b.lower[0].saturating_add(spare as u64), b.lower[1].saturating_add(spare as u64)], true)
        }
    } else {
        let scale = if lower_sum > 0.0 { (b.upper_total / lower_sum).max(0.0) } else { 0.0 };
        ([0, 1].map(|d| ((b.lower[d] as f64 * scale) as u64).max(MIN_QUEUE)), false)
    };
    let mut capped = false;
    for q in &mut queue {
        if *q > max_queue {
            *q = max_queue;
            capped = true;
        }
    }
    // A cap below Eq. 2 makes the result infeasible too.
    let feasible = feasible && queue[0] >= b.lower[0] && queue[1] >= b.lower[1];
    Derivation { bounds: b, queue, feasible, capped }
}

/// Measured queue sizes brought within the bounds ([`fit_measured`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredFit {
    pub bounds: Bounds,
    /// Bytes per direction, or `None` when no queue satisfies both bounds (leave the queue
    /// to [`derive()`]'s compromise).
    pub queue: Option<[u64; 2]>,
    /// Per direction: raised to Eq. 2's lower bound.
    pub raised: [bool; 2],
    /// Whether the part above Eq. 2 was scaled down to fit Eq. 4.
    pub lowered: bool,
    /// Per direction: no measurement, the derived queue taken.
    pub derived: [bool; 2],
}

/// Fits measured queue sizes (bytes per direction; `None` where not measured) to Eq. 2 and
/// Eq. 4 (module doc).
pub fn fit_measured(input: &PathBoundsInput, measured: [Option<u64>; 2], max_queue: u64) -> MeasuredFit {
    let b = bounds(input);
    let derived = derive(input, max_queue);
    // An unmeasured direction takes the derived queue, or what Eq. 4 leaves beside the
    // measured one if that is less (but not less than its Eq. 2 bound, below).
    let mut q = [0, 1].map(|d| match (measured[d], measured[1 - d]) {
        (Some(m), _) => m,
        (None, Some(other)) => derived.queue[d].min((b.upper_total - other as f64).max(0.0) as u64),
        (None, None) => derived.queue[d],
    });
    let raised = [0, 1].map(|d| measured[d].is_some() && q[d] < b.lower[d]);
    for (q, lower) in q.iter_mut().zip(b.lower) {
        *q = (*q).max(lower);
    }
    // Each lower bound may approach u64::MAX (billions of flows of a huge window): sums are
    // taken in f64 or saturate.
    let lower_sum = b.lower[0] as f64 + b.lower[1] as f64;
    let total = (q[0] + q[1]) as f64;
    let mut lowered = false;
    let queue = if total <= b.upper_total {
        Some(q)
    } else if lower_sum <= b.upper_total {
        // Scale the part above Eq. 2 so that the total meets Eq. 4.
        let k = (b.upper_total - lower_sum) / (total - lower_sum);
        lowered = true;
        Some([0, 1].map(|d| b.lower[d] + ((q[d] - b.lower[d]) as f64 * k) as u64))
    } else {
        None
    };
    MeasuredFit { bounds: b, queue, raised, lowered, derived: measured.map(|m| m.is_none()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A measured queue within the bounds is kept; one below Eq. 2 is raised to it; two that
    /// exceed Eq. 4 together keep their Eq. 2 part and share the rest; an unmeasured
    /// direction takes the derived queue; an infeasible path gets none.
    #[test]
    fn measured_queues_are_fitted_to_the_bounds() {
        // Figure 1's path at 100 Mbit/s: lower 25 000 B each, upper 400 000 B in total.
        let fit = fit_measured(&fig1(100), [Some(80_000), Some(10_000)], DEFAULT_MAX_QUEUE);
        assert_eq!(fit.queue, Some([80_000, 25_000]));
        assert_eq!((fit.raised, fit.lowered), ([false, true], false));
        let fit = fit_measured(&fig1(100), [Some(500_000), Some(100_000)], DEFAULT_MAX_QUEUE);
        // 350 000 B above the lower bounds to share in the ratio 475:75.
        let q = fit.queue.unwrap();
        assert!(fit.lowered && q[0] + q[1] <= 400_000 && q[0] + q[1] >= 399_998, "{q:?}");
        assert_eq!(q[0], 25_000 + (475_000.0 * 350_000.0 / 550_000.0) as u64);
        let fit = fit_measured(&fig1(100), [Some(80_000), None], DEFAULT_MAX_QUEUE);
        assert_eq!((fit.queue, fit.derived), (Some([80_000, 200_000]), [false, true]));
        // Beside a large measurement, the unmeasured direction gets what Eq. 4 leaves.
        let fit = fit_measured(&fig1(100), [Some(300_000), None], DEFAULT_MAX_QUEUE);
        assert_eq!((fit.queue, fit.lowered), (Some([300_000, 100_000]), false));
        let fit = fit_measured(&fig1(100), [None, Some(390_000)], DEFAULT_MAX_QUEUE);
        // Too large for Eq. 4 beside the other's Eq. 2 bound: that bound, and the rest.
        assert_eq!((fit.queue, fit.raised, fit.lowered), (Some([25_000, 375_000]), [false, false], true));
        assert_eq!(fit_measured(&fig1(10), [Some(80_000), Some(80_000)], DEFAULT_MAX_QUEUE).queue, None);
    }

    fn fig1(capacity_mbps: u64) -> PathBoundsInput {
        PathBoundsInput {
            abw: [Rate::from_mbps(10); 2],
            capacity: [Rate::from_mbps(capacity_mbps); 2],
            rtt_base: Duration::from_millis(20),
            wmax: 65_000,
            flows: [1, 1],
        }
    }

    #[test]
    fn figure1_lower_bound_is_the_bdp_and_upper_grows_with_capacity() {
        // BDP = 10 Mbit/s × 20 ms = 25 000 B (below w_max).
        let b = bounds(&fig1(100));
        assert_eq!(b.lower, [25_000, 25_000]);
        // Eq. 4 by hand: C/8 · (65 000·8/10e6 − 0.020) = 12.5e6 · 0.032 = 400 000 B.
        assert!((b.upper_total - 400_000.0).abs() < 1.0, "{}", b.upper_total);
    }

    #[test]
    fn figure1_has_no_feasible_queue_when_capacity_is_near_abw() {
        assert!(!derive(&fig1(10), DEFAULT_MAX_QUEUE).feasible);
        // The curves cross where C·0.032/8 = 50 000 B, i.e. C = 12.5 Mbit/s.
        assert!(!derive(&fig1(12), DEFAULT_MAX_QUEUE).feasible);
        assert!(derive(&fig1(13), DEFAULT_MAX_QUEUE).feasible);
        let d = derive(&fig1(100), DEFAULT_MAX_QUEUE);
        assert_eq!(d.queue, [200_000, 200_000], "equal split of Eq. 4");
    }

    #[test]
    fn window_caps_the_lower_bound() {
        // 100 Mbit/s × 100 ms = 1.25 MB per flow, but w_max = 64 KB.
        assert_eq!(lower_bound(Rate::from_mbps(100), Duration::from_millis(100), 64_000, 3), 192_000);
    }

    #[test]
    fn asymmetric_path_uses_the_higher_abw_as_forward() {
        let i = PathBoundsInput {
            abw: [Rate::from_kbps(3_000), Rate::from_kbps(10_000)],
            capacity: [Rate::from_mbps(100); 2],
            rtt_base: Duration::from_millis(30),
            wmax: 65_535,
            flows: [1, 1],
        };
        let b = bounds(&i);
        assert_eq!(b.forward, 1);
        let expected = 100e6 / 8.0 * (65_535.0 * 8.0 / 10e6 - 0.030);
        assert!((b.upper_total - expected).abs() < 1.0);
    }
}
