//! A small virtual-time harness for two endpoints, used only by the tests.
//!
//! Side 0 is the client (`connect`, ISN 0, so its data starts at sequence 1), side 1 the
//! server (`listen`, ISN 1 000 000). Each direction is a FIFO link: an optional drop filter,
//! then an optional bottleneck of `rate_bps` with a DropTail limit in packets (counting the
//! one in transmission), then a fixed one-way delay plus an optional per-segment extra delay
//! (which reorders segments). Instead of dropping, a direction can mark ECN-capable
//! segments CE: chosen ones through a mark filter, or every one that finds at least a
//! threshold of packets in the bottleneck (a step marker, as RED with ECN at min = max).
//! Packet size on the wire is the payload
//! plus TCP header (with options) plus a 20-byte IPv4 header. The loop handles one thing at
//! a time — an arrival or an endpoint timer, arrivals first on ties — and after each one
//! drains both endpoints' `poll_transmit` and `poll_event`, as a driver must.
#![allow(dead_code)]

use pathtwin_core::time::{Duration, Instant};
use pathtwin_tcp::{Ecn, Endpoint, Event, Segment, TcpConfig};
use std::collections::{BTreeSet, VecDeque};

pub const IP_HEADER: u64 = 20;
pub const SERVER_ISN: u64 = 1_000_000;

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
pub fn at_ms(v: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(v)
}
pub fn wire_bytes(seg: &Segment) -> u64 {
    seg.len as u64 + seg.header_bytes() as u64 + IP_HEADER
}
/// Sequence number of the client's `i`-th full data segment.
pub fn data_seq(i: u64, mss: u64) -> u64 {
    1 + i * mss
}

#[derive(Clone, Copy, Debug)]
pub struct LinkCfg {
    pub delay: Duration,
    pub rate_bps: Option<u64>,
    pub queue_limit: Option<usize>,
}

impl LinkCfg {
    pub fn delay(delay: Duration) -> Self {
        LinkCfg { delay, rate_bps: None, queue_limit: None }
    }
    pub fn bottleneck(delay: Duration, rate_bps: u64, queue_limit: usize) -> Self {
        LinkCfg { delay, rate_bps: Some(rate_bps), queue_limit: Some(queue_limit) }
    }
}

/// Decides whether a segment offered to a link is dropped.
pub type DropFn = Box<dyn FnMut(&Segment) -> bool>;
/// Extra propagation delay for a segment leaving the bottleneck; a segment delayed more
/// than the ones behind it arrives after them.
pub type DelayFn = Box<dyn FnMut(&Segment) -> Duration>;

/// Delays the first transmission of the data segments with these 0-based indices (in the
/// order data segments are offered, retransmissions included) by the given extra time.
pub fn delay_data_indices(list: &[(u64, Duration)]) -> DelayFn {
    let list = list.to_vec();
    let mut n = 0;
    Box::new(move |seg| {
        if seg.len == 0 {
            return Duration::ZERO;
        }
        n += 1;
        list.iter().find(|(i, _)| *i == n - 1).map_or(Duration::ZERO, |(_, d)| *d)
    })
}

/// Decides whether an ECN-capable segment offered to a link is marked CE (not-ECT segments
/// are never marked). The same shape as [`DropFn`], so the `drop_*` selectors serve.
pub type MarkFn = DropFn;

/// Drops the data segments (payload > 0) with these 0-based indices in the order they are
/// offered to the link, retransmissions included.
pub fn drop_data_indices(indices: &[u64]) -> DropFn {
    let set: BTreeSet<u64> = indices.iter().copied().collect();
    let mut n = 0;
    Box::new(move |seg| {
        if seg.len == 0 {
            return false;
        }
        n += 1;
        set.contains(&(n - 1))
    })
}

/// Drops the first `times` data segments starting at sequence number `seq`.
pub fn drop_seq_times(seq: u64, times: u32) -> DropFn {
    let mut left = times;
    Box::new(move |seg| {
        if seg.len > 0 && seg.seq == seq && left > 0 {
            left -= 1;
            true
        } else {
            false
        }
    })
}

/// Drops the first `times` segments carrying SYN.
pub fn drop_syn_times(times: u32) -> DropFn {
    let mut left = times;
    Box::new(move |seg| {
        if seg.flags.syn() && left > 0 {
            left -= 1;
            true
        } else {
            false
        }
    })
}

/// Drops each segment with probability `p`, from a seeded 64-bit LCG (Knuth's MMIX
/// constants), so runs are reproducible without a dependency.
pub fn drop_random(seed: u64, p: f64) -> DropFn {
    let mut state = seed;
    Box::new(move |_| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) < p
    })
}

