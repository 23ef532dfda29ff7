//! Token buckets: the two-colour [`TokenBucket`] marker and the exact integer [`Tokens`]
//! counter that it and the three-colour meters (`tcm`) fill continuously.
//!
//! Per-interval form (the thesis's marker, ch. 3: 296 K byte tokens every 400 ms): the bucket
//! is reset to B at every multiple of T from time zero — unused tokens do not carry over — and
//! a packet is IN if the tokens cover its length (tokens −= length), otherwise OUT. Its long-run
//! IN rate for an overloaded source is B/T. Continuous form: tokens accrue at r up to the depth
//! b, starting full; long-run IN rate r. Packet lengths are IP bytes (RFC 2697 §3's B).

use crate::time::{Duration, Instant};
use crate::units::{Rate, Size};

/// Token units per byte: a rate in bit/s times an interval in ns is `bits · 10⁹`, so one byte
/// is `8 · 10⁹` units and filling is exact integer arithmetic (no drift over long runs).
const UNITS_PER_BYTE: u128 = 8 * 1_000_000_000;

/// A token counter with a ceiling, filled at a rate, in exact integer units.
#[derive(Clone, Debug)]
pub(crate) struct Tokens {
    level: u128,
    depth: u128,
}

impl Tokens {
    /// A full bucket of `depth` bytes (RFC 2697 §3 and RFC 2698 §3 start full).
    pub(crate) fn full(depth: Size) -> Tokens {
        let depth = depth.bytes() as u128 * UNITS_PER_BYTE;
        Tokens { level: depth, depth }
    }

    /// Adds `units`; returns what did not fit (srTCM's overflow into the excess bucket).
    pub(crate) fn add(&mut self, units: u128) -> u128 {
        let room = self.depth - self.level;
        let taken = units.min(room);
        self.level += taken;
        units - taken
    }

    /// Whether at least `len` bytes of tokens are there.
    pub(crate) fn covers(&self, len: u32) -> bool {
        self.level >= len as u128 * UNITS_PER_BYTE
    }

    /// Removes `len` bytes of tokens; the caller checked [`covers`](Self::covers).
    pub(crate) fn take(&mut self, len: u32) {
        self.level -= len as u128 * UNITS_PER_BYTE;
    }

    /// Whole bytes of tokens (for tests and inspection).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        (self.level / UNITS_PER_BYTE) as u64
    }
}

/// Units a rate delivers between `from` and `to` (zero if `to` is not later).
pub(crate) fn units_between(rate: Rate, from: Instant, to: Instant) -> u128 {
    rate.bps() as u128 * to.saturating_since(from).as_nanos() as u128
}

#[derive(Clone, Debug)]
enum Form {
    /// Reset to `bucket` bytes at every multiple of `interval`.
    PerInterval { bucket: u64, interval: Duration, epoch: u64, tokens: u64 },
    /// Filled at `rate` up to its depth.
    Continuous { rate: Rate, tokens: Tokens, last: Instant },
}

/// The two-colour token bucket marker: green (IN) while tokens last, else red (OUT).
#[derive(Clone, Debug)]
pub struct TokenBucket {
    form: Form,
}

impl TokenBucket {
    /// B bytes of tokens refreshed every T (the thesis: B = 296 KB, T = 400 ms); T > 0.
    pub fn per_interval(bucket: Size, interval: Duration) -> TokenBucket {
        assert!(interval.as_nanos() > 0, "validated: interval > 0");
        TokenBucket { form: Form::PerInterval { bucket: bucket.bytes(), interval, epoch: 0, tokens: bucket.bytes() } }
    }

    /// Tokens at `rate` up to `depth`, starting full.
    pub fn continuous(rate: Rate, depth: Size) -> TokenBucket {
        TokenBucket { form: Form::Continuous { rate, tokens: Tokens::full(depth), last: Instant::ZERO } }
    }

