//! Congestion control and loss recovery, checked against what RFC 5681, 6582 and 6675 and
//! simple queueing arithmetic predict.

mod common;

use common::*;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_tcp::{AckEvent, CcAlgorithm, CcParams, CongestionControl, NewRenoTimer, Reno, TcpConfig};

const MSS: u64 = 1460;

/// cwnd of the client at time `t`, from the harness trace.
fn cwnd_at(sim: &Sim, t: Instant) -> u64 {
    sim.trace.iter().take_while(|s| s.t <= t).last().unwrap().cwnd
}

/// Bulk transfer over a 100 ms RTT path without a bottleneck.
fn bulk(cfg: TcpConfig, drops: &[u64], secs: u64) -> Sim {
    let mut sim = Sim::symmetric(cfg, ms(50));
    sim.set_drop(0, drop_data_indices(drops));
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(secs * 1000));
    sim
}

#[test]
fn slow_start_doubles_cwnd_every_rtt_without_delayed_acks() {
    let cfg = TcpConfig { delayed_ack: false, ..Default::default() };
    let sim = bulk(cfg, &[], 1);
    // The SYN-ACK arrives at 100 ms and the first window leaves then; round k's ACKs all
    // arrive at 200 + 100k ms. Sample in the middle of each round.
    let per_round: Vec<u64> = (0..6).map(|k| cwnd_at(&sim, at_ms(150 + 100 * k)) / MSS).collect();
    assert_eq!(per_round, [10, 20, 40, 80, 160, 320]);
}

#[test]
fn slow_start_grows_by_half_per_rtt_with_delayed_acks() {
    let sim = bulk(TcpConfig::default(), &[], 1);
    // One ACK per two segments, each adding one SMSS (RFC 5681 eq. 2 with L = 1 SMSS).
    let per_round: Vec<u64> = (0..6).map(|k| cwnd_at(&sim, at_ms(160 + 100 * k)) / MSS).collect();
    for w in per_round.windows(2) {
        let ratio = w[1] as f64 / w[0] as f64;
        assert!((1.4..=1.6).contains(&ratio), "growth {per_round:?}");
    }
}

fn single_loss(cc: CcAlgorithm, sack: bool) {
    let cfg = TcpConfig { cc, sack, delayed_ack: false, ..Default::default() };
    // Segment 30 is the first of the third round (10 + 20 segments before it), sent with
    // cwnd = 40 segments.
    let sim = bulk(cfg, &[30], 2);
    let st = sim.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.timeouts, st.retransmits), (1, 0, 1), "{cc:?} sack={sack}");
    let episodes = recovery_episodes(&sim);
    assert_eq!(episodes.len(), 1);
    let before = sim.trace.iter().take_while(|s| !s.in_recovery).last().unwrap();
    let after = sim.trace.iter().find(|s| s.t >= episodes[0].1 && !s.in_recovery).unwrap();
    assert_eq!(before.cwnd, 40 * MSS);
    assert_eq!(after.ssthresh, 20 * MSS, "ssthresh = FlightSize / 2");
    assert_eq!(after.cwnd, 20 * MSS, "cwnd halved on leaving recovery");
    // One RTT from fast retransmit to the ACK of the retransmission.
    let rtt = (episodes[0].1 - episodes[0].0).as_millis_f64();
    assert!((100.0..101.0).contains(&rtt), "recovery took {rtt} ms");
}

#[test]
fn single_loss_is_one_fast_retransmit_and_one_halving() {
    single_loss(CcAlgorithm::Reno, false);
    single_loss(CcAlgorithm::NewReno, false);
    single_loss(CcAlgorithm::NewReno, true);
}

/// Three losses in the window of 40 segments sent in the third round.
fn three_losses(cc: CcAlgorithm, sack: bool) -> Sim {
    let cfg = TcpConfig { cc, sack, delayed_ack: false, ..Default::default() };
    bulk(cfg, &[30, 33, 36], 3)
}

#[test]
fn three_losses_newreno_recovers_in_one_episode_over_three_rtts() {
    let sim = three_losses(CcAlgorithm::NewReno, false);
    let st = sim.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.timeouts, st.retransmits), (1, 0, 3));
    let episodes = recovery_episodes(&sim);
    assert_eq!(episodes.len(), 1);
    // One hole per RTT: partial ACKs after one and two RTTs, the full ACK after three.
    let d = (episodes[0].1 - episodes[0].0).as_millis_f64();
    assert!((300.0..302.0).contains(&d), "recovery took {d} ms");
    assert_eq!(sim.ep[0].ssthresh(), 20 * MSS, "one halving");
}

