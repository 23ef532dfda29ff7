//! Python bindings for pathtwin-emu: `EmuRun`, one running emulation, and two helpers for
//! runs left behind (`emu_cleanup_stale`, `emu_live_runs`).
//!
//! The emulator's loop runs on its own native thread, never under the GIL: a Python thread
//! would stall the packet loop whenever the interpreter is busy (up to the 5 ms switch
//! interval), which would show up as release lateness. Python talks to it through a stop
//! flag and a snapshot the thread refreshes every 250 ms. Results and snapshots cross as
//! JSON text, except the `flow_series` table, written here as Parquet when Python names
//! the result directory (see `EmuRun::stop`); `pathtwin.emulation` turns the rest into
//! `run.json` and Parquet. Every error
//! becomes a `pathtwin.errors.PathtwinError` with a one-line message.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pathtwin_core::config::Config;
use pathtwin_core::time::Duration;
use pathtwin_emu::netns::{cleanup_stale, live_runs, RunId};
use pathtwin_emu::emulator::LatenessSummary;
use pathtwin_emu::lab::write_state_file;
use pathtwin_emu::lateness::Histogram;
use pathtwin_emu::sampler::FlowSeriesRow;
use pathtwin_emu::{Emulator, EmulatorOptions};

use crate::parquet_out::{write_nullable_groups, ColumnRef};
use pyo3::prelude::*;

/// Interval at which the loop thread refreshes the snapshot (memory and `stats.json`).
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);

fn pathtwin_error(py: Python<'_>, msg: impl std::fmt::Display) -> PyErr {
    match py.import("pathtwin.errors").and_then(|m| m.getattr("PathtwinError")) {
        Ok(cls) => {
            PyErr::from_value(cls.call1((msg.to_string(),)).unwrap_or_else(|e| e.into_value(py).into_bound(py).into_any()))
        }
        Err(e) => e,
    }
}

struct Running {
    stop: Arc<AtomicBool>,
    snapshot: Arc<Mutex<String>>,
    /// Copies of the release and timer-wake lateness histograms, refreshed with the snapshot.
    lateness: Arc<Mutex<(Histogram, Histogram)>>,
    thread: JoinHandle<Result<(String, Vec<FlowSeriesRow>), String>>,
}

/// One running emulation: the hosts exist and packets flow from construction until `stop()`.
#[pyclass(module = "pathtwin._native")]
struct EmuRun {
    running: Option<Running>,
    #[pyo3(get)]
    run_id: String,
    #[pyo3(get)]
    state_dir: String,
    hosts_json: String,
    #[pyo3(get)]
    warnings: Vec<String>,
    /// The lateness histograms at the previous `lateness_window()` call.
    window_start: (Histogram, Histogram),
}

