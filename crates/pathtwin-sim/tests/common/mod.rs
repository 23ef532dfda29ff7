//! What the end-to-end simulator tests share: run a scenario to its end with the server's
//! packets captured, and read the capture back as IP datagrams.

use pathtwin_core::config::Config;
use pathtwin_sim::{Results, Simulation};
use std::path::PathBuf;

/// Runs the TOML `scenario` (which must capture host "server") to its end; returns the
/// results and every IP datagram of the server's capture, in order. `name` keeps concurrent
/// tests' capture directories apart.
pub fn run_capturing_server(scenario: &str, name: &str) -> (Results, Vec<Vec<u8>>) {
    let cfg = Config::from_toml(scenario, name).unwrap();
    let mut sim = Simulation::new(cfg).unwrap();
    let dir: PathBuf = std::env::temp_dir().join(format!("pathtwin-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    sim.capture_to(&dir).unwrap();
    sim.advance(sim.end());
    sim.flush_captures().unwrap();
    let results = sim.results();
    let bytes = std::fs::read(dir.join("server.pcap")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut datagrams = Vec::new();
    let mut at = 24; // pcap global header
    while at + 16 <= bytes.len() {
        let incl = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        datagrams.push(bytes[at + 16..at + 16 + incl].to_vec());
        at += 16 + incl;
    }
    (results, datagrams)
}
