//! Virtual-time tests of the bandwidth queue: conservation (property test), placeholder
//! cross traffic leaving exactly C − ABW to foreground traffic, and serialization timing.

use pathtwin_core::element::{BandwidthQueue, Element, PLACEHOLDER_LEN};
use pathtwin_core::packet::{FlowKey, PacketMeta, TcpFlags};
use pathtwin_core::qdisc::DropTail;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::units::{QueueLimit, Rate};
use pathtwin_core::rng_for;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Pkt {
    len: u32,
    flow: u64,
}

impl PacketMeta for Pkt {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn payload_len(&self) -> u32 {
        self.len.saturating_sub(40)
    }
    fn flow_key(&self) -> FlowKey {
        self.flow
    }
    fn tcp_flags(&self) -> Option<TcpFlags> {
        None
    }
}

fn queue(capacity: Rate, abw: Rate, limit: QueueLimit) -> BandwidthQueue<Pkt> {
    BandwidthQueue::new(capacity, abw, DropTail::new(limit), rng_for(1, 1))
}

/// Drains everything due by `now`, returning (departure time, packet).
fn drain(q: &mut BandwidthQueue<Pkt>, now: Instant, out: &mut Vec<(Instant, Pkt)>) {
    while let Some(x) = q.poll_output(now) {
        out.push(x);
    }
}

#[test]
fn a_packet_leaves_after_its_serialization_time() {
    let mut q = queue(Rate::from_mbps(10), Rate::from_mbps(10), QueueLimit::Packets(10));
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 1 }, 0);
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 1 }, 0);
    // 1500 B at 10 Mbit/s = 1.2 ms each, back to back.
    assert_eq!(q.next_wakeup(), Some(Instant::ZERO + Duration::from_micros(1200)));
    let mut out = Vec::new();
    drain(&mut q, Instant::ZERO + Duration::from_millis(5), &mut out);
    let times: Vec<_> = out.iter().map(|(t, _)| t.as_nanos()).collect();
    assert_eq!(times, vec![1_200_000, 2_400_000]);
}

#[test]
fn placeholders_leave_foreground_exactly_the_abw() {
    // C = 100 Mbit/s, ABW = 10 Mbit/s. A saturating foreground source (always a packet
    // queued) must get 10 Mbit/s: FIFO shares departures in proportion to arrivals, and the
    // placeholders arrive at 90 Mbit/s. Offer 20 Mbit/s and check the departed rate.
    let c = Rate::from_mbps(100);
    let mut q = queue(c, Rate::from_mbps(10), QueueLimit::Bytes(200_000));
    let mut out = Vec::new();
    let gap = Rate::from_mbps(20).transmit_time(1500);
    let mut t = Instant::ZERO;
    let end = Instant::ZERO + Duration::from_secs(10);
    while t < end {
        q.push(t, Pkt { len: 1500, flow: 1 }, 0);
        drain(&mut q, t, &mut out);
        t += gap;
    }
    // Count what left during the last 5 s (after the queue filled).
    let from = Instant::ZERO + Duration::from_secs(5);
    let bytes: u64 = out.iter().filter(|(d, _)| *d >= from).map(|(_, p)| p.len as u64).sum();
    let rate = bytes as f64 * 8.0 / 5.0;
    assert!((rate - 10e6).abs() / 10e6 < 0.02, "foreground got {rate} bit/s, expected 10 Mbit/s");
    let s = q.stats();
    let share = s.placeholder_departure_bytes as f64 / (s.placeholder_departure_bytes + s.departure_bytes) as f64;
    assert!((share - 0.9).abs() < 0.02, "placeholder share {share}");
}