struct Dir {
    cfg: LinkCfg,
    in_flight: VecDeque<(Instant, Segment)>,
    /// Transmission end times of packets still in the bottleneck.
    departures: VecDeque<Instant>,
    busy_until: Instant,
    drop: Option<DropFn>,
    mark: Option<MarkFn>,
    /// Mark ECT packets CE that find at least this many packets in the bottleneck.
    mark_threshold: Option<usize>,
    ce_marks: u64,
    extra_delay: Option<DelayFn>,
    filter_drops: u64,
    queue_drops: u64,
    delivered_wire_bytes: u64,
}

/// Cwnd, ssthresh and recovery state of the client after an input, when they changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CcSample {
    pub t: Instant,
    pub cwnd: u64,
    pub ssthresh: u64,
    pub in_recovery: bool,
}

pub struct Sim {
    pub now: Instant,
    pub ep: [Endpoint; 2],
    dirs: [Dir; 2],
    /// Record every segment each side sends (before any drop) and the client's cc trace.
    pub record: bool,
    pub sent: [Vec<(Instant, Segment)>; 2],
    pub trace: Vec<CcSample>,
    pub events: [Vec<(Instant, Event)>; 2],
    /// Close a side's sending direction when its peer's FIN arrives.
    pub close_on_peer_close: [bool; 2],
    /// Inputs handled (arrivals plus timer firings).
    pub steps: u64,
}

impl Sim {
    pub fn new(client: TcpConfig, server: TcpConfig, up: LinkCfg, down: LinkCfg) -> Sim {
        client.validate().unwrap();
        server.validate().unwrap();
        let dir = |cfg| Dir {
            cfg,
            in_flight: VecDeque::new(),
            departures: VecDeque::new(),
            busy_until: Instant::ZERO,
            drop: None,
            mark: None,
            mark_threshold: None,
            ce_marks: 0,
            extra_delay: None,
            filter_drops: 0,
            queue_drops: 0,
            delivered_wire_bytes: 0,
        };
        Sim {
            now: Instant::ZERO,
            ep: [Endpoint::connect(client, Instant::ZERO, 0), Endpoint::listen(server, SERVER_ISN)],
            dirs: [dir(up), dir(down)],
            record: true,
            sent: [Vec::new(), Vec::new()],
            trace: Vec::new(),
            events: [Vec::new(), Vec::new()],
            close_on_peer_close: [true, true],
            steps: 0,
        }
    }

    /// Symmetric path: same delay both ways, no bottleneck.
    pub fn symmetric(cfg: TcpConfig, one_way: Duration) -> Sim {
        Sim::new(cfg.clone(), cfg, LinkCfg::delay(one_way), LinkCfg::delay(one_way))
    }

    /// Installs a drop filter on the direction leaving `side`.
    pub fn set_drop(&mut self, side: usize, f: DropFn) {
        self.dirs[side].drop = Some(f);
    }

    /// Installs a CE-mark filter on the direction leaving `side`.
    pub fn set_mark(&mut self, side: usize, f: MarkFn) {
        self.dirs[side].mark = Some(f);
    }

    /// Marks ECT packets leaving `side` CE when they find `packets` or more in the
    /// bottleneck (instead of dropping them, until the queue limit).
    pub fn set_mark_threshold(&mut self, side: usize, packets: usize) {
        self.dirs[side].mark_threshold = Some(packets);
    }

    /// Segments leaving `side` that were marked CE.
    pub fn ce_marks(&self, side: usize) -> u64 {
        self.dirs[side].ce_marks
    }

    /// Installs an extra-delay function on the direction leaving `side`.
    pub fn set_extra_delay(&mut self, side: usize, f: DelayFn) {
        self.dirs[side].extra_delay = Some(f);
    }

    pub fn filter_drops(&self, side: usize) -> u64 {
        self.dirs[side].filter_drops
    }
    pub fn queue_drops(&self, side: usize) -> u64 {
        self.dirs[side].queue_drops
    }
    /// Packets in the bottleneck of the link leaving `side` now, the one in transmission
    /// included (what the DropTail limit counts).
    pub fn queue_len(&self, side: usize) -> usize {
        self.dirs[side].departures.iter().filter(|&&t| t > self.now).count()
    }
    /// Wire bytes that have arrived at the far end of the link leaving `side`.
    pub fn delivered_wire_bytes(&self, side: usize) -> u64 {
        self.dirs[side].delivered_wire_bytes
    }

