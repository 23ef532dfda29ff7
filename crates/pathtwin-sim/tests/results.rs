//! Results taken while a run goes on: the time series are shared with the simulation rather
//! than copied, and must still read as they were when taken.

use pathtwin_core::config::Config;
use pathtwin_core::time::{Duration, Instant};
use pathtwin_sim::Simulation;

const SCENARIO: &str = r#"
hosts = ["a", "b"]
[run]
duration = "4s"
seed = 3
sample_interval = "100ms"
[[link]]
between = ["a", "b"]
rate = "10mbit"
delay = "10ms"
queue = "50p"
[[flow]]
from = "a"
to = "b"
count = 2
"#;

#[test]
fn results_taken_mid_run_keep_their_rows_while_the_run_goes_on() {
    let mut sim = Simulation::new(Config::from_toml(SCENARIO, "results.toml").unwrap()).unwrap();
    sim.advance(Instant::ZERO + Duration::from_secs(1));
    let early = sim.results();
    let (flow_rows, queue_rows) = (early.flow_series.rows(), early.queue_series.rows());
    let early_cwnd = early.flow_series.i64s("cwnd_bytes").to_vec();
    assert!(flow_rows > 0 && queue_rows > 0);

    sim.advance(sim.end());
    let late = sim.results();
    // The earlier snapshot is untouched by the samples taken since.
    assert_eq!(early.flow_series.rows(), flow_rows);
    assert_eq!(early.queue_series.rows(), queue_rows);
    assert_eq!(early.flow_series.i64s("cwnd_bytes"), early_cwnd);
    // The later one has every sample: 2 flows and 2 queues (one per direction), 41 samples
    // from 0 to 4 s; the first second's rows are the same in both.
    assert_eq!(late.queue_series.rows(), 2 * 41);
    assert!(late.flow_series.rows() > flow_rows);
    assert_eq!(&late.flow_series.i64s("cwnd_bytes")[..flow_rows], early_cwnd);
    let labels: Vec<&str> = match late.flow_series.column("label") {
        Some(pathtwin_core::table::Column::Category(c)) => c.iter().collect(),
        other => panic!("label column: {other:?}"),
    };
    assert_eq!(labels.len(), late.flow_series.rows());
    assert!(labels.iter().all(|l| l.starts_with("a->b#")), "{labels:?}");
}
