//! Virtual-time tests of the network driver ([`pathtwin_core::driver`]): a small engine keeps
//! the wake-ups the driver asks for on a heap and records what it delivers and recycles;
//! networks are built element by element (`Network::of_elements`). Each test compares the
//! driver's output with times and counts worked out by hand from the elements' parameters:
//! a delay line holds a packet for its delay, a link of rate C serializes L bytes in
//! L·8/C, and a packet's time through a route is the sum of what each hop adds.
//!
//! The engine also checks, on every call, the driver's promises to it: a wake-up is asked for
//! only if it is earlier than the one pending for that element (never later, never the same
//! again), the driver's `armed_at` is always the engine's pending wake-up, and an in-order
//! engine is never asked for a wake-up in the past.

use pathtwin_core::driver::{Driver, Engine, QueueSample, RouteId, Routed};
use pathtwin_core::element::{AbwTable, BandwidthQueue, DelayLine, Element, QueueRule, RandomLoss, Reactivity, Reorder};
use pathtwin_core::marker::{Marker, Policy, TokenBucket};
use pathtwin_core::packet::{FlowKey, Mark, PacketMeta, TcpFlags};
use pathtwin_core::qdisc::DropTail;
use pathtwin_core::rng_for;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::topology::{Hop, Network};
use pathtwin_core::units::{Fraction, QueueLimit, Rate, Size};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

// ---------------------------------------------------------------------------------------
// The harness

/// A packet: an id to follow it by, its length on the wire, where it is on its route, and
/// the mark a marker gave it.
#[derive(Clone, Debug, PartialEq)]
struct Pkt {
    id: u32,
    len: u32,
    route: RouteId,
    hop: usize,
    mark: Mark,
}

fn pkt(id: u32, len: u32, route: RouteId) -> Pkt {
    Pkt { id, len, route, hop: 0, mark: Mark::Unmarked }
}

impl PacketMeta for Pkt {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn payload_len(&self) -> u32 {
        self.len.saturating_sub(40)
    }
    fn flow_key(&self) -> FlowKey {
        u64::from(self.route)
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        None
    }
    fn mark(&self) -> Mark {
        self.mark
    }
    fn set_mark(&mut self, mark: Mark) {
        self.mark = mark;
    }
}

impl Routed for Pkt {
    fn route(&self) -> RouteId {
        self.route
    }
    fn hop(&self) -> usize {
        self.hop
    }
    fn set_hop(&mut self, hop: usize) {
        self.hop = hop;
    }
}

/// A virtual-time engine; `IN_ORDER` as the simulator (true) or the emulator (false).
#[derive(Default)]
struct Harness<const IN_ORDER: bool> {
    /// Wake-ups asked for, earliest first (ties in the order asked), stale ones included:
    /// like both engines, the harness never removes a replaced wake-up.
    heap: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    seq: u64,
    /// Per element, the wake-up the driver has it armed for, as far as the engine knows: the
    /// last one asked for, until it comes due.
    pending: BTreeMap<usize, Instant>,
    /// Every `wake_at` call, in order: (element, time).
    asked: Vec<(usize, Instant)>,
    /// Every delivery, in order: (time, packet).
    delivered: Vec<(Instant, Pkt)>,
    recycled: Vec<Pkt>,
    /// The engine's clock: the latest wake-up or send time.
    now: Instant,
    /// The last wake-up's time, and how many wake-ups in a row came at it: a driver that
    /// keeps asking for wake-ups at the time it is at never lets the clock move.
    last_wake: (Instant, u32),
    /// Answer every packet delivered on `.0` at once with a packet on `.1` (its id + 1000),
    /// as a simulated endpoint answers a segment from inside `deliver`.
    echo: Option<(RouteId, RouteId)>,
}

impl<const IN_ORDER: bool> Engine<Pkt> for Harness<IN_ORDER> {
    const IN_ORDER: bool = IN_ORDER;

    fn wake_at(&mut self, element: usize, at: Instant) {
        if let Some(&p) = self.pending.get(&element) {
            assert!(at < p, "element {element} asked to wake at {at:?} while a wake-up at {p:?} is pending");
        }
        if IN_ORDER {
            assert!(at >= self.now, "element {element} asked to wake at {at:?}, in the past of {:?}", self.now);
        }
        self.pending.insert(element, at);
        self.asked.push((element, at));
        self.heap.push(Reverse((at, self.seq, element)));
        self.seq += 1;
    }

    fn deliver(&mut self, net: &mut Driver<Pkt>, at: Instant, p: Pkt) {
        let (id, len, route) = (p.id, p.len, p.route);
        self.delivered.push((at, p));
        if let Some((from, to)) = self.echo {
            if route == from {
                net.send(at, pkt(id + 1000, len, to), self);
            }
        }
    }

    fn recycle(&mut self, p: Pkt) {
        self.recycled.push(p);
    }
}

