//! `[[probe]]` series end to end: a probe's one-way delay and round trip are what the links
//! say (propagation plus each link's serialization of the probe and of its echo, computed
//! here from the link rates, not from the simulator), probes leave every interval between
//! start and stop, a lossy link loses probes as counted, and a probe waits behind data in a
//! queue like any packet.

use pathtwin_core::config::Config;
use pathtwin_core::table::Column;
use pathtwin_sim::{Results, Simulation};

/// a ─(2 ms, 30 Mbit/s up / 50 down)─ r ─(10 ms, 20 Mbit/s)─ b
const TOPOLOGY: &str = r#"
hosts = ["a", "b"]
routers = ["r"]
[run]
duration = "3s"
[[link]]
between = ["a", "r"]
rate = "30mbit/50mbit"
delay = "2ms"
[[link]]
between = ["r", "b"]
rate = "20mbit"
delay = "10ms"
"#;

fn run(extra: &str) -> Results {
    Simulation::new(Config::from_toml(&format!("{TOPOLOGY}{extra}"), "probes.toml").unwrap()).unwrap().run()
}

fn opt_i64s<'a>(r: &'a Results, name: &str) -> &'a [Option<i64>] {
    match r.probes.column(name) {
        Some(Column::OptI64(v)) => v,
        _ => panic!("no optional i64 column {name}"),
    }
}

/// Serialization of `bytes` at `bps`, in ns.
fn tx_ns(bytes: u64, bps: u64) -> i64 {
    (bytes * 8 * 1_000_000_000 / bps) as i64
}

#[test]
fn an_idle_paths_probe_takes_propagation_and_serialization() {
    let r = run("[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"100ms\"\nstart = \"1s\"\nstop = \"2s\"\n");
    // 1.0, 1.1, ... 1.9 s: ten probes.
    assert_eq!(r.probes.rows(), 10);
    assert_eq!(r.probes.i64s("round"), (0..10).collect::<Vec<i64>>());
    let sent = r.probes.i64s("sent_ns");
    assert!(sent.iter().enumerate().all(|(k, &t)| t == 1_000_000_000 + k as i64 * 100_000_000), "{sent:?}");
    // 92-byte probe: a->r at 30 Mbit/s, r->b at 20; 64-byte echo: b->r at 20, r->a at 50.
    let one_way = 12_000_000 + tx_ns(92, 30_000_000) + tx_ns(92, 20_000_000);
    let back = 12_000_000 + tx_ns(64, 20_000_000) + tx_ns(64, 50_000_000);
    for (k, (&arrived, &echoed)) in opt_i64s(&r, "arrived_ns").iter().zip(opt_i64s(&r, "echoed_ns")).enumerate() {
        let (arrived, echoed) = (arrived.expect("arrived"), echoed.expect("echoed"));
        assert!((arrived - sent[k] - one_way).abs() <= 1, "probe {k}: one way {} ns, expected {one_way}", arrived - sent[k]);
        assert!((echoed - arrived - back).abs() <= 1, "probe {k}: back {} ns, expected {back}", echoed - arrived);
    }
}

#[test]
fn sizes_are_the_configured_datagrams() {
    let r = run("[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"1s\"\nsize = \"1500B\"\necho_size = \"28B\"\n");
    let (sent, arrived) = (r.probes.i64s("sent_ns")[0], opt_i64s(&r, "arrived_ns")[0].unwrap());
    assert_eq!(arrived - sent, 12_000_000 + tx_ns(1500, 30_000_000) + tx_ns(1500, 20_000_000));
}

#[test]
fn a_lossy_link_loses_probes_and_echoes_and_the_table_says_which() {
    let lossy = TOPOLOGY.replace("delay = \"10ms\"\n", "delay = \"10ms\"\nloss = \"0.3\"\n");
    let cfg = format!("{lossy}[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"10ms\"\n");
    let r = Simulation::new(Config::from_toml(&cfg, "lossy.toml").unwrap()).unwrap().run();
    let n = r.probes.rows();
    assert_eq!(n, 300);
    let arrived = opt_i64s(&r, "arrived_ns").iter().filter(|a| a.is_some()).count();
    let echoed = opt_i64s(&r, "echoed_ns").iter().filter(|a| a.is_some()).count();
    // Each way crosses the lossy link once: 70 % arrive, 49 % come back (binomial: ±5 σ).
    let (p_arrive, p_back) = (arrived as f64 / n as f64, echoed as f64 / n as f64);
    assert!((p_arrive - 0.7).abs() < 5.0 * (0.7 * 0.3 / n as f64).sqrt(), "{p_arrive}");
    assert!((p_back - 0.49).abs() < 5.0 * (0.49 * 0.51 / n as f64).sqrt(), "{p_back}");
    // An echo exists only for a probe that arrived.
    assert!(opt_i64s(&r, "arrived_ns").iter().zip(opt_i64s(&r, "echoed_ns")).all(|(a, e)| a.is_some() || e.is_none()));
}

#[test]
fn a_probe_waits_behind_a_bulk_flows_queue() {
    let quiet = run("[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"50ms\"\n");
    let busy = run("[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"50ms\"\n[[flow]]\nfrom = \"a\"\nto = \"b\"\n");
    let delay = |r: &Results| -> Vec<i64> {
        r.probes.i64s("sent_ns").iter().zip(opt_i64s(r, "arrived_ns")).filter_map(|(s, a)| a.map(|a| a - s)).collect()
    };
    let (q, b) = (delay(&quiet), delay(&busy));
    // A bulk flow fills the 20 Mbit/s link's queue: some probes wait at least 10 packet times.
    assert!(q.iter().all(|&d| d == q[0]));
    assert!(b.iter().any(|&d| d > q[0] + 10 * tx_ns(1500, 20_000_000)), "{b:?}");
    // The same run twice: the same delays.
    assert_eq!(delay(&run("[[probe]]\nfrom = \"a\"\nto = \"b\"\ninterval = \"50ms\"\n[[flow]]\nfrom = \"a\"\nto = \"b\"\n")), b);
}
