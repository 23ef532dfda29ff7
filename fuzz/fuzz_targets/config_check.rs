//! What both config targets do with a config that parsed: everything a front end and the
//! engines do with it before a run starts. It is written back as JSON (Python's
//! `validate_config`) and as TOML (`config_toml`) and each must parse to the same config; it is
//! compiled with a route for every host pair (the emulator's network) and built into a
//! simulation (the simulator's, which compiles the pairs its flows use and checks the TCP
//! settings), which then runs a few simulated milliseconds only (a config may ask for hours),
//! fewer on links fast enough to carry more than some thousands of packets in them. A
//! `ConfigError` anywhere is an answer; a panic, an overflow or a hang is a bug.

use pathtwin_core::config::Config;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_core::topology::{self, DEFAULT_PATH_CAPACITY};
use pathtwin_core::units::Rate;
use pathtwin_sim::packet::SimPacket;
use pathtwin_sim::Simulation;

/// The simulated time a fuzzed config may run: enough to start connections and move packets
/// through every element, short enough to keep each input in milliseconds of real time.
const SIMULATED: Duration = Duration::from_millis(5);

/// Full-size packets the fastest path, link or pipe may carry in that time: the simulator's
/// work grows with packets, and a petabit link carries 400 million in 5 ms.
const PACKETS: u64 = 10_000;

/// The most connections a fuzzed workload is built with. Validation allows a million
/// (`MAX_CONNECTIONS`), whose endpoints take gigabytes: past the fuzzer's memory limit, and
/// the benchmarks' concern (their largest run has 10 000), not the parser's.
const MAX_SIMULATED_CONNECTIONS: u64 = 10_000;

/// The text of a fuzz input, if it is UTF-8 (the parsers take `&str`, as every caller has).
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Round trips and builds a config that parsed (see the module docs).
pub fn exercise(cfg: Config) {
    let json = serde_json::to_string(&cfg).expect("a valid config serialises as JSON");
    match Config::from_json(&json) {
        Ok(back) => assert_eq!(back, cfg, "the JSON round trip changed the config: {json}"),
        Err(e) => panic!("a valid config's JSON is refused: {e}\n{json}"),
    }
    let toml_text = toml::to_string(&cfg).unwrap_or_else(|e| panic!("a valid config cannot be written as TOML: {e}\n{json}"));
    match Config::from_toml(&toml_text, "round-trip") {
        Ok(back) => assert_eq!(back, cfg, "the TOML round trip changed the config:\n{toml_text}"),
        Err(e) => panic!("a valid config's TOML is refused: {e}\n{toml_text}"),
    }
    let _ = topology::compile::<SimPacket>(&cfg);
    if cfg.flows.iter().map(|f| u64::from(f.count)).sum::<u64>() > MAX_SIMULATED_CONNECTIONS {
        return;
    }
    let run_for = simulated(&cfg);
    if let Ok(mut sim) = Simulation::new(cfg) {
        sim.advance(Instant::ZERO + run_for);
    }
}

/// [`SIMULATED`], or less on links so fast that it would carry more than [`PACKETS`].
fn simulated(cfg: &Config) -> Duration {
    let paths = cfg.paths.iter().flat_map(|p| p.capacity.map_or([DEFAULT_PATH_CAPACITY; 2], |c| c.0).into_iter().chain(p.abw.iter().flat_map(|a| a.0)));
    let links = cfg.links.iter().flat_map(|l| l.rate.0);
    let pipes = cfg.pipes.iter().flat_map(|p| p.rate.0);
    let fastest = paths.chain(links).chain(pipes).max().unwrap_or(Rate::ZERO);
    // A zero rate's transmit time is "never": no cap.
    fastest.transmit_time(PACKETS * 1500).min(SIMULATED)
}
