//! Bounded-memory sample summaries: exact count, min, max and mean, plus a fixed-size
//! uniform reservoir (Vitter's Algorithm R) for the median and the histogram mode.
//!
//! Owns the rule that a connection's memory does not grow with its length: a million RTT
//! samples cost the same as [`RESERVOIR`] of them. The reservoir's random choices come from
//! a xorshift generator seeded by the caller (the connection's index), so the same capture
//! always gives the same output.

/// Samples kept per summary; exact statistics below this count, a uniform sample above.
pub const RESERVOIR: usize = 256;

/// Streaming summary of a set of non-negative samples.
#[derive(Debug, Clone)]
pub struct Summary {
    count: u64,
    min: f64,
    max: f64,
    sum: f64,
    kept: Vec<f64>,
    rng: u64,
}

impl Summary {
    pub fn new(seed: u64) -> Self {
        Summary { count: 0, min: f64::INFINITY, max: 0.0, sum: 0.0, kept: Vec::new(), rng: seed | 1 }
    }

    pub fn add(&mut self, x: f64) {
        self.count += 1;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        self.sum += x;
        if self.kept.len() < RESERVOIR {
            if self.kept.is_empty() {
                // Most summaries of a busy capture hold tens of samples: start there rather
                // than growing from four, one reallocation at a time.
                self.kept.reserve(RESERVOIR / 4);
            }
            self.kept.push(x);
        } else {
            // Algorithm R: keep the new sample with probability RESERVOIR / count.
            let j = self.next_rand() % self.count;
            if (j as usize) < RESERVOIR {
                self.kept[j as usize] = x;
            }
        }
    }

    fn next_rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    pub fn count(&self) -> u64 {
        self.count
    }
    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min)
    }
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// Median of the kept samples (exact below [`RESERVOIR`] samples).
    pub fn median(&self) -> Option<f64> {
        median(&mut self.kept.clone())
    }

    /// The mode of a log-binned histogram with `bins_per_decade` bins, refined to the median
    /// of the samples in the winning bin; ties go to the bin nearest the overall median.
    pub fn log_mode(&self, bins_per_decade: f64) -> Option<f64> {
        let bin = |x: f64| (x.log10() * bins_per_decade).floor() as i64;
        let mut positive: Vec<f64> = self.kept.iter().copied().filter(|&x| x > 0.0).collect();
        let med_bin = bin(median(&mut positive)?);
        let mut bins: Vec<i64> = positive.iter().map(|&x| bin(x)).collect();
        bins.sort_unstable();
        let (mut best, mut best_n) = (bins[0], 0usize);
        let mut i = 0;
        while i < bins.len() {
            let j = bins[i..].partition_point(|&b| b == bins[i]) + i;
            let n = j - i;
            if n > best_n || (n == best_n && (bins[i] - med_bin).abs() < (best - med_bin).abs()) {
                best = bins[i];
                best_n = n;
            }
            i = j;
        }
        positive.retain(|&x| bin(x) == best);
        median(&mut positive)
    }
}

/// Median of `xs` (mean of the middle two for even lengths); `None` when empty. Reorders
/// `xs`. A selection, not a sort: linear time, which matters when every connection of a
/// large capture asks for a few medians at the end.
pub fn median(xs: &mut [f64]) -> Option<f64> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let (below, &mut mid, _) = xs.select_nth_unstable_by(n / 2, |a, b| a.total_cmp(b));
    if n % 2 == 1 {
        return Some(mid);
    }
    // The lower middle is the largest of the elements selected below the upper one.
    let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lower + mid) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_statistics_below_reservoir() {
        let mut s = Summary::new(1);
        for x in [5.0, 1.0, 3.0, 2.0, 4.0] {
            s.add(x);
        }
        assert_eq!((s.min(), s.max(), s.mean(), s.median()), (Some(1.0), Some(5.0), Some(3.0), Some(3.0)));
    }

    /// Selection gives the sorted definition's median, odd and even lengths alike.
    #[test]
    fn median_matches_sorted_definition() {
        let mut state = 0x9e37_79b9_u64;
        for n in 1..60 {
            let mut xs: Vec<f64> = (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 50) as f64
                })
                .collect();
            let mut sorted = xs.clone();
            sorted.sort_by(|a, b| a.total_cmp(b));
            let expected = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
            assert_eq!(median(&mut xs), Some(expected), "n={n}");
        }
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn mode_ignores_outliers() {
        let mut s = Summary::new(7);
        // 40 samples near 10 Mb/s, 10 scattered outliers on both sides.
        for i in 0..40 {
            s.add(10e6 * (1.0 + (i as f64 - 20.0) * 0.001));
        }
        for i in 1..=5 {
            s.add(1e6 * i as f64);
            s.add(50e6 * i as f64);
        }
        let m = s.log_mode(20.0).unwrap();
        assert!((m / 10e6 - 1.0).abs() < 0.02, "{m}");
    }

    #[test]
    fn reservoir_keeps_memory_bounded_and_median_close() {
        let mut s = Summary::new(3);
        for i in 0..100_000u64 {
            s.add((i % 1000) as f64);
        }
        assert_eq!(s.kept.len(), RESERVOIR);
        assert_eq!(s.count(), 100_000);
        let med = s.median().unwrap();
        assert!((med - 500.0).abs() < 150.0, "{med}");
    }
}
