//! RED's machinery, shared by [`Red`](super::Red) and RIO/FRIO ([`Rio`](super::Rio)): the
//! exponentially weighted average and its idle-time decay ([`RedAverage`], [`IdleClock`]),
//! one drop curve with its `count` ([`RedCurve`]), and what a verdict does to an arrival
//! (drop, ECN mark, admit) with its per-class statistics ([`AqmStats`]).
//!
//! The equations are Floyd & Jacobson 1993 with ns-2's `queue/red.cc` variants (see the
//! `red` module doc). RIO (Clark & Fang 1998) is two of these curves over two averages,
//! which is why the curve does not own its average: a caller passes the average a class is
//! tested on. This module owns no queue; disciplines own their FIFO and their limit.

use super::{Backlog, Queued};
use crate::packet::{Mark, PacketMeta};
use crate::time::Instant;
use crate::units::{QueueLimit, Rate};
use crate::Rng;
use rand::Rng as _;

use super::RedParams;

/// The drop precedence a discipline files an arrival under. RIO treats unmarked traffic as
/// IN (the `Mark` doc: the conservative choice); RED records its arrivals by the same rule,
/// so its per-class counters show how much traffic a marker put in each class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    In,
    Out,
}

impl Class {
    pub fn of(mark: Mark) -> Class {
        match mark {
            Mark::Out => Class::Out,
            Mark::In | Mark::Unmarked => Class::In,
        }
    }
}

/// What one drop precedence saw at an active queue manager (real packets only: the
/// bandwidth queue counts placeholders itself).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClassStats {
    pub arrivals: u64,
    pub early_drops: u64,
    pub forced_drops: u64,
    pub ecn_marks: u64,
}

impl ClassStats {
    pub fn drops(&self) -> u64 {
        self.early_drops + self.forced_drops
    }
}

/// What an active queue manager did, beyond the queue's own counters: totals, and the same
/// split by drop precedence (`in` includes unmarked traffic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AqmStats {
    pub early_drops: u64,
    pub forced_drops: u64,
    pub ecn_marks: u64,
    #[serde(rename = "in")]
    pub in_class: ClassStats,
    #[serde(rename = "out")]
    pub out_class: ClassStats,
}

/// One arrival's outcome, as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Arrival,
    EarlyDrop,
    ForcedDrop,
    EcnMark,
}

impl AqmStats {
    pub fn record(&mut self, class: Class, outcome: Outcome) {
        let c = match class {
            Class::In => &mut self.in_class,
            Class::Out => &mut self.out_class,
        };
        let (total, per_class) = match outcome {
            Outcome::Arrival => {
                c.arrivals += 1;
                return;
            }
            Outcome::EarlyDrop => (&mut self.early_drops, &mut c.early_drops),
            Outcome::ForcedDrop => (&mut self.forced_drops, &mut c.forced_drops),
            Outcome::EcnMark => (&mut self.ecn_marks, &mut c.ecn_marks),
        };
        *total += 1;
        *per_class += 1;
    }

    /// The class's counters.
    pub fn class(&self, class: Class) -> &ClassStats {
        match class {
            Class::In => &self.in_class,
            Class::Out => &self.out_class,
        }
    }
}

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

/// When a queue last became empty, for ns-2's idle-time estimator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IdleClock {
    since: Option<Instant>,
}

impl IdleClock {
    /// A queue that has been empty since time zero.
    pub fn new() -> Self {
        IdleClock { since: Some(Instant::ZERO) }
    }

    /// The queue is empty from `now`.
    pub fn mark_idle(&mut self, now: Instant) {
        self.since = Some(now);
    }

    /// The queue is busy; nothing to decay at the next arrival.
    #[cfg(test)]
    pub fn mark_busy(&mut self) {
        self.since = None;
    }

    /// At an arrival: the number of mean-size packets the link could have sent since the
    /// queue became empty, `m = idle·C/(8·mean packet)` (0 if it was not empty).
    pub fn take_m(&mut self, now: Instant, capacity: Rate, mean_packet: u32) -> f64 {
        match self.since.take() {
            Some(since) => now.saturating_since(since).as_secs_f64() * capacity.bps() as f64 / (8.0 * mean_packet as f64),
            None => 0.0,
        }
    }
}

impl Default for IdleClock {
    fn default() -> Self {
        Self::new()
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

/// Carries out `verdict` on `item` of drop precedence `class`: admitted items come back as
/// `Ok` (for the caller's FIFO and limit), early drops of ECN-capable packets are marked CE
/// instead when `ecn` is on, other drops come back as `Err`. Placeholders ignore verdicts
/// (see the `red` module doc) and are not counted.
pub fn settle<P: PacketMeta>(verdict: Verdict, mut item: Queued<P>, class: Class, ecn: bool, stats: &mut AqmStats) -> Result<Queued<P>, Queued<P>> {
    if item.is_placeholder() {
        return Ok(item);
    }
    stats.record(class, Outcome::Arrival);
    match verdict {
        Verdict::Admit => Ok(item),
        Verdict::EarlyDrop => match &mut item.packet {
            Some(pkt) if ecn && pkt.ecn_capable() => {
                pkt.set_ce();
                stats.record(class, Outcome::EcnMark);
                Ok(item)
            }
            _ => {
                stats.record(class, Outcome::EarlyDrop);
                Err(item)
            }
        },
        Verdict::ForcedDrop => {
            stats.record(class, Outcome::ForcedDrop);
            Err(item)
        }
    }
}