#[test]
fn three_losses_sack_recovers_in_about_one_rtt() {
    let sim = three_losses(CcAlgorithm::NewReno, true);
    let st = sim.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.timeouts, st.retransmits), (1, 0, 3));
    let episodes = recovery_episodes(&sim);
    assert_eq!(episodes.len(), 1);
    let d = (episodes[0].1 - episodes[0].0).as_millis_f64();
    assert!(d < 150.0, "recovery took {d} ms");
    assert_eq!(sim.ep[0].ssthresh(), 20 * MSS, "one halving");
    // All three holes were retransmitted before the first retransmission was acknowledged.
    let retx: Vec<Instant> = [30, 33, 36].iter().map(|&i| sim.send_times_of(0, data_seq(i, MSS))[1]).collect();
    assert!(retx[2] - retx[0] < ms(100), "retransmissions at {retx:?}");
}

#[test]
fn three_losses_reno_suffers() {
    let reno = three_losses(CcAlgorithm::Reno, false);
    let newreno = three_losses(CcAlgorithm::NewReno, false);
    let st = reno.ep[0].stats();
    assert!(st.fast_retransmits >= 2 || st.timeouts >= 1, "Reno got away with {st:?}");
    assert!(
        reno.ep[1].stats().bytes_delivered < newreno.ep[1].stats().bytes_delivered,
        "Reno should deliver less than NewReno in the same time"
    );
}

/// Utilisation of a 10 Mbit/s bottleneck with 50 ms RTT and a DropTail buffer of one
/// bandwidth-delay product, measured on the wire between 5 s and 35 s.
fn utilisation(cfg: TcpConfig) -> f64 {
    let rate = 10_000_000u64;
    let one_way = ms(25);
    let bdp_packets = (rate as f64 * 0.050 / 8.0 / 1500.0).round() as usize;
    let mut sim = Sim::new(
        cfg.clone(),
        cfg,
        LinkCfg::bottleneck(one_way, rate, bdp_packets),
        LinkCfg::bottleneck(one_way, rate, bdp_packets),
    );
    sim.record = false;
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(5_000));
    let b0 = sim.delivered_wire_bytes(0);
    sim.run_until(at_ms(35_000));
    let bytes = sim.delivered_wire_bytes(0) - b0;
    assert!(sim.queue_drops(0) > 0, "the buffer must overflow for the test to mean anything");
    bytes as f64 * 8.0 / (rate as f64 * 30.0)
}

#[test]
fn bulk_fills_a_bottleneck_with_a_one_bdp_buffer() {
    for (cc, sack) in [(CcAlgorithm::NewReno, true), (CcAlgorithm::NewReno, false), (CcAlgorithm::Reno, false)] {
        let u = utilisation(TcpConfig { cc, sack, ..Default::default() });
        assert!(u >= 0.95, "{cc:?} sack={sack}: utilisation {u:.4}");
    }
}

/// Goodput between 2 s and 12 s of a bulk transfer over a fast 100 ms RTT path.
fn goodput(client: TcpConfig, server: TcpConfig) -> f64 {
    let link = LinkCfg::bottleneck(ms(50), 1_000_000_000, 10_000);
    let mut sim = Sim::new(client, server, link, link);
    sim.record = false;
    sim.ep[0].send(u64::MAX / 2);
    sim.run_until(at_ms(2_000));
    let a = sim.ep[0].stats().bytes_acked;
    sim.run_until(at_ms(12_000));
    assert_eq!(sim.queue_drops(0), 0);
    (sim.ep[0].stats().bytes_acked - a) as f64 / 10.0
}

fn assert_close(got: f64, want: f64, tol: f64) {
    assert!((got / want - 1.0).abs() <= tol, "got {got:.0} B/s, want {want:.0} B/s");
}

#[test]
fn max_window_limits_throughput_to_window_over_rtt() {
    let rtt = Duration::from_millis(100).as_secs_f64();
    for w in [20 * MSS, 64 * 1024] {
        let cfg = TcpConfig { max_window: w, ..Default::default() };
        // Only whole segments are sent while data is in flight.
        let flight = w / MSS * MSS;
        assert_close(goodput(cfg.clone(), cfg), flight as f64 / rtt, 0.02);
    }
}

#[test]
fn receive_window_limits_throughput_to_window_over_rtt() {
    let rtt = Duration::from_millis(100).as_secs_f64();
    let server = TcpConfig { rcv_buffer: 30 * MSS, ..Default::default() };
    assert_close(goodput(TcpConfig::default(), server), (30 * MSS) as f64 / rtt, 0.02);
}

