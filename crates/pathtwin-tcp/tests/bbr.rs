//! BBR v1 over a simulated bottleneck, checked against what the BBR paper (Cardwell et al.,
//! ACM Queue 2016) says it achieves and what queueing arithmetic predicts: a bandwidth
//! estimate equal to the bottleneck's payload rate, a full link with a queue of about
//! nothing where Reno fills the buffer, indifference to random loss where Reno collapses
//! (Mathis et al.), and a ProbeRTT every 10 s.

mod common;

use common::*;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_tcp::{Bbr, BbrMode, CcAlgorithm, Segment, TcpConfig};

const MSS: u64 = 1460;
const RATE_BPS: u64 = 10_000_000;
/// 20 ms each way: a 40 ms base RTT.
const ONE_WAY_MS: u64 = 20;
/// Far more than the 34-packet BDP, so that a loss-based sender fills a deep queue.
const BUFFER_PACKETS: usize = 1000;

fn bbr(sim: &Sim) -> &Bbr {
    sim.ep[0].congestion_control().as_any().and_then(|a| a.downcast_ref::<Bbr>()).expect("a BBR sender")
}

/// The bottleneck's rate in payload bytes per second: full data segments carry MSS bytes in
/// MSS + TCP + IP header bytes on the wire.
fn payload_rate() -> f64 {
    let seg = Segment { len: MSS as u32, ..Segment::default() };
    RATE_BPS as f64 / 8.0 * MSS as f64 / wire_bytes(&seg) as f64
}

/// A bulk transfer from side 0 over the 10 Mbit/s, 40 ms path, optionally with random loss
/// of data segments before the bottleneck.
fn path(cc: CcAlgorithm, loss: f64) -> Sim {
    path_with(TcpConfig { cc, ..Default::default() }, loss, BUFFER_PACKETS)
}

fn path_with(cfg: TcpConfig, loss: f64, buffer_packets: usize) -> Sim {
    let link = LinkCfg::bottleneck(ms(ONE_WAY_MS), RATE_BPS, buffer_packets);
    let mut sim = Sim::new(cfg.clone(), cfg, link, link);
    sim.record = false;
    if loss > 0.0 {
        let mut drop = drop_random(0x5eed, loss);
        sim.set_drop(0, Box::new(move |seg| seg.len > 0 && drop(seg)));
    }
    sim.ep[0].send(u64::MAX / 2);
    sim
}

/// What happened on the path between two instants.
struct Window {
    utilisation: f64,
    mean_rtt_ms: f64,
}

fn measure(sim: &mut Sim, from: Instant, to: Instant) -> Window {
    sim.run_until(from);
    let (b0, st0) = (sim.delivered_wire_bytes(0), sim.ep[0].stats().clone());
    sim.run_until(to);
    let st = sim.ep[0].stats();
    let secs = (to - from).as_secs_f64();
    Window {
        utilisation: (sim.delivered_wire_bytes(0) - b0) as f64 * 8.0 / (RATE_BPS as f64 * secs),
        mean_rtt_ms: (st.rtt_sum - st0.rtt_sum).as_millis_f64() / (st.rtt_count - st0.rtt_count) as f64,
    }
}

#[test]
fn bbr_finds_the_bottleneck_rate_and_keeps_the_queue_short_where_reno_fills_it() {
    let base_rtt_ms = 2.0 * ONE_WAY_MS as f64;
    let mut sim = path(CcAlgorithm::Bbr, 0.0);
    sim.run_until(at_ms(3_000));
    assert_eq!(bbr(&sim).mode(), BbrMode::ProbeBw, "Startup and Drain are over after 3 s");
    let bw = bbr(&sim).btl_bw() as f64;
    assert!((bw / payload_rate() - 1.0).abs() <= 0.05, "BtlBw {bw:.0} B/s, bottleneck {:.0} B/s", payload_rate());
    let w = measure(&mut sim, at_ms(5_000), at_ms(35_000));
    let bw = bbr(&sim).btl_bw() as f64;
    assert!((bw / payload_rate() - 1.0).abs() <= 0.05, "BtlBw {bw:.0} B/s at the end");
    assert!(w.utilisation >= 0.95, "BBR utilisation {:.4}", w.utilisation);
    assert!(w.mean_rtt_ms < 1.5 * base_rtt_ms, "BBR mean RTT {:.1} ms", w.mean_rtt_ms);
    assert_eq!(sim.queue_drops(0), 0, "BBR never filled the buffer");

    // Reno on the same path fills the buffer until it overflows: a standing queue of
    // hundreds of packets, each 1.2 ms at 10 Mbit/s.
    let mut sim = path(CcAlgorithm::NewReno, 0.0);
    let reno = measure(&mut sim, at_ms(5_000), at_ms(35_000));
    assert!(sim.queue_drops(0) > 0);
    assert!(reno.mean_rtt_ms > 3.0 * base_rtt_ms, "Reno mean RTT {:.1} ms", reno.mean_rtt_ms);
    println!(
        "BBR: utilisation {:.4}, mean RTT {:.1} ms; Reno: utilisation {:.4}, mean RTT {:.1} ms",
        w.utilisation, w.mean_rtt_ms, reno.utilisation, reno.mean_rtt_ms
    );
}