    pub(crate) fn color(&mut self, now: Instant, len: u32) -> super::Color {
        use super::Color::{Green, Red};
        match &mut self.form {
            Form::PerInterval { bucket, interval, epoch, tokens } => {
                let k = now.as_nanos() / interval.as_nanos();
                if k != *epoch {
                    *epoch = k;
                    *tokens = *bucket;
                }
                if *tokens >= len as u64 {
                    *tokens -= len as u64;
                    Green
                } else {
                    Red
                }
            }
            Form::Continuous { rate, tokens, last } => {
                tokens.add(units_between(*rate, *last, now));
                *last = now.max(*last);
                if tokens.covers(len) {
                    tokens.take(len);
                    Green
                } else {
                    Red
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Color;
    use super::*;

    /// Offers `len`-byte packets at `offered` for `secs`; returns IN bytes per second.
    fn in_rate(tb: &mut TokenBucket, offered: Rate, len: u32, secs: u64) -> f64 {
        let gap = offered.transmit_time(len as u64);
        let end = Instant::ZERO + Duration::from_secs(secs);
        let (mut t, mut in_bytes) = (Instant::ZERO, 0u64);
        while t < end {
            if tb.color(t, len) == Color::Green {
                in_bytes += len as u64;
            }
            t += gap;
        }
        in_bytes as f64 / secs as f64
    }

    #[test]
    fn per_interval_in_rate_of_an_overloaded_source_is_b_over_t() {
        // The thesis: 296 KB every 400 ms = 740 KB/s = 5.92 Mbit/s; offered 20 Mbit/s.
        let mut tb = TokenBucket::per_interval(Size::from_bytes(296_000), Duration::from_millis(400));
        let r = in_rate(&mut tb, Rate::from_mbps(20), 1500, 100);
        // An interval can strand up to one packet's worth of tokens: ≤ 1500/296000 ≈ 0.5 %.
        assert!((r / 740_000.0 - 1.0).abs() < 0.006, "IN rate {r} B/s, expected 740000");
    }

    #[test]
    fn continuous_in_rate_of_an_overloaded_source_is_r() {
        let mut tb = TokenBucket::continuous(Rate::from_kbps(5_920), Size::from_bytes(30_000));
        let r = in_rate(&mut tb, Rate::from_mbps(20), 1500, 100);
        // r plus the initial full bucket spread over the run: 740000 + 30000/100.
        assert!((r - 740_300.0).abs() < 740_000.0 * 0.003, "IN rate {r} B/s");
    }

    #[test]
    fn a_source_under_the_rate_is_all_in() {
        let mut per = TokenBucket::per_interval(Size::from_bytes(296_000), Duration::from_millis(400));
        // 5 Mbit/s = 625 KB/s < 740 KB/s, but a 400 ms interval gets at most 250 KB < 296 KB.
        assert_eq!(in_rate(&mut per, Rate::from_mbps(5), 1000, 20), 625_000.0);
        let mut cont = TokenBucket::continuous(Rate::from_mbps(6), Size::from_bytes(3000));
        assert_eq!(in_rate(&mut cont, Rate::from_mbps(5), 1000, 20), 625_000.0);
    }

    #[test]
    fn per_interval_tokens_do_not_carry_over() {
        let mut tb = TokenBucket::per_interval(Size::from_bytes(1000), Duration::from_millis(100));
        // Idle for many intervals, then a burst: only one bucket's worth is IN.
        let t = Instant::ZERO + Duration::from_millis(950);
        assert_eq!(tb.color(t, 1000), Color::Green);
        assert_eq!(tb.color(t, 1), Color::Red);
        // The next interval starts at 1000 ms, not 100 ms after the burst.
        assert_eq!(tb.color(Instant::ZERO + Duration::from_millis(999), 1), Color::Red);
        assert_eq!(tb.color(Instant::ZERO + Duration::from_millis(1000), 1000), Color::Green);
    }

    #[test]
    fn continuous_fill_is_exact_and_capped_at_the_depth() {
        let mut t = Tokens::full(Size::from_bytes(100));
        t.take(100);
        // 8 bit/s for 1 s is one byte.
        assert_eq!(t.add(units_between(Rate::from_bps(8), Instant::ZERO, Instant::ZERO + Duration::from_secs(1))), 0);
        assert_eq!(t.bytes(), 1);
        let over = t.add(200 * UNITS_PER_BYTE);
        assert_eq!((t.bytes(), over / UNITS_PER_BYTE), (100, 101));
    }
}