#[test]
fn window_limited_sender_does_not_grow_cwnd_it_cannot_use() {
    let cfg = TcpConfig { max_window: 20 * MSS, ..Default::default() };
    let sim = bulk(cfg, &[], 5);
    // Slow start stops growing once less than half of cwnd is in use (RFC 7661 spirit), so
    // cwnd ends at most one SMSS above twice the 20-segment window.
    assert!(sim.ep[0].cwnd() <= 41 * MSS, "cwnd {}", sim.ep[0].cwnd());
}

/// Reno with a fixed pacing rate of 100 full segments per second, as a stand-in for the
/// paced controllers (Monaco) to come; built through `CcAlgorithm::Custom`.
#[derive(Debug)]
struct Paced(Reno);

const PACE: u64 = 100 * MSS;

impl CongestionControl for Paced {
    fn name(&self) -> &'static str {
        "paced-reno"
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
    fn cwnd(&self) -> u64 {
        self.0.cwnd()
    }
    fn ssthresh(&self) -> u64 {
        self.0.ssthresh()
    }
    fn pacing_rate(&self) -> Option<u64> {
        Some(PACE)
    }
}

fn build_paced(p: &CcParams) -> Box<dyn CongestionControl> {
    Box::new(Paced(Reno::new(p)))
}

#[test]
fn a_pacing_controller_spaces_segments_at_its_rate() {
    let cfg = TcpConfig { cc: CcAlgorithm::Custom { name: "paced-reno", build: build_paced }, ..Default::default() };
    let sim = bulk(cfg, &[], 2);
    assert_eq!(sim.ep[0].congestion_control().name(), "paced-reno");
    let sends: Vec<Instant> = sim.sent[0].iter().filter(|(_, s)| s.len > 0).map(|(t, _)| *t).collect();
    assert!(sends.len() > 150);
    // 1460 bytes at 146 000 B/s: never closer than 10 ms; once cwnd no longer limits
    // (it does in the first round trips), exactly 100 segments per second.
    assert!(sends.windows(2).all(|w| w[1] - w[0] >= ms(10)));
    assert_eq!(sends.iter().filter(|&&t| t >= at_ms(1000) && t < at_ms(2000)).count(), 100);
    assert!(sim.ep[0].cwnd() > 20 * MSS);
}

#[test]
fn pacing_also_spaces_retransmissions() {
    // Three losses in the third round: the fast retransmission and the SACK recovery's
    // retransmissions go out at the pacing rate too (Linux's internal pacing and fq pace
    // every transmission), not in a burst on the ACK that starts recovery.
    let cfg = TcpConfig { cc: CcAlgorithm::Custom { name: "paced-reno", build: build_paced }, ..Default::default() };
    let sim = bulk(cfg, &[30, 33, 36], 3);
    let st = sim.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.retransmits, st.timeouts), (1, 3, 0));
    let sends: Vec<Instant> = sim.sent[0].iter().filter(|(_, s)| s.len > 0).map(|(t, _)| *t).collect();
    if let Some(w) = sends.windows(2).find(|w| w[1] - w[0] < ms(10)) {
        panic!("segments sent {} apart at {}", w[1] - w[0], w[0]);
    }
}

/// A window with many losses (every other segment of the third round) without SACK.
fn many_losses(newreno_timer: NewRenoTimer) -> Sim {
    let cfg = TcpConfig { sack: false, delayed_ack: false, newreno_timer, ..Default::default() };
    let drops: Vec<u64> = (30..70).step_by(2).collect();
    bulk(cfg, &drops, 4)
}

#[test]
fn newreno_slow_but_steady_repairs_one_hole_per_rtt_and_impatient_times_out() {
    let steady = many_losses(NewRenoTimer::SlowButSteady);
    let st = steady.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.timeouts, st.retransmits), (1, 0, 20));
    let d = recovery_episodes(&steady)[0];
    assert!((2000.0..2010.0).contains(&(d.1 - d.0).as_millis_f64()), "20 holes, 20 RTTs: {d:?}");

    let impatient = many_losses(NewRenoTimer::Impatient);
    let st = impatient.ep[0].stats();
    assert_eq!((st.fast_retransmits, st.timeouts), (1, 1));
    assert!(
        impatient.ep[1].stats().bytes_delivered > steady.ep[1].stats().bytes_delivered,
        "the timeout's go-back-N repairs the window faster than one hole per RTT"
    );
}
