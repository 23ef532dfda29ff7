//! How fast the endpoint runs: a bulk transfer through the test harness's virtual-time
//! link (1 Gbit/s bottleneck, 20 ms RTT, DropTail buffer of one BDP by default), timed on the wall clock.
//!
//! Run with `cargo run --release -p pathtwin-tcp --example bulk_rate [seconds] [sack 0|1]
//! [buffer in BDPs]`; a buffer below one BDP makes the flow lose packets every cycle.
//! Reports harness steps (segment arrivals plus timer firings) and segments per wall-clock
//! second; the harness's own work (a FIFO per direction) is included, so this is a lower
//! bound on the endpoint's speed.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use pathtwin_tcp::TcpConfig;

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let sack = args.next().as_deref() != Some("0");
    let buffer_bdps: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1.0);
    let cfg = TcpConfig { sack, ..Default::default() };
    let rate = 1_000_000_000u64;
    let bdp_packets = (rate as f64 * 0.020 / 8.0 / 1500.0).round() as usize;
    let link = LinkCfg::bottleneck(ms(10), rate, ((bdp_packets as f64 * buffer_bdps) as usize).max(1));
    let mut sim = Sim::new(cfg.clone(), cfg, link, link);
    sim.record = false;
    sim.ep[0].send(u64::MAX / 2);
    let wall = std::time::Instant::now();
    sim.run_until(at_ms(secs * 1000));
    let elapsed = wall.elapsed().as_secs_f64();
    let segments = sim.ep[0].stats().segments_sent + sim.ep[1].stats().segments_sent;
    let util = sim.delivered_wire_bytes(0) as f64 * 8.0 / (rate as f64 * secs as f64);
    println!(
        "sack={sack} buffer={buffer_bdps} BDP: simulated {secs} s in {elapsed:.3} s wall: {} steps ({:.2} M/s), {segments} segments ({:.2} M/s), \
         utilisation {util:.4}, retransmits {}, timeouts {}",
        sim.steps,
        sim.steps as f64 / elapsed / 1e6,
        segments as f64 / elapsed / 1e6,
        sim.ep[0].stats().retransmits,
        sim.ep[0].stats().timeouts,
    );
}
