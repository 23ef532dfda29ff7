//! Python bindings for pathtwin-emu: `EmuRun`, one running emulation (with `workload`, the
//! config's `[[flow]]` workload runs in it, on the emulator's own thread), and two helpers
//! for runs left behind (`emu_cleanup_stale`, `emu_live_runs`).
//!
//! The emulator's loop runs on its own native thread, never under the GIL: a Python thread
//! would stall the packet loop whenever the interpreter is busy (up to the 5 ms switch
//! interval), which would show up as release lateness. Python talks to it through a stop
//! flag and a snapshot (JSON text) the thread refreshes every 250 ms. At the end the result
//! tables are written here as Parquet, by the simulator's writer ([`crate::tables`]), when
//! Python names the result directory (see `EmuRun::stop`); `pathtwin.emulation` writes
//! `run.json`. Every error becomes a `pathtwin.errors.PathtwinError` with a one-line message.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pathtwin_core::config::Config;
use pathtwin_core::time::Duration;
use pathtwin_core::table::Table;
use pathtwin_emu::emulator::LatenessSummary;
use pathtwin_emu::lab::write_state_file;
use pathtwin_emu::lateness::Histogram;
use pathtwin_emu::netns::{cleanup_stale, live_runs, RunId};
use pathtwin_emu::long_tables::ResultTable;
use pathtwin_emu::emulator::Prepared;
use pathtwin_emu::{Emulator, EmulatorOptions};

use crate::tables;
use pyo3::prelude::*;
use pyo3::types::PyDict;

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

