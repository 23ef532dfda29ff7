//! Python bindings for pathtwin-trace: `trace_analyze` and `trace_diagnose`.
//!
//! Both read a capture file with the GIL released; the optional `progress(bytes_read)`
//! callback is called about every megabyte with the GIL re-taken, which is also where
//! Ctrl-C is noticed. Results cross as columns that `pathtwin.trace` turns into DataFrames
//! (`trace_analyze`: numbers packed as `(dtype, bytes)`, strings as lists, for the
//! connection table and, if asked for, the exchange table of the same pass;
//! `trace_diagnose`: lists), plus a dict of capture-wide counts. A capture that cannot be read
//! raises `pathtwin.errors.PathtwinError` with the reader's one-line message.

use std::net::IpAddr;
use std::path::PathBuf;

use pathtwin_trace::{AnalyzeOptions, Column, TraceError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

fn pathtwin_error(py: Python<'_>, msg: impl std::fmt::Display) -> PyErr {
    match py.import("pathtwin.errors").and_then(|m| m.getattr("PathtwinError")) {
        Ok(cls) => match cls.call1((msg.to_string(),)) {
            Ok(exc) => PyErr::from_value(exc),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

/// Parses `IP`, `IP:PORT` or `[IPv6]:PORT`.
fn parse_server(s: &str) -> Option<(IpAddr, Option<u16>)> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some((ip, None));
    }
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.parse().ok()?, Some(port.parse().ok()?)))
}

/// Runs `f` without the GIL, giving it a progress function that calls `progress` with the
/// GIL and stops (returns `false`) on Ctrl-C or a failing callback.
fn with_progress<T: Send>(
    py: Python<'_>,
    progress: Option<PyObject>,
    f: impl FnOnce(&mut dyn FnMut(u64) -> bool) -> Result<T, TraceError> + Send,
) -> PyResult<T> {
    let mut interrupt: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let mut report = |bytes: u64| -> bool {
            Python::with_gil(|py| {
                let outcome = py.check_signals().and_then(|()| match &progress {
                    Some(cb) => cb.call1(py, (bytes,)).map(|_| ()),
                    None => Ok(()),
                });
                match outcome {
                    Ok(()) => true,
                    Err(e) => {
                        interrupt = Some(e);
                        false
                    }
                }
            })
        };
        f(&mut report)
    });
    match (result, interrupt) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(pathtwin_error(py, e)),
    }
}

/// A column for Python: numbers as a `(dtype, bytes)` pair of packed little-endian values
/// that `pathtwin.trace` turns into a NumPy array without touching each value (building a
/// Python object per cell was a fifth of the time of a large analysis); strings as a list.
fn column_to_python(py: Python<'_>, c: Column) -> PyResult<PyObject> {
    fn packed<'py, T: Copy>(py: Python<'py>, dtype: &str, v: &[T], to_le: impl Fn(T) -> [u8; 8]) -> PyResult<PyObject> {
        let mut bytes = Vec::with_capacity(v.len() * 8);
        for &x in v {
            bytes.extend_from_slice(&to_le(x));
        }
        Ok((dtype, PyBytes::new(py, &bytes)).into_pyobject(py)?.into_any().unbind())
    }
    Ok(match c {
        // Counts stay well below 2^63: int64, the dtype pandas gives Python ints.
        Column::U64(v) => packed(py, "<i8", &v, |x| (x as i64).to_le_bytes())?,
        // A missing value is NaN, as pandas makes of None in a float column.
        Column::F64(v) => packed(py, "<f8", &v, |x| x.unwrap_or(f64::NAN).to_le_bytes())?,
        Column::Bool(v) => {
            let bytes: Vec<u8> = v.iter().map(|&b| b as u8).collect();
            ("?", PyBytes::new(py, &bytes)).into_pyobject(py)?.into_any().unbind()
        }
        Column::Str(v) => v.into_pyobject(py)?.into_any().unbind(),
    })
}

/// Named columns as a dict, in order.
fn columns_to_python<'py>(py: Python<'py>, cols: Vec<(&'static str, Column)>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, col) in cols {
        dict.set_item(name, column_to_python(py, col)?)?;
    }
    Ok(dict)
}