impl<const IN_ORDER: bool> Harness<IN_ORDER> {
    /// Sends `p` at `at`, after the wake-ups due before `at` and before those due at `at`
    /// (one order an event queue may have; the other is what `run_until(at)` then `send`
    /// gives).
    fn send(&mut self, d: &mut Driver<Pkt>, at: Instant, p: Pkt) {
        if let Some(before) = at.as_nanos().checked_sub(1) {
            self.run_until(d, Instant::from_nanos(before));
        }
        self.now = self.now.max(at);
        d.send(at, p, self);
        self.check_armed(d);
    }

    /// Wakes every element whose wake-up is due by `until`, in time order, each at its own
    /// wake-up time.
    fn run_until(&mut self, d: &mut Driver<Pkt>, until: Instant) {
        while let Some(&Reverse((t, _, e))) = self.heap.peek() {
            if t > until {
                break;
            }
            self.heap.pop();
            assert!(t >= self.now || !IN_ORDER, "a wake-up at {t:?} surfaced after {:?}", self.now);
            self.last_wake = if t == self.last_wake.0 { (t, self.last_wake.1 + 1) } else { (t, 1) };
            assert!(self.last_wake.1 <= 1000, "more than 1000 wake-ups in a row at {t:?}: the clock is stuck");
            self.now = self.now.max(t);
            if self.pending.get(&e) == Some(&t) {
                self.pending.remove(&e);
            }
            d.wake(t, e, self);
            self.check_armed(d);
        }
    }

    fn run(&mut self, d: &mut Driver<Pkt>) {
        self.run_until(d, Instant::MAX);
    }

    /// The driver's armed wake-ups are exactly the ones the engine has pending.
    fn check_armed(&self, d: &Driver<Pkt>) {
        for e in 0..d.net.elements.len() {
            assert_eq!(d.armed_at(e), self.pending.get(&e).copied(), "element {e}");
        }
    }

    /// Samples the queues at `now`, as an engine's sampling event does.
    fn sample(&mut self, d: &mut Driver<Pkt>, now: Instant) -> Vec<(QueueSample, String)> {
        self.run_until(d, now);
        self.now = self.now.max(now);
        let mut rows = Vec::new();
        d.sample_queues(now, self, |s, name| rows.push((*s, name.to_string())));
        self.check_armed(d);
        rows
    }

    /// (time, id) of every delivery, in order.
    fn deliveries(&self) -> Vec<(Instant, u32)> {
        self.delivered.iter().map(|(t, p)| (*t, p.id)).collect()
    }
}

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

fn us(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000)
}

fn delay(d: Duration) -> Element<Pkt> {
    Element::Delay(DelayLine::new(d))
}

fn queue(capacity: Rate, abw: Rate, limit: QueueLimit) -> Element<Pkt> {
    Element::Queue(BandwidthQueue::new(capacity, abw, DropTail::new(limit), rng_for(1, 1)))
}

/// A link without cross traffic.
fn link(capacity: Rate, limit: QueueLimit) -> Element<Pkt> {
    queue(capacity, capacity, limit)
}

fn loss(p: f64, seed: u64) -> Element<Pkt> {
    Element::Loss(RandomLoss::new(Fraction::new(p).unwrap(), rng_for(seed, 2)))
}

/// A token-bucket marker with `bucket` bytes a second: IN while they last, then OUT.
fn marker(bucket: u64) -> Element<Pkt> {
    Element::Marker(Marker::new(Policy::TokenBucket(TokenBucket::per_interval(Size::from_bytes(bucket), Duration::from_secs(1)))))
}

/// A driver over `elements`, with one route per entry of `routes` (element indices, slot 0).
fn driver(elements: Vec<Element<Pkt>>, routes: &[&[usize]]) -> Driver<Pkt> {
    let mut d = Driver::new(Network::of_elements(elements));
    for (i, r) in routes.iter().enumerate() {
        let hops: Vec<Hop> = r.iter().map(|&element| Hop { element, slot: 0 }).collect();
        assert_eq!(d.add_route(&hops), i as RouteId);
    }
    d
}

fn queue_stats(d: &Driver<Pkt>, e: usize) -> pathtwin_core::element::QueueStats {
    *d.net.elements[e].as_queue().unwrap().stats()
}

// ---------------------------------------------------------------------------------------
// Forwarding and timing

