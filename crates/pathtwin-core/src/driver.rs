//! The network driver: the one piece of code that moves packets through a compiled
//! [`Network`]'s elements, for both engines.
//!
//! It owns what each engine used to do in its own way: which element must be woken when (one
//! armed wake-up per element), hop-by-hop forwarding along a route (a packet that leaves an
//! element at model time t enters the next one at t, so lateness in a driver never becomes
//! delay in the model), releasing zero-delay elements (loss, markers) at once rather than
//! through the clock, and sampling the bandwidth queues for the `queue_series` table. Like the
//! elements it is sans-IO: it never reads a clock, and `now` is always an argument.
//!
//! An engine keeps only its clock and its I/O, and plugs them in through [`Engine`]:
//! - the simulator: a wake-up is an event on its virtual-time queue; a delivered packet goes
//!   to a simulated TCP endpoint, which may answer at once — back into the driver,
//!   re-entrantly, which is why [`Engine::deliver`] is handed the driver;
//! - the emulator: a wake-up goes on its timer heap; a delivered datagram goes into its
//!   host's outbox. Datagrams read from a device enter at the real time of their read, which
//!   may be behind an element's model time ([`Engine::IN_ORDER`] is false): the driver then
//!   moves such a push up to the element's time and counts it ([`Driver::reordered_pushes`]),
//!   and leaves zero-delay elements to the engine's timer order instead of releasing them
//!   ahead of outputs still due earlier.
//!
//! Call order: register the routes ([`Driver::add_route`]); [`Driver::send`] a packet at hop 0
//! of its route; when a wake-up the engine was asked for ([`Engine::wake_at`]) comes due, call
//! [`Driver::wake`] at exactly that time; [`Driver::sample_queues`] whenever the engine takes
//! a sample.

use crate::element::Element;
use crate::packet::PacketMeta;
use crate::time::Instant;
use crate::topology::{Hop, Network};

/// Index of a route in a [`Driver`]'s route table.
pub type RouteId = u32;

/// A packet the driver can forward: the route it follows and how far along it is.
pub trait Routed: PacketMeta {
    /// The route ([`Driver::add_route`]) the packet follows.
    fn route(&self) -> RouteId;
    /// The index of the hop the packet is at or enters next; 0 when sent.
    fn hop(&self) -> usize;
    fn set_hop(&mut self, hop: usize);
}

/// An engine's side of the driver: its clock's scheduling and its packets' destinations.
pub trait Engine<P> {
    /// Whether every push reaches an element in model-time order. A discrete-event clock
    /// guarantees it; a real-time loop that reads devices does not (see the module docs).
    const IN_ORDER: bool;
    /// Element `element` must be woken ([`Driver::wake`]) at `at`. A wake-up asked for
    /// earlier than one pending replaces it; a later one is never asked for while an earlier
    /// one is pending (the earlier one re-arms the element).
    fn wake_at(&mut self, element: usize, at: Instant);
    /// `pkt` left the last element of its route at `at` (or was sent on a route without
    /// elements). The engine may send packets from here: `net` is the driver.
    fn deliver(&mut self, net: &mut Driver<P>, at: Instant, pkt: P);
    /// An element dropped `pkt` on arrival (the element counted it); the engine may reuse
    /// what it holds.
    fn recycle(&mut self, pkt: P);
}

/// `Driver::armed`'s "no wake-up armed" (no model time is that late).
const NOT_ARMED: u64 = u64::MAX;

/// Where a route's hops lie in the driver's flat hop table.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    len: u32,
}

/// One sample of a bandwidth queue: a `queue_series` row (see [`crate::results`]).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueueSample {
    pub t_ns: u64,
    pub element: usize,
    /// Real packets and bytes waiting or in service, and placeholders likewise.
    pub packets: u64,
    pub bytes: u64,
    pub placeholder_packets: u64,
    pub placeholder_bytes: u64,
    /// Real packets dropped since the previous sample.
    pub drops: u64,
    /// Real bytes that have left the queue since the start.
    pub departed_bytes: u64,
    pub abw_bps: f64,
    /// Foreground flows the queue's reactivity counts, over all its paths.
    pub active_flows: u64,
    /// The discipline's average queue (RED's, in its thresholds' unit); NaN if it keeps none.
    pub avg_queue: f64,
}

