//! A log-linear histogram of nanosecond durations, for release lateness (actual write time
//! minus the model's departure time) and similar distributions.
//!
//! Buckets are exact below 64 ns and then have 32 sub-buckets per power of two, so any
//! quantile is reported within 1/32 (3 %) of the true value, from constant memory and an
//! O(1) record — cheap enough to record every packet. The maximum is kept exactly.

/// Sub-buckets per power of two (must be a power of two).
const SUB: u64 = 32;
const SUB_BITS: u32 = SUB.trailing_zeros();

#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; Self::index(u64::MAX) + 1], total: 0, max: 0, sum: 0 }
    }
}

impl Histogram {
    fn index(v: u64) -> usize {
        if v < 2 * SUB {
            return v as usize;
        }
        let msb = 63 - v.leading_zeros(); // ≥ SUB_BITS + 1
        let shift = msb - SUB_BITS;
        let sub = (v >> shift) - SUB; // in 0..SUB
        (2 * SUB + (shift as u64 - 1) * SUB + sub) as usize
    }

    /// The largest value that lands in bucket `i` (quantiles report the upper edge, so
    /// they never understate lateness).
    fn upper(i: usize) -> u64 {
        let i = i as u64;
        if i < 2 * SUB {
            return i;
        }
        let shift = (i - 2 * SUB) / SUB + 1;
        let sub = (i - 2 * SUB) % SUB;
        (((SUB + sub + 1) as u128) << shift).saturating_sub(1).min(u64::MAX as u128) as u64
    }

    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
        self.sum += v as u128;
    }

    pub fn count(&self) -> u64 {
        self.total
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The value at quantile `q` in [0, 1] (upper bucket edge, capped at the maximum);
    /// zero when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }

    /// What was recorded after `earlier`, a copy of this histogram taken before: counts
    /// subtract exactly; the maximum is the upper edge of the highest bucket left (capped at
    /// this histogram's maximum), as the exact one is not kept per interval.
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let counts: Vec<u64> = self.counts.iter().zip(&earlier.counts).map(|(a, b)| a.saturating_sub(*b)).collect();
        let max = counts.iter().rposition(|&c| c > 0).map_or(0, |i| Self::upper(i).min(self.max));
        Histogram { counts, total: self.total.saturating_sub(earlier.total), max, sum: self.sum.saturating_sub(earlier.sum) }
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_holds_only_what_came_after_the_copy() {
        let mut h = Histogram::default();
        for v in 0..1000u64 {
            h.record(v * 1000); // 0 .. 999 µs, uniform
        }
        let before = h.clone();
        for _ in 0..1000 {
            h.record(5_000_000); // then 1000 values of 5 ms
        }
        let window = h.since(&before);
        assert_eq!(window.count(), 1000);
        assert!((window.mean() - 5e6).abs() < 1.0, "{}", window.mean());
        // Every quantile of the window is 5 ms, within the histogram's 1/32 resolution.
        for q in [0.01, 0.5, 0.99] {
            let v = window.quantile(q) as f64;
            assert!((v - 5e6).abs() <= 5e6 / 32.0, "q{q}: {v}");
        }
        assert!(window.max() >= 5_000_000 && window.max() as f64 <= 5e6 * (1.0 + 1.0 / 32.0));
        assert_eq!(h.since(&h).count(), 0);
    }

    #[test]
    fn buckets_are_contiguous_and_monotonic() {
        let mut prev = 0;
        for v in (0..100_000u64).chain([1 << 40, u64::MAX - 1, u64::MAX]) {
            let i = Histogram::index(v);
            assert!(i >= prev || v > 100_000);
            assert!(Histogram::upper(i) >= v, "value {v} above its bucket's edge");
            if i > 0 {
                assert!(Histogram::upper(i - 1) < v, "value {v} belongs in an earlier bucket");
            }
            prev = i;
        }
    }

    #[test]
    fn quantiles_of_a_uniform_sample_are_within_three_percent() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        for (q, exact) in [(0.5, 500_000.0), (0.99, 990_000.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - exact).abs() / exact <= 1.0 / 32.0, "q{q}: {got} vs {exact}");
            assert!(got >= exact);
        }
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert!((h.mean() - 500_005.0).abs() < 1e-6);
    }

    #[test]
    fn empty_and_merged() {
        let mut a = Histogram::default();
        assert_eq!(a.quantile(0.5), 0);
        let mut b = Histogram::default();
        b.record(7);
        a.record(3);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.quantile(0.5), 3);
        assert_eq!(a.max(), 7);
    }
}