/// Delay d1 = 10 ms, a 10 Mbit/s link, delay d2 = 5 ms; packets of 1500 B (1.2 ms on the
/// link: 1500·8 / 10⁷ s) and 500 B (0.4 ms), both sent at t0 = 1 ms. The first leaves at
/// t0 + d1 + 1.2 + d2 = 17.2 ms; the second waits for the first on the link and leaves at
/// t0 + d1 + 1.2 + 0.4 + d2 = 17.6 ms. Wake-ups: the first delay once (both packets leave it
/// at 11 ms), the link once per packet (12.2, 12.6 ms), the second delay once per packet
/// (17.2, 17.6 ms): five, asked in that order of events.
#[test]
fn a_packet_leaves_after_the_sum_of_the_delays_plus_its_serialization_with_one_wake_up_per_departure() {
    let mut d = driver(vec![delay(Duration::from_millis(10)), link(Rate::from_mbps(10), QueueLimit::Packets(10)), delay(Duration::from_millis(5))], &[&[0, 1, 2]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, ms(1), pkt(0, 1500, 0));
    h.send(&mut d, ms(1), pkt(1, 500, 0));
    assert_eq!(h.asked, [(0, ms(11))], "the second packet leaves the first delay at the same time: no second wake-up");
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(us(17_200), 0), (us(17_600), 1)]);
    assert_eq!(h.asked, [(0, ms(11)), (1, us(12_200)), (2, us(17_200)), (1, us(12_600)), (2, us(17_600))]);
    assert!(h.recycled.is_empty());
    assert_eq!(d.reordered_pushes(), 0);
    for e in 0..3 {
        assert_eq!(d.armed_at(e), None, "element {e} has nothing left");
    }
    let s = queue_stats(&d, 1);
    assert_eq!((s.arrivals, s.departures, s.departure_bytes, s.drops), (2, 2, 2000, 0));
}

/// A link carrying its propagation delay (`with_propagation`) adds it after serialization:
/// 1000 B at 8 Mbit/s is 1 ms on the link, plus 20 ms: a packet sent at 0 leaves at 21 ms,
/// with one wake-up.
#[test]
fn a_link_with_its_propagation_delay_adds_it_after_serialization() {
    let q = BandwidthQueue::new(Rate::from_mbps(8), Rate::from_mbps(8), DropTail::new(QueueLimit::Packets(10)), rng_for(1, 1)).with_propagation(Duration::from_millis(20));
    let mut d = driver(vec![Element::Queue(q)], &[&[0]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 1000, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(21), 0)]);
    assert_eq!(h.asked, [(0, ms(21))]);
}

/// Two routes share a 12 Mbit/s link (1500 B: 1 ms on it) behind delays of 2 ms and 3 ms.
/// Packets sent at 0 reach the link at 2 ms (route 0) and 3 ms (route 1, while route 0's
/// packet is still on the link until 3 ms, and the second of route 0 waits): route 0's
/// first leaves at 3 ms, its second (sent at 0.5 ms, at the link at 2.5 ms) at 4 ms, route
/// 1's (at the link at 3 ms, behind it) at 5 ms.
#[test]
fn routes_sharing_a_link_queue_behind_each_other() {
    let mut d = driver(vec![delay(Duration::from_millis(2)), delay(Duration::from_millis(3)), link(Rate::from_mbps(12), QueueLimit::Packets(10))], &[&[0, 2], &[1, 2]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 1500, 0));
    h.send(&mut d, Instant::ZERO, pkt(10, 1500, 1));
    h.send(&mut d, us(500), pkt(1, 1500, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(3), 0), (ms(4), 1), (ms(5), 10)]);
}

/// A route without elements delivers a packet within `send`, at the send time, and asks for
/// no wake-up, in either kind of engine.
#[test]
fn a_route_without_elements_delivers_at_the_send_time() {
    let mut d = driver(vec![delay(Duration::from_millis(1))], &[&[]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, ms(7), pkt(0, 100, 0));
    assert_eq!(h.deliveries(), [(ms(7), 0)]);
    assert!(h.asked.is_empty());

    let mut d = driver(vec![delay(Duration::from_millis(1))], &[&[]]);
    let mut h = Harness::<false>::default();
    h.send(&mut d, ms(7), pkt(0, 100, 0));
    assert_eq!(h.deliveries(), [(ms(7), 0)]);
    assert!(h.asked.is_empty());
}

/// `repeat_route` gives a new id with the same hops.
#[test]
fn a_repeated_route_has_the_same_hops_under_a_new_id() {
    let mut d = driver(vec![delay(Duration::from_millis(1)), delay(Duration::from_millis(2))], &[&[1, 0]]);
    assert_eq!(d.repeat_route(0), 1);
    assert_eq!(d.routes(), 2);
    assert_eq!(d.route_hops(1), d.route_hops(0));
    assert_eq!(d.route_hops(1).iter().map(|h| h.element).collect::<Vec<_>>(), [1, 0]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 100, 1));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(3), 0)]);
}

