//! Strict priority: FIFO bands served in order of [`PacketMeta::priority`], band 0 first;
//! a band is served only while every band before it is empty. Monaco's routers need it: its
//! out-of-band control packets (band 0) must skip the data queue (ACC paper §III-B).
//!
//! One limit applies to all bands together, as a router's shared buffer: an arrival that
//! would exceed it is dropped, whatever its band (drop-tail, no pushing out of lower bands).
//! Bands above [`BANDS`] − 1 share the last band. Placeholders are band 1, as data.

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
    backlog: Backlog,
    limit: QueueLimit,
}

impl<P> StrictPriority<P> {
    pub fn new(limit: QueueLimit) -> Self {
        StrictPriority { bands: Default::default(), backlog: Backlog::default(), limit }
    }

    /// Items waiting in `band`.
    pub fn band_len(&self, band: usize) -> usize {
        self.bands[band].len()
    }
}

impl<P: PacketMeta + Send + Sync> Qdisc<P> for StrictPriority<P> {
    fn enqueue(&mut self, _now: Instant, item: Queued<P>, _rng: &mut Rng) -> Result<(), Queued<P>> {
        if self.backlog.would_exceed(self.limit, item.wire_len) {
            return Err(item);
        }
        self.backlog.add(item.wire_len);
        let band = (item.priority as usize).min(BANDS - 1);
        self.bands[band].push_back(item);
        Ok(())
    }

    fn dequeue(&mut self, _now: Instant) -> Option<Queued<P>> {
        let item = self.bands.iter_mut().find_map(VecDeque::pop_front)?;
        self.backlog.remove(item.wire_len);
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
    use crate::packet::{FlowKey, Mark, TcpFlags};
    use rand::SeedableRng;

    #[derive(Debug)]
    struct Pkt(u8);

    impl PacketMeta for Pkt {
        fn wire_len(&self) -> u32 {
            100
        }
        fn payload_len(&self) -> u32 {
            60
        }
        fn flow_key(&self) -> FlowKey {
            0
        }
        fn tcp_flags(&self) -> Option<TcpFlags> {
            None
        }
    }

    fn item(band: u8) -> Queued<Pkt> {
        Queued { packet: Some(Pkt(band)), wire_len: 100, flow: 0, mark: Mark::Unmarked, priority: band, enqueued_at: Instant::ZERO }
    }

    #[test]
    fn lower_bands_are_served_first_and_fifo_within_a_band() {
        let mut q = StrictPriority::new(QueueLimit::Packets(10));
        let mut rng = Rng::seed_from_u64(1);
        for band in [1, 1, 2, 0, 1, 0, 7] {
            q.enqueue(Instant::ZERO, item(band), &mut rng).unwrap();
        }
        let order: Vec<u8> = std::iter::from_fn(|| q.dequeue(Instant::ZERO)).map(|i| i.packet.unwrap().0).collect();
        assert_eq!(order, vec![0, 0, 1, 1, 1, 2, 7], "band 7 shares the last band");
    }

    #[test]
    fn one_limit_for_all_bands() {
        let mut q = StrictPriority::new(QueueLimit::Packets(2));
        let mut rng = Rng::seed_from_u64(1);
        q.enqueue(Instant::ZERO, item(1), &mut rng).unwrap();
        q.enqueue(Instant::ZERO, item(1), &mut rng).unwrap();
        assert!(q.enqueue(Instant::ZERO, item(0), &mut rng).is_err(), "a full buffer drops even band 0");
        assert_eq!(q.backlog(), Backlog { packets: 2, bytes: 200 });
    }
}
