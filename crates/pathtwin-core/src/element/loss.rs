//! Random loss: drops each packet independently with probability p, from the element's own
//! seeded RNG (so a run is reproducible and another seed gives another loss pattern).
//! Zero delay: a packet that survives leaves at the time it arrived.

use crate::time::Instant;
use crate::units::Fraction;
use crate::Rng;
use rand::Rng as _;
use crate::element::Passthrough;

pub struct RandomLoss<P> {
    probability: f64,
    rng: Rng,
    pending: Passthrough<P>,
    arrivals: u64,
    drops: u64,
}

impl<P> RandomLoss<P> {
    pub fn new(probability: Fraction, rng: Rng) -> Self {
        RandomLoss { probability: probability.get(), rng, pending: Passthrough::default(), arrivals: 0, drops: 0 }
    }

    /// Returns the packet if it was lost.
    pub fn push(&mut self, at: Instant, pkt: P) -> Option<P> {
        self.arrivals += 1;
        if self.probability > 0.0 && self.rng.gen::<f64>() < self.probability {
            self.drops += 1;
            Some(pkt)
        } else {
            self.pending.push(at, pkt);
            None
        }
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        self.pending.next_wakeup()
    }

    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        self.pending.poll_output(now)
    }

    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    pub fn drops(&self) -> u64 {
        self.drops
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}
