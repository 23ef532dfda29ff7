//! RIO through the simulator. Markers are not written yet, so every packet is unmarked,
//! which RIO treats as IN: RIO must then be RED with RIO's IN parameters, drop for drop,
//! on the same seed (the OUT curve never sees a packet).

use pathtwin_core::config::Config;
use pathtwin_sim::{Results, Simulation};

fn dumbbell(qdisc: &str) -> Results {
    let text = format!(
        r#"
hosts = ["a", "b"]
[run]
duration = "20s"
seed = 7
sample_interval = "100ms"
[tcp]
cc = "reno"
max_window = "1MiB"
rcv_window = "1MiB"
[[link]]
between = ["a", "b"]
rate = "10mbit"
delay = "20ms"
queue = "100p"
{qdisc}
[[flow]]
from = "a"
to = "b"
count = 10
"#
    );
    let mut sim = Simulation::new(Config::from_toml(&text, "rio.toml").unwrap()).unwrap();
    sim.advance(sim.end());
    sim.results()
}

#[test]
fn rio_with_only_unmarked_traffic_is_red_with_the_in_parameters() {
    let red = dumbbell(r#"qdisc = "red"
red = { min_th = "15p", max_th = "30p", max_p = 0.02, w_q = 0.002 }"#);
    // The OUT class's thresholds are deliberately tight: no OUT packet exists to meet them.
    let rio = dumbbell(r#"qdisc = "rio"
rio = { in = { min_th = "15p", max_th = "30p", max_p = 0.02 }, out = { min_th = "2p", max_th = "4p", max_p = 1.0 }, w_q = 0.002 }"#);
    assert_eq!(rio.queues.strs("qdisc"), ["rio", "rio"]);
    for col in ["arrivals", "drops", "early_drops", "forced_drops", "departure_bytes", "in_arrivals", "in_drops"] {
        assert_eq!(rio.queues.i64s(col), red.queues.i64s(col), "{col}");
    }
    assert_eq!(rio.queues.i64s("out_arrivals"), [0, 0]);
    let early = rio.queues.i64s("early_drops")[0];
    assert!(early > 50, "the bottleneck's curve was exercised: {early} early drops");
    assert_eq!(rio.queues.i64s("in_drops")[0], rio.queues.i64s("drops")[0], "every drop is an IN drop");
    assert_eq!(rio.queue_series.f64s("avg_queue"), red.queue_series.f64s("avg_queue"));
    assert_eq!(rio.flows.i64s("retransmits"), red.flows.i64s("retransmits"));
}
