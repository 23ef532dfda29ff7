//! Round-trip time estimation and the retransmission timeout: RFC 6298, or Linux's variant
//! of it ([`RtoStyle`]).
//!
//! This module owns SRTT, RTTVAR, the RTO and its exponential back-off. It does not decide
//! which segments yield samples (Karn's rule lives with the scoreboard, which knows what was
//! retransmitted) or when the timer runs (the endpoint).
//!
//! Linux (`tcp_rtt_estimator` and `__tcp_set_rto` in `net/ipv4/tcp_input.c`, `tcp_bound_rto`
//! in `include/net/tcp.h`) keeps SRTT with the same gain (1/8) but differs in the variance
//! term: `mdev` (4·mean deviation, gain 1/4) gains only 1/32 of a deviation when the RTT
//! fell (its Eifel-like rule); `rttvar` is the largest `mdev` of the current round trip
//! (`mdev_max`, decaying by a quarter of the gap at each round trip, a round ending when
//! SND.UNA passes the SND.NXT at its start), and never below `tcp_rto_min` (200 ms): the
//! floor applies to the variance term, so RTO = SRTT + rttvar ≥ SRTT + 200 ms, where RFC
//! 6298 clamps the RTO itself to 200 ms. The first sample sets mdev = 2·R, so the first RTO
//! is R + max(2·R, 200 ms). The maximum is `TCP_RTO_MAX`, 120 s. Linux keeps microseconds
//! and arms its timers in jiffies (1 ms at HZ = 1000); this estimator keeps nanoseconds.
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

/// How the RTO follows the RTT samples (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RtoStyle {
    /// RFC 6298 §2: RTO = max(SRTT + max(G, 4·RTTVAR), min_rto).
    #[default]
    Rfc6298,
    /// Linux's `tcp_rtt_estimator` and `__tcp_set_rto`: RTO = SRTT + rttvar, rttvar the
    /// round trip's largest 4·mdev and at least min_rto.
    Linux,
}

/// Linux's variance state (`tcp_sock`'s `mdev_us`, `mdev_max_us`, `rttvar_us`, `rtt_seq`),
/// in nanoseconds; `mdev` and the others are 4·mean deviation, as Linux scales them.
#[derive(Clone, Copy, Debug, Default)]
struct LinuxVar {
    mdev: u64,
    mdev_max: u64,
    rttvar: u64,
    /// SND.NXT when the current measuring round began.
    rtt_seq: u64,
}

/// RTT and RTO state for one connection.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    style: RtoStyle,
    srtt: Option<Duration>,
    rttvar: Duration,
    linux: LinuxVar,
    /// RTO before back-off, clamped to [min_rto, max_rto].
    base: Duration,
    /// Number of doublings since the last valid sample (RFC 6298 (5.5)).
    backoff: u32,
    min_rto: Duration,
    max_rto: Duration,
}

