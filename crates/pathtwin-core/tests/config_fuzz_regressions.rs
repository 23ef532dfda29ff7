//! Configs that once panicked, overflowed, or did not survive being written back, met while
//! fuzzing the config schema (`fuzz/fuzz_targets/config_toml.rs`, `config_json.rs`) or
//! reading the code those targets reach. Each is now a one-line error naming the key, or a
//! config whose JSON and TOML parse back to it.

use pathtwin_core::config::{Config, MAX_CONNECTIONS};
use pathtwin_core::topology::{compile, Network};

mod common;
use common::P;

const TWO_HOSTS: &str = "hosts = [\"a\", \"b\"]\n";

fn path(extra: &str) -> String {
    format!("{TWO_HOSTS}[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"1mbit\"\n{extra}\n")
}

fn toml_error(text: &str) -> String {
    let e = Config::from_toml(text, "t.toml").expect_err("the config must be refused").to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    e
}

fn json_error(text: &str) -> String {
    let e = Config::from_json(text).expect_err("the config must be refused").to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    e
}

/// The config written back as JSON and as TOML, as the front ends do, parses to itself.
fn assert_round_trips(cfg: &Config) {
    let json = serde_json::to_string(cfg).unwrap();
    assert_eq!(&Config::from_json(&json).unwrap(), cfg, "{json}");
    let text = toml::to_string(cfg).unwrap();
    assert_eq!(&Config::from_toml(&text, "again.toml").unwrap(), cfg, "{text}");
}

/// A RIO `mean_packet` of 2³² bytes was cut to a `u32` zero, and FRIO's default max_q divided
/// by it during validation.
#[test]
fn a_mean_packet_beyond_any_ip_packet_is_refused() {
    let rio = "rio = { in = { min_th = \"20KB\", max_th = \"40KB\" }, out = { min_th = \"5KB\", max_th = \"15KB\" }, mean_packet = \"4294967296B\" }";
    let text = format!("{TWO_HOSTS}[[link]]\nbetween = [\"a\", \"b\"]\nrate = \"10mbit\"\ndelay = \"1ms\"\nqdisc = \"frio\"\n{rio}\n");
    assert_eq!(toml_error(&text), "link[0].rio.mean_packet: 4294967296 B is above 65535 B, the largest IP packet");
    let red = path("qdisc = \"red\"\nred = { mean_packet = \"1MB\" }");
    assert_eq!(toml_error(&red), "path[0].red.mean_packet: 1000000 B is above 65535 B, the largest IP packet");
}

/// `count = 4000000000` asked validation for four billion connection labels, and two such
/// entries overflowed their `u32` sum.
#[test]
fn a_workload_of_more_than_a_million_connections_is_refused() {
    let flow = |count: u64| format!("[[flow]]\nfrom = \"a\"\nto = \"b\"\ncount = {count}\n");
    assert_eq!(
        toml_error(&path(&flow(4_000_000_000))),
        "flow[0].count: the workload reaches 4000000000 connections here, more than the 1000000 a run may have"
    );
    let half = MAX_CONNECTIONS / 2 + 1;
    assert_eq!(
        toml_error(&path(&(flow(half) + &flow(half)))),
        format!("flow[1].count: the workload reaches {} connections here, more than the 1000000 a run may have", 2 * half)
    );
    assert!(Config::from_toml(&path(&flow(MAX_CONNECTIONS)), "t.toml").is_ok());
}

/// A queue of 10¹⁹ packets became `u64::MAX` packets, whose bytes (× 1500) overflowed when the
/// queue was checked against the bounds; sizes had no ceiling either.
#[test]
fn sizes_and_queues_beyond_a_petabyte_are_refused() {
    let e = toml_error(&path("queue = \"1e19p\""));
    assert!(e.starts_with("t.toml:6: path[0].queue: invalid queue size \"1e19p\": above 10^12 packets"), "{e}");
    let e = toml_error(&path("queue = \"2000000GB\""));
    assert!(e.starts_with("t.toml:6: path[0].queue: invalid queue size \"2000000GB\": above 1 PB"), "{e}");
    let e = toml_error(&path("wmax = \"1e20B\""));
    assert!(e.starts_with("t.toml:6: path[0].wmax: invalid size \"1e20B\": above 1 PB"), "{e}");
    // The ceilings themselves are taken.
    let cfg = Config::from_toml(&path("queue = \"1000000000000p\"\nwmax = \"1e15B\"\nenforce_bounds = false"), "t.toml").unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    assert!(net.resolved[0].feasible);
}

/// Eq. 2's bandwidth-delay product of a petabit path over 30 years is 10²³ bytes: it wrapped
/// to an arbitrary `u64`, and once saturated, the two directions' bounds overflowed their sum.
#[test]
fn bounds_of_an_enormous_path_saturate_instead_of_wrapping() {
    let text = format!(
        "{TWO_HOSTS}[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"1e9s\"\nabw = \"1000000gbit\"\ncapacity = \"1000000gbit\"\nwmax = \"1e15B\"\nflows = [4000000000, 4000000000]\n"
    );
    let cfg = Config::from_toml(&text, "t.toml").unwrap();
    let net: Network<P> = compile(&cfg).unwrap();
    let n = 4_000_000_000u64;
    assert_eq!(net.resolved[0].lower_bound, u64::MAX / n * n);
    assert!(!net.resolved[0].feasible);
}