#[pymethods]
impl EmuRun {
    /// Starts an emulation of `config_text` (TOML, or JSON when `json` is true, as Python
    /// dicts are passed; `origin` names the file in errors).
    #[new]
    #[pyo3(signature = (config_text, origin = "", json = false, run_id = None, cc = None, spin_us = 0.0,
                        high_priority = true, cpu_latency_qos = true, tcp_info = true, monarch_pcap = None,
                        offload = true))]
    fn new(
        py: Python<'_>,
        config_text: &str,
        origin: &str,
        json: bool,
        run_id: Option<&str>,
        cc: Option<String>,
        spin_us: f64,
        high_priority: bool,
        cpu_latency_qos: bool,
        tcp_info: bool,
        monarch_pcap: Option<String>,
        offload: bool,
    ) -> PyResult<Self> {
        let config = if json { Config::from_json(config_text) } else { Config::from_toml(config_text, origin) };
        let config = config.map_err(|e| pathtwin_error(py, e))?;
        let run_id = run_id.map(RunId::parse).transpose().map_err(|e| pathtwin_error(py, e))?;
        if !(0.0..=1e6).contains(&spin_us) {
            return Err(pathtwin_error(py, format!("spin {spin_us} µs must be between 0 and 1 s")));
        }
        let opts = EmulatorOptions {
            run_id,
            cc,
            spin: Duration::from_secs_f64(spin_us * 1e-6),
            high_priority,
            cpu_latency_qos,
            tcp_info,
            monarch_capture: monarch_pcap.map(std::path::PathBuf::from),
            offload,
        };
        let emu = py.allow_threads(|| Emulator::start(config, &opts)).map_err(|e| pathtwin_error(py, e))?;
        let hosts_json = serde_json::to_string(emu.hosts()).expect("host info serializes");
        let run_id = emu.run_id().to_string();
        let state_dir = emu.lab().state_dir().display().to_string();
        let warnings = emu.warnings().to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let snapshot = Arc::new(Mutex::new(serde_json::to_string(&emu.snapshot()).expect("snapshot serializes")));
        let lateness = Arc::new(Mutex::new((Histogram::default(), Histogram::default())));
        let thread = {
            let (stop, snapshot, lateness) = (stop.clone(), snapshot.clone(), lateness.clone());
            std::thread::Builder::new()
                .name(format!("pathtwin-emu-{run_id}"))
                .spawn(move || loop_thread(emu, &stop, &snapshot, &lateness))
                .map_err(|e| pathtwin_error(py, format!("starting the emulator thread: {e}")))?
        };
        let window_start = (Histogram::default(), Histogram::default());
        Ok(EmuRun { running: Some(Running { stop, snapshot, lateness, thread }), run_id, state_dir, hosts_json, warnings, window_start })
    }

    /// The hosts as a list of dicts: name, netns, ipv4, ipv6.
    #[getter]
    fn hosts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.call_method1("loads", (&self.hosts_json,))
    }

    /// Live counters as JSON text (refreshed every 250 ms).
    fn snapshot(&self, py: Python<'_>) -> PyResult<String> {
        match &self.running {
            Some(r) => Ok(r.snapshot.lock().expect("snapshot lock").clone()),
            None => Err(pathtwin_error(py, "the emulation has stopped")),
        }
    }

    /// Release and timer-wake lateness since the previous call (or the start) as JSON
    /// `{"release": {count, mean_ns, p50_ns, p99_ns, p999_ns, max_ns}, "timer_wake": {...}}`;
    /// as fresh as the snapshot (250 ms). For watching a long run minute by minute.
    fn lateness_window(&mut self, py: Python<'_>) -> PyResult<String> {
        let Some(r) = &self.running else {
            return Err(pathtwin_error(py, "the emulation has stopped"));
        };
        let now = r.lateness.lock().expect("lateness lock").clone();
        let (release, wake) = (now.0.since(&self.window_start.0), now.1.since(&self.window_start.1));
        self.window_start = now;
        let v = serde_json::json!({"release": LatenessSummary::from(&release), "timer_wake": LatenessSummary::from(&wake)});
        Ok(v.to_string())
    }

    /// Whether the loop is still running (it stops on its own only after an error).
    fn is_running(&self) -> bool {
        self.running.as_ref().is_some_and(|r| !r.thread.is_finished())
    }

    /// Stops the loop, removes every host, and returns the results as JSON text.
    ///
    /// With `out_dir` (an existing directory), the `flow_series` table (every TCP socket
    /// every sample interval: the one table that grows with a run's length) is written there
    /// as `flow_series.parquet` and left out of the JSON, which then says
    /// `"flow_series_written": true`: an hour's 600 000 rows cost 900 MB as Python objects.
    /// If writing fails, the rows come back in the JSON instead, with a warning, so nothing
    /// measured is lost. `"flow_series_rows"` counts the rows either way.
    #[pyo3(signature = (out_dir = None))]
    fn stop(&mut self, py: Python<'_>, out_dir: Option<std::path::PathBuf>) -> PyResult<String> {
        let Some(r) = self.running.take() else {
            return Err(pathtwin_error(py, "the emulation was already stopped"));
        };
        r.stop.store(true, Ordering::Relaxed);
        let (json, flow_series) = match py.allow_threads(|| r.thread.join()) {
            Ok(Ok(results)) => results,
            Ok(Err(msg)) => return Err(pathtwin_error(py, msg)),
            Err(_) => return Err(pathtwin_error(py, "the emulator thread panicked")),
        };
        // `None`: not asked to write (no directory, or no rows).
        let written = out_dir.filter(|_| !flow_series.is_empty()).map(|dir| {
            let path = dir.join("flow_series.parquet");
            py.allow_threads(|| write_flow_series(&path, &flow_series)).map_err(|e| format!("{}: cannot write ({e})", path.display()))
        });
        // The results object is `{...}`: the extra fields go before its closing brace.
        let body = json.strip_suffix('}').ok_or_else(|| pathtwin_error(py, "emulator results are not a JSON object"))?;
        let mut out = format!("{body},\"flow_series_rows\":{}", flow_series.len());
        if let Some(Ok(())) = written {
            out.push_str(",\"flow_series_written\":true");
        } else {
            let rows = serde_json::to_string(&flow_series).map_err(|e| pathtwin_error(py, e))?;
            out.push_str(&format!(",\"flow_series\":{rows}"));
            if let Some(Err(why)) = written {
                out.push_str(&format!(",\"flow_series_warning\":{}", serde_json::Value::String(why)));
            }
        }
        out.push('}');
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!("EmuRun(run_id={:?}, running={})", self.run_id, self.is_running())
    }
}

