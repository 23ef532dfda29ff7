//! Round-trip time estimation and the retransmission timeout, RFC 6298.
//!
//! This module owns SRTT, RTTVAR, the RTO and its exponential back-off. It does not decide
//! which segments yield samples (Karn's rule lives with the scoreboard, which knows what was
//! retransmitted) or when the timer runs (the endpoint).
//!
//! Constants (RFC 6298 §2): α = 1/8, β = 1/4, K = 4. The clock granularity G is 1 ms:
//! the model's clock is exact to the nanosecond, but G bounds the variance term from below,
//! and 1 ms is the granularity of Linux's jiffies at HZ=1000, the stack simulated paths are
//! compared with. Deviations, both configurable: the minimum RTO defaults to 200 ms as in
//! Linux and ns-2 instead of RFC 6298 (2.4)'s 1 s; the maximum is `max_rto` (RFC 6298 (2.5)
//! asks for at least 60 s).
//!
//! All arithmetic is in integer nanoseconds, so a run is bit-for-bit reproducible.

use pathtwin_core::time::Duration;

/// RFC 6298 §2: the variance multiplier.
const K: u64 = 4;
/// Clock granularity G (see the module doc).
pub const CLOCK_GRANULARITY: Duration = Duration::from_millis(1);

/// RFC 6298 state for one connection.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    /// RTO before back-off, clamped to [min_rto, max_rto].
    base: Duration,
    /// Number of doublings since the last valid sample (RFC 6298 (5.5)).
    backoff: u32,
    min_rto: Duration,
    max_rto: Duration,
}

impl RttEstimator {
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            base: initial_rto.min(max_rto),
            backoff: 0,
            min_rto,
            max_rto,
        }
    }

    /// Takes one valid sample (RFC 6298 (2.2)/(2.3)); clears the back-off, since RFC 6298
    /// §5 lets a fresh measurement collapse a backed-off RTO.
    pub fn on_sample(&mut self, r: Duration) {
        let r_ns = r.as_nanos();
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = Duration::from_nanos(r_ns / 2);
            }
            Some(srtt) => {
                let s = srtt.as_nanos();
                let err = s.abs_diff(r_ns);
                // RTTVAR <- (1 - β)·RTTVAR + β·|SRTT - R'|, then SRTT <- (1 - α)·SRTT + α·R'.
                self.rttvar = Duration::from_nanos((3 * self.rttvar.as_nanos() + err) / 4);
                self.srtt = Some(Duration::from_nanos((7 * s + r_ns) / 8));
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        let var = Duration::from_nanos(K.saturating_mul(self.rttvar.as_nanos())).max(CLOCK_GRANULARITY);
        self.base = (srtt + var).max(self.min_rto).min(self.max_rto);
        self.backoff = 0;
    }

    /// The timer expired: double the RTO (RFC 6298 (5.5)), up to `max_rto`.
    pub fn on_timeout(&mut self) {
        if self.rto() < self.max_rto {
            self.backoff += 1;
        }
    }

    /// RFC 6298 (5.7): after a SYN timed out and no sample was taken, data transmission
    /// starts with this RTO (3 s in the RFC).
    pub fn restart_after_syn_timeout(&mut self, rto: Duration) {
        if self.srtt.is_none() {
            self.base = rto.max(self.min_rto).min(self.max_rto);
            self.backoff = 0;
        }
    }

    /// The current RTO, back-off included.
    pub fn rto(&self) -> Duration {
        let ns = self.base.as_nanos().checked_shl(self.backoff).filter(|v| v >> self.backoff == self.base.as_nanos());
        match ns {
            Some(ns) => Duration::from_nanos(ns).min(self.max_rto),
            None => self.max_rto,
        }
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }
    /// Doublings applied since the last valid sample.
    pub fn backoff(&self) -> u32 {
        self.backoff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> RttEstimator {
        RttEstimator::new(Duration::from_secs(1), Duration::from_millis(200), Duration::from_secs(60))
    }

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = est();
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(Duration::from_millis(100));
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(e.rttvar(), Duration::from_millis(50));
        // 100 + 4·50 = 300 ms
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn later_samples_use_alpha_and_beta() {
        let mut e = est();
        e.on_sample(Duration::from_millis(100));
        e.on_sample(Duration::from_millis(200));
        // RTTVAR = 3/4·50 + 1/4·100 = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
    }

    #[test]
    fn min_rto_and_granularity_bound_from_below() {
        let mut e = est();
        for _ in 0..100 {
            e.on_sample(Duration::from_millis(10));
        }
        assert_eq!(e.rto(), Duration::from_millis(200));
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::from_micros(1), Duration::from_secs(60));
        for _ in 0..200 {
            e.on_sample(Duration::from_millis(10));
        }
        // RTTVAR decays to zero, so RTO = SRTT + G.
        assert_eq!(e.rto(), Duration::from_millis(11));
    }

    #[test]
    fn backoff_doubles_up_to_max_and_a_sample_collapses_it() {
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::from_millis(200), Duration::from_secs(10));
        let mut seen = vec![e.rto().as_nanos() / 1_000_000_000];
        for _ in 0..6 {
            e.on_timeout();
            seen.push(e.rto().as_nanos() / 1_000_000_000);
        }
        assert_eq!(seen, [1, 2, 4, 8, 10, 10, 10]);
        e.on_sample(Duration::from_millis(100));
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn syn_timeout_restart_applies_only_without_a_sample() {
        let mut e = est();
        e.on_timeout();
        e.restart_after_syn_timeout(Duration::from_secs(3));
        assert_eq!(e.rto(), Duration::from_secs(3));
        e.on_sample(Duration::from_millis(100));
        e.restart_after_syn_timeout(Duration::from_secs(3));
        assert_eq!(e.rto(), Duration::from_millis(300));
    }
}