#[test]
fn idle_placeholder_stream_has_the_configured_rate() {
    let mut q = queue(Rate::from_mbps(100), Rate::from_mbps(40), QueueLimit::Packets(100));
    q.advance(Instant::ZERO + Duration::from_secs(1));
    // 60 Mbit/s of 1500 B placeholders for 1 s: 5000 packets (the one at t = 1 s included).
    let s = q.stats();
    assert!((s.placeholder_arrivals as i64 - 5_000).abs() <= 1, "{}", s.placeholder_arrivals);
    assert_eq!(s.placeholder_drops, 0, "an idle 100 Mbit/s link never queues 60 Mbit/s");
    assert_eq!(PLACEHOLDER_LEN, 1500);
}

#[test]
fn changing_abw_at_run_time_changes_the_placeholder_rate() {
    let mut q = queue(Rate::from_mbps(100), Rate::from_mbps(40), QueueLimit::Packets(100));
    q.advance(Instant::ZERO + Duration::from_secs(1));
    let before = q.stats().placeholder_arrivals;
    q.set_abw(Instant::ZERO + Duration::from_secs(1), Rate::from_mbps(70));
    q.advance(Instant::ZERO + Duration::from_secs(2));
    let during = q.stats().placeholder_arrivals - before;
    // 30 Mbit/s for 1 s = 2500 packets.
    assert!((during as i64 - 2_500).abs() <= 2, "{during}");
    assert_eq!(q.abw(), Rate::from_mbps(70));
}

proptest! {
    /// For every queue: arrivals = departures + drops + occupancy, at every point in time,
    /// whatever the traffic, capacity, ABW and limit.
    #[test]
    fn conservation(
        capacity_mbps in 1u64..200,
        abw_percent in 1u64..=100,
        limit_pkts in 1u64..50,
        byte_limit in any::<bool>(),
        arrivals in proptest::collection::vec((0u64..2_000_000, 40u32..1500), 1..300),
    ) {
        let c = Rate::from_mbps(capacity_mbps);
        let abw = Rate::from_bps(c.bps() * abw_percent / 100);
        let limit = if byte_limit { QueueLimit::Bytes(limit_pkts * 1000) } else { QueueLimit::Packets(limit_pkts) };
        let mut e = Element::Queue(queue(c, abw, limit));
        let mut t = Instant::ZERO;
        let mut out = 0u64;
        for (gap, len) in arrivals {
            t += Duration::from_nanos(gap);
            e.push(t, Pkt { len, flow: 1 }, 0);
            while e.poll_output(t).is_some() {
                out += 1;
            }
            let q = e.as_queue().unwrap();
            let s = *q.stats();
            prop_assert_eq!(s.departures, out);
            prop_assert_eq!(s.arrivals, s.departures + s.drops + q.occupancy().packets);
            prop_assert_eq!(
                s.placeholder_arrivals,
                s.placeholder_departures + s.placeholder_drops + q.occupancy().placeholder_packets + q.occupancy().deferred_placeholders
            );
        }
        // Drain completely: everything admitted eventually leaves.
        let end = t + Duration::from_secs(100);
        while e.poll_output(end).is_some() {
            out += 1;
        }
        let q = e.as_queue().unwrap();
        prop_assert_eq!(q.stats().arrivals, out + q.stats().drops);
    }
}

#[test]
fn propagation_delay_is_added_after_serialization() {
    let mut q = queue(Rate::from_mbps(10), Rate::from_mbps(10), QueueLimit::Packets(10)).with_propagation(Duration::from_millis(45));
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 1 }, 0);
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 1 }, 0);
    assert_eq!(q.next_wakeup(), Some(Instant::ZERO + Duration::from_micros(46_200)));
    let mut out = Vec::new();
    drain(&mut q, Instant::ZERO + Duration::from_millis(100), &mut out);
    let times: Vec<_> = out.iter().map(|(t, _)| t.as_nanos()).collect();
    assert_eq!(times, vec![46_200_000, 47_400_000]);
}

