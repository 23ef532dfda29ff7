//! Python bindings for the simulator.
//!
//! `Simulation(text, format, origin)` parses a config (TOML text or JSON from a dict) with the
//! one Rust schema ([`crate::model::parse_config`]); `advance(until_s)` runs a chunk with the GIL released, so Python can show
//! progress and honour Ctrl-C between chunks; `results()` returns the tables as
//! `{table: {column: list}}`, `write_results(dir)` writes them as Parquet.

use pathtwin_core::time::{Duration, Instant};
use pathtwin_sim::{Results, Simulation};

use crate::model::{config_err, parse_config, ConfigError};
use crate::tables;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

#[pyclass(name = "Simulation", module = "pathtwin._native")]
struct PySimulation {
    inner: Simulation,
    /// The tables as of the last `advance`, built on first use: a command-line run writes
    /// them and then reads two back, which rebuilt every table each time.
    results: Option<Results>,
}

fn meta_dict<'py>(py: Python<'py>, r: &Results) -> PyResult<Bound<'py, PyDict>> {
    let meta = PyDict::new(py);
    meta.set_item("simulated_s", r.simulated_s)?;
    meta.set_item("events", r.events)?;
    meta.set_item("complete", r.complete)?;
    Ok(meta)
}

impl PySimulation {
    fn current_results(&mut self) -> &Results {
        self.results.get_or_insert_with(|| self.inner.results())
    }
}

#[pymethods]
impl PySimulation {
    #[new]
    #[pyo3(signature = (text, format = "toml", origin = ""))]
    fn new(text: &str, format: &str, origin: &str) -> PyResult<Self> {
        let cfg = parse_config(text, format, origin)?;
        let inner = Simulation::new(cfg).map_err(config_err)?;
        Ok(PySimulation { inner, results: None })
    }

    /// Runs events up to `until_s` simulated seconds; returns True when the run is complete.
    fn advance(&mut self, py: Python<'_>, until_s: f64) -> bool {
        let until = Instant::ZERO + Duration::from_secs_f64(until_s);
        self.results = None;
        let inner = &mut self.inner;
        py.allow_threads(move || inner.advance(until))
    }

    /// Writes `<dir>/<host>.pcap` for the hosts in `[run] pcap`; returns the file paths.
    fn capture_to(&mut self, dir: std::path::PathBuf) -> PyResult<Vec<String>> {
        let paths = self.inner.capture_to(&dir).map_err(|e| ConfigError::new_err(format!("{}: cannot write captures ({e})", dir.display())))?;
        Ok(paths.into_iter().map(|p| p.display().to_string()).collect())
    }

    fn flush_captures(&mut self) -> PyResult<()> {
        self.inner.flush_captures().map_err(|e| ConfigError::new_err(format!("writing captures: {e}")))
    }

    #[getter]
    fn now_s(&self) -> f64 {
        self.inner.now().as_secs_f64()
    }

    #[getter]
    fn duration_s(&self) -> f64 {
        self.inner.end().as_secs_f64()
    }

    #[getter]
    fn finished(&self) -> bool {
        self.inner.is_finished()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.inner.network().warnings.clone()
    }

    /// The fully resolved config as JSON: the parsed config with defaults filled, plus every
    /// path direction's resolved capacity, ABW, delay and queue, and what a connection of the
    /// `[tcp]` defaults sends (`tcp_defaults`: a full segment's payload and IP bytes, the
    /// largest window).
    fn resolved_json(&self) -> PyResult<String> {
        let tcp = self.inner.tcp_defaults();
        let v = serde_json::json!({
            "config": self.inner.config(),
            "paths": self.inner.network().resolved,
            "elements": self.inner.network().element_info,
            "tcp_defaults": {"payload": tcp.payload, "ip_bytes": tcp.ip_bytes, "max_window": tcp.max_window},
        });
        serde_json::to_string(&v).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// `{"flows": {...}, "flow_series": {...}, "queues": {...}, "queue_series": {...}, "markers": {...}, "pipes": {...}, "probes": {...}, "meta": {...}}`;
    /// with `only`, just those tables (and `meta`).
    #[pyo3(signature = (only = None))]
    fn results<'py>(&mut self, py: Python<'py>, only: Option<Vec<String>>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.current_results();
        let d = PyDict::new(py);
        for (name, table) in [("flows", &r.flows), ("flow_series", &*r.flow_series), ("queues", &r.queues), ("queue_series", &*r.queue_series), ("markers", &r.markers), ("pipes", &r.pipes), ("probes", &r.probes)] {
            if only.as_ref().is_none_or(|o| o.iter().any(|n| n == name)) {
                d.set_item(name, tables::to_dict(py, table)?)?;
            }
        }
        d.set_item("meta", meta_dict(py, r)?)?;
        Ok(d)
    }

    /// Writes the result tables as `<dir>/<table>.parquet` (`pipes` and `probes` only when the
    /// run has them) with the GIL released; returns `{"tables": [names written], "failed": [one-line
    /// errors of tables that could not be], "meta": {...}}`.
    fn write_results<'py>(&mut self, py: Python<'py>, dir: std::path::PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let r = self.current_results();
        let mut all = vec![("flows", &r.flows), ("flow_series", &*r.flow_series), ("queues", &r.queues), ("queue_series", &*r.queue_series), ("markers", &r.markers)];
        if r.pipes.rows() > 0 {
            all.push(("pipes", &r.pipes));
        }
        if r.probes.rows() > 0 {
            all.push(("probes", &r.probes));
        }
        let (written, failed) = py.allow_threads(|| tables::write_all(&dir, &all));
        let d = PyDict::new(py);
        d.set_item("tables", written)?;
        d.set_item("failed", failed)?;
        d.set_item("meta", meta_dict(py, r)?)?;
        Ok(d)
    }
}

/// The congestion controls the simulator runs (`[tcp] cc` names).
#[pyfunction]
fn simulator_congestion_controls() -> Vec<&'static str> {
    pathtwin_sim::congestion_controls().to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySimulation>()?;
    m.add_function(wrap_pyfunction!(simulator_congestion_controls, m)?)?;
    Ok(())
}
