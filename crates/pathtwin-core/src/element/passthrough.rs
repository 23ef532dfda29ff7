//! The output side of a zero-delay element (random loss, markers): packets leave in arrival
//! order at the time they arrived. The element decides what to drop or rewrite on `push`;
//! this only holds the survivors until the driver polls, so that every element follows the
//! same push / next_wakeup / poll_output protocol.

use crate::time::Instant;
use std::collections::VecDeque;

pub struct Passthrough<P> {
    pending: VecDeque<(Instant, P)>,
}

impl<P> Default for Passthrough<P> {
    fn default() -> Self {
        Passthrough { pending: VecDeque::new() }
    }
}

impl<P> Passthrough<P> {
    /// Queues `pkt` to leave at `at` (non-decreasing, as the element protocol requires).
    pub fn push(&mut self, at: Instant, pkt: P) {
        self.pending.push_back((at, pkt));
    }

    /// Packets waiting to be polled.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        self.pending.front().map(|&(t, _)| t)
    }

    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        match self.pending.front() {
            Some(&(t, _)) if t <= now => self.pending.pop_front(),
            _ => None,
        }
    }
}
