//! The `packet_flows` records: per direction of a 5-tuple, what entered the model and what
//! left it. Owns the live records, when a record is finished, and where finished ones go.
//!
//! # Why records finish
//! A run with short connections meets a new 5-tuple for each of them (a new ephemeral
//! port), and kept them all in one map for the whole run: an hour-long soak with eight
//! fetching clients would hold hundreds of thousands, the map's memory growing all the way
//! and every doubling of it rehashing the lot on the real-time loop's thread. As a flow
//! exporter does (NetFlow's and IPFIX's "inactive timeout"), a record that has seen no packet
//! for [`IDLE_FINISH`] is finished: it leaves the map for a [`SpillThread`] (a file written
//! off the loop's thread), and the map holds only the flows of the last couple of minutes.
//! A 5-tuple that sends again after that gets a record of its own, beginning then.
//!
//! [`IDLE_FINISH`] is longer than anything that still belongs to a finished TCP connection:
//! Linux's `TCP_TIMEWAIT_LEN` (60 s, in which a lost final ACK brings the peer's FIN again)
//! and `TCP_RTO_MAX` (120 s, the longest a retransmission waits).
//!
//! # In order, without holding them all
//! The table lists records in order of first packet, but they finish in order of last
//! packet. [`FlowRecords::for_each_in_order`] sorts them as an external sort does: runs of
//! [`SORT_RUN`] records sorted in memory, each (when there is more than one) written to a
//! spill file of its own, then merged; memory holds one run and one record per run, not the
//! hour-long soak's 276 586 records (31 MB as records, several times that as a table).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::IpAddr;

use pathtwin_core::table::Cell;
use pathtwin_core::time::{Duration, Instant};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::long_tables::{Groups, Rows};
use crate::packet::FiveTuple;
use crate::spill::{Spill, SpillThread};

/// A record idle this long is finished (see the module doc).
pub const IDLE_FINISH: Duration = Duration::from_secs(125);

/// Records sorted in memory at a time when the records are put in order (see the module doc):
/// 7 MB of them.
pub const SORT_RUN: usize = 1 << 16;

/// How often the live records are looked through for finished ones: an idle record leaves
/// at most this late, and the look (one pass over the live map) stays rare.
const SWEEP_EVERY: Duration = Duration::from_secs(5);

/// One direction of a flow: totals into the model and out of it to the destination.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct FlowCounters {
    pub route: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets_in: u64,
    pub bytes_in: u64,
    pub payload_bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub payload_bytes_out: u64,
}

/// The live records, and the finished ones on their way to a file.
pub struct FlowRecords {
    /// FxHash: looked up once per packet with keys the hosts' own addresses make, not chosen
    /// by an adversary, so SipHash's flooding resistance buys nothing here.
    live: FxHashMap<FiveTuple, FlowCounters>,
    finished: SpillThread<(FiveTuple, FlowCounters)>,
    next_sweep: Instant,
}

impl Default for FlowRecords {
    fn default() -> Self {
        FlowRecords {
            live: FxHashMap::default(),
            finished: SpillThread::new("pathtwin-packet-flows"),
            next_sweep: Instant::ZERO + SWEEP_EVERY,
        }
    }
}

impl FlowRecords {
    /// Counts `count` packets of `tuple` (`bytes` in all, `payload` of it data) entering
    /// `route` at `at`.
    pub fn count_in(&mut self, route: u32, tuple: FiveTuple, at: Instant, count: u64, bytes: u64, payload: u64) {
        let f = self.live.entry(tuple).or_insert(FlowCounters {
            route,
            first_ns: at.as_nanos(),
            last_ns: 0,
            packets_in: 0,
            bytes_in: 0,
            payload_bytes_in: 0,
            packets_out: 0,
            bytes_out: 0,
            payload_bytes_out: 0,
        });
        f.last_ns = at.as_nanos();
        f.packets_in += count;
        f.bytes_in += bytes;
        f.payload_bytes_in += payload;
    }

    /// Counts one packet of `tuple` (`bytes`, `payload` of it data) written to its
    /// destination. Its record is live: a packet's time in the model is far shorter than
    /// [`IDLE_FINISH`].
    pub fn count_out(&mut self, tuple: &FiveTuple, bytes: u64, payload: u64) {
        if let Some(f) = self.live.get_mut(tuple) {
            f.packets_out += 1;
            f.bytes_out += bytes;
            f.payload_bytes_out += payload;
        }
    }