/// Drives a compiled [`Network`]'s elements for one engine (see the module docs).
pub struct Driver<P> {
    /// The compiled topology. Its elements are driven here; the engine reads its hosts,
    /// pipes, resolved paths and the elements' counters.
    pub net: Network<P>,
    /// Every route's hops, one after the other: with thousands of flows a hop is looked up
    /// from one table, not from a small allocation per route.
    hops: Vec<Hop>,
    routes: Vec<Span>,
    /// Per element, the model time (ns) of its armed wake-up, [`NOT_ARMED`] if none: 8 bytes
    /// an element, read at every hop.
    armed: Vec<u64>,
    /// Per element, the latest model time it was pushed, polled or advanced at (kept for
    /// engines whose pushes may come out of order).
    element_now: Vec<Instant>,
    reordered_pushes: u64,
    /// The bandwidth queues [`Driver::sample_queues`] samples, and their drops at the previous
    /// sample (for per-interval drop counts).
    sampled: Vec<usize>,
    drops_at_last_sample: Vec<u64>,
}

impl<P: Routed + Send + Sync + 'static> Driver<P> {
    /// A driver for `net`, without routes yet. It samples the network's bandwidth queues
    /// (`pipe` queues, one per replayed connection, are left out: thousands of them would
    /// make the series grow by thousands of rows per sample).
    pub fn new(net: Network<P>) -> Driver<P> {
        let n = net.elements.len();
        let sampled: Vec<usize> = net.queue_ids().collect();
        Driver {
            net,
            hops: Vec::new(),
            routes: Vec::new(),
            armed: vec![NOT_ARMED; n],
            element_now: vec![Instant::ZERO; n],
            reordered_pushes: 0,
            drops_at_last_sample: vec![0; sampled.len()],
            sampled,
        }
    }

    /// Adds a route crossing `hops` in order; packets name it by the id returned.
    pub fn add_route(&mut self, hops: &[Hop]) -> RouteId {
        let start = self.hops.len() as u32;
        self.hops.extend_from_slice(hops);
        self.push_span(Span { start, len: hops.len() as u32 })
    }

    /// Adds a route with the same hops as `route` (without copying them).
    pub fn repeat_route(&mut self, route: RouteId) -> RouteId {
        self.push_span(self.routes[route as usize])
    }

    fn push_span(&mut self, span: Span) -> RouteId {
        self.routes.push(span);
        RouteId::try_from(self.routes.len() - 1).expect("fewer than 2^32 routes")
    }

    /// The hops of `route`.
    pub fn route_hops(&self, route: RouteId) -> &[Hop] {
        let s = self.routes[route as usize];
        &self.hops[s.start as usize..(s.start + s.len) as usize]
    }

    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    /// Pushes that came earlier than their element's model time and were moved up to it
    /// (only with an engine whose pushes may come out of order).
    pub fn reordered_pushes(&self) -> u64 {
        self.reordered_pushes
    }

    /// When element `e` is to be woken, if it is armed.
    pub fn armed_at(&self, e: usize) -> Option<Instant> {
        (self.armed[e] != NOT_ARMED).then(|| Instant::from_nanos(self.armed[e]))
    }

    /// Asks for a wake-up of every element that has something pending (placeholder cross
    /// traffic runs from time zero); for an engine that starts its clock with the network.
    pub fn arm_all<E: Engine<P>>(&mut self, now: Instant, engine: &mut E) {
        for e in 0..self.net.elements.len() {
            self.rearm(now, e, engine);
        }
    }

    /// Sends `pkt`, at hop 0 of its route, into the network at `at`.
    #[inline]
    pub fn send<E: Engine<P>>(&mut self, at: Instant, pkt: P, engine: &mut E) {
        self.enter(at, pkt, engine);
    }

    /// Element `e`'s wake-up at `now` is due: releases what it has, unless the wake-up is
    /// stale (the element was re-armed earlier, or released already).
    #[inline]
    pub fn wake<E: Engine<P>>(&mut self, now: Instant, e: usize, engine: &mut E) {
        if self.armed[e] != now.as_nanos() {
            return;
        }
        self.armed[e] = NOT_ARMED;
        self.release(now, e, engine);
    }

    /// Samples every bandwidth queue at `now` (bringing its placeholders up to date first),
    /// handing each sample and the queue's name to `record`.
    pub fn sample_queues<E: Engine<P>>(&mut self, now: Instant, engine: &mut E, mut record: impl FnMut(&QueueSample, &str)) {
        for k in 0..self.sampled.len() {
            let e = self.sampled[k];
            let Element::Queue(q) = &mut self.net.elements[e] else { continue };
            q.advance(now);
            let occupancy = q.occupancy();
            let stats = q.stats();
            let drops = stats.drops - self.drops_at_last_sample[k];
            self.drops_at_last_sample[k] = stats.drops;
            let sample = QueueSample {
                t_ns: now.as_nanos(),
                element: e,
                packets: occupancy.packets,
                bytes: occupancy.bytes,
                placeholder_packets: occupancy.placeholder_packets,
                placeholder_bytes: occupancy.placeholder_bytes,
                drops,
                departed_bytes: stats.departure_bytes,
                abw_bps: q.abw().as_f64(),
                active_flows: q.active_flows().map_or(0, |a| a.iter().map(|&n| u64::from(n)).sum()),
                avg_queue: q.qdisc_average().unwrap_or(f64::NAN),
            };
            record(&sample, &self.net.element_info[e].name);
            if !E::IN_ORDER {
                self.element_now[e] = self.element_now[e].max(now);
            }
            // Advancing may have moved departures into the output buffer.
            self.rearm(now, e, engine);
        }
    }

    /// Moves `pkt` into hop `pkt.hop()` of its route at `at`, or delivers it past the last.
    #[inline]
    fn enter<E: Engine<P>>(&mut self, at: Instant, pkt: P, engine: &mut E) {
        let span = self.routes[pkt.route() as usize];
        let hop = pkt.hop();
        if hop >= span.len as usize {
            engine.deliver(self, at, pkt);
            return;
        }
        let Hop { element, slot } = self.hops[span.start as usize + hop];
        let at = if E::IN_ORDER { at } else { self.catch_up(element, at) };
        if let Some(dropped) = self.net.elements[element].push(at, pkt, slot) {
            engine.recycle(dropped);
        }
        self.after_push(at, element, engine);
    }

    /// A push at `at` into element `e`, which may have been polled or advanced past `at`
    /// already: moved up to the element's time (a bandwidth queue would otherwise serve it
    /// in the past, on link time its placeholders used).
    fn catch_up(&mut self, e: usize, at: Instant) -> Instant {
        if at < self.element_now[e] {
            self.reordered_pushes += 1;
            self.element_now[e]
        } else {
            self.element_now[e] = at;
            at
        }
    }

    /// After a push at `now`: an element with something due now (a zero-delay element)
    /// releases it at once, unless a wake-up at this very time is pending (it will); else
    /// the element is armed for its next wake-up.
    #[inline]
    fn after_push<E: Engine<P>>(&mut self, now: Instant, e: usize, engine: &mut E) {
        match self.net.elements[e].next_wakeup() {
            Some(w) if E::IN_ORDER && w <= now && self.armed[e] != now.as_nanos() => self.release(now, e, engine),
            Some(w) => self.arm(e, w.max(now), engine),
            None => {}
        }
    }

    /// Forwards everything element `e` releases by `now`, then re-arms it.
    fn release<E: Engine<P>>(&mut self, now: Instant, e: usize, engine: &mut E) {
        if !E::IN_ORDER {
            self.element_now[e] = self.element_now[e].max(now);
        }
        while let Some((t, mut pkt)) = self.net.elements[e].poll_output(now) {
            pkt.set_hop(pkt.hop() + 1);
            self.enter(t, pkt, engine);
        }
        self.rearm(now, e, engine);
    }

    #[inline]
    fn rearm<E: Engine<P>>(&mut self, now: Instant, e: usize, engine: &mut E) {
        if let Some(w) = self.net.elements[e].next_wakeup() {
            self.arm(e, w.max(now), engine);
        }
    }

    /// Makes sure element `e` is woken at `w`; a pending earlier wake-up will re-arm it.
    #[inline]
    fn arm<E: Engine<P>>(&mut self, e: usize, w: Instant, engine: &mut E) {
        if self.armed[e] > w.as_nanos() {
            self.armed[e] = w.as_nanos();
            engine.wake_at(e, w);
        }
    }
}
