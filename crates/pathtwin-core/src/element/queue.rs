//! Bandwidth queue: a link of capacity C fed through a queue discipline, with optional virtual
//! placeholder cross traffic at C − ABW (NSDI'09 §2.2.3, §3.2).
//!
//! Placeholder packets are constant-bit-rate, full-size items that take queue space and link
//! time exactly like real packets, but never exist as bytes. A placeholder that finds the
//! queue full is not dropped: it waits at the entrance and takes the next slot that frees up,
//! ahead of later real arrivals. The cross traffic's long-run rate is therefore exactly
//! C − ABW and foreground traffic gets exactly the ABW — the paper's "precise available
//! bandwidth at every point in time" (§2.2.1). Dropping it instead (a proposal we rejected
//! after measuring it) hands the placeholders' share to whichever stream wins the freed slots,
//! so a phase-locked foreground flow could take twice its ABW.
//! They are processed lazily: [`BandwidthQueue::advance`] replays every placeholder arrival
//! and service completion up to `now` in time order, so a driver wakes the queue only when a
//! real packet can leave ([`BandwidthQueue::next_wakeup`]) — not once per placeholder.
//!
//! The placeholder rate can follow a schedule of ABW steps (`with_abw_steps`: non-reactive
//! cross traffic recorded over time, iBox's profile). The source holds the next step as one
//! of its events, so a step takes effect at its model time inside the same lazy replay,
//! after the completions and arrivals before it, and needs no wake-up of its own either.
//!
//! A queue can carry its link's propagation delay (`with_propagation`): a packet then leaves
//! the element one propagation delay after its last bit left the link. Folding the delay into
//! the link halves the events a driver handles per hop; it changes no timing.
//!
//! Call order: `push(at, ..)` with non-decreasing `at`; `poll_output(now)` until `None` at or
//! after `next_wakeup()`; `next_wakeup()` again after every push or poll. Departure times are
//! model times, so an emulator that polls late still forwards each packet with the time at
//! which it left the link.

use super::reactivity::Reactivity;
use crate::packet::PacketMeta;
use crate::qdisc::{Backlog, Discipline, Qdisc, Queued};
use crate::time::{Duration, Instant};
use crate::units::{QueueLimit, Rate};
use crate::Rng;
use std::collections::VecDeque;

/// Size of a placeholder packet: a full Ethernet-MTU IP packet.
pub const PLACEHOLDER_LEN: u32 = 1500;

/// Counters of one bandwidth queue; real and placeholder traffic kept apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueStats {
    pub arrivals: u64,
    pub arrival_bytes: u64,
    pub departures: u64,
    pub departure_bytes: u64,
    pub drops: u64,
    pub drop_bytes: u64,
    pub placeholder_arrivals: u64,
    pub placeholder_departures: u64,
    pub placeholder_departure_bytes: u64,
    pub placeholder_drops: u64,
    /// Placeholders that found the queue full and waited for a free slot.
    pub placeholder_deferrals: u64,
    /// How often reactivity changed the placeholder rate.
    pub rate_changes: u64,
}

/// What is inside the queue right now: waiting, or in service on the link. Packets that have
/// left the link — still propagating on a link with its delay folded in, or not yet polled by
/// the driver — are no longer queued and not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Occupancy {
    pub packets: u64,
    pub bytes: u64,
    pub placeholder_packets: u64,
    pub placeholder_bytes: u64,
    /// Placeholders waiting outside a full queue.
    pub deferred_placeholders: u64,
}

/// The constant-bit-rate placeholder source. Arrival k (from the epoch) is at
/// epoch + k·len·8/rate, computed exactly so that long runs do not drift. With ABW steps,
/// `next` is the earlier of the next arrival and the next step (`step_at`): the queue's
/// replay then meets a step as it meets an arrival, at no cost to queues without steps.
#[derive(Clone, Copy, Debug)]
struct PlaceholderSource {
    rate: Rate,
    epoch: Instant,
    count: u64,
    next: Option<Instant>,
    step_at: Option<Instant>,
}