impl Drop for EmuRun {
    /// A run dropped without `stop()` (an exception unwinding past it) still cleans up.
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop.store(true, Ordering::Relaxed);
            let _ = r.thread.join();
        }
    }
}

fn loop_thread(mut emu: Emulator, stop: &AtomicBool, snapshot: &Mutex<String>, lateness: &Mutex<(Histogram, Histogram)>) -> Result<(String, Vec<FlowSeriesRow>), String> {
    // `stats.json` (for `pathtwin emu stats`) is written by a thread of its own: on a disk a
    // write and rename waited up to ~0.9 s on the journal, and the loop held every packet due
    // meanwhile (the soak's release stalls).
    let (to_publisher, published) = std::sync::mpsc::channel::<String>();
    let state_dir = emu.lab().state_dir();
    let publisher = std::thread::Builder::new().name("pathtwin-stats".into()).spawn(move || {
        while let Ok(mut json) = published.recv() {
            // Only the newest snapshot is worth writing.
            while let Ok(newer) = published.try_recv() {
                json = newer;
            }
            // Readers of the file are optional; a full /run is not fatal.
            let _ = write_state_file(&state_dir, "stats.json", &json);
        }
    });
    let outcome = (|| {
        while !stop.load(Ordering::Relaxed) {
            emu.run_for(SNAPSHOT_EVERY, || stop.load(Ordering::Relaxed)).map_err(|e| e.to_string())?;
            let snap = emu.snapshot();
            let json = serde_json::to_string(&snap).map_err(|e| e.to_string())?;
            let _ = to_publisher.send(json.clone());
            *snapshot.lock().expect("snapshot lock") = json;
            let engine = emu.engine();
            *lateness.lock().expect("lateness lock") = (engine.lateness.clone(), engine.wake_lateness.clone());
        }
        Ok(())
    })();
    // The publisher finishes its last write before the state directory goes.
    drop(to_publisher);
    if let Ok(p) = publisher {
        let _ = p.join();
    }
    // Whatever ended the loop, what was measured is kept: the last TCP sample, then results.
    emu.stop_sampling();
    let outcome = outcome.and_then(|()| {
        let mut results = emu.results();
        let flow_series = std::mem::take(&mut results.flow_series);
        serde_json::to_string(&results).map(|json| (json, flow_series)).map_err(|e| e.to_string())
    });
    // `emu` drops here: devices close, namespaces and the state directory are removed.
    drop(emu);
    outcome
}

/// Rows per row group of `flow_series.parquet`: the columns of one group are built at a time
/// (a few MB), where the whole table's would be hundreds after an hour.
const FLOW_SERIES_GROUP_ROWS: usize = 65_536;

