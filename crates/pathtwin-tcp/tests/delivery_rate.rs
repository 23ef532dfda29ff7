//! The endpoint's delivery-rate sampling as a congestion controller sees it through
//! `CongestionControl::on_delivery`: every delivered byte counted once, SACKed data sampled
//! during recovery, and application-limited periods marked as
//! draft-cheng-iccrg-delivery-rate-estimation §3.4 says.

mod common;

use common::*;
use pathtwin_core::time::Instant;
use pathtwin_tcp::{AckEvent, CcAlgorithm, CcParams, CongestionControl, DeliveryEvent, Event, Reno, TcpConfig};
use std::sync::Mutex;

const MSS: u64 = 1460;

/// Events recorded by [`Recorder`], per test (each test uses its own name).
static EVENTS: Mutex<Vec<(&'static str, DeliveryEvent)>> = Mutex::new(Vec::new());

/// Reno that records every delivery event; `N` names the test that owns it.
#[derive(Debug)]
struct Recorder<const N: usize>(Reno);

const NAMES: [&str; 2] = ["sack", "app"];

impl<const N: usize> CongestionControl for Recorder<N> {
    fn name(&self) -> &'static str {
        NAMES[N]
    }
    fn on_ack(&mut self, ev: &AckEvent) {
        self.0.on_ack(ev)
    }
    fn on_enter_recovery(&mut self, now: Instant, flight: u64) {
        self.0.on_enter_recovery(now, flight)
    }
    fn on_exit_recovery(&mut self, now: Instant, flight: u64) {
        self.0.on_exit_recovery(now, flight)
    }
    fn on_rto(&mut self, now: Instant, flight: u64, first: bool) {
        self.0.on_rto(now, flight, first)
    }
    fn on_delivery(&mut self, ev: &DeliveryEvent) {
        EVENTS.lock().unwrap().push((NAMES[N], *ev));
    }
    fn cwnd(&self) -> u64 {
        self.0.cwnd()
    }
    fn ssthresh(&self) -> u64 {
        self.0.ssthresh()
    }
}

fn build<const N: usize>(p: &CcParams) -> Box<dyn CongestionControl> {
    Box::new(Recorder::<N>(Reno::new(p)))
}

fn events(name: &str) -> Vec<DeliveryEvent> {
    EVENTS.lock().unwrap().iter().filter(|(n, _)| *n == name).map(|(_, e)| *e).collect()
}

#[test]
fn every_byte_is_counted_once_and_sacks_are_sampled_during_recovery() {
    let cfg = TcpConfig { cc: CcAlgorithm::Custom { name: NAMES[0], build: build::<0> }, delayed_ack: false, ..Default::default() };
    let mut sim = Sim::symmetric(cfg, ms(50));
    sim.set_drop(0, drop_data_indices(&[30, 33, 36]));
    sim.ep[0].send(200 * MSS);
    sim.run_until(at_ms(3_000));
    assert!(sim.event_time(0, Event::AllAcked).is_some());
    assert_eq!(sim.ep[0].stats().retransmits, 3);
    let ev = events(NAMES[0]);
    let total: u64 = ev.iter().map(|e| e.sample.newly_delivered).sum();
    assert_eq!(total, 200 * MSS, "each byte delivered once");
    assert_eq!(ev.last().unwrap().sample.total_delivered, 200 * MSS);
    assert!(ev.windows(2).all(|w| w[1].sample.total_delivered == w[0].sample.total_delivered + w[1].sample.newly_delivered));
    // During recovery, ACKs that only SACK data still bring samples; with no bottleneck
    // every sample spans one round trip of 100 ms or more.
    let in_recovery: Vec<&DeliveryEvent> = ev.iter().filter(|e| e.in_recovery).collect();
    assert!(in_recovery.len() > 10, "{} samples in recovery", in_recovery.len());
    assert!(ev.iter().all(|e| e.sample.interval.is_none_or(|i| i >= ms(100))));
    assert_eq!(ev.iter().map(|e| e.newly_lost).sum::<u64>(), 3 * MSS, "three segments deemed lost");
    // Karn: the retransmissions' samples carry no RTT; the others carry the path's 100 ms.
    assert!(ev.iter().filter_map(|e| e.sample.rtt).all(|r| r >= ms(100) && r < ms(101)));
}

#[test]
fn idle_application_marks_the_next_flight_app_limited() {
    let cfg = TcpConfig { cc: CcAlgorithm::Custom { name: NAMES[1], build: build::<1> }, delayed_ack: false, ..Default::default() };
    let mut sim = Sim::symmetric(cfg, ms(50));
    // Five segments when the window allows ten: the sender runs out of data with room in
    // cwnd, so what it sends next is application-limited until those five are delivered.
    sim.ep[0].send(5 * MSS);
    sim.run_until(at_ms(1_000));
    let first = events(NAMES[1]);
    assert_eq!(first.len(), 5);
    assert!(first.iter().all(|e| !e.sample.is_app_limited), "sent before the application ran dry");
    // Twenty more: the flight that leaves at once was sent during the app-limited period;
    // segments sent after its first ACK (which delivers beyond the mark) are not.
    sim.ep[0].send(20 * MSS);
    sim.run_until(at_ms(2_000));
    let all = events(NAMES[1]);
    let second = &all[5..];
    assert_eq!(second.len(), 20);
    let limited = second.iter().take_while(|e| e.sample.is_app_limited).count();
    let cwnd_at_send = second.iter().filter(|e| e.sample.prior_delivered == 5 * MSS).count();
    assert!(cwnd_at_send >= 10, "a whole window left at once");
    assert_eq!(limited, cwnd_at_send, "exactly the segments sent before the mark was passed");
    assert!(second[limited..].iter().all(|e| !e.sample.is_app_limited));
}
