//! The `[[flow]]` workload end to end (root only: skipped with a message on a developer's
//! machine without it, a failure under CI, where a skip would pass unseen): real
//! namespaces, the kernel's TCP, the emulator's own programs. Expectations come from the
//! config: every byte of a sized transfer arrives, no sooner than the path allows; a
//! request/response flow completes its exchanges, each no quicker than an RTT and the
//! server delay; the workload ends by itself with `until_done`, and its sockets carry the
//! connections' labels in `flow_series`.

mod common;
use common::can_emulate;

use std::sync::atomic::Ordering;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use pathtwin_core::config::Config;
use pathtwin_core::time::Duration;
use pathtwin_emu::{Emulator, EmulatorOptions};

const CONFIG: &str = r#"
hosts = ["a", "b"]
[run]
duration = "10s"
until_done = true
[[path]]
between = ["a", "b"]
rtt = "20ms"
abw = "20mbit"
mode = "link"
queue = "500KB"
[[flow]]
from = "a"
to = "b"
bytes = "300KB"
count = 2
[[flow]]
from = "b"
to = "a"
app = "reqresp"
request = "100B"
response = "4KB"
server_delay = "10ms"
requests = 3
label = "web"
"#;

#[test]
fn a_workload_runs_to_its_end_and_reports_every_connection() {
    if !can_emulate() {
        return;
    }
    let cfg = Config::from_toml(CONFIG, "workload.toml").unwrap();
    let mut emu = Emulator::start(cfg, &EmulatorOptions { workload: true, ..EmulatorOptions::default() }).unwrap();
    let finished = emu.workload_finished().expect("a workload was asked for");
    let deadline = StdInstant::now() + StdDuration::from_secs(10);
    while !finished.load(Ordering::Acquire) {
        assert!(StdInstant::now() < deadline, "the workload did not end within 10 s");
        emu.run_for(Duration::from_millis(20), || false).unwrap();
    }
    emu.stop_workload();
    emu.stop_sampling();
    assert!(!emu.workload_interrupted());
    let results = emu.results();
    assert!(results.run.workload && !results.run.interrupted);
    let tables: Vec<(&str, pathtwin_core::table::Table)> = results.tables.into_iter().map(|(n, t)| (n, t.into_table().unwrap())).collect();
    let flows = &tables.iter().find(|(n, _)| *n == "flows").expect("a flows table").1;
    assert_eq!(flows.rows(), 3);
    let ints = |c: &str| match flows.column(c) {
        Some(pathtwin_core::table::Column::I64(v)) => v.clone(),
        other => panic!("{c}: {other:?}"),
    };
    let floats = |c: &str| match flows.column(c) {
        Some(pathtwin_core::table::Column::F64(v)) => v.clone(),
        other => panic!("{c}: {other:?}"),
    };
    assert_eq!(ints("bytes_delivered"), [300_000, 300_000, 3 * 4_100]);
    assert_eq!(ints("responses"), [0, 0, 3]);
    // A sized transfer: a handshake and the serialization of 300 KB at 20 Mbit/s at least.
    for c in &floats("completion_s")[..2] {
        assert!(*c >= 0.020 + 300_000.0 * 8.0 / 20e6, "completion {c}");
    }
    let mean = floats("response_time_mean_s")[2];
    assert!((0.030..0.060).contains(&mean), "response time {mean}");
    let flow_series = tables.iter().find(|(n, _)| *n == "flow_series").expect("a flow_series table");
    let Some(pathtwin_core::table::Column::Category(labels)) = flow_series.1.column("label") else { panic!("no label column") };
    let labels: Vec<&str> = labels.iter().collect();
    for l in ["a->b#0", "a->b#1", "web"] {
        assert!(labels.contains(&l), "{l} not in the flow_series labels {labels:?}");
    }
}

#[test]
fn a_flow_setting_the_kernel_cannot_take_per_connection_is_refused_before_any_host_exists() {
    if !can_emulate() {
        return;
    }
    let cfg = Config::from_toml(&format!("{CONFIG}[flow.tcp]\nmin_rto = \"50ms\"\n"), "workload.toml").unwrap();
    let err = Emulator::start(cfg, &EmulatorOptions { workload: true, ..EmulatorOptions::default() }).err().expect("refused");
    assert!(err.to_string().starts_with("flow[1].tcp.min_rto: the kernel sets it per route or per host"), "{err}");
}
