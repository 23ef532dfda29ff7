//! End-to-end transfers: every byte arrives exactly once, in order, with and without loss,
//! in one or both directions, and the connection closes with a FIN each way.

mod common;

use common::*;
use pathtwin_core::time::Instant;
use pathtwin_tcp::{CcAlgorithm, Event, State, TcpConfig};

fn received_total(sim: &Sim, side: usize) -> u64 {
    sim.events[side].iter().map(|(_, e)| if let Event::Received { bytes } = e { *bytes } else { 0 }).sum()
}

/// The client writes `n` bytes and closes; the server closes when it sees the FIN.
fn one_way(cfg: TcpConfig, n: u64, drop_up: Option<DropFn>, drop_down: Option<DropFn>) -> Sim {
    let mut sim = Sim::symmetric(cfg, ms(10));
    if let Some(f) = drop_up {
        sim.set_drop(0, f);
    }
    if let Some(f) = drop_down {
        sim.set_drop(1, f);
    }
    sim.ep[0].send(n);
    sim.ep[0].close();
    sim.run_until(at_ms(30_000));
    sim
}

fn assert_complete(sim: &Sim, n: u64) {
    let (c, s) = (&sim.ep[0], &sim.ep[1]);
    assert_eq!(s.stats().bytes_delivered, n, "server delivered");
    assert_eq!(received_total(sim, 1), n, "Received events add up");
    assert_eq!(c.stats().bytes_acked, n, "client acked");
    assert_eq!(c.flight_size(), 0);
    for side in 0..2 {
        assert!(sim.event_time(side, Event::PeerClosed).is_some(), "side {side} saw the peer's FIN");
        assert!(sim.event_time(side, Event::Closed).is_some(), "side {side} closed");
    }
    // The client closed first, so it is the one waiting in TIME-WAIT.
    assert_eq!(c.state(), State::TimeWait);
    assert_eq!(s.state(), State::Closed);
}

#[test]
fn every_size_is_delivered_exactly_and_closed_both_ways() {
    for n in [0, 1, 1459, 1460, 1461, 14_600, 100_000, 1_000_000] {
        let sim = one_way(TcpConfig::default(), n, None, None);
        assert_complete(&sim, n);
        assert_eq!(sim.ep[0].stats().retransmits, 0, "n = {n}: no loss, no retransmission");
        // Payload segments: ceil(n / MSS), the last carrying the FIN unless n = 0.
        assert_eq!(sim.ep[0].stats().data_segments_sent, n.div_ceil(1460), "n = {n}");
    }
}

#[test]
fn lossy_paths_still_deliver_every_byte() {
    let algos = [(CcAlgorithm::NewReno, true), (CcAlgorithm::NewReno, false), (CcAlgorithm::Reno, false)];
    for (cc, sack) in algos {
        for seed in 1..=4 {
            let cfg = TcpConfig { cc, sack, ..Default::default() };
            let n = 300_000;
            let sim = one_way(cfg, n, Some(drop_random(seed, 0.03)), Some(drop_random(seed + 100, 0.03)));
            assert_complete(&sim, n);
            assert!(sim.filter_drops(0) > 0, "the test must actually lose data");
            assert!(sim.ep[0].stats().retransmits > 0);
        }
    }
}

#[test]
fn both_directions_carry_data_at_once() {
    for sack in [true, false] {
        let cfg = TcpConfig { sack, ..Default::default() };
        let mut sim = Sim::symmetric(cfg, ms(15));
        sim.set_drop(0, drop_random(7, 0.02));
        sim.set_drop(1, drop_random(8, 0.02));
        sim.ep[0].send(200_000);
        sim.ep[0].close();
        // The server writes as soon as it is connected; the harness closes it on the FIN,
        // after its own data (a FIN always follows queued data).
        while sim.ep[1].state() != State::Established {
            sim.run_for(ms(1));
        }
        sim.ep[1].send(350_000);
        sim.run_until(at_ms(30_000));
        assert_eq!(sim.ep[1].stats().bytes_delivered, 200_000);
        assert_eq!(sim.ep[0].stats().bytes_delivered, 350_000);
        assert_eq!(sim.ep[1].stats().bytes_acked, 350_000);
        assert!(sim.event_time(0, Event::Closed).is_some() && sim.event_time(1, Event::Closed).is_some());
    }
}

#[test]
fn events_come_in_order() {
    let sim = one_way(TcpConfig::default(), 50_000, Some(drop_data_indices(&[5])), None);
    let server: Vec<Event> = sim.events[1].iter().map(|(_, e)| *e).collect();
    assert_eq!(server.first(), Some(&Event::Connected));
    let fin = server.iter().position(|e| *e == Event::PeerClosed).unwrap();
    assert!(server[..fin].iter().all(|e| matches!(e, Event::Connected | Event::Received { .. })));
    assert_eq!(server.last(), Some(&Event::Closed));
    let client: Vec<Event> = sim.events[0].iter().map(|(_, e)| *e).collect();
    assert_eq!(client, [Event::Connected, Event::AllAcked, Event::PeerClosed, Event::Closed]);
}

#[test]
fn time_wait_ends_and_a_stray_segment_is_reset() {
    let mut sim = one_way(TcpConfig::default(), 10_000, None, None);
    sim.run_until(at_ms(200_000));
    assert_eq!(sim.ep[0].state(), State::Closed);
    assert_eq!(sim.ep[0].poll_timeout(), None);
    let stray = sim.sent[1].last().unwrap().1;
    sim.ep[0].handle_segment(sim.now, &stray);
    let rst = sim.ep[0].poll_transmit(sim.now).unwrap();
    assert!(rst.flags.rst());
    sim.ep[1].handle_segment(sim.now, &rst);
    assert_eq!(sim.ep[1].poll_event(), None, "a closed endpoint ignores resets");
}

#[test]
fn reset_aborts_the_peer() {
    let mut sim = Sim::symmetric(TcpConfig::default(), ms(10));
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(200));
    let rst = pathtwin_tcp::Segment { flags: pathtwin_tcp::Flags::RST, ..Default::default() };
    sim.ep[1].handle_segment(sim.now, &rst);
    assert_eq!(sim.ep[1].state(), State::Closed);
    let evs: Vec<_> = std::iter::from_fn(|| sim.ep[1].poll_event()).collect();
    assert_eq!(evs.last(), Some(&Event::Reset));
}

#[test]
fn identical_inputs_give_identical_runs() {
    let run = || {
        let sim = one_way(TcpConfig::default(), 400_000, Some(drop_random(3, 0.05)), Some(drop_random(4, 0.05)));
        (sim.sent, sim.ep[0].stats().clone(), sim.ep[1].stats().clone())
    };
    assert!(run() == run());
}

#[test]
fn endless_bulk_keeps_sending() {
    let mut sim = Sim::symmetric(TcpConfig::default(), ms(10));
    sim.record = false;
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(1_000));
    let delivered = sim.ep[1].stats().bytes_delivered;
    assert!(delivered > 10_000_000, "delivered only {delivered}");
    assert_eq!(sim.ep[0].state(), State::Established);
    assert!(sim.ep[0].poll_timeout().unwrap() > Instant::ZERO);
}
