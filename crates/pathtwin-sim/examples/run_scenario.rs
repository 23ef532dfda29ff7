//! Runs a scenario file with the engine alone (no Python), printing events and engine time.
//! For profiling: `cargo run --release -p pathtwin-sim --example run_scenario -- FILE`.

use pathtwin_core::config::Config;
use pathtwin_sim::Simulation;

fn main() {
    let path = std::env::args().nth(1).expect("usage: run_scenario FILE.toml");
    let text = std::fs::read_to_string(&path).expect("read scenario");
    let cfg = Config::from_toml(&text, &path).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let t0 = std::time::Instant::now();
    let sim = Simulation::new(cfg).expect("build");
    let r = sim.run();
    let wall = t0.elapsed().as_secs_f64();
    println!("simulated {:.1} s, {} events in {:.3} s ({:.0} events/s)", r.simulated_s, r.events, wall, r.events as f64 / wall);
}