/// `nan` and `inf` are TOML floats: a controller constant took them, and the config's JSON
/// then held `null` (NaN is not equal to itself either).
#[test]
fn controller_constants_must_be_finite() {
    for (table, value) in [("vegas", "alpha = nan"), ("cubic", "beta = inf"), ("monaco", "k = -inf")] {
        let e = toml_error(&format!("{TWO_HOSTS}[tcp.{table}]\n{value}\n"));
        let key = value.split(' ').next().unwrap();
        assert!(e.contains(&format!("tcp.{table}.{key}")) && e.contains("is not a finite number"), "{e}");
    }
    let cfg = Config::from_toml(&format!("{TWO_HOSTS}[tcp.vegas]\nalpha = 2\nbeta = 4.5\n"), "t.toml").unwrap();
    assert_round_trips(&cfg);
}

/// A fraction was written back as a percentage, `{v × 100}%`, which for 0.007 reads back as
/// 0.007000000000000001.
#[test]
fn fractions_are_written_back_exactly() {
    for loss in ["0.007", "0.013", "\"0.7%\"", "\"1%\"", "1e-300"] {
        let cfg = Config::from_toml(&path(&format!("loss = {loss}\nreorder = {loss}")), "t.toml").unwrap();
        assert_round_trips(&cfg);
    }
}

/// JSON carries any `u64`, TOML integers stop at `i64::MAX`: such a seed or exchange size
/// could not be written back as TOML (`config_toml`).
#[test]
fn integers_tomls_cannot_hold_are_refused_from_json() {
    let hosts = r#""hosts":["a","b"],"path":[{"between":["a","b"],"rtt":"50ms","abw":"1mbit"}]"#;
    assert_eq!(
        json_error(&format!(r#"{{{hosts},"run":{{"seed":18446744073709551615}}}}"#)),
        "run.seed: 18446744073709551615 is above 9223372036854775807, the largest integer TOML can hold"
    );
    let replay = |req: u64| format!(r#"{{{hosts},"flow":[{{"from":"a","to":"b","app":"replay","exchanges":[[{req},100,-1,0.0,0.0,0.0]]}}]}}"#);
    assert_eq!(json_error(&replay(u64::MAX)), "flow[0].exchanges[0]: request_bytes 18446744073709551615 is above 1000000000000000 (1 PB)");
    let cfg = Config::from_json(&format!(r#"{{{hosts},"run":{{"seed":9223372036854775807}}}}"#)).unwrap();
    assert_round_trips(&cfg);
    assert_round_trips(&Config::from_json(&replay(1_000_000)).unwrap());
}

/// Times were read through seconds in an f64, which beyond 2^53 ns (104 days) lose
/// nanoseconds: "822803136531ms" became 822803136531000064 ns, written back as such and read
/// again as 822803136531000192.
#[test]
fn long_times_are_read_exactly_and_written_back_exactly() {
    let cfg = Config::from_toml(&path("").replace("\"50ms\"", "\"822803136531ms\""), "t.toml").unwrap();
    assert_eq!(cfg.paths[0].rtt.as_nanos(), 822_803_136_531_000_000);
    assert_round_trips(&cfg);
    for (text, ns) in [("2.5ms", 2_500_000), ("1e9s", 1_000_000_000_000_000_000), ("+.5ns", 1), ("0.4ns", 0), ("1.5e-3s", 1_500_000), ("2min", 120_000_000_000)] {
        let cfg = Config::from_toml(&path("").replace("\"50ms\"", &format!("\"{text}\"")), "t.toml").unwrap();
        assert_eq!(cfg.paths[0].rtt.as_nanos(), ns, "{text}");
    }
}

/// A nanosecond sample interval is a row per flow and queue every simulated nanosecond.
#[test]
fn the_sample_interval_must_be_at_least_a_microsecond() {
    let run = |t: &str| path(&format!("[run]\nsample_interval = \"{t}\""));
    assert_eq!(toml_error(&run("999ns")), "run.sample_interval: must be at least 1us");
    assert!(Config::from_toml(&run("1us"), "t.toml").is_ok());
}

/// `on = "0s"` and `off = "0s"` toggled an on/off flow at its start time forever: the
/// simulator's clock never moved on.
#[test]
fn on_off_periods_must_be_positive() {
    let flow = |on: &str, off: &str| path(&format!("[[flow]]\nfrom = \"a\"\nto = \"b\"\napp = \"onoff\"\non = \"{on}\"\noff = \"{off}\"\n"));
    assert_eq!(toml_error(&flow("0s", "0s")), "flow[0].on: must be positive");
    assert_eq!(toml_error(&flow("1ms", "0ms")), "flow[0].off: must be positive");
    assert!(Config::from_toml(&flow("1ns", "1ns"), "t.toml").is_ok());
}
