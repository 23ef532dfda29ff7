//! RED's equations, shared by [`Red`](super::Red) and RIO/FRIO ([`Rio`](super::Rio)): the
//! exponentially weighted average ([`RedAverage`]) and one drop curve with its `count`
//! ([`RedCurve`]).
//!
//! The equations are Floyd & Jacobson 1993 with ns-2's `queue/red.cc` variants (see the
//! `red` module doc). RIO (Clark & Fang 1998) is two of these curves over two averages,
//! which is why the curve does not own its average: a caller passes the average a class is
//! tested on. The queue under the curves is `aqm`'s.

use super::{Backlog, RedParams};
use crate::time::Instant;
use crate::units::QueueLimit;
use crate::Rng;
use rand::Rng as _;

/// The instantaneous queue in a threshold's unit (packets or bytes).
pub fn in_units(unit: QueueLimit, b: Backlog) -> f64 {
    match unit {
        QueueLimit::Packets(_) => b.packets as f64,
        QueueLimit::Bytes(_) => b.bytes as f64,
    }
}

fn threshold(t: QueueLimit) -> f64 {
    match t {
        QueueLimit::Packets(n) | QueueLimit::Bytes(n) => n as f64,
    }
}

/// RED's average queue: `avg ← (1 − w_q)·avg + w_q·q` per arrival.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RedAverage {
    pub avg: f64,
}

impl RedAverage {
    pub fn update(&mut self, w_q: f64, q: f64) {
        self.avg = (1.0 - w_q) * self.avg + w_q * q;
    }

    /// Decays as if `m` empty arrivals had been seen: `avg ← (1 − w_q)^m·avg`.
    pub fn decay(&mut self, w_q: f64, m: f64) {
        self.avg *= (1.0 - w_q).powf(m);
    }
}

/// What RED decides for one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Admit,
    EarlyDrop,
    ForcedDrop,
}

/// One RED drop curve: thresholds, max_p, gentle, wait, byte mode, and `count`, the
/// arrivals tested since the last early drop. Tested against an average the caller keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct RedCurve {
    pub p: RedParams,
    pub count: i64,
    next_adapt: Option<Instant>,
}

impl RedCurve {
    pub fn new(p: RedParams) -> Self {
        RedCurve { p, count: -1, next_adapt: None }
    }

    /// p_b for `avg` (gentle region included); `None` above the forced-drop threshold,
    /// `Some(0)` below min_th.
    pub fn base_probability(&self, avg: f64) -> Option<f64> {
        let (lo, hi) = (threshold(self.p.min_th), threshold(self.p.max_th));
        if avg < lo {
            Some(0.0)
        } else if avg < hi {
            Some(self.p.max_p * (avg - lo) / (hi - lo))
        } else if self.p.gentle && avg < 2.0 * hi {
            Some(self.p.max_p + (1.0 - self.p.max_p) * (avg - hi) / hi)
        } else {
            None
        }
    }

    /// p_a from p_b and the arrivals since the last early drop (`count`, already counting
    /// this arrival), with or without ns-2's `wait`.
    pub fn actual_probability(p_b: f64, count: i64, wait: bool) -> f64 {
        let c = count as f64 * p_b;
        if wait {
            if c < 1.0 {
                0.0
            } else if c < 2.0 {
                p_b / (2.0 - c)
            } else {
                1.0
            }
        } else if c < 1.0 {
            p_b / (1.0 - c)
        } else {
            1.0
        }
    }

    /// The decision for an arrival of `wire_len` bytes tested on `avg`; updates `count`.
    pub fn judge(&mut self, avg: f64, wire_len: u32, rng: &mut Rng) -> Verdict {
        match self.base_probability(avg) {
            Some(p_b) if p_b <= 0.0 => {
                self.count = -1;
                Verdict::Admit
            }
            Some(mut p_b) => {
                self.count += 1;
                if self.p.byte_mode {
                    p_b *= wire_len as f64 / self.p.mean_packet as f64;
                }
                let p_a = Self::actual_probability(p_b, self.count, self.p.wait);
                if rng.gen::<f64>() < p_a {
                    self.count = 0;
                    Verdict::EarlyDrop
                } else {
                    Verdict::Admit
                }
            }
            None => {
                self.count = 0;
                Verdict::ForcedDrop
            }
        }
    }

    /// Adaptive RED: every `interval`, max_p moves toward keeping `avg` in the middle fifth
    /// of [min_th, max_th] (Floyd, Gummadi, Shenker 2001).
    pub fn adapt(&mut self, now: Instant, avg: f64) {
        let next = *self.next_adapt.get_or_insert(now + self.p.interval);
        if now < next {
            return;
        }
        self.next_adapt = Some(now + self.p.interval);
        let (lo, hi) = (threshold(self.p.min_th), threshold(self.p.max_th));
        let (band_lo, band_hi) = (lo + 0.4 * (hi - lo), lo + 0.6 * (hi - lo));
        if avg > band_hi && self.p.max_p <= 0.5 {
            self.p.max_p += (self.p.max_p / 4.0).min(0.01);
        } else if avg < band_lo && self.p.max_p >= 0.01 {
            self.p.max_p *= 0.9;
        }
    }
}

