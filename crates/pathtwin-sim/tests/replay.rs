//! `app = "replay"` over `[[pipe]]`s end to end: response times on a loss-free pipe equal
//! what the path and TCP's initial window say they must be (computed here from first
//! principles, not from the simulator), each pipe's connection shows its own client address
//! in the server's capture, and `[run] until_done` ends the run when the last connection
//! has closed.

mod common;

use pathtwin_core::config::Config;
use pathtwin_sim::{Results, Simulation};

/// Path: 40 ms RTT, 10 Mbit/s both ways, no loss; Monkey's queue rule gives it 40 packets
/// each way, more than any test here fills. TCP: MSS 1460, initial window 10 (the
/// simulator's default, Linux's), NewReno, no delayed ACKs (the replay of a "quick" client).
const RATE_BPS: f64 = 10e6;
const ONE_WAY_S: f64 = 0.020;
const MSS: u64 = 1460;
const IW: u64 = 10;
/// IPv4 + TCP headers without options (data and ACK segments carry none on a clean path).
const HEADERS: u64 = 40;
const REQUEST: u64 = 500;
const SERVER_DELAY_S: f64 = 0.005;

fn tx(bytes: u64) -> f64 {
    bytes as f64 * 8.0 / RATE_BPS
}

/// Client writes the request until the server has it whole: one segment's serialization
/// on the upstream pipe, then the one-way delay.
fn request_path() -> f64 {
    tx(REQUEST + HEADERS) + ONE_WAY_S
}

fn scenario(pipes: usize, exchanges: &str, extra_run: &str) -> String {
    let mut s = format!(
        r#"
hosts = ["server", "clients"]
[run]
duration = "30s"
pcap = ["server"]
{extra_run}
[tcp]
mss = {MSS}
initial_window = {IW}
delayed_ack = false
"#
    );
    for g in 0..pipes {
        s += "[[pipe]]\nbetween = [\"server\", \"clients\"]\nrtt = \"40ms\"\nrate = \"10mbit\"\n";
        s += &format!("[[flow]]\nfrom = \"clients\"\nto = \"server\"\npipe = {g}\nstart = \"{}ms\"\napp = \"replay\"\nexchanges = {exchanges}\n", 100 * g);
    }
    s
}

fn run(scenario: &str) -> Results {
    Simulation::new(Config::from_toml(scenario, "replay.toml").unwrap()).unwrap().run()
}

fn assert_close(got: f64, want: f64, what: &str) {
    // Every term is a whole number of nanoseconds; allow one µs for rounding.
    assert!((got - want).abs() < 1e-6, "{what}: simulated {:.6} ms, expected {:.6} ms", got * 1e3, want * 1e3);
}

#[test]
fn a_response_of_two_slow_start_rounds_takes_what_the_path_says() {
    // 30 full segments: the initial window sends 10 at once; each of their ACKs opens the
    // window by one segment and frees one, so two segments leave per ACK. The first ACK
    // is back one data segment's serialization + RTT + the ACK's serialization after the
    // write; the 20 second-round segments then keep the pipe busy back to back.
    let response = 30 * MSS;
    let r = run(&scenario(1, &format!("[[{REQUEST}, {response}, -1, {SERVER_DELAY_S}, 0.0, 0.0]]"), ""));
    let seg = tx(MSS + HEADERS);
    let first_ack_back = seg + 2.0 * ONE_WAY_S + tx(HEADERS);
    let second_round = 20.0 * seg + ONE_WAY_S;
    let want = request_path() + SERVER_DELAY_S + first_ack_back + second_round;
    assert_eq!(r.flows.i64s("responses"), [1]);
    assert_close(r.flows.f64s("response_time_mean_s")[0], want, "response time");
    assert_eq!(r.flows.i64s("retransmits"), [0]);
}

#[test]
fn one_window_response_takes_one_trip() {
    let response = IW * MSS;
    let r = run(&scenario(1, &format!("[[{REQUEST}, {response}, -1, {SERVER_DELAY_S}, 0.0, 0.0]]"), ""));
    let want = request_path() + SERVER_DELAY_S + IW as f64 * tx(MSS + HEADERS) + ONE_WAY_S;
    assert_close(r.flows.f64s("response_time_mean_s")[0], want, "response time");
}

#[test]
fn the_rest_of_a_split_response_follows_the_query_delay() {
    // 5 header segments, then 5 more 100 ms later: the first part's ACKs are back by then
    // (one RTT ≈ 46 ms), so the window is open and the rest crosses in one go.
    let (header, response, query) = (5 * MSS, 10 * MSS, 0.100);
    let r = run(&scenario(1, &format!("[[{REQUEST}, {response}, {header}, {SERVER_DELAY_S}, {query}, 0.0]]"), ""));
    let want = request_path() + SERVER_DELAY_S + query + 5.0 * tx(MSS + HEADERS) + ONE_WAY_S;
    assert_close(r.flows.f64s("response_time_mean_s")[0], want, "response time");
}

