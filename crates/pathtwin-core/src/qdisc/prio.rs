//! Strict priority: FIFO bands served in order of [`PacketMeta::priority`], band 0 first;
//! a band is served only while every band before it is empty. Monaco's routers need it: its
//! out-of-band control packets (band 0) must skip the data queue (ACC paper §III-B).
//!
//! Band 0 is the paper's "separate dedicated high priority queue": it has a buffer of its
//! own of the configured size, so control packets are not dropped because data filled the
//! router (a shared buffer lost Monaco's probes whenever its flows overflowed the data
//! queue, and with them the feedback that would have drained it). Bands 1 and up share the
//! configured limit, as one data buffer: an arrival that would exceed its buffer is dropped
//! (drop-tail, no pushing out of lower bands). Bands above [`BANDS`] − 1 share the last
//! band. Placeholders are band 1, as data.

use super::{Backlog, Qdisc, Queued};
use crate::packet::PacketMeta;
use crate::time::Instant;
use crate::units::QueueLimit;
use crate::Rng;
use std::collections::VecDeque;

/// Bands: 0 (control), 1 (data, the default of every packet), 2 (background).
pub const BANDS: usize = 3;

pub struct StrictPriority<P> {
    bands: [VecDeque<Queued<P>>; BANDS],
    /// Everything queued, all bands.
    backlog: Backlog,
    /// Band 0 alone, which has its own buffer.
    control: Backlog,
    limit: QueueLimit,
}

impl<P> StrictPriority<P> {
    pub fn new(limit: QueueLimit) -> Self {
        StrictPriority { bands: Default::default(), backlog: Backlog::default(), control: Backlog::default(), limit }
    }

    /// Items waiting in `band`.
    pub fn band_len(&self, band: usize) -> usize {
        self.bands[band].len()
    }
}

impl<P: PacketMeta + Send + Sync> Qdisc<P> for StrictPriority<P> {
    fn enqueue(&mut self, _now: Instant, item: Queued<P>, _rng: &mut Rng) -> Result<(), Queued<P>> {
        let band = (item.priority as usize).min(BANDS - 1);
        let buffer = if band == 0 {
            self.control
        } else {
            Backlog { packets: self.backlog.packets - self.control.packets, bytes: self.backlog.bytes - self.control.bytes }
        };
        if buffer.would_exceed(self.limit, item.wire_len) {
            return Err(item);
        }
        self.backlog.add(item.wire_len);
        if band == 0 {
            self.control.add(item.wire_len);
        }
        self.bands[band].push_back(item);
        Ok(())
    }

    fn dequeue(&mut self, _now: Instant) -> Option<Queued<P>> {
        let band = self.bands.iter().position(|b| !b.is_empty())?;
        let item = self.bands[band].pop_front()?;
        self.backlog.remove(item.wire_len);
        if band == 0 {
            self.control.remove(item.wire_len);
        }
        Some(item)
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
        "prio"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Mark;
    use crate::qdisc::testing::{packet, Pkt};
    use rand::SeedableRng;

    /// A 100-byte packet in `band`.
    fn item(band: u8) -> Queued<Pkt> {
        let p = packet(0, Mark::Unmarked, false);
        Queued { packet: Some(Pkt { len: 100, ect: false, ce: false }), wire_len: 100, priority: band, ..p }
    }

    #[test]
    fn lower_bands_are_served_first_and_fifo_within_a_band() {
        let mut q = StrictPriority::new(QueueLimit::Packets(10));
        let mut rng = Rng::seed_from_u64(1);
        for band in [1, 1, 2, 0, 1, 0, 7] {
            q.enqueue(Instant::ZERO, item(band), &mut rng).unwrap();
        }
        let order: Vec<u8> = std::iter::from_fn(|| q.dequeue(Instant::ZERO)).map(|i| i.priority).collect();
        assert_eq!(order, vec![0, 0, 1, 1, 1, 2, 7], "band 7 shares the last band");
    }

    #[test]
    fn band_0_has_its_own_buffer_and_the_data_bands_share_one() {
        let mut q = StrictPriority::new(QueueLimit::Packets(2));
        let mut rng = Rng::seed_from_u64(1);
        q.enqueue(Instant::ZERO, item(1), &mut rng).unwrap();
        q.enqueue(Instant::ZERO, item(2), &mut rng).unwrap();
        assert!(q.enqueue(Instant::ZERO, item(1), &mut rng).is_err(), "bands 1 and 2 share the limit");
        q.enqueue(Instant::ZERO, item(0), &mut rng).expect("full data buffer, control still admitted");
        q.enqueue(Instant::ZERO, item(0), &mut rng).unwrap();
        assert!(q.enqueue(Instant::ZERO, item(0), &mut rng).is_err(), "band 0's own buffer is full");
        assert_eq!(q.backlog(), Backlog { packets: 4, bytes: 400 });
        assert_eq!(q.dequeue(Instant::ZERO).unwrap().priority, 0);
        q.enqueue(Instant::ZERO, item(0), &mut rng).expect("room again in band 0");
        assert!(q.enqueue(Instant::ZERO, item(1), &mut rng).is_err(), "control leaving frees no data room");
    }
}
