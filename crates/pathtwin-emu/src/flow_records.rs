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

use pathtwin_core::time::{Duration, Instant};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::packet::FiveTuple;
use crate::spill::SpillThread;

/// A record idle this long is finished (see the module doc).
pub const IDLE_FINISH: Duration = Duration::from_secs(125);

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

    /// Every record, finished and live, in order of first packet (then of tuple, for a
    /// stable order between records that began together).
    pub fn all(&mut self) -> Vec<(FiveTuple, FlowCounters)> {
        let mut all = self.finished.read_all();
        all.extend(self.live.iter().map(|(t, c)| (*t, *c)));
        all.sort_by_key(|(t, c)| (c.first_ns, t.src, t.dst, t.src_port, t.dst_port));
        all
    }
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
        let all = r.all();
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
        assert_eq!((r.live(), r.all().len()), (1, 1));
        assert_eq!(r.all()[0].1.packets_in, 6);
    }

    #[test]
    fn a_tuple_that_sends_again_after_finishing_begins_a_new_record() {
        let mut r = FlowRecords::default();
        r.count_in(0, tuple(1000), at_s(0), 1, 100, 40);
        r.sweep(at_s(200));
        r.count_in(0, tuple(1000), at_s(300), 2, 200, 80);
        let all = r.all();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].1.first_ns, all[0].1.packets_in), (0, 1));
        assert_eq!((all[1].1.first_ns, all[1].1.packets_in), (300_000_000_000, 2));
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