/// What the loop thread hands back when the run ends: `run.json`'s facts as JSON text and
/// the result tables (the long ones still in the files the run spilled them to).
struct Finished {
    run: String,
    tables: Vec<(&'static str, ResultTable)>,
}

struct Running {
    stop: Arc<AtomicBool>,
    snapshot: Arc<Mutex<String>>,
    /// Copies of the release and timer-wake lateness histograms, refreshed with the snapshot.
    lateness: Arc<Mutex<(Histogram, Histogram)>>,
    thread: JoinHandle<Result<Finished, String>>,
    /// Set by the workload's thread when it has ended by itself.
    workload_finished: Option<Arc<AtomicBool>>,
}

/// One emulation: the hosts exist from construction until `stop()`; packets flow from
/// construction, or with `hold=True` from `go()` (so that captures of the hosts' devices can
/// start first).
#[pyclass(module = "pathtwin._native")]
struct EmuRun {
    /// The hosts of a run made with `hold=True`, until `go()`.
    held: Option<Prepared>,
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
    /// dicts are passed; `origin` names the file in errors); with `hold`, only its hosts,
    /// until `go()`.
    #[new]
    #[pyo3(signature = (config_text, origin = "", json = false, run_id = None, cc = None, spin_us = 0.0,
                        high_priority = true, cpu_latency_qos = true, tcp_info = true, monarch_pcap = None,
                        offload = true, workload = false, hold = false))]
    #[allow(clippy::too_many_arguments)]
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
        workload: bool,
        hold: bool,
    ) -> PyResult<Self> {
        let config = if json { Config::from_json_file(config_text, origin) } else { Config::from_toml(config_text, origin) };
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
            workload,
        };
        let prepared = py.allow_threads(|| Emulator::prepare(config, &opts)).map_err(|e| pathtwin_error(py, e))?;
        // Each host with the addresses of its pipes (the emulator's own, pipe `s` at index s).
        let hosts: Vec<serde_json::Value> = prepared
            .hosts()
            .iter()
            .map(|h| {
                let mut v = serde_json::to_value(h).expect("host info serializes");
                let pipes: Vec<String> = (0..h.pipes).filter_map(|s| h.pipe_address(s)).map(|a| a.to_string()).collect();
                v["pipe_addresses"] = pipes.into();
                v
            })
            .collect();
        let hosts_json = serde_json::to_string(&hosts).expect("host info serializes");
        let run_id = prepared.run_id().to_string();
        let state_dir = prepared.lab().state_dir().display().to_string();
        let warnings = prepared.warnings().to_vec();
        let mut run = EmuRun { held: Some(prepared), running: None, run_id, state_dir, hosts_json, warnings, window_start: Default::default() };
        if !hold {
            run.go(py)?;
        }
        Ok(run)
    }

    /// Lets the packets of a run made with `hold=True` flow: model time zero, the workload
    /// and the `tcp_info` sampling start now. Does nothing once they flow.
    fn go(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(prepared) = self.held.take() else { return Ok(()) };
        let emu = py.allow_threads(|| prepared.start()).map_err(|e| pathtwin_error(py, e))?;
        let run_id = self.run_id.clone();
        let workload_finished = emu.workload_finished();
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
        self.running = Some(Running { stop, snapshot, lateness, thread, workload_finished });
        Ok(())
    }

    /// The hosts as a list of dicts: name, netns, ipv4, ipv6, and as a pipe client `pipes`
    /// and `pipe_addresses` (pipe `s`'s address at index `s`).
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

    /// Whether the `[[flow]]` workload (started with `workload=True`) has ended by itself:
    /// its run's duration is over, or with `until_done` every connection has closed. The
    /// packet loop still runs until `stop()`. False without a workload, and after `stop()`.
    fn workload_done(&self) -> bool {
        self.running.as_ref().and_then(|r| r.workload_finished.as_ref()).is_some_and(|f| f.load(Ordering::Acquire))
    }

    /// Stops the loop, removes every host, and returns the results as a dict: `run` (what
    /// `run.json` says of the emulation), `tables` (`{table: {column: list}}`), `written`
    /// (the tables written) and `warnings`.
    ///
    /// With `out_dir` (an existing directory) every table is written there as
    /// `<table>.parquet`, and the tables written are left out of `tables` (Python reads them
    /// from their files when asked): as Python objects the hour-long soak's 585 563
    /// `flow_series` rows and 276 586 `packet_flows` rows cost hundreds of MB. The tables that
    /// grow with a run's length (`flow_series`, `queue_series`, `packet_flows`) are written
    /// from the files the run spilled them to, a row group of
    /// [`tables::LONG_TABLE_GROUP_ROWS`] rows at a time, never whole. A table that cannot be
    /// written comes back in `tables`, with a warning, so nothing measured is lost.
    #[pyo3(signature = (out_dir = None))]
    fn stop<'py>(&mut self, py: Python<'py>, out_dir: Option<std::path::PathBuf>) -> PyResult<Bound<'py, PyDict>> {
        // A held run stopped before `go()` still ends with its (empty) results, and starts
        // no connection of its workload on the way.
        if let Some(prepared) = self.held.take() {
            self.held = Some(prepared.without_workload());
            self.go(py)?;
        }
        let Some(r) = self.running.take() else {
            return Err(pathtwin_error(py, "the emulation was already stopped"));
        };
        r.stop.store(true, Ordering::Relaxed);
        let finished = match py.allow_threads(|| r.thread.join()) {
            Ok(Ok(finished)) => finished,
            Ok(Err(msg)) => return Err(pathtwin_error(py, msg)),
            Err(_) => return Err(pathtwin_error(py, "the emulator thread panicked")),
        };
        let mut written: Vec<&str> = Vec::new();
        let mut warnings: Vec<String> = Vec::new();
        let mut kept: Vec<(&str, ResultTable)> = Vec::new();
        py.allow_threads(|| {
            for (name, mut t) in finished.tables {
                let Some(dir) = &out_dir else {
                    kept.push((name, t));
                    continue;
                };
                let path = dir.join(format!("{name}.parquet"));
                let done = match &mut t {
                    ResultTable::Whole(whole) => tables::write(&path, whole),
                    ResultTable::Long(long) => tables::write_long(&path, long, tables::LONG_TABLE_GROUP_ROWS).map(|_| ()),
                };
                match done {
                    Ok(()) => written.push(name),
                    Err(why) => {
                        warnings.push(why);
                        kept.push((name, t));
                    }
                }
            }
        });
        let out = PyDict::new(py);
        out.set_item("run", py.import("json")?.call_method1("loads", (&finished.run,))?)?;
        let by_name = PyDict::new(py);
        for (name, t) in kept {
            let schema = match &t {
                ResultTable::Long(l) => Some(l.schema),
                ResultTable::Whole(_) => None,
            };
            let table = match py.allow_threads(|| t.into_table()) {
                Ok(table) => table,
                Err(why) => {
                    // The spill file could not be read back: the table's columns, without rows.
                    warnings.push(why);
                    Table::new(schema.expect("only a long table is read back"))
                }
            };
            by_name.set_item(name, tables::to_dict(py, &table)?)?;
        }
        out.set_item("tables", by_name)?;
        out.set_item("written", written)?;
        out.set_item("warnings", warnings)?;
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

fn loop_thread(mut emu: Emulator, stop: &AtomicBool, snapshot: &Mutex<String>, lateness: &Mutex<(Histogram, Histogram)>) -> Result<Finished, String> {
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
    // Whatever ended the loop, what was measured is kept: the workload's flows (its sockets
    // close, and the sampler records their last state), the last TCP sample, then results.
    emu.stop_workload();
    emu.stop_sampling();
    let outcome = outcome.and_then(|()| {
        let results = emu.results();
        let run = serde_json::to_string(&results.run).map_err(|e| e.to_string())?;
        Ok(Finished { run, tables: results.tables })
    });
    // `emu` drops here: devices close, namespaces and the state directory are removed.
    drop(emu);
    outcome
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
