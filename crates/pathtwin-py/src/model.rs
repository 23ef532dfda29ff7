//! The model's rules Python needs, from the one place they live: the config schema (parse,
//! validate, serialise), unit and per-direction quantities, the NSDI'09 queue bounds (and
//! measured queues fitted to them) and Monkey Do's pipe queues. Python calls these instead of restating them.
//!
//! `ConfigError` is the exception every binding raises for a user's mistake (one line).

use pathtwin_core::bounds::{self, PathBoundsInput};
use pathtwin_core::config::{Config, PerDirection};
use pathtwin_core::time::Duration;
use pathtwin_core::topology;
use pathtwin_core::units::{self, QueueLimit, Rate, Size};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(_native, ConfigError, PyValueError, "A config, argument or input the user must fix; the message is one line.");

pub fn config_err<E: std::fmt::Display>(e: E) -> PyErr {
    ConfigError::new_err(e.to_string())
}

/// Parses config text in `format` ("toml" or "json"); `origin` names the file in errors.
pub fn parse_config(text: &str, format: &str, origin: &str) -> PyResult<Config> {
    match format {
        "toml" => Config::from_toml(text, origin).map_err(config_err),
        "json" => Config::from_json_file(text, origin).map_err(config_err),
        other => Err(PyValueError::new_err(format!("unknown config format {other:?}"))),
    }
}

/// Validates config text and returns the parsed config as JSON (defaults filled).
#[pyfunction]
#[pyo3(signature = (text, format = "toml", origin = ""))]
fn validate_config(text: &str, format: &str, origin: &str) -> PyResult<String> {
    let cfg = parse_config(text, format, origin)?;
    serde_json::to_string(&cfg).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Validates config text and returns it as TOML written by the schema's own serialiser
/// (defaults filled), so that the text parses back to the same config.
#[pyfunction]
#[pyo3(signature = (text, format = "toml", origin = ""))]
fn config_toml(text: &str, format: &str, origin: &str) -> PyResult<String> {
    let cfg = parse_config(text, format, origin)?;
    toml::to_string(&cfg).map_err(|e| PyValueError::new_err(format!("the config cannot be written as TOML: {e}")))
}

/// NSDI'09 Eq. 2 and Eq. 4 for one path, with the queue sizes the model would pick.
#[pyfunction]
#[pyo3(signature = (abw_forward_bps, abw_reverse_bps, rtt_s, wmax_bytes, capacity_bps, flows = 1, max_queue_bytes = bounds::DEFAULT_MAX_QUEUE))]
#[allow(clippy::too_many_arguments)]
fn queue_bounds<'py>(
    py: Python<'py>,
    abw_forward_bps: u64,
    abw_reverse_bps: u64,
    rtt_s: f64,
    wmax_bytes: u64,
    capacity_bps: u64,
    flows: u32,
    max_queue_bytes: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let input = PathBoundsInput {
        abw: [Rate::from_bps(abw_forward_bps), Rate::from_bps(abw_reverse_bps)],
        capacity: [Rate::from_bps(capacity_bps); 2],
        rtt_base: Duration::from_secs_f64(rtt_s),
        wmax: wmax_bytes,
        flows: [flows, flows],
    };
    let d = bounds::derive(&input, max_queue_bytes);
    let out = PyDict::new(py);
    out.set_item("lower", d.bounds.lower.to_vec())?;
    out.set_item("upper_total", d.bounds.upper_total)?;
    out.set_item("forward", d.bounds.forward)?;
    out.set_item("queue", d.queue.to_vec())?;
    out.set_item("feasible", d.feasible)?;
    out.set_item("capped", d.capped)?;
    Ok(out)
}