#[test]
fn wakeup_skips_placeholders_queued_ahead_of_a_real_packet() {
    // C = 100 Mbit/s, ABW = 10 Mbit/s, foreground offered at 20 Mbit/s: the queue builds up
    // with placeholders between the real packets. Every wakeup the queue asks for must
    // release a real packet (a rounding-early one may repeat), not one per placeholder.
    let mut q = queue(Rate::from_mbps(100), Rate::from_mbps(10), QueueLimit::Packets(1000));
    let gap = Rate::from_mbps(20).transmit_time(1500);
    let mut next_push = Instant::ZERO;
    let (mut pushed, mut wakes, mut released) = (0, 0, 0);
    loop {
        let wake = q.next_wakeup();
        match wake {
            Some(w) if pushed == 200 || w < next_push => {
                wakes += 1;
                while q.poll_output(w).is_some() {
                    released += 1;
                }
            }
            _ if pushed < 200 => {
                q.push(next_push, Pkt { len: 1500, flow: 1 }, 0);
                pushed += 1;
                next_push += gap;
            }
            _ => break,
        }
    }
    assert_eq!(released, 200);
    let s = q.stats();
    assert!(s.placeholder_departures > 500, "placeholders were interleaved: {}", s.placeholder_departures);
    assert!(wakes <= released + 20, "{wakes} wakeups for {released} packets");
}

#[test]
fn reactivity_falls_back_when_traffic_stops_without_another_packet() {
    use pathtwin_core::element::{AbwTable, QueueRule, Reactivity};
    // ABW(1) = 2, ABW(2) = 3 Mbit/s. Two flows send, then both fall silent: once the idle
    // timeout has passed, the queue must ask to be woken and drop back to ABW(1) by itself.
    let table = AbwTable::new(vec![(1, Rate::from_mbps(2)), (2, Rate::from_mbps(3))]).unwrap();
    let timeout = Duration::from_secs(1);
    let r = Reactivity::new(vec![table], QueueRule::Fixed(QueueLimit::Packets(100)), timeout);
    let mut q = queue(Rate::from_mbps(100), Rate::from_mbps(2), QueueLimit::Packets(100)).with_reactivity(r);
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 1 }, 0);
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 2 }, 0);
    assert_eq!(q.abw(), Rate::from_mbps(3));
    // Drive the queue only at the times it asks for, as the engines do.
    let mut now = Instant::ZERO;
    while let Some(w) = q.next_wakeup() {
        now = w.max(now);
        while q.poll_output(now).is_some() {}
        if now > Instant::ZERO + Duration::from_secs(10) {
            break;
        }
    }
    assert_eq!(q.active_flows(), Some(&[0u32][..]));
    assert_eq!(q.abw(), Rate::from_mbps(2));
    assert!(now <= Instant::ZERO + timeout + timeout, "retired at {now:?}");
}

#[test]
fn abw_steps_give_the_foreground_each_steps_abw_from_its_time_on() {
    // C = 20 Mbit/s; ABW 15 Mbit/s until 4 s, then 5 until 8 s, then 10. A saturating
    // foreground must get each step's ABW (the placeholders take C − ABW(t)), measured over
    // each step's last 3 s, once the queue has settled at the new rate.
    let c = Rate::from_mbps(20);
    let steps = [(Instant::ZERO + Duration::from_secs(4), Rate::from_mbps(5)), (Instant::ZERO + Duration::from_secs(8), Rate::from_mbps(10))];
    let mut q = queue(c, Rate::from_mbps(15), QueueLimit::Bytes(100_000)).with_abw_steps(&steps);
    let mut out = Vec::new();
    let gap = Rate::from_mbps(25).transmit_time(1500);
    let mut t = Instant::ZERO;
    let end = Instant::ZERO + Duration::from_secs(12);
    while t < end {
        q.push(t, Pkt { len: 1500, flow: 1 }, 0);
        drain(&mut q, t, &mut out);
        t += gap;
    }
    let rate_between = |a: u64, b: u64| {
        let (a, b) = (Instant::ZERO + Duration::from_secs(a), Instant::ZERO + Duration::from_secs(b));
        out.iter().filter(|(d, _)| *d >= a && *d < b).map(|(_, p)| p.len as f64 * 8.0).sum::<f64>() / (b - a).as_secs_f64()
    };
    for (from, to, abw) in [(1, 4, 15e6), (5, 8, 5e6), (9, 12, 10e6)] {
        let got = rate_between(from, to);
        assert!((got - abw).abs() / abw < 0.03, "{from}-{to} s: foreground got {got} bit/s, the step says {abw}");
    }
    assert_eq!(q.stats().rate_changes, 2);
    assert_eq!(q.abw(), Rate::from_mbps(10));
}