impl RttEstimator {
    pub fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        Self::with_style(RtoStyle::Rfc6298, initial_rto, min_rto, max_rto)
    }

    pub fn with_style(style: RtoStyle, initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator {
            style,
            srtt: None,
            rttvar: Duration::ZERO,
            linux: LinuxVar::default(),
            base: initial_rto.min(max_rto),
            backoff: 0,
            min_rto,
            max_rto,
        }
    }

    /// Takes one valid sample (RFC 6298 (2.2)/(2.3)); clears the back-off, since RFC 6298
    /// §5 lets a fresh measurement collapse a backed-off RTO. `una` and `nxt` are SND.UNA
    /// and SND.NXT after the ACK, which Linux's estimator uses to tell round trips apart.
    pub fn on_sample(&mut self, r: Duration, una: u64, nxt: u64) {
        if self.style == RtoStyle::Linux {
            return self.on_sample_linux(r, una, nxt);
        }
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

    /// `tcp_rtt_estimator` and `__tcp_set_rto` (Linux 6.x), in nanoseconds.
    fn on_sample_linux(&mut self, r: Duration, una: u64, nxt: u64) {
        let m = r.as_nanos().max(1) as i64;
        let rto_min = self.min_rto.as_nanos();
        let v = &mut self.linux;
        let srtt = match self.srtt {
            Some(srtt) => {
                let s = srtt.as_nanos() as i64;
                let mut err = m - s;
                let srtt = s + err / 8;
                let mdev = v.mdev as i64;
                if err < 0 {
                    // The RTT fell: a finer gain (1/32) on the deviation.
                    err = -err - mdev / 4;
                    if err > 0 {
                        err /= 8;
                    }
                } else {
                    err -= mdev / 4;
                }
                v.mdev = (mdev + err).max(0) as u64;
                if v.mdev > v.mdev_max {
                    v.mdev_max = v.mdev;
                    v.rttvar = v.rttvar.max(v.mdev_max);
                }
                if una > v.rtt_seq {
                    // A round trip ended: let rttvar decay towards the round's maximum.
                    if v.mdev_max < v.rttvar {
                        v.rttvar -= (v.rttvar - v.mdev_max) / 4;
                    }
                    v.rtt_seq = nxt;
                    v.mdev_max = rto_min;
                }
                srtt.max(1) as u64
            }
            None => {
                v.mdev = 2 * m as u64;
                v.rttvar = v.mdev.max(rto_min);
                v.mdev_max = v.rttvar;
                v.rtt_seq = nxt;
                m as u64
            }
        };
        self.srtt = Some(Duration::from_nanos(srtt));
        self.rttvar = Duration::from_nanos(v.rttvar / K);
        self.base = Duration::from_nanos(srtt + v.rttvar).min(self.max_rto);
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
    /// RTTVAR (RFC 6298); with Linux's estimator, its rttvar divided by 4.
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
        e.on_sample(Duration::from_millis(100), 0, 0);
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(e.rttvar(), Duration::from_millis(50));
        // 100 + 4·50 = 300 ms
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn later_samples_use_alpha_and_beta() {
        let mut e = est();
        e.on_sample(Duration::from_millis(100), 0, 0);
        e.on_sample(Duration::from_millis(200), 0, 0);
        // RTTVAR = 3/4·50 + 1/4·100 = 62.5; SRTT = 7/8·100 + 1/8·200 = 112.5
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
    }

    #[test]
    fn min_rto_and_granularity_bound_from_below() {
        let mut e = est();
        for _ in 0..100 {
            e.on_sample(Duration::from_millis(10), 0, 0);
        }
        assert_eq!(e.rto(), Duration::from_millis(200));
        let mut e = RttEstimator::new(Duration::from_secs(1), Duration::from_micros(1), Duration::from_secs(60));
        for _ in 0..200 {
            e.on_sample(Duration::from_millis(10), 0, 0);
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
        e.on_sample(Duration::from_millis(100), 0, 0);
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn syn_timeout_restart_applies_only_without_a_sample() {
        let mut e = est();
        e.on_timeout();
        e.restart_after_syn_timeout(Duration::from_secs(3));
        assert_eq!(e.rto(), Duration::from_secs(3));
        e.on_sample(Duration::from_millis(100), 0, 0);
        e.restart_after_syn_timeout(Duration::from_secs(3));
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn linux_rto_is_srtt_plus_a_variance_floored_at_min_rto() {
        let ms = Duration::from_millis;
        let mut e = RttEstimator::with_style(RtoStyle::Linux, Duration::from_secs(1), ms(200), Duration::from_secs(120));
        assert_eq!(e.rto(), Duration::from_secs(1));
        // First sample R: mdev = 2R, rttvar = max(2R, 200 ms): 60 + 200, 150 + 300.
        e.on_sample(ms(60), 1, 10);
        assert_eq!(e.rto(), ms(260));
        let mut big = RttEstimator::with_style(RtoStyle::Linux, Duration::from_secs(1), ms(200), Duration::from_secs(120));
        big.on_sample(ms(150), 1, 10);
        assert_eq!(big.rto(), ms(450));
        // A steady 60 ms: the RTO stays SRTT + 200 ms, where RFC 6298's would fall to 200 ms.
        let mut una = 1;
        for _ in 0..100 {
            una += 10;
            e.on_sample(ms(60), una, una + 10);
        }
        assert_eq!(e.srtt(), Some(ms(60)));
        assert_eq!(e.rto(), ms(260));
        let mut rfc = est();
        for _ in 0..100 {
            rfc.on_sample(ms(60), 0, 0);
        }
        assert_eq!(rfc.rto(), ms(200));
    }

    #[test]
    fn linux_rttvar_follows_the_rounds_largest_deviation_and_decays_slowly() {
        let ms = Duration::from_millis;
        let mut e = RttEstimator::with_style(RtoStyle::Linux, Duration::from_secs(1), ms(10), Duration::from_secs(120));
        e.on_sample(ms(100), 1, 100);
        assert_eq!(e.rto(), ms(300)); // 100 + 2·100
        // Within the round (SND.UNA not past 100): a sample 100 ms above SRTT raises mdev to
        // 3/4·200 + 100 = 250, above rttvar 200; SRTT = 100 + 100/8 = 112.5.
        e.on_sample(ms(200), 50, 150);
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
        // A lower RTT gains only 1/32: 250 + (|50 − 112.5| − 62.5)… ≤ 0 → mdev 250 − 0.
        e.on_sample(ms(50), 60, 150);
        assert!(e.rto() >= ms(250), "{:?}", e.rto());
        // The next round ends the first: rttvar decays by a quarter of its gap to the round's
        // maximum (reset to the floor at each round's end).
        let before = e.rto();
        for i in 0..40 {
            e.on_sample(ms(100), 200 + i * 100, 300 + i * 100);
        }
        assert!(e.rto() < before && e.rto() >= ms(100) + ms(10), "{:?} -> {:?}", before, e.rto());
    }
}