/// Measured queue sizes (bytes per direction of a path, `None` where not measured) fitted
/// to NSDI'09 Eq. 2 and Eq. 4 (`bounds::fit_measured`): the queues to write, or `None` when
/// no queue satisfies both, and what the fit changed. `wmax_bytes` `None` is the model's
/// default w_max.
#[pyfunction]
#[pyo3(signature = (abw_bps, capacity_bps, rtt_s, wmax_bytes, measured_bytes, flows = 1, max_queue_bytes = bounds::DEFAULT_MAX_QUEUE))]
#[allow(clippy::too_many_arguments)]
fn fit_queues<'py>(
    py: Python<'py>,
    abw_bps: (u64, u64),
    capacity_bps: (u64, u64),
    rtt_s: f64,
    wmax_bytes: Option<u64>,
    measured_bytes: (Option<u64>, Option<u64>),
    flows: u32,
    max_queue_bytes: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let input = PathBoundsInput {
        abw: [Rate::from_bps(abw_bps.0), Rate::from_bps(abw_bps.1)],
        capacity: [Rate::from_bps(capacity_bps.0), Rate::from_bps(capacity_bps.1)],
        rtt_base: Duration::from_secs_f64(rtt_s),
        wmax: wmax_bytes.unwrap_or(topology::DEFAULT_WMAX),
        flows: [flows, flows],
    };
    let fit = bounds::fit_measured(&input, [measured_bytes.0, measured_bytes.1], max_queue_bytes);
    let out = PyDict::new(py);
    out.set_item("lower", fit.bounds.lower.to_vec())?;
    out.set_item("upper_total", fit.bounds.upper_total)?;
    out.set_item("forward", fit.bounds.forward)?;
    out.set_item("queue", fit.queue.map(|q| q.to_vec()))?;
    out.set_item("raised", fit.raised.to_vec())?;
    out.set_item("lowered", fit.lowered)?;
    out.set_item("derived", fit.derived.to_vec())?;
    Ok(out)
}

/// A queue limit as a number: bytes, or packets negated.
fn queue_number(q: QueueLimit) -> f64 {
    match q {
        QueueLimit::Bytes(b) => b as f64,
        QueueLimit::Packets(p) => -(p as f64),
    }
}

/// One quantity of `kind` ("rate" bit/s, "size" bytes, "time" seconds, "fraction", "queue"
/// as [`queue_number`]) from `text`.
fn quantity(kind: &str, text: &str) -> PyResult<f64> {
    let r: Result<f64, units::UnitError> = match kind {
        "rate" => text.parse::<Rate>().map(|r| r.as_f64()),
        "size" => text.parse::<Size>().map(|s| s.bytes() as f64),
        "time" => units::parse_duration(text).map(|d| d.as_secs_f64()),
        "fraction" => text.parse::<units::Fraction>().map(|f| f.get()),
        "queue" => text.parse::<QueueLimit>().map(queue_number),
        other => return Err(PyValueError::new_err(format!("unknown quantity kind {other:?}"))),
    };
    r.map_err(config_err)
}

/// Unit parsing shared with config files, for command-line arguments.
#[pyfunction]
fn parse_quantity(kind: &str, text: &str) -> PyResult<f64> {
    quantity(kind, text)
}

/// A value per direction as config files write it (`"10mbit"` for both, or
/// `"4.3mbit/409kbit"`), parsed by the schema's own `PerDirection`: `(a→b, b→a)`.
#[pyfunction]
fn parse_per_direction(kind: &str, text: &str) -> PyResult<(f64, f64)> {
    fn pair<T>(text: &str, f: impl Fn(T) -> f64) -> PyResult<(f64, f64)>
    where
        T: serde::de::DeserializeOwned + std::str::FromStr + Copy,
        T::Err: std::fmt::Display,
    {
        let d: PerDirection<T> = serde_json::from_value(serde_json::Value::String(text.to_string())).map_err(config_err)?;
        Ok((f(d.get(0)), f(d.get(1))))
    }
    match kind {
        "rate" => pair::<Rate>(text, |r| r.as_f64()),
        "size" => pair::<Size>(text, |s| s.bytes() as f64),
        "queue" => pair::<QueueLimit>(text, queue_number),
        other => Err(PyValueError::new_err(format!("unknown per-direction kind {other:?}"))),
    }
}

/// Monkey Do's pipe queues for a downstream rate (`topology::monkey_pipe_queues`), as
/// config text: `(down, up)`, e.g. `("30p", "10p")`.
#[pyfunction]
fn monkey_pipe_queues(down_bps: u64) -> (String, String) {
    let q = topology::monkey_pipe_queues(Rate::from_bps(down_bps));
    (q.get(0).to_string(), q.get(1).to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("DEFAULT_PATH_CAPACITY_BPS", topology::DEFAULT_PATH_CAPACITY.bps())?;
    m.add_function(wrap_pyfunction!(validate_config, m)?)?;
    m.add_function(wrap_pyfunction!(config_toml, m)?)?;
    m.add_function(wrap_pyfunction!(queue_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(fit_queues, m)?)?;
    m.add_function(wrap_pyfunction!(parse_quantity, m)?)?;
    m.add_function(wrap_pyfunction!(parse_per_direction, m)?)?;
    m.add_function(wrap_pyfunction!(monkey_pipe_queues, m)?)?;
    Ok(())
}