#[test]
fn an_abw_step_at_time_zero_replaces_the_initial_abw() {
    let q = queue(Rate::from_mbps(20), Rate::from_mbps(15), QueueLimit::Packets(10)).with_abw_steps(&[(Instant::ZERO, Rate::from_mbps(3))]);
    assert_eq!(q.abw(), Rate::from_mbps(3));
}

/// A `[[shared]] paths` class's queue of capacity `c` over two members (own ABW 8 and 10
/// Mbit/s), `together` its ABW measured with both loaded, a 1-s flow idle timeout.
fn paths_class(c: Rate, together: Option<Rate>) -> BandwidthQueue<Pkt> {
    use pathtwin_core::element::{AbwTable, PathsClass, QueueRule, Reactivity};
    let tables = vec![AbwTable::constant(Rate::from_mbps(8)), AbwTable::constant(Rate::from_mbps(10))];
    let reactivity = Reactivity::new(tables, QueueRule::Fixed(QueueLimit::Bytes(100_000)), Duration::from_secs(1))
        .for_paths_class(PathsClass::new(together, c));
    queue(c, Rate::from_mbps(8), QueueLimit::Bytes(100_000)).with_reactivity(reactivity)
}

#[test]
fn a_paths_class_carries_a_lone_member_whole_and_two_at_their_abw() {
    // Member 0 alone must get what its own queue gives it, so the class takes no placeholders
    // and a 15-Mbit/s stream passes whole; with member 1 sending too, the placeholders take
    // C − ABW and the two together get the class's ABW (measured together, 6 Mbit/s) — or,
    // without one, NSDI'09 §2.3's flow-weighted mean Σ n_p·ABW_p / Σ n_p.
    let c = Rate::from_mbps(20);
    let mut q = paths_class(c, Some(Rate::from_mbps(6)));
    assert_eq!(q.abw(), c, "idle: no placeholders");
    let mut out = Vec::new();
    // Member 0 alone at 15 Mbit/s for 4 s, then both members at 12.5 Mbit/s each for 4 s.
    let (alone_gap, both_gap) = (Rate::from_mbps(15).transmit_time(1500), Rate::from_mbps(25).transmit_time(1500));
    let (switch, end) = (Instant::ZERO + Duration::from_secs(4), Instant::ZERO + Duration::from_secs(8));
    let mut t = Instant::ZERO;
    let mut k = 0u64;
    while t < end {
        let slot = if t < switch { 0 } else { (k % 2) as u16 };
        q.push(t, Pkt { len: 1500, flow: 1 + slot as u64 }, slot);
        drain(&mut q, t, &mut out);
        t += if t < switch { alone_gap } else { both_gap };
        k += 1;
    }
    let rate_between = |a: u64, b: u64| {
        let (a, b) = (Instant::ZERO + Duration::from_secs(a), Instant::ZERO + Duration::from_secs(b));
        out.iter().filter(|(d, _)| *d >= a && *d < b).map(|(_, p)| p.len as f64 * 8.0).sum::<f64>() / (b - a).as_secs_f64()
    };
    let alone = rate_between(1, 4);
    assert!((alone - 15e6).abs() / 15e6 < 0.01, "one member alone got {alone} bit/s of the 15 it offered");
    let both = rate_between(5, 8);
    assert!((both - 6e6).abs() / 6e6 < 0.03, "two members got {both} bit/s, the class's ABW is 6");
    assert_eq!(q.abw(), Rate::from_mbps(6));
    // Without a measured ABW: one flow on each member, (8 + 10) / 2.
    let mut q = paths_class(c, None);
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 1 }, 0);
    assert_eq!(q.abw(), c, "one member: transparent");
    q.push(Instant::ZERO, Pkt { len: 1500, flow: 2 }, 1);
    assert_eq!(q.abw(), Rate::from_mbps(9));
}