impl PlaceholderSource {
    fn new(rate: Rate, now: Instant, step_at: Option<Instant>) -> Self {
        let mut s = PlaceholderSource { rate, epoch: now, count: 0, next: None, step_at };
        s.schedule();
        s
    }

    fn schedule(&mut self) {
        let arrival = (self.rate.bps() > 0).then(|| {
            let ns = self.count as u128 * PLACEHOLDER_LEN as u128 * 8 * 1_000_000_000 / self.rate.bps() as u128;
            self.epoch + Duration::from_nanos(ns as u64)
        });
        self.next = match (arrival, self.step_at) {
            (Some(a), Some(s)) => Some(a.min(s)),
            (a, None) => a,
            (None, s) => s,
        };
    }

    fn advance(&mut self) {
        self.count += 1;
        self.schedule();
    }
}

/// Laid out in declaration order (`repr(C)`), what a packet's arrival and departure read
/// first, and reactivity boxed: with thousands of links the element is rarely in cache, and
/// every line it spans that a packet touches is a miss (10 000 flows on `bench/sim/scale.py`:
/// 3.57 → 3.49 s, the element 608 → 480 bytes).
#[repr(C)]
pub struct BandwidthQueue<P> {
    /// Latest time the queue has been advanced to (monotonic).
    now: Instant,
    capacity: Rate,
    /// The serialisation time of the last packet length put on the link.
    last_transmit: (u32, Duration),
    /// Propagation delay added after serialization.
    propagation: Duration,
    /// Placeholders waiting at the entrance of a full queue.
    deferred_placeholders: u64,
    placeholder: PlaceholderSource,
    /// Real packets in the discipline (placeholders excluded).
    real_backlog: Backlog,
    reactivity: Option<Box<Reactivity>>,
    /// Departed real packets not yet polled, with their departure times.
    output: VecDeque<(Instant, P)>,
    /// The item on the link and the time its last bit leaves.
    in_service: Option<(Queued<P>, Instant)>,
    stats: QueueStats,
    qdisc: Discipline<P>,
    rng: Rng,
    /// ABW steps still to come (time, ABW), earliest last so that the next is a `pop`; the
    /// placeholder source knows the next one's time. Last: only a step reads it.
    abw_steps: Option<Box<Vec<(Instant, Rate)>>>,
}

