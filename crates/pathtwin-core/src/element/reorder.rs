//! Reordering: each packet, with probability p from the element's own seeded RNG, is held an
//! extra `delay`; the packets behind it that are not held pass it (netem's reordering, made
//! explicit). Zero delay for the others. Output leaves in release-time order, a held packet
//! before one that arrived later at the same release time. Monarch's validation needs paths
//! that reorder one way or the other (Haeberlen et al., IMC 2006, §4.4).

use crate::element::Passthrough;
use crate::time::{Duration, Instant};
use crate::units::Fraction;
use crate::Rng;
use rand::Rng as _;

pub struct Reorder<P> {
    probability: f64,
    delay: Duration,
    rng: Rng,
    /// Held packets: release times rise with arrival times, as the extra delay is fixed.
    held: Passthrough<P>,
    passing: Passthrough<P>,
    arrivals: u64,
    reordered: u64,
}

impl<P> Reorder<P> {
    pub fn new(probability: Fraction, delay: Duration, rng: Rng) -> Self {
        Reorder { probability: probability.get(), delay, rng, held: Passthrough::default(), passing: Passthrough::default(), arrivals: 0, reordered: 0 }
    }

    pub fn push(&mut self, at: Instant, pkt: P) {
        self.arrivals += 1;
        if self.probability > 0.0 && self.rng.gen::<f64>() < self.probability {
            self.reordered += 1;
            self.held.push(at + self.delay, pkt);
        } else {
            self.passing.push(at, pkt);
        }
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        match (self.held.next_wakeup(), self.passing.next_wakeup()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        let held_first = match (self.held.next_wakeup(), self.passing.next_wakeup()) {
            (Some(h), Some(p)) => h <= p,
            (Some(_), None) => true,
            _ => false,
        };
        if held_first {
            self.held.poll_output(now)
        } else {
            self.passing.poll_output(now)
        }
    }

    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    /// Packets held back (each overtaken by whatever arrived within `delay` after it).
    pub fn reordered(&self) -> u64 {
        self.reordered
    }

    pub fn len(&self) -> usize {
        self.held.len() + self.passing.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng_for;

    /// With every packet held, nothing is overtaken; with none, nothing either; with some,
    /// the held ones leave `delay` later, after packets that arrived behind them.
    #[test]
    fn held_packets_are_overtaken_by_those_behind_them() {
        let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
        let mut r: Reorder<u32> = Reorder::new(Fraction::new(0.3).unwrap(), Duration::from_millis(5), rng_for(7, 0));
        for i in 0..100u32 {
            r.push(ms(i as u64), i);
        }
        let mut out = Vec::new();
        while let Some((t, p)) = r.poll_output(ms(1000)) {
            out.push((t, p));
        }
        assert_eq!(out.len(), 100);
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "release times in order");
        // Each held packet left 5 ms after it came, the others at once.
        let held: Vec<u32> = out.iter().filter(|(t, p)| *t == ms(*p as u64 + 5)).map(|&(_, p)| p).collect();
        assert_eq!(held.len() as u64, r.reordered());
        assert!((15..=45).contains(&held.len()), "{} of 100 held at p = 0.3", held.len());
        // A held packet is behind the (up to 5) unheld packets that arrived after it.
        let order: Vec<u32> = out.iter().map(|&(_, p)| p).collect();
        let first_held = held[0];
        let pos = order.iter().position(|&p| p == first_held).unwrap();
        assert!(order[..pos].iter().any(|&p| p > first_held));
    }
}