#[test]
fn a_paths_class_binds_at_a_second_member_and_frees_a_hold_after_fewer_than_two() {
    use pathtwin_core::element::PATHS_CLASS_HOLD;
    // The definition (element::PathsClass): bound from the instant two members carry flows;
    // freed once fewer than two have for PATHS_CLASS_HOLD, and not before. Member 0 sends
    // throughout; member 1 sends 1-2 s, goes silent for 2.5 s (a sender backing off its
    // retransmission timer: retired after 1 s, back within the hold), sends 4.5-5 s, is
    // silent past its retirement plus the hold, and sends again 10-11 s.
    // The monitor retires a silent member on its own clock (idle timeout, swept every
    // quarter of it): the hold is checked from the instant the monitor says so.
    let c = Rate::from_mbps(20);
    let together = Rate::from_mbps(6);
    let mut q = paths_class(c, Some(together));
    let step = Duration::from_millis(10);
    let secs = |s: f64| Instant::ZERO + Duration::from_secs_f64(s);
    let member1_sends = |t: Instant| [(1.0, 2.0), (4.5, 5.0), (10.0, 11.0)].iter().any(|&(a, b)| t >= secs(a) && t < secs(b));
    let mut out = Vec::new();
    let (mut t, mut fewer_since): (Instant, Option<Instant>) = (Instant::ZERO, None);
    let (mut frees, mut binds) = (Vec::new(), Vec::new());
    let mut was_bound = false;
    while t < secs(16.0) {
        q.push(t, Pkt { len: 1500, flow: 1 }, 0);
        if member1_sends(t) {
            q.push(t, Pkt { len: 1500, flow: 2 }, 1);
        }
        drain(&mut q, t, &mut out);
        let members = q.active_flows().unwrap().iter().filter(|&&n| n > 0).count();
        if members >= 2 {
            fewer_since = None;
        } else if was_bound && fewer_since.is_none() {
            fewer_since = Some(t);
        }
        let bound = q.abw() == together;
        assert!(bound || q.abw() == c, "at {t:?}: ABW {} is neither the class's nor its capacity", q.abw());
        // Binds at once with two members; stays bound while fewer than two for less than the hold.
        let expect = members >= 2 || (was_bound && fewer_since.is_some_and(|s| t < s + PATHS_CLASS_HOLD));
        assert_eq!(bound, expect, "at {t:?}: {members} member(s) active, fewer than two since {fewer_since:?}");
        if bound && !was_bound {
            binds.push(t);
        }
        if !bound && was_bound {
            frees.push(t);
        }
        was_bound = bound;
        t += step;
    }
    // Bound at member 1's first packet (1 s), through its short silence, freed the hold after
    // the monitor retired it from its long one (its last packet at 4.99 s, retired 1-1.25 s
    // later: idle timeout, swept every quarter of it), bound again at 10 s and freed so.
    assert_eq!(binds, vec![secs(1.0), secs(10.0)]);
    assert_eq!(frees.len(), 2, "{frees:?}");
    let hold = PATHS_CLASS_HOLD.as_secs_f64();
    for (free, last) in frees.iter().zip([4.99, 10.99]) {
        let after = free.saturating_since(secs(last)).as_secs_f64();
        assert!(after > 1.0 + hold && after <= 1.25 + hold + 0.02, "freed {after} s after member 1's last packet");
    }
}