/// The engine may send from `deliver` (a simulated endpoint answers at once): the answer
/// enters its route at the delivery time. Route 0 is a 3 ms delay, route 1 a 4 ms one: a
/// packet sent at 1 ms arrives at 4 ms, its answer at 8 ms. Through a zero-delay element
/// both routes share, the answer is pushed into the element while the driver is releasing
/// it, and still leaves at once, right after the packet it answers.
#[test]
fn an_engine_may_send_from_deliver() {
    let mut d = driver(vec![delay(Duration::from_millis(3)), delay(Duration::from_millis(4))], &[&[0], &[1]]);
    let mut h = Harness::<true> { echo: Some((0, 1)), ..Default::default() };
    h.send(&mut d, ms(1), pkt(0, 100, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(4), 0), (ms(8), 1000)]);

    let mut d = driver(vec![marker(1_000_000)], &[&[0], &[0]]);
    let mut h = Harness::<true> { echo: Some((0, 1)), ..Default::default() };
    h.send(&mut d, ms(1), pkt(0, 100, 0));
    h.send(&mut d, ms(2), pkt(1, 100, 0));
    assert_eq!(h.deliveries(), [(ms(1), 0), (ms(1), 1000), (ms(2), 1), (ms(2), 1001)]);
    assert!(h.asked.is_empty());
}

// ---------------------------------------------------------------------------------------
// Zero-delay elements

/// In an in-order engine a zero-delay element (loss with probability 0, a marker) releases a
/// packet within the push: a packet sent at 3 ms through both is delivered before `send`
/// returns, at 3 ms, and no wake-up is asked for. The marker's bucket holds one 1500 B
/// packet, so the first is IN and the second OUT. Behind a 2 ms delay line, only the delay
/// line is woken (at 2 + 3 = 5 ms).
#[test]
fn zero_delay_elements_release_within_the_push_in_an_in_order_engine() {
    let mut d = driver(vec![loss(0.0, 1), marker(1500)], &[&[0, 1]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, ms(3), pkt(0, 1500, 0));
    assert_eq!(h.deliveries(), [(ms(3), 0)]);
    h.send(&mut d, ms(3), pkt(1, 1500, 0));
    assert_eq!(h.deliveries(), [(ms(3), 0), (ms(3), 1)]);
    assert_eq!(h.delivered.iter().map(|(_, p)| p.mark).collect::<Vec<_>>(), [Mark::In, Mark::Out]);
    assert!(h.asked.is_empty(), "{:?}", h.asked);
    assert!(h.heap.is_empty());

    let mut d = driver(vec![delay(Duration::from_millis(2)), loss(0.0, 1), marker(1500)], &[&[0, 1, 2]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, ms(3), pkt(0, 1500, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(5), 0)]);
    assert_eq!(h.asked, [(0, ms(5))]);
}

/// In an engine whose pushes may come out of order, a zero-delay element is released through
/// a wake-up at the push time: two packets sent at 3 ms through loss then marker are not
/// delivered by `send`; the loss element asks once (at 3 ms, the second packet finding the
/// wake-up pending), the marker once when the loss element releases both into it; both are
/// delivered at 3 ms.
#[test]
fn zero_delay_elements_go_through_a_wake_up_in_an_out_of_order_engine() {
    let mut d = driver(vec![loss(0.0, 1), marker(1500)], &[&[0, 1]]);
    let mut h = Harness::<false>::default();
    h.send(&mut d, ms(3), pkt(0, 1500, 0));
    h.send(&mut d, ms(3), pkt(1, 1500, 0));
    assert!(h.delivered.is_empty());
    assert_eq!(h.asked, [(0, ms(3))]);
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(3), 0), (ms(3), 1)]);
    assert_eq!(h.asked, [(0, ms(3)), (1, ms(3))]);
    assert_eq!(h.delivered.iter().map(|(_, p)| p.mark).collect::<Vec<_>>(), [Mark::In, Mark::Out]);
}

// ---------------------------------------------------------------------------------------
// Wake-ups

/// A 5 ms delay line with packets sent at 0, 1 and 2 ms: armed at 5 ms by the first send
/// only (the later packets leave later: no wake-up is asked while the earlier one is
/// pending); each wake-up releases one packet and re-arms the line at the next departure
/// (6 ms, then 7 ms); after the last, nothing is armed.
#[test]
fn an_element_is_armed_once_and_re_armed_at_its_next_departure() {
    let mut d = driver(vec![delay(Duration::from_millis(5))], &[&[0]]);
    let mut h = Harness::<true>::default();
    for i in 0..3 {
        h.send(&mut d, ms(i), pkt(i as u32, 100, 0));
    }
    assert_eq!(h.asked, [(0, ms(5))]);
    assert_eq!(d.armed_at(0), Some(ms(5)));
    h.run_until(&mut d, ms(5));
    assert_eq!(h.asked, [(0, ms(5)), (0, ms(6))]);
    assert_eq!(d.armed_at(0), Some(ms(6)));
    h.run(&mut d);
    assert_eq!(h.asked, [(0, ms(5)), (0, ms(6)), (0, ms(7))]);
    assert_eq!(h.deliveries(), [(ms(5), 0), (ms(6), 1), (ms(7), 2)]);
    assert_eq!(d.armed_at(0), None);
}