/// Writes `rows` as the `flow_series` Parquet file, with the columns and types that
/// `pathtwin.emulation.write_emu_results` gives the table when it comes through Python
/// (`FLOW_SERIES_COLUMNS`: numbers as INT64 or DOUBLE, missing values as nulls).
fn write_flow_series(path: &std::path::Path, rows: &[FlowSeriesRow]) -> Result<(), parquet::errors::ParquetError> {
    let groups = rows.len().div_ceil(FLOW_SERIES_GROUP_ROWS);
    write_nullable_groups(path, groups, &|g, emit| {
        let part = &rows[g * FLOW_SERIES_GROUP_ROWS..((g + 1) * FLOW_SERIES_GROUP_ROWS).min(rows.len())];
        let col = |f: &dyn Fn(&FlowSeriesRow) -> Option<i64>| part.iter().map(f).collect::<Vec<_>>();
        let float = |f: &dyn Fn(&FlowSeriesRow) -> Option<f64>| part.iter().map(f).collect::<Vec<_>>();
        let int = |f: &dyn Fn(&FlowSeriesRow) -> i64| part.iter().map(f).collect::<Vec<_>>();
        let text = |f: &dyn Fn(&FlowSeriesRow) -> &str| part.iter().map(|r| f(r).to_string()).collect::<Vec<_>>();
        let (time_s, srtt_ms, goodput_bps) = (float(&|r| Some(r.time_s)), float(&|r| Some(r.srtt_ms)), float(&|r| Some(r.goodput_bps)));
        let (rttvar_ms, min_rtt_ms, rto_ms) = (float(&|r| r.rttvar_ms), float(&|r| r.min_rtt_ms), float(&|r| r.rto_ms));
        let (delivery_rate_bps, pacing_rate_bps) = (float(&|r| r.delivery_rate_bps), float(&|r| r.pacing_rate_bps));
        let (flow, src_port, dst_port) = (int(&|r| r.flow.into()), int(&|r| r.src_port.into()), int(&|r| r.dst_port.into()));
        let (cwnd_bytes, ssthresh_bytes) = (int(&|r| r.cwnd_bytes), int(&|r| r.ssthresh_bytes));
        let (delivered_bytes, retransmits, state) = (int(&|r| r.delivered_bytes), int(&|r| r.retransmits), int(&|r| r.state.into()));
        let (label, src, dst) = (text(&|r| &r.label), text(&|r| &r.src), text(&|r| &r.dst));
        let cc: Vec<Option<String>> = part.iter().map(|r| r.cc.clone()).collect();
        let (ca_state, rto_retransmits) = (col(&|r| r.ca_state.map(i64::from)), col(&|r| r.rto_retransmits.map(i64::from)));
        let (mss, cwnd_segments) = (col(&|r| r.mss.map(i64::from)), col(&|r| r.cwnd_segments.map(i64::from)));
        let (unacked_segments, lost_segments) = (col(&|r| r.unacked_segments.map(i64::from)), col(&|r| r.lost_segments.map(i64::from)));
        // Byte counters stay far below 2^63.
        let (bytes_sent, bytes_retrans) = (col(&|r| r.bytes_sent.map(|b| b as i64)), col(&|r| r.bytes_retrans.map(|b| b as i64)));
        let bytes_received = col(&|r| r.bytes_received.map(|b| b as i64));
        emit(&[
            ("time_s", ColumnRef::OptF64(&time_s)),
            ("flow", ColumnRef::I64(&flow)),
            ("label", ColumnRef::Str(&label)),
            ("src", ColumnRef::Str(&src)),
            ("dst", ColumnRef::Str(&dst)),
            ("src_port", ColumnRef::I64(&src_port)),
            ("dst_port", ColumnRef::I64(&dst_port)),
            ("cwnd_bytes", ColumnRef::I64(&cwnd_bytes)),
            ("ssthresh_bytes", ColumnRef::I64(&ssthresh_bytes)),
            ("srtt_ms", ColumnRef::OptF64(&srtt_ms)),
            ("goodput_bps", ColumnRef::OptF64(&goodput_bps)),
            ("delivered_bytes", ColumnRef::I64(&delivered_bytes)),
            ("retransmits", ColumnRef::I64(&retransmits)),
            ("cc", ColumnRef::OptStr(&cc)),
            ("state", ColumnRef::I64(&state)),
            ("ca_state", ColumnRef::OptI64(&ca_state)),
            ("rto_retransmits", ColumnRef::OptI64(&rto_retransmits)),
            ("rttvar_ms", ColumnRef::OptF64(&rttvar_ms)),
            ("min_rtt_ms", ColumnRef::OptF64(&min_rtt_ms)),
            ("rto_ms", ColumnRef::OptF64(&rto_ms)),
            ("mss", ColumnRef::OptI64(&mss)),
            ("cwnd_segments", ColumnRef::OptI64(&cwnd_segments)),
            ("unacked_segments", ColumnRef::OptI64(&unacked_segments)),
            ("lost_segments", ColumnRef::OptI64(&lost_segments)),
            ("delivery_rate_bps", ColumnRef::OptF64(&delivery_rate_bps)),
            ("pacing_rate_bps", ColumnRef::OptF64(&pacing_rate_bps)),
            ("bytes_sent", ColumnRef::OptI64(&bytes_sent)),
            ("bytes_retrans", ColumnRef::OptI64(&bytes_retrans)),
            ("bytes_received", ColumnRef::OptI64(&bytes_received)),
        ])
    })
}

/// Removes namespaces and state of runs whose owner died; returns the namespaces removed.
#[pyfunction]
fn emu_cleanup_stale(py: Python<'_>) -> Vec<String> {
    py.allow_threads(cleanup_stale).namespaces
}

/// Run ids of emulations whose owner process is alive.
#[pyfunction]
fn emu_live_runs() -> Vec<String> {
    live_runs().into_iter().map(|r| r.to_string()).collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EmuRun>()?;
    m.add_function(wrap_pyfunction!(emu_cleanup_stale, m)?)?;
    m.add_function(wrap_pyfunction!(emu_live_runs, m)?)?;
    Ok(())
}