#[test]
fn think_time_separates_exchanges_and_the_server_closes_after_the_last() {
    let x = format!("[[{REQUEST}, {MSS}, -1, {SERVER_DELAY_S}, 0.0, 0.0], [{REQUEST}, {MSS}, -1, {SERVER_DELAY_S}, 0.0, 0.5]]");
    let (r, datagrams) = common::run_capturing_server(&scenario(1, &x, ""), "replay-think");
    let one = request_path() + SERVER_DELAY_S + tx(MSS + HEADERS) + ONE_WAY_S;
    assert_eq!(r.flows.i64s("responses"), [2]);
    assert_close(r.flows.f64s("response_time_mean_s")[0], one, "mean response time");
    // The capture: the two requests are `think` + the first response's time apart, and the
    // server's FIN comes after its last data.
    let payload = |ip: &[u8]| u16::from_be_bytes([ip[2], ip[3]]) as usize - 20 - (ip[32] >> 4) as usize * 4;
    let from_server = |ip: &[u8]| ip[12..16] == [10, 0, 0, 1];
    let fin = datagrams.iter().position(|ip| from_server(ip) && ip[33] & 1 != 0).expect("server FIN");
    let last_data = datagrams.iter().rposition(|ip| from_server(ip) && payload(ip) > 0).unwrap();
    assert!(fin >= last_data, "FIN at {fin}, last data at {last_data}");
    assert!(datagrams.iter().any(|ip| !from_server(ip) && ip[33] & 1 != 0), "the client closes too");
    assert_eq!(datagrams.iter().filter(|ip| !from_server(ip) && payload(ip) == REQUEST as usize).count(), 2);
}

#[test]
fn each_pipe_shows_its_own_client_address() {
    let x = format!("[[{REQUEST}, {MSS}, -1, 0.0, 0.0, 0.0]]");
    let (r, datagrams) = common::run_capturing_server(&scenario(3, &x, ""), "replay-addresses");
    let clients: std::collections::BTreeSet<[u8; 4]> = datagrams.iter().map(|ip| ip[12..16].try_into().unwrap()).filter(|a| *a != [10, 0, 0, 1]).collect();
    assert_eq!(clients.into_iter().collect::<Vec<_>>(), [[10, 128, 0, 1], [10, 128, 0, 2], [10, 128, 0, 3]]);
    assert_eq!(r.pipes.strs("address"), ["10.128.0.1", "10.128.0.2", "10.128.0.3"]);
    assert_eq!(r.pipes.strs("client"), ["clients"; 3]);
    assert_eq!(r.flows.i64s("responses"), [1, 1, 1]);
}

#[test]
fn until_done_ends_the_run_with_the_last_connection() {
    let x = format!("[[{REQUEST}, {MSS}, -1, 0.0, 0.0, 0.0]]");
    let r = run(&scenario(2, &x, "until_done = true"));
    assert!(r.complete);
    // The second connection starts at 100 ms and is over well within a second; without
    // `until_done` the run goes to its 30 s (the server's TIME-WAIT timer alone lasts 60 s).
    assert!(r.simulated_s > 0.1 && r.simulated_s < 1.0, "ended at {} s", r.simulated_s);
    assert!(r.flows.f64s("completion_s").iter().all(|c| c.is_finite()));
    let full = run(&scenario(2, &x, ""));
    assert!((full.simulated_s - 30.0).abs() < 1e-9, "{}", full.simulated_s);
    assert_eq!(full.flows.f64s("response_time_mean_s"), r.flows.f64s("response_time_mean_s"));
}

#[test]
fn a_pipe_replay_is_deterministic() {
    let x = format!("[[{REQUEST}, 200000, 3000, 0.002, 0.05, 0.0], [{REQUEST}, 40000, -1, 0.001, 0.0, 0.3]]");
    let clean = scenario(4, &x, "seed = 7").replace("rate = \"10mbit\"\n", "rate = \"2mbit\"\n");
    let lossy = clean.replace("rate = \"2mbit\"\n", "rate = \"2mbit\"\nloss = [\"2%\", \"0%\"]\n");
    let (a, b) = (run(&lossy), run(&lossy));
    assert_eq!(a.flows, b.flows);
    assert_eq!(a.pipes, b.pipes);
    assert_eq!(a.flows.i64s("responses"), [2, 2, 2, 2]);
    // The flow table's TCP counters are the client's; the loss shows in the response times.
    let total = |r: &Results| r.flows.f64s("response_time_mean_s").iter().sum::<f64>();
    assert!(total(&a) > total(&run(&clean)), "2 % loss on 4 × 240 KB of responses must cost time");
}