/// A wake-up at a time the element is not armed for does nothing: a 10 ms delay line holding
/// a packet sent at 0 is woken by hand at 5 ms (too early) — nothing leaves, it stays armed
/// for 10 ms and nothing new is asked; its wake-up at 10 ms releases the packet; woken at
/// 10 ms again (a duplicate) it does nothing.
#[test]
fn a_stale_wake_up_does_nothing() {
    let mut d = driver(vec![delay(Duration::from_millis(10))], &[&[0]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 100, 0));
    d.wake(ms(5), 0, &mut h);
    assert!(h.delivered.is_empty());
    assert_eq!(d.armed_at(0), Some(ms(10)));
    assert_eq!(h.asked, [(0, ms(10))]);
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(10), 0)]);
    d.wake(ms(10), 0, &mut h);
    assert_eq!(h.deliveries(), [(ms(10), 0)]);
    assert_eq!(h.asked, [(0, ms(10))]);
    assert_eq!(d.armed_at(0), None);
}

/// The first two draws of `rng_for(seed, 3)` against p = 0.5: the seed whose first packet a
/// reorder element holds and whose second it lets pass.
fn seed_holding_the_first_of_two() -> u64 {
    use rand::Rng as _;
    (0..)
        .find(|&s| {
            let mut r = rng_for(s, 3);
            r.gen::<f64>() < 0.5 && r.gen::<f64>() >= 0.5
        })
        .unwrap()
}

/// An element whose next departure moves earlier asks for the earlier wake-up, and the later
/// one goes stale. A reorder element (extra delay 10 ms) holds a packet sent at 0 (it
/// leaves at 10 ms) and lets one sent at 2 ms pass (it leaves at 2 ms, ahead of the first).
/// Out of order (zero-delay release through the clock): asked at 10 ms, then at 2 ms
/// (replacing it); woken at 2 ms it re-arms for 10 ms, asking again; the first 10 ms
/// wake-up releases the held packet, the second is stale. Three wake-ups asked, deliveries
/// at 2 and 10 ms.
#[test]
fn an_earlier_wake_up_replaces_a_pending_later_one_and_the_replaced_one_goes_stale() {
    let reorder = || Element::Reorder(Reorder::new(Fraction::new(0.5).unwrap(), Duration::from_millis(10), rng_for(seed_holding_the_first_of_two(), 3)));
    let mut d = driver(vec![reorder()], &[&[0]]);
    let mut h = Harness::<false>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 100, 0));
    h.send(&mut d, ms(2), pkt(1, 100, 0));
    assert_eq!(h.asked, [(0, ms(10)), (0, ms(2))]);
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(2), 1), (ms(10), 0)]);
    assert_eq!(h.asked, [(0, ms(10)), (0, ms(2)), (0, ms(10))]);

    // In order, the passing packet leaves within its push; the held one's wake-up stands.
    let mut d = driver(vec![reorder()], &[&[0]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 100, 0));
    h.send(&mut d, ms(2), pkt(1, 100, 0));
    assert_eq!(h.deliveries(), [(ms(2), 1)]);
    assert_eq!(h.asked, [(0, ms(10))]);
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(2), 1), (ms(10), 0)]);
    assert_eq!(h.asked, [(0, ms(10))]);
}

/// `arm_all` asks for a wake-up for every element that holds something when the driver
/// starts (a delay line pushed before the driver took it: 0 + 4 ms), and none for the others
/// (an empty delay line, a link with placeholder cross traffic only).
#[test]
fn arm_all_asks_only_for_elements_with_something_pending() {
    let mut held = DelayLine::new(Duration::from_millis(4));
    held.push(Instant::ZERO, pkt(0, 100, 0));
    let mut d = driver(vec![delay(Duration::from_millis(1)), Element::Delay(held), queue(Rate::from_mbps(10), Rate::from_mbps(5), QueueLimit::Packets(10))], &[&[1]]);
    let mut h = Harness::<true>::default();
    d.arm_all(Instant::ZERO, &mut h);
    assert_eq!(h.asked, [(1, ms(4))]);
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(4), 0)]);
}

/// A reactive queue is woken for its flow monitor's sweeps even when no packet moves, so an
/// idle flow stops counting. 10 Mbit/s, idle timeout 100 ms (swept at most every 25 ms): a
/// 1500 B packet with payload at 0 starts a flow and leaves at 1.2 ms; the monitor then
/// sweeps at 25, 50, 75 and 100 ms (the flow, silent for at most 100 ms, still counts) and at
/// 125 ms (silent for 125 ms: retired), after which nothing is armed. Samples at 110 and
/// 130 ms see one active flow, then none.
#[test]
fn a_reactive_queue_is_woken_for_its_monitor_until_its_idle_flow_retires() {
    let reactivity = Reactivity::new(vec![AbwTable::constant(Rate::from_mbps(10))], QueueRule::Fixed(QueueLimit::Packets(10)), Duration::from_millis(100));
    let q = BandwidthQueue::new(Rate::from_mbps(10), Rate::from_mbps(10), DropTail::new(QueueLimit::Packets(10)), rng_for(1, 1)).with_reactivity(reactivity);
    let mut d = driver(vec![Element::Queue(q)], &[&[0]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 1500, 0));
    let at_110 = h.sample(&mut d, ms(110));
    let at_130 = h.sample(&mut d, ms(130));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(us(1200), 0)]);
    assert_eq!(h.asked, [(0, us(1200)), (0, ms(25)), (0, ms(50)), (0, ms(75)), (0, ms(100)), (0, ms(125))]);
    assert_eq!(at_110[0].0.active_flows, 1);
    assert_eq!(at_130[0].0.active_flows, 0);
    assert_eq!(d.armed_at(0), None);
}

