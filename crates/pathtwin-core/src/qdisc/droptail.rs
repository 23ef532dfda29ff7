//! DropTail: first in, first out; an arrival that would exceed the limit is dropped.
//! The limit counts packets or bytes, as configured.

use super::{Backlog, Qdisc, Queued};
use crate::time::Instant;
use crate::units::QueueLimit;
use crate::Rng;
use std::collections::VecDeque;

pub struct DropTail<P> {
    items: VecDeque<Queued<P>>,
    backlog: Backlog,
    limit: QueueLimit,
    /// Bytes ever enqueued and dequeued, and for each real packet waiting the enqueued-bytes
    /// count when it arrived: together they give the bytes ahead of the oldest real packet
    /// in O(1) (`fifo_head_real`).
    bytes_in: u64,
    bytes_out: u64,
    real_marks: VecDeque<(u64, u32)>,
}

impl<P> DropTail<P> {
    pub fn new(limit: QueueLimit) -> Self {
        DropTail {
            items: VecDeque::new(),
            backlog: Backlog::default(),
            limit,
            bytes_in: 0,
            bytes_out: 0,
            real_marks: VecDeque::new(),
        }
    }
}

impl<P: Send + Sync> Qdisc<P> for DropTail<P> {
    fn enqueue(&mut self, _now: Instant, item: Queued<P>, _rng: &mut Rng) -> Result<(), Queued<P>> {
        if self.backlog.would_exceed(self.limit, item.wire_len) {
            return Err(item);
        }
        self.backlog.add(item.wire_len);
        if !item.is_placeholder() {
            self.real_marks.push_back((self.bytes_in, item.wire_len));
        }
        self.bytes_in += item.wire_len as u64;
        self.items.push_back(item);
        Ok(())
    }

    fn dequeue(&mut self, _now: Instant) -> Option<Queued<P>> {
        let item = self.items.pop_front()?;
        self.backlog.remove(item.wire_len);
        self.bytes_out += item.wire_len as u64;
        if !item.is_placeholder() {
            self.real_marks.pop_front();
        }
        Some(item)
    }

    fn fifo_head_real(&self) -> Option<(u64, u32)> {
        self.real_marks.front().map(|&(mark, len)| (mark - self.bytes_out, len))
    }

    fn pass_through(&mut self, _now: Instant, item: Queued<P>, _rng: &mut Rng) -> Result<Queued<P>, Queued<P>> {
        if Backlog::default().would_exceed(self.limit, item.wire_len) {
            Err(item)
        } else {
            Ok(item)
        }
    }

    fn admits_when_empty(&self, len: u32) -> Option<bool> {
        Some(!Backlog::default().would_exceed(self.limit, len))
    }

    fn backlog(&self) -> Backlog {
        self.backlog
    }

    fn set_limit(&mut self, limit: QueueLimit) {
        self.limit = limit;
    }

    fn limit(&self) -> QueueLimit {
        self.limit
    }

    fn name(&self) -> &'static str {
        "droptail"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Mark;
    use rand::SeedableRng;

    fn item(len: u32) -> Queued<u32> {
        Queued { packet: Some(len), wire_len: len, flow: 0, mark: Mark::Unmarked, priority: 1, enqueued_at: Instant::ZERO }
    }

    #[test]
    fn packet_limit_drops_the_arrival_that_overflows() {
        let mut q = DropTail::new(QueueLimit::Packets(2));
        let mut rng = Rng::seed_from_u64(1);
        assert!(q.enqueue(Instant::ZERO, item(1500), &mut rng).is_ok());
        assert!(q.enqueue(Instant::ZERO, item(40), &mut rng).is_ok());
        assert_eq!(q.enqueue(Instant::ZERO, item(40), &mut rng).unwrap_err().wire_len, 40);
        assert_eq!(q.dequeue(Instant::ZERO).unwrap().wire_len, 1500, "FIFO order");
    }

    #[test]
    fn byte_limit_admits_small_packets_a_large_one_would_not_fit() {
        let mut q = DropTail::new(QueueLimit::Bytes(3000));
        let mut rng = Rng::seed_from_u64(1);
        assert!(q.enqueue(Instant::ZERO, item(1500), &mut rng).is_ok());
        assert!(q.enqueue(Instant::ZERO, item(1400), &mut rng).is_ok());
        assert!(q.enqueue(Instant::ZERO, item(1500), &mut rng).is_err());
        assert!(q.enqueue(Instant::ZERO, item(100), &mut rng).is_ok());
        assert_eq!(q.backlog(), Backlog { packets: 3, bytes: 3000 });
    }
}