impl<P: PacketMeta + Send + Sync + 'static> BandwidthQueue<P> {
    /// A queue draining at `capacity`; `abw` below capacity adds placeholders at C − ABW.
    pub fn new(capacity: Rate, abw: Rate, qdisc: impl Into<Discipline<P>>, rng: Rng) -> Self {
        BandwidthQueue {
            capacity,
            last_transmit: (0, Duration::ZERO),
            propagation: Duration::ZERO,
            qdisc: qdisc.into(),
            in_service: None,
            placeholder: PlaceholderSource::new(capacity.saturating_sub(abw), Instant::ZERO, None),
            deferred_placeholders: 0,
            output: VecDeque::new(),
            real_backlog: Backlog::default(),
            stats: QueueStats::default(),
            reactivity: None,
            abw_steps: None,
            rng,
            now: Instant::ZERO,
        }
    }

    /// Makes the ABW follow `steps` (model time, ABW; in increasing time): from each step's
    /// time on, placeholders arrive at C − ABW. A step at time zero replaces the initial ABW.
    pub fn with_abw_steps(mut self, steps: &[(Instant, Rate)]) -> Self {
        let mut pending: Vec<(Instant, Rate)> = steps.to_vec();
        pending.reverse();
        self.placeholder.step_at = pending.last().map(|&(at, _)| at);
        self.placeholder.schedule();
        self.abw_steps = (!pending.is_empty()).then(|| Box::new(pending));
        self.replay(Instant::ZERO);
        self
    }

    /// Adds a fixed propagation delay after the link (a packet leaves the element that long
    /// after its last bit was serialized).
    pub fn with_propagation(mut self, delay: Duration) -> Self {
        self.propagation = delay;
        self
    }

    pub fn propagation(&self) -> Duration {
        self.propagation
    }

    /// Attaches a reactivity controller; it re-sets ABW and the queue size as flows come and go.
    pub fn with_reactivity(mut self, reactivity: Reactivity) -> Self {
        self.reactivity = Some(Box::new(reactivity));
        self.apply_reactivity(Instant::ZERO);
        self
    }

    pub fn capacity(&self) -> Rate {
        self.capacity
    }

    /// The ABW foreground traffic currently gets: capacity minus the placeholder rate.
    pub fn abw(&self) -> Rate {
        self.capacity.saturating_sub(self.placeholder.rate)
    }

    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// Placeholder share of the bytes the link has transmitted so far.
    pub fn placeholder_share(&self) -> f64 {
        let s = &self.stats;
        let sent = s.departure_bytes + s.placeholder_departure_bytes;
        if sent == 0 {
            0.0
        } else {
            s.placeholder_departure_bytes as f64 / sent as f64
        }
    }

    pub fn limit(&self) -> QueueLimit {
        self.qdisc.limit()
    }

    /// The discipline's average queue (RED), if it keeps one.
    pub fn qdisc_average(&self) -> Option<f64> {
        self.qdisc.average()
    }

    /// Early drops, forced drops and ECN marks of an active queue manager.
    pub fn aqm_stats(&self) -> Option<crate::qdisc::AqmStats> {
        self.qdisc.aqm_stats()
    }

    pub fn qdisc_name(&self) -> &'static str {
        self.qdisc.name()
    }

    /// Active foreground flows per path slot, when reactivity is on.
    pub fn active_flows(&self) -> Option<&[u32]> {
        self.reactivity.as_ref().map(|r| r.monitor.active())
    }

    /// Changes the placeholder rate to C − `abw` from `now` on (reactivity, or a driver).
    pub fn set_abw(&mut self, now: Instant, abw: Rate) {
        self.advance(now);
        let rate = self.capacity.saturating_sub(abw);
        if rate != self.placeholder.rate {
            self.placeholder = PlaceholderSource::new(rate, now.max(self.now), self.placeholder.step_at);
            self.stats.rate_changes += 1;
        }
    }

    /// Changes the queue limit from `now` on.
    pub fn set_limit(&mut self, now: Instant, limit: QueueLimit) {
        self.advance(now);
        self.qdisc.set_limit(limit);
    }

    /// What is in the queue now.
    pub fn occupancy(&self) -> Occupancy {
        let total = self.qdisc.backlog();
        let mut occ = Occupancy {
            packets: self.real_backlog.packets,
            bytes: self.real_backlog.bytes,
            placeholder_packets: total.packets - self.real_backlog.packets,
            placeholder_bytes: total.bytes - self.real_backlog.bytes,
            deferred_placeholders: self.deferred_placeholders,
        };
        if let Some((item, _)) = &self.in_service {
            if item.is_placeholder() {
                occ.placeholder_packets += 1;
                occ.placeholder_bytes += item.wire_len as u64;
            } else {
                occ.packets += 1;
                occ.bytes += item.wire_len as u64;
            }
        }
        occ
    }

    /// Offers a real packet arriving at `at` on behalf of path `slot` (0 unless shared).
    /// Returns the packet if the discipline dropped it, so the driver can recycle it.
    pub fn push(&mut self, at: Instant, pkt: P, slot: u16) -> Option<P> {
        self.advance(at);
        if let Some(r) = &mut self.reactivity {
            if r.observe(at, &pkt, slot) {
                self.apply_reactivity(at);
            }
        }
        let len = pkt.wire_len();
        self.stats.arrivals += 1;
        self.stats.arrival_bytes += len as u64;
        let idle = self.in_service.is_none() && self.deferred_placeholders == 0 && self.qdisc.backlog().packets == 0;
        match self.qdisc.admits_when_empty(len).filter(|_| idle) {
            Some(true) => {
                let done = at + self.transmit_time(len);
                self.in_service = Some((Queued::real(pkt, at), done));
                return None;
            }
            Some(false) => {
                self.stats.drops += 1;
                self.stats.drop_bytes += len as u64;
                return Some(pkt);
            }
            None => {}
        }
        let item = Queued::real(pkt, at);
        if idle {
            // Idle link: straight onto the wire if the discipline admits it.
            return match self.qdisc.pass_through(at, item, &mut self.rng) {
                Ok(item) => {
                    let done = at + self.transmit_time(len);
                    self.in_service = Some((item, done));
                    None
                }
                Err(item) => {
                    self.stats.drops += 1;
                    self.stats.drop_bytes += len as u64;
                    item.packet
                }
            };
        }
        match self.qdisc.enqueue(at, item, &mut self.rng) {
            Ok(()) => {
                self.real_backlog.add(len);
                self.start_service_if_idle(at);
                None
            }
            Err(item) => {
                self.stats.drops += 1;
                self.stats.drop_bytes += len as u64;
                item.packet
            }
        }
    }

    /// When a real packet can next leave, or when the link must make progress towards one;
    /// placeholders alone never wake a driver. Service completions are replayed lazily by
    /// [`Self::advance`], so a real packet on the link is only looked at when it leaves the
    /// element (completion plus propagation).
    #[inline]
    pub fn next_wakeup(&self) -> Option<Instant> {
        let in_service = match &self.in_service {
            Some((item, done)) if !item.is_placeholder() => Some(*done + self.propagation),
            Some((_, done)) if self.real_backlog.packets > 0 => Some(match self.qdisc.fifo_head_real() {
                // FIFO: the oldest real packet leaves once everything ahead of it has been
                // sent, so skip the placeholder completions in between (per-item rounding
                // can make this a few nanoseconds early, never late).
                Some((ahead, len)) => *done + self.capacity.transmit_time(ahead) + self.capacity.transmit_time(len as u64) + self.propagation,
                None => *done,
            }),
            _ => None,
        };
        let mut wake = match (self.output.front(), in_service) {
            (Some(&(a, _)), Some(b)) => Some(a.min(b)),
            (Some(&(a, _)), None) => Some(a),
            (None, b) => b,
        };
        if let Some(r) = &self.reactivity {
            if let Some(e) = r.next_check() {
                wake = Some(wake.map_or(e, |w| w.min(e)));
            }
        }
        wake
    }

    /// Returns the next real packet that has left the link by `now`, with its departure time.
    pub fn poll_output(&mut self, now: Instant) -> Option<(Instant, P)> {
        self.advance(now);
        match self.output.front() {
            Some(&(t, _)) if t <= now => self.output.pop_front(),
            _ => None,
        }
    }

    /// Replays placeholder arrivals and service completions up to `now`, in time order
    /// (a completion before an arrival at the same instant, so the arrival sees the free slot).
    pub fn advance(&mut self, now: Instant) {
        // Everything due at `self.now` was replayed already, and what was pushed since then
        // completes later: a second call at the same instant has nothing to replay.
        if now > self.now || now == Instant::ZERO {
            self.now = self.now.max(now);
            self.replay(now);
        }
        // Idle flows are retired even when no packet moves (see `next_wakeup`).
        if let Some(r) = &mut self.reactivity {
            if r.expire(now) {
                self.apply_reactivity(now);
            }
        }
    }

    // Inlined into `advance` as before ABW steps existed: their branch tipped the compiler's
    // choice, and the call cost the simulator 3 % more instructions (callgrind, 60-s dumbbell).
    #[inline(always)]
    fn replay(&mut self, now: Instant) {
        loop {
            let done = self.in_service.as_ref().map(|&(_, t)| t);
            let arrival = self.placeholder.next;
            let next = match (done, arrival) {
                (Some(d), Some(a)) => d.min(a),
                (Some(d), None) => d,
                (None, Some(a)) => a,
                (None, None) => break,
            };
            if next > now {
                break;
            }
            if done == Some(next) {
                self.complete_service();
            } else {
                self.placeholder_arrival(next);
            }
        }
    }

    /// The next ABW step is due at `at`: from it on, placeholders arrive at C − ABW (a new
    /// source from `at`, which replaces an arrival of the old one at the same instant).
    #[cold]
    #[inline(never)]
    fn abw_step(&mut self, at: Instant) {
        let steps = self.abw_steps.as_mut().expect("a step is due only while steps remain");
        let (_, abw) = steps.pop().expect("a step is due");
        let step_at = steps.last().map(|&(t, _)| t);
        let rate = self.capacity.saturating_sub(abw);
        if rate != self.placeholder.rate {
            self.stats.rate_changes += 1;
        }
        self.placeholder = PlaceholderSource::new(rate, at, step_at);
    }

    fn placeholder_arrival(&mut self, at: Instant) {
        if self.placeholder.step_at == Some(at) {
            return self.abw_step(at);
        }
        self.placeholder.advance();
        self.stats.placeholder_arrivals += 1;
        if self.deferred_placeholders > 0 || !self.enqueue_placeholder(at) {
            self.deferred_placeholders += 1;
            self.stats.placeholder_deferrals += 1;
        }
        self.start_service_if_idle(at);
    }

    fn enqueue_placeholder(&mut self, at: Instant) -> bool {
        let item = Queued {
            packet: None,
            wire_len: PLACEHOLDER_LEN,
            flow: u64::MAX,
            mark: Default::default(),
            priority: 1,
            enqueued_at: at,
        };
        self.qdisc.enqueue(at, item, &mut self.rng).is_ok()
    }

    fn complete_service(&mut self) {
        // The packet moves from its place on the link straight into the output: taking the
        // whole item first copied it through the stack in pieces the next copy could not
        // read back without a stall.
        let (item, done) = self.in_service.as_mut().expect("completion without service");
        let (done, wire_len) = (*done, item.wire_len as u64);
        match item.packet.take() {
            Some(pkt) => {
                self.stats.departures += 1;
                self.stats.departure_bytes += wire_len;
                self.output.push_back((done + self.propagation, pkt));
            }
            None => {
                self.stats.placeholder_departures += 1;
                self.stats.placeholder_departure_bytes += wire_len;
            }
        }
        self.in_service = None;
        self.start_service_if_idle(done);
    }

    fn start_service_if_idle(&mut self, at: Instant) {
        if self.in_service.is_some() {
            return;
        }
        if let Some(item) = self.qdisc.dequeue(at) {
            if !item.is_placeholder() {
                self.real_backlog.remove(item.wire_len);
            }
            // The dequeue freed a slot: waiting placeholders enter first.
            while self.deferred_placeholders > 0 && self.enqueue_placeholder(at) {
                self.deferred_placeholders -= 1;
            }
            let done = at + self.transmit_time(item.wire_len);
            self.in_service = Some((item, done));
        }
    }

    /// `capacity.transmit_time(len)`, remembered for the last length: a link carries
    /// packets of few sizes (full segments one way, ACKs the other), and the 64-bit division
    /// was a fifth of a push's time.
    #[inline]
    fn transmit_time(&mut self, len: u32) -> Duration {
        if self.last_transmit.0 != len {
            self.last_transmit = (len, self.capacity.transmit_time(len as u64));
        }
        self.last_transmit.1
    }

    fn apply_reactivity(&mut self, now: Instant) {
        let Some(r) = &self.reactivity else { return };
        let abw = r.current_abw();
        let limit = r.queue_rule.limit_for(abw, r.monitor.total_active());
        let rate = self.capacity.saturating_sub(abw);
        if rate != self.placeholder.rate {
            self.placeholder = PlaceholderSource::new(rate, now, self.placeholder.step_at);
            self.stats.rate_changes += 1;
        }
        self.qdisc.set_limit(limit);
    }
}