/// The same with an idle timeout of zero (validation refuses it in a config, a network built by
/// hand may have it): the monitor's next sweep was then due at the very time it swept, so the
/// queue asked to be woken again at the time it was woken, forever. Its sweeps are now at
/// least a nanosecond apart, and the clock moves on to the packet's departure.
#[test]
fn a_reactive_queue_with_a_zero_idle_timeout_lets_the_clock_move() {
    let reactivity = Reactivity::new(vec![AbwTable::constant(Rate::from_mbps(10))], QueueRule::Fixed(QueueLimit::Packets(10)), Duration::ZERO);
    let q = BandwidthQueue::new(Rate::from_mbps(10), Rate::from_mbps(10), DropTail::new(QueueLimit::Packets(10)), rng_for(1, 1)).with_reactivity(reactivity);
    let mut d = driver(vec![Element::Queue(q)], &[&[0]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 1500, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(us(1200), 0)]);
}

// ---------------------------------------------------------------------------------------
// Out-of-order pushes

/// With an engine whose pushes may come out of order, a push behind the element's time is
/// moved up to it and counted: through a 1 ms delay line, packets sent at 10, 10, 4 and
/// 12 ms leave at 11, 11, 11 (moved up to 10 ms) and 13 ms, one push counted. Pushes at the
/// element's time or later are not.
#[test]
fn a_push_behind_an_elements_time_is_moved_up_and_counted() {
    let mut d = driver(vec![delay(Duration::from_millis(1))], &[&[0]]);
    let mut h = Harness::<false>::default();
    h.send(&mut d, ms(10), pkt(0, 100, 0));
    h.send(&mut d, ms(10), pkt(1, 100, 0));
    assert_eq!(d.reordered_pushes(), 0, "a push at the element's own time is in order");
    h.send(&mut d, ms(4), pkt(2, 100, 0));
    assert_eq!(d.reordered_pushes(), 1);
    h.send(&mut d, ms(12), pkt(3, 100, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(11), 0), (ms(11), 1), (ms(11), 2), (ms(13), 3)]);
    assert_eq!(d.reordered_pushes(), 1);
}

/// In-order traffic over several hops is never counted as reordered, in either engine
/// (the same packets as the first test: delay, link, delay).
#[test]
fn pushes_in_order_are_not_counted() {
    let elements = || vec![delay(Duration::from_millis(10)), link(Rate::from_mbps(10), QueueLimit::Packets(10)), delay(Duration::from_millis(5))];
    let mut d = driver(elements(), &[&[0, 1, 2]]);
    let mut h = Harness::<false>::default();
    for i in 0..4 {
        h.send(&mut d, us(300 * i), pkt(i as u32, 1500, 0));
    }
    h.run(&mut d);
    // Each reaches the link at 10 ms + 0.3·i ms and waits for the ones ahead: the i-th
    // leaves the link at 10 ms + 1.2·(i + 1) ms, the route 5 ms later.
    assert_eq!(h.deliveries(), [(us(16_200), 0), (us(17_400), 1), (us(18_600), 2), (us(19_800), 3)]);
    assert_eq!(d.reordered_pushes(), 0);
}

/// A queue sampled or woken at t has been advanced to t; in an out-of-order engine a later
/// push stamped earlier is moved up to t (else the link would serve it on time that has
/// already passed). 1500 B take 1 ms on a 12 Mbit/s link:
/// - sampled at 20 ms, then a packet sent at 15 ms: it leaves at 20 + 1 = 21 ms;
/// - a packet sent at 30 ms (leaves at 31 ms, when the link is woken), then one stamped
///   30.5 ms: the link was busy until 31 ms, so it leaves at 32 ms, not at 31.5 ms.
///
/// Two pushes counted.
#[test]
fn a_push_behind_a_queues_sample_or_release_is_moved_up_to_it() {
    let mut d = driver(vec![link(Rate::from_mbps(12), QueueLimit::Packets(10))], &[&[0]]);
    let mut h = Harness::<false>::default();
    h.sample(&mut d, ms(20));
    h.send(&mut d, ms(15), pkt(0, 1500, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(21), 0)]);
    assert_eq!(d.reordered_pushes(), 1);
    h.send(&mut d, ms(30), pkt(1, 1500, 0));
    h.run(&mut d);
    h.send(&mut d, us(30_500), pkt(2, 1500, 0));
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(ms(21), 0), (ms(31), 1), (ms(32), 2)]);
    assert_eq!(d.reordered_pushes(), 2);
}

