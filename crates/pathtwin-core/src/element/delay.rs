//! Delay line: holds every packet for a fixed one-way delay; unbounded, order-preserving.
//! Models the base RTT's share of one direction (propagation, and the queueing of
//! non-bottleneck links, NSDI'09 §2.1).

use crate::time::{Duration, Instant};
use std::collections::VecDeque;

pub struct DelayLine<P> {
    delay: Duration,
    in_flight: VecDeque<(Instant, P)>,
    passed: u64,
}

impl<P> DelayLine<P> {
    pub fn new(delay: Duration) -> Self {
        DelayLine { delay, in_flight: VecDeque::new(), passed: 0 }
    }

    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Accepts a packet at `at`; it leaves at `at + delay`.
    pub fn push(&mut self, at: Instant, pkt: P) {
        self.in_flight.push_back((at + self.delay, pkt));
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        self.in_flight.front().map(|&(t, _)| t)
    }

    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        match self.in_flight.front() {
            Some(&(t, _)) if t <= now => {
                self.passed += 1;
                self.in_flight.pop_front()
            }
            _ => None,
        }
    }

    /// Packets currently inside.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Packets that have left.
    pub fn passed(&self) -> u64 {
        self.passed
    }
}