/// Analyzes a capture (Monkey See). Returns `(columns, exchange_columns, stats)`: one entry
/// per connection in each column; with `exchanges`, one per request/response exchange in
/// each of `exchange_columns` (else `None`); and capture-wide counts. `server` is `"IP"` or
/// `"IP:PORT"`; `threads` 0 chooses from the processors and the capture's size (the result
/// does not depend on it).
#[pyfunction]
#[pyo3(signature = (path, server = None, progress = None, threads = 0, exchanges = false))]
fn trace_analyze<'py>(
    py: Python<'py>,
    path: PathBuf,
    server: Option<&str>,
    progress: Option<PyObject>,
    threads: usize,
    exchanges: bool,
) -> PyResult<(Bound<'py, PyDict>, Option<Bound<'py, PyDict>>, Bound<'py, PyDict>)> {
    let mut opts = AnalyzeOptions { threads, exchanges, ..AnalyzeOptions::default() };
    if let Some(s) = server {
        opts.server = Some(parse_server(s).ok_or_else(|| {
            pathtwin_error(py, format!("--server {s:?}: expected IP, IP:PORT or [IPv6]:PORT"))
        })?);
    }
    let analysis = with_progress(py, progress, |report| pathtwin_trace::analyze_path(&path, &opts, report))?;
    let cols = columns_to_python(py, pathtwin_trace::to_columns(&analysis.conns))?;
    let exchange_cols =
        if exchanges { Some(columns_to_python(py, pathtwin_trace::exchange_columns(&analysis.exchanges))?) } else { None };
    let s = &analysis.stats;
    let stats = PyDict::new(py);
    stats.set_item("frames", s.frames)?;
    stats.set_item("tcp_packets", s.tcp_packets)?;
    stats.set_item("other_packets", s.other_packets)?;
    stats.set_item("non_ip", s.non_ip)?;
    stats.set_item("bad_headers", s.bad_headers)?;
    stats.set_item("fragments", s.fragments)?;
    stats.set_item("snapped", s.snapped)?;
    stats.set_item("truncated_tail", s.truncated_tail)?;
    stats.set_item("connections", s.connections)?;
    stats.set_item("first_s", s.first_ns as f64 / 1e9)?;
    stats.set_item("last_s", s.last_ns as f64 / 1e9)?;
    Ok((cols, exchange_cols, stats))
}

/// Runs Monarch's self-diagnosis over the probe flows of a capture. Returns
/// `(columns, stats)` with one entry per flow.
#[pyfunction]
#[pyo3(signature = (path, progress = None))]
fn trace_diagnose<'py>(
    py: Python<'py>,
    path: PathBuf,
    progress: Option<PyObject>,
) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
    let d = with_progress(py, progress, |report| pathtwin_trace::diagnose_path(&path, report))?;
    let cols = PyDict::new(py);
    let f = &d.flows;
    cols.set_item("local_ip", f.iter().map(|x| x.local.to_string()).collect::<Vec<_>>())?;
    cols.set_item("remote_ip", f.iter().map(|x| x.remote.to_string()).collect::<Vec<_>>())?;
    cols.set_item("probe", f.iter().map(|x| x.kind.as_str()).collect::<Vec<_>>())?;
    cols.set_item("probes", f.iter().map(|x| x.probes).collect::<Vec<_>>())?;
    cols.set_item("responses", f.iter().map(|x| x.responses).collect::<Vec<_>>())?;
    cols.set_item("ipid_usable", f.iter().map(|x| x.ipid_usable).collect::<Vec<_>>())?;
    cols.set_item("ipid_little_endian", f.iter().map(|x| x.ipid_little_endian).collect::<Vec<_>>())?;
    cols.set_item("lost_downstream", f.iter().map(|x| x.lost_downstream).collect::<Vec<_>>())?;
    cols.set_item("lost_upstream", f.iter().map(|x| x.lost_upstream).collect::<Vec<_>>())?;
    cols.set_item("lost_unclassified", f.iter().map(|x| x.lost_unclassified).collect::<Vec<_>>())?;
    cols.set_item("reordered_downstream", f.iter().map(|x| x.reordered_downstream).collect::<Vec<_>>())?;
    cols.set_item("reordered_upstream_minor", f.iter().map(|x| x.reordered_upstream_minor).collect::<Vec<_>>())?;
    cols.set_item("reordered_upstream_harmful", f.iter().map(|x| x.reordered_upstream_harmful).collect::<Vec<_>>())?;
    cols.set_item("verdict", f.iter().map(|x| x.verdict.as_str()).collect::<Vec<_>>())?;
    cols.set_item("reason", f.iter().map(|x| x.reason).collect::<Vec<_>>())?;
    let stats = PyDict::new(py);
    stats.set_item("frames", d.frames)?;
    stats.set_item("bad_headers", d.bad_headers)?;
    stats.set_item("truncated_tail", d.truncated_tail)?;
    Ok((cols, stats))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(trace_analyze, m)?)?;
    m.add_function(wrap_pyfunction!(trace_diagnose, m)?)?;
    Ok(())
}