// ---------------------------------------------------------------------------------------
// Drops

/// A DropTail queue of one packet on a 10 Mbit/s link: of three 1500 B packets sent at 0,
/// the first goes onto the link, the second waits, the third is dropped and handed to the
/// engine's `recycle`; the others leave at 1.2 and 2.4 ms. A random loss of probability 1
/// hands every packet to `recycle` likewise.
#[test]
fn a_drop_goes_to_the_engines_recycle() {
    let mut d = driver(vec![link(Rate::from_mbps(10), QueueLimit::Packets(1))], &[&[0]]);
    let mut h = Harness::<true>::default();
    for i in 0..3 {
        h.send(&mut d, Instant::ZERO, pkt(i, 1500, 0));
    }
    assert_eq!(h.recycled.iter().map(|p| p.id).collect::<Vec<_>>(), [2]);
    h.run(&mut d);
    assert_eq!(h.deliveries(), [(us(1200), 0), (us(2400), 1)]);
    let s = queue_stats(&d, 0);
    assert_eq!((s.arrivals, s.drops, s.drop_bytes, s.departures), (3, 1, 1500, 2));

    let mut d = driver(vec![delay(Duration::from_millis(1)), loss(1.0, 1)], &[&[0, 1]]);
    let mut h = Harness::<true>::default();
    h.send(&mut d, Instant::ZERO, pkt(0, 100, 0));
    h.send(&mut d, Instant::ZERO, pkt(1, 100, 0));
    h.run(&mut d);
    assert!(h.delivered.is_empty());
    assert_eq!(h.recycled.iter().map(|p| p.id).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(h.asked, [(0, ms(1))], "a dropped packet leaves nothing to wake");
}

// ---------------------------------------------------------------------------------------
// Queue sampling

/// Elements: a delay line, a queue q (12 Mbit/s, no cross traffic, DropTail of one packet:
/// 1500 B take 1 ms), a `pipe` queue (not sampled), a queue p (12 Mbit/s, ABW 6 Mbit/s, no
/// real traffic: placeholders of 1500 B at C − ABW = 6 Mbit/s arrive every 2 ms from 0 and
/// take 1 ms each on the link) and a marker. Only q and p are sampled, in element order,
/// under their `of_elements` names.
///
/// Into q at 0: four packets (the first on the link until 1 ms, the second waiting until
/// 2 ms, two dropped); one more at 0.6 ms (dropped).
/// - 0.5 ms: q holds 2 packets (3000 B), 2 drops, 0 B departed; p a placeholder on its link.
/// - 1.5 ms: q 1 packet, 1 drop (since the previous sample; 3 in all), 1500 B departed;
///   p empty (its placeholder left at 1 ms, the next comes at 2 ms).
/// - 2.5 ms: q empty, 0 drops, 3000 B departed; p the 2 ms placeholder.
#[test]
fn sampling_reports_each_queue_with_drops_per_interval() {
    let elements = vec![
        delay(Duration::from_millis(1)),
        link(Rate::from_mbps(12), QueueLimit::Packets(1)),
        link(Rate::from_mbps(12), QueueLimit::Packets(1)),
        queue(Rate::from_mbps(12), Rate::from_mbps(6), QueueLimit::Packets(10)),
        marker(1500),
    ];
    let mut net = Network::of_elements(elements);
    net.element_info[2].kind = "pipe";
    let mut d = Driver::new(net);
    assert_eq!(d.add_route(&[Hop { element: 1, slot: 0 }]), 0);
    assert_eq!(d.add_route(&[Hop { element: 2, slot: 0 }]), 1);
    let mut h = Harness::<true>::default();
    for i in 0..4 {
        h.send(&mut d, Instant::ZERO, pkt(i, 1500, 0));
    }
    h.send(&mut d, Instant::ZERO, pkt(100, 1500, 1));
    let at_05 = h.sample(&mut d, us(500));
    h.send(&mut d, us(600), pkt(4, 1500, 0));
    let at_15 = h.sample(&mut d, us(1500));
    let at_25 = h.sample(&mut d, us(2500));
    h.run(&mut d);

    let names = |rows: &[(QueueSample, String)]| rows.iter().map(|(s, n)| (s.element, n.clone())).collect::<Vec<_>>();
    for rows in [&at_05, &at_15, &at_25] {
        assert_eq!(names(rows), [(1, "element[1]".to_string()), (3, "element[3]".to_string())]);
    }
    // (t, packets, bytes, placeholder packets, placeholder bytes, drops, departed bytes)
    let row = |s: &QueueSample| (s.t_ns, s.packets, s.bytes, s.placeholder_packets, s.placeholder_bytes, s.drops, s.departed_bytes);
    assert_eq!(row(&at_05[0].0), (500_000, 2, 3000, 0, 0, 2, 0));
    assert_eq!(row(&at_15[0].0), (1_500_000, 1, 1500, 0, 0, 1, 1500));
    assert_eq!(row(&at_25[0].0), (2_500_000, 0, 0, 0, 0, 0, 3000));
    assert_eq!(row(&at_05[1].0), (500_000, 0, 0, 1, 1500, 0, 0));
    assert_eq!(row(&at_15[1].0), (1_500_000, 0, 0, 0, 0, 0, 0));
    assert_eq!(row(&at_25[1].0), (2_500_000, 0, 0, 1, 1500, 0, 0));
    for rows in [&at_05, &at_15, &at_25] {
        assert_eq!(rows[0].0.abw_bps, 12e6);
        assert_eq!(rows[1].0.abw_bps, 6e6);
        for (s, _) in rows.iter() {
            assert_eq!(s.active_flows, 0, "no reactivity");
            assert!(s.avg_queue.is_nan(), "DropTail keeps no average");
        }
    }
    assert_eq!(queue_stats(&d, 1).drops, 3, "the queue's own count is the total");
    assert_eq!(h.recycled.iter().map(|p| p.id).collect::<Vec<_>>(), [2, 3, 4]);
    assert_eq!(h.deliveries(), [(ms(1), 0), (ms(1), 100), (ms(2), 1)]);
}

// ---------------------------------------------------------------------------------------
// Determinism

type Run = (Vec<(Instant, u32, Mark)>, Vec<u32>, Vec<(usize, Instant)>, Vec<QueueSample>, u64);

/// A mixed network — random loss, a marker, reordering, a shared link with placeholder cross
/// traffic and a short DropTail queue, delays — fed 300 packets from two routes at
/// pseudo-random times and lengths (a fixed LCG), sampled every 10 ms.
fn mixed_run<const IN_ORDER: bool>() -> Run {
    let elements = vec![
        loss(0.1, 7),
        marker(20_000),
        Element::Reorder(Reorder::new(Fraction::new(0.2).unwrap(), Duration::from_millis(3), rng_for(7, 3))),
        delay(Duration::from_millis(2)),
        Element::Queue(BandwidthQueue::new(Rate::from_mbps(20), Rate::from_mbps(12), DropTail::new(QueueLimit::Packets(8)), rng_for(7, 4))),
        delay(Duration::from_millis(5)),
    ];
    let mut d = Driver::new(Network::of_elements(elements));
    d.add_route(&[0, 1, 2, 4, 5].map(|element| Hop { element, slot: 0 }));
    d.add_route(&[3, 4, 5].map(|element| Hop { element, slot: 1 }));
    let mut h = Harness::<IN_ORDER>::default();
    let mut x: u64 = 12345;
    let mut lcg = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut t = Instant::ZERO;
    let mut samples = Vec::new();
    let mut next_sample = Instant::ZERO;
    for id in 0..300u32 {
        t += Duration::from_nanos(lcg() % 600_000);
        while next_sample <= t {
            samples.extend(h.sample(&mut d, next_sample).into_iter().map(|(s, _)| s));
            next_sample += Duration::from_millis(10);
        }
        let len = 40 + (lcg() % 1461) as u32;
        h.send(&mut d, t, pkt(id, len, (lcg() % 2) as RouteId));
    }
    h.run(&mut d);
    let delivered = h.delivered.iter().map(|(t, p)| (*t, p.id, p.mark)).collect();
    (delivered, h.recycled.iter().map(|p| p.id).collect(), h.asked, samples, d.reordered_pushes())
}

/// The same sequence run twice gives the same deliveries (times, order, marks), drops,
/// wake-ups and samples, bit for bit, in both kinds of engine; and every packet is accounted
/// for (delivered or recycled), with some of each.
#[test]
fn the_same_sequence_run_twice_gives_identical_results() {
    fn check(a: Run, b: Run) {
        assert_eq!(a.0.len() + a.1.len(), 300, "every packet delivered or dropped");
        assert!(!a.0.is_empty() && !a.1.is_empty(), "{} delivered, {} dropped", a.0.len(), a.1.len());
        assert!(a.0.windows(2).all(|w| w[0].0 <= w[1].0), "deliveries in time order");
        // `QueueSample` holds NaN (DropTail's average): compare it field by field, bits for the floats.
        let key = |s: &QueueSample| (s.t_ns, s.element, s.packets, s.bytes, s.placeholder_packets, s.drops, s.departed_bytes, s.abw_bps.to_bits(), s.avg_queue.to_bits());
        assert_eq!(a.3.iter().map(key).collect::<Vec<_>>(), b.3.iter().map(key).collect::<Vec<_>>());
        assert_eq!((a.0, a.1, a.2, a.4), (b.0, b.1, b.2, b.4));
    }
    check(mixed_run::<true>(), mixed_run::<true>());
    check(mixed_run::<false>(), mixed_run::<false>());
}