#[test]
fn bbr_keeps_the_link_full_under_one_percent_random_loss_where_reno_collapses() {
    let p = 0.01;
    let mut sim = path(CcAlgorithm::Bbr, p);
    let bbr_w = measure(&mut sim, at_ms(5_000), at_ms(35_000));
    let bbr_losses = sim.filter_drops(0);
    let mut sim = path(CcAlgorithm::NewReno, p);
    let reno_w = measure(&mut sim, at_ms(5_000), at_ms(35_000));
    // Mathis et al. (CCR 1997): a loss-based sender gets at most about
    // MSS/RTT · sqrt(3/(2p)) whatever the link can do.
    let rtt = 2.0 * ONE_WAY_MS as f64 / 1000.0;
    let mathis = MSS as f64 / rtt * (1.5 / p).sqrt() / payload_rate();
    println!(
        "1% loss: BBR utilisation {:.4} ({bbr_losses} drops), Reno {:.4}, Mathis bound for Reno {mathis:.3}",
        bbr_w.utilisation, reno_w.utilisation
    );
    assert!(bbr_losses > 100, "the loss process must bite");
    assert!(bbr_w.utilisation >= 0.9, "BBR utilisation {:.4}", bbr_w.utilisation);
    assert!(reno_w.utilisation <= 1.1 * mathis, "Reno utilisation {:.4}, Mathis {mathis:.3}", reno_w.utilisation);
    assert!(mathis < 0.5, "the scenario must be one where the Mathis bound is far below the link");
}

#[test]
fn bbr_without_sack_recovers_from_its_startup_overshoot() {
    // Behind a one-BDP buffer Startup's 2.885 gain overflows the queue and loses dozens of
    // segments in one window; NewReno repairs one per round trip and a timeout may follow.
    // Duplicate ACKs must count as deliveries (or the flight never looks drained and the
    // estimate decays in Drain), and the go-back-N after the timeout must not count the
    // receiver's buffered data again (or BtlBw overshoots many times and the next losses
    // are in the thousands).
    let bdp_packets = (RATE_BPS as f64 / 8.0 * 0.040 / 1500.0).round() as usize;
    let cfg = TcpConfig { cc: CcAlgorithm::Bbr, sack: false, ..Default::default() };
    let mut sim = path_with(cfg, 0.0, bdp_packets);
    let w = measure(&mut sim, at_ms(5_000), at_ms(35_000));
    assert!(sim.queue_drops(0) > 10, "Startup must overflow the buffer for the test to mean anything");
    assert!(w.utilisation >= 0.95, "utilisation {:.4}", w.utilisation);
    let bw = bbr(&sim).btl_bw() as f64;
    assert!((bw / payload_rate() - 1.0).abs() <= 0.05, "BtlBw {bw:.0} B/s, bottleneck {:.0} B/s", payload_rate());
}

#[test]
fn bbr_probes_rtt_every_ten_seconds() {
    let mut sim = path(CcAlgorithm::Bbr, 0.0);
    // Mode transitions, sampled every millisecond: (start, end) of each ProbeRTT.
    let mut probes: Vec<(Instant, Option<Instant>)> = Vec::new();
    let step = Duration::from_millis(1);
    while sim.now < at_ms(35_000) {
        sim.run_for(step);
        let b = bbr(&sim);
        match (b.mode(), probes.last_mut()) {
            (BbrMode::ProbeRtt, Some((_, None))) => {
                assert!(sim.ep[0].cwnd() <= 4 * MSS, "ProbeRTT cwnd {} at {}", sim.ep[0].cwnd(), sim.now);
            }
            (BbrMode::ProbeRtt, _) => probes.push((sim.now, None)),
            (_, Some((_, end @ None))) => *end = Some(sim.now),
            _ => {}
        }
    }
    println!("ProbeRTT episodes: {probes:?}");
    // ProbeRTT starts once RTprop has not been refreshed for 10 s. RTprop is last
    // refreshed early in the run (while the queue is still short), and then when a ProbeRTT
    // ends or within the next few round trips, while its drained queue is still empty; so
    // each ProbeRTT comes 10 s and a little after the previous one ended.
    assert_eq!(probes.len(), 3, "{probes:?}");
    assert!(probes[0].0 > at_ms(10_000) && probes[0].0 < at_ms(11_000), "{probes:?}");
    for (i, &(start, end)) in probes.iter().enumerate() {
        let end = end.expect("every ProbeRTT ends");
        // At least 200 ms plus one round trip at the minimum window (a round trip of the
        // base 40 ms), plus the time to drain the flight down to 4 segments.
        let d = end - start;
        assert!(d >= Duration::from_millis(240) && d < Duration::from_millis(400), "ProbeRTT {i} lasted {d}");
        if let Some(&(next, _)) = probes.get(i + 1) {
            let gap = next - end;
            assert!(gap >= Duration::from_secs(10) && gap < Duration::from_millis(10_500), "ProbeRTT {} came {gap} after {i} ended", i + 1);
        }
    }
}

#[test]
fn bbr_runs_are_deterministic() {
    // Same config and loss seed: the same segments at the same instants, bit for bit (the
    // ProbeBW start phase is a hash of the state, not a random draw).
    let run = || {
        let mut sim = path(CcAlgorithm::Bbr, 0.01);
        sim.record = true;
        sim.run_until(at_ms(12_000));
        (sim.sent[0].clone(), sim.ep[0].stats().clone(), bbr(&sim).btl_bw(), bbr(&sim).cycle_phase())
    };
    let (a, b) = (run(), run());
    assert!(a.0.len() > 5_000);
    assert!(a == b, "two identical runs differ");
}