    fn offer(&mut self, side: usize, mut seg: Segment) {
        let now = self.now;
        if self.record {
            self.sent[side].push((now, seg));
        }
        let d = &mut self.dirs[side];
        if let Some(f) = d.drop.as_mut() {
            if f(&seg) {
                d.filter_drops += 1;
                return;
            }
        }
        if let Some(f) = d.mark.as_mut() {
            if f(&seg) && seg.ecn.is_capable() {
                seg.ecn = Ecn::Ce;
                d.ce_marks += 1;
            }
        }
        let leaves = match d.cfg.rate_bps {
            None => now,
            Some(rate) => {
                while d.departures.front().is_some_and(|&t| t <= now) {
                    d.departures.pop_front();
                }
                if d.cfg.queue_limit.is_some_and(|limit| d.departures.len() >= limit) {
                    d.queue_drops += 1;
                    return;
                }
                if d.mark_threshold.is_some_and(|k| d.departures.len() >= k) && seg.ecn == Ecn::Ect0 {
                    seg.ecn = Ecn::Ce;
                    d.ce_marks += 1;
                }
                let tx_ns = (wire_bytes(&seg) as u128 * 8 * 1_000_000_000 / rate as u128) as u64;
                d.busy_until = d.busy_until.max(now) + Duration::from_nanos(tx_ns);
                d.departures.push_back(d.busy_until);
                d.busy_until
            }
        };
        let extra = d.extra_delay.as_mut().map_or(Duration::ZERO, |f| f(&seg));
        let arrives = leaves + d.cfg.delay + extra;
        // Kept in arrival order; equal times keep the order they were sent in.
        let at = d.in_flight.partition_point(|(t, _)| *t <= arrives);
        d.in_flight.insert(at, (arrives, seg));
    }

    /// Drains both endpoints after an input: events (the application reacts), then
    /// segments, until neither has anything left.
    pub fn flush(&mut self) {
        loop {
            let mut progress = false;
            for side in 0..2 {
                while let Some(ev) = self.ep[side].poll_event() {
                    self.events[side].push((self.now, ev));
                    if ev == Event::PeerClosed && self.close_on_peer_close[side] {
                        self.ep[side].close();
                    }
                }
                while let Some(seg) = self.ep[side].poll_transmit(self.now) {
                    self.offer(side, seg);
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        if self.record {
            let c = &self.ep[0];
            let s = CcSample { t: self.now, cwnd: c.cwnd(), ssthresh: c.ssthresh(), in_recovery: c.in_recovery() };
            let key = |c: &CcSample| (c.cwnd, c.ssthresh, c.in_recovery);
            if self.trace.last().map(key) != Some(key(&s)) {
                self.trace.push(s);
            }
        }
    }

    /// Runs until nothing is left to do or the next thing would happen after `end`; the
    /// clock then reads `end`.
    pub fn run_until(&mut self, end: Instant) {
        self.flush();
        loop {
            // Candidates in tie-break order: arrivals before timers, side 0 before side 1.
            let cands = [
                self.dirs[0].in_flight.front().map(|x| x.0),
                self.dirs[1].in_flight.front().map(|x| x.0),
                self.ep[0].poll_timeout(),
                self.ep[1].poll_timeout(),
            ];
            let Some((which, t)) =
                cands.iter().enumerate().filter_map(|(i, t)| t.map(|t| (i, t))).min_by_key(|&(i, t)| (t, i))
            else {
                break;
            };
            if t > end {
                break;
            }
            self.now = self.now.max(t);
            self.steps += 1;
            match which {
                0 | 1 => {
                    let (_, seg) = self.dirs[which].in_flight.pop_front().unwrap();
                    self.dirs[which].delivered_wire_bytes += wire_bytes(&seg);
                    self.ep[1 - which].handle_segment(self.now, &seg);
                }
                side => self.ep[side - 2].handle_timeout(self.now),
            }
            self.flush();
        }
        self.now = self.now.max(end);
    }

    /// Runs for `d` more virtual time.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    /// Time of the first event `ev` on `side`.
    pub fn event_time(&self, side: usize, ev: Event) -> Option<Instant> {
        self.events[side].iter().find(|(_, e)| *e == ev).map(|(t, _)| *t)
    }

    /// Send times of data segments from `side` starting at `seq`.
    pub fn send_times_of(&self, side: usize, seq: u64) -> Vec<Instant> {
        self.sent[side].iter().filter(|(_, s)| s.seq == seq && s.len > 0).map(|(t, _)| *t).collect()
    }
}

/// (start, end) of each recovery episode in the client's trace.
pub fn recovery_episodes(sim: &Sim) -> Vec<(Instant, Instant)> {
    let mut out = Vec::new();
    let mut start = None;
    for s in &sim.trace {
        match (start, s.in_recovery) {
            (None, true) => start = Some(s.t),
            (Some(t0), false) => {
                out.push((t0, s.t));
                start = None;
            }
            _ => {}
        }
    }
    out
}