    /// Finishes the records idle for [`IDLE_FINISH`] at `now`, at most every [`SWEEP_EVERY`].
    pub fn sweep(&mut self, now: Instant) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + SWEEP_EVERY;
        let Some(cutoff) = now.as_nanos().checked_sub(IDLE_FINISH.as_nanos()) else { return };
        let finished = &mut self.finished;
        self.live.retain(|tuple, f| {
            let idle = f.last_ns < cutoff;
            if idle {
                finished.push((*tuple, *f));
            }
            !idle
        });
    }

    /// Records still live (not finished).
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Every record, finished and live, in order (see [`FlowRecords::for_each_in_order`]), in
    /// memory.
    pub fn all(&mut self) -> Result<Vec<(FiveTuple, FlowCounters)>, String> {
        let mut all = Vec::new();
        self.for_each_in_order(|t, c| all.push((t, c)))?;
        Ok(all)
    }

    /// Calls `each` with every record, finished and live, in order of first packet (then of
    /// tuple, for a stable order between records that began together), holding at most
    /// [`SORT_RUN`] of them at a time (see the module doc).
    pub fn for_each_in_order(&mut self, each: impl FnMut(FiveTuple, FlowCounters)) -> Result<(), String> {
        self.for_each_in_order_by_runs(SORT_RUN, each)
    }

    fn for_each_in_order_by_runs(&mut self, run: usize, mut each: impl FnMut(FiveTuple, FlowCounters)) -> Result<(), String> {
        let spilling = |e: std::io::Error| format!("sorting packet_flows records through a spill file: {e}");
        let mut runs: Vec<Spill<Record>> = Vec::new();
        let mut chunk: Vec<Record> = Vec::with_capacity(run.min(self.finished_len() + self.live.len()));
        let mut failed: Option<String> = None;
        // A full chunk, sorted, becomes a run on disk.
        let end_run = |chunk: &mut Vec<Record>, runs: &mut Vec<Spill<Record>>| -> std::io::Result<()> {
            chunk.sort_by_key(order);
            let mut spill = Spill::new();
            chunk.drain(..).try_for_each(|r| spill.push(&r))?;
            runs.push(spill);
            Ok(())
        };
        let read = self.finished.for_each(|r| {
            chunk.push(r);
            if chunk.len() >= run && failed.is_none() {
                if let Err(e) = end_run(&mut chunk, &mut runs) {
                    failed = Some(spilling(e));
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        read?;
        for (t, c) in &self.live {
            chunk.push((*t, *c));
            if chunk.len() >= run {
                end_run(&mut chunk, &mut runs).map_err(spilling)?;
            }
        }
        chunk.sort_by_key(order);
        if runs.is_empty() {
            chunk.into_iter().for_each(|(t, c)| each(t, c));
            return Ok(());
        }
        if !chunk.is_empty() {
            end_run(&mut chunk, &mut runs).map_err(spilling)?;
        }
        drop(chunk);
        // The merge: the least head of all runs next; equal keys by run, as a stable sort.
        let mut readers = runs.iter_mut().map(Spill::reader).collect::<std::io::Result<Vec<_>>>().map_err(spilling)?;
        let mut current: Vec<Option<Record>> = vec![None; readers.len()];
        let mut heads = BinaryHeap::new();
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(first) = r.next().transpose().map_err(spilling)? {
                heads.push(Reverse((order(&first), i)));
                current[i] = Some(first);
            }
        }
        while let Some(Reverse((_, i))) = heads.pop() {
            let (t, c) = current[i].take().expect("a head has its record");
            each(t, c);
            if let Some(next) = readers[i].next().transpose().map_err(spilling)? {
                heads.push(Reverse((order(&next), i)));
                current[i] = Some(next);
            }
        }
        Ok(())
    }

    /// Records finished so far (spilled, or on their way).
    fn finished_len(&self) -> usize {
        self.finished.len()
    }
}

/// `packet_flows`' rows ([`pathtwin_core::results::PACKET_FLOWS`]): every record, in order,
/// a row group at a time ([`crate::long_tables`]).
pub struct PacketFlowsRows {
    pub records: FlowRecords,
    /// Each route's source and destination host names, by route index.
    pub route_ends: Vec<(String, String)>,
}

impl Rows for PacketFlowsRows {
    fn rows(&mut self, groups: &mut Groups<'_>) -> Result<(), String> {
        let ends = &self.route_ends;
        self.records.for_each_in_order(|t, c| {
            let (src, dst) = &ends[c.route as usize];
            groups.row(|table| {
                table.push(vec![
                    Cell::S(t.src.to_string()),
                    Cell::S(t.dst.to_string()),
                    Cell::I(t.proto.into()),
                    Cell::I(t.src_port.into()),
                    Cell::I(t.dst_port.into()),
                    Cell::T(src),
                    Cell::T(dst),
                    Cell::I(c.first_ns as i64),
                    Cell::I(c.last_ns as i64),
                    Cell::I(c.packets_in as i64),
                    Cell::I(c.bytes_in as i64),
                    Cell::I(c.payload_bytes_in as i64),
                    Cell::I(c.packets_out as i64),
                    Cell::I(c.bytes_out as i64),
                    Cell::I(c.payload_bytes_out as i64),
                ])
            })
        })
    }
}

/// A record as it is kept and sorted.
type Record = (FiveTuple, FlowCounters);

/// The order of records in the table: first packet, then tuple.
fn order((t, c): &Record) -> (u64, IpAddr, IpAddr, u16, u16) {
    (c.first_ns, t.src, t.dst, t.src_port, t.dst_port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn tuple(port: u16) -> FiveTuple {
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        FiveTuple { src: a, dst: b, proto: 6, src_port: port, dst_port: 80 }
    }

    fn at_s(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }

    #[test]
    fn an_idle_record_leaves_the_map_and_stays_in_the_results() {
        let mut r = FlowRecords::default();
        r.count_in(0, tuple(1000), at_s(1), 3, 3000, 2880);
        r.count_out(&tuple(1000), 1000, 960);
        r.count_in(0, tuple(1001), at_s(100), 1, 60, 0);
        // At 126 s the first has been idle 125 s, the second 26 s.
        r.sweep(at_s(126) + Duration::from_nanos(1));
        assert_eq!(r.live(), 1);
        let all = r.all().unwrap();
        assert_eq!(all.iter().map(|(t, _)| t.src_port).collect::<Vec<_>>(), [1000, 1001]);
        let first = all[0].1;
        assert_eq!((first.packets_in, first.bytes_in, first.packets_out, first.payload_bytes_out), (3, 3000, 1, 960));
    }

    #[test]
    fn a_record_seen_within_the_idle_time_stays_one_record() {
        let mut r = FlowRecords::default();
        for s in (0..600).step_by(100) {
            r.count_in(0, tuple(1000), at_s(s), 1, 100, 40);
            r.sweep(at_s(s + 1));
        }
        assert_eq!((r.live(), r.all().unwrap().len()), (1, 1));
        assert_eq!(r.all().unwrap()[0].1.packets_in, 6);
    }

    #[test]
    fn a_tuple_that_sends_again_after_finishing_begins_a_new_record() {
        let mut r = FlowRecords::default();
        r.count_in(0, tuple(1000), at_s(0), 1, 100, 40);
        r.sweep(at_s(200));
        r.count_in(0, tuple(1000), at_s(300), 2, 200, 80);
        let all = r.all().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].1.first_ns, all[0].1.packets_in), (0, 1));
        assert_eq!((all[1].1.first_ns, all[1].1.packets_in), (300_000_000_000, 2));
    }

    /// Records finished out of order of first packet (long ones late), many runs of them:
    /// the merged order is a plain sort's, every record once.
    #[test]
    fn records_come_in_order_of_first_packet_through_many_sorted_runs() {
        let mut r = FlowRecords::default();
        let mut want = Vec::new();
        // Flow i starts at i s; every third lasts 400 s, the others 1 s.
        for i in 0..2000u64 {
            let port = (i % 60_000) as u16;
            let last = if i % 3 == 0 { i + 400 } else { i + 1 };
            r.count_in(i as u32, tuple(port), at_s(i), 1, 100, 40);
            r.count_in(i as u32, tuple(port), at_s(last), 1, 100, 40);
            r.sweep(at_s(i));
            want.push((i * 1_000_000_000, port));
        }
        assert!(r.finished_len() > 1000 && r.live() > 100, "records both finished and live: {} {}", r.finished_len(), r.live());
        for run in [7, 1000, usize::MAX] {
            let mut got = Vec::new();
            r.for_each_in_order_by_runs(run, |t, c| got.push((c.first_ns, t.src_port))).unwrap();
            assert_eq!(got, want, "runs of {run}");
        }
    }

    #[test]
    fn sweeps_are_rare() {
        let mut r = FlowRecords::default();
        r.count_in(0, tuple(1000), at_s(0), 1, 100, 40);
        r.sweep(at_s(130));
        r.count_in(0, tuple(1001), at_s(1), 1, 100, 40);
        // Idle 130 s, but the last look was under SWEEP_EVERY ago.
        r.sweep(at_s(131));
        assert_eq!(r.live(), 1);
        r.sweep(at_s(136));
        assert_eq!(r.live(), 0);
    }
}
