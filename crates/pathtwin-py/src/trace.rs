//! Python bindings for pathtwin-trace: `trace_analyze` and `trace_diagnose`.
//!
//! Both read a capture file with the GIL released; the optional `progress(bytes_read)`
//! callback is called about every megabyte with the GIL re-taken, which is also where
//! Ctrl-C is noticed. Results cross as columns that `pathtwin.trace` turns into DataFrames
//! (`trace_analyze`: numbers packed as `(dtype, bytes)`, strings as lists, for the
//! connection table and, if asked for, the exchange table of the same pass;
//! `trace_diagnose`: lists), plus a dict of capture-wide counts. A capture that cannot be read
//! raises `pathtwin.errors.PathtwinError` with the reader's one-line message.
//!
//! `trace_analyze_files` is the command line's form of `trace_analyze`: it writes the tables
//! as Parquet itself (also without the GIL) and hands back only the counts and first rows a
//! summary prints, so that `pathtwin trace analyze` needs neither pandas nor pyarrow.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use parquet::errors::ParquetError;
use pathtwin_trace::{AnalyzeOptions, CaptureStats, Column, TraceError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::parquet_out::{write_nullable_table, ColumnRef};

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
/// GIL and stops (returns `false`) on Ctrl-C or a failing callback. With `capture`, a
/// reader's error names the file (the Python API's callers add it themselves).
fn with_progress<T: Send>(
    py: Python<'_>,
    capture: Option<&Path>,
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
        (Err(e), None) => match capture {
            Some(p) => Err(pathtwin_error(py, format!("{}: {e}", p.display()))),
            None => Err(pathtwin_error(py, e)),
        },
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

/// Analyzes a capture (Monkey See). Returns `(columns, exchange_columns, stats,
/// cross_traffic_columns)`: one entry per connection in each column; with `exchanges`, one
/// per request/response exchange in each of `exchange_columns` (else `None`); capture-wide
/// counts; with `cross_traffic`, one per bin of each connection direction's cross-traffic
/// profile (else `None`). `server` is `"IP"` or `"IP:PORT"`; `threads` 0 chooses from the
/// processors and the capture's size (the result does not depend on it).
#[pyfunction]
#[pyo3(signature = (path, server = None, progress = None, threads = 0, exchanges = false, cross_traffic = false))]
#[allow(clippy::type_complexity)]
fn trace_analyze<'py>(
    py: Python<'py>,
    path: PathBuf,
    server: Option<&str>,
    progress: Option<PyObject>,
    threads: usize,
    exchanges: bool,
    cross_traffic: bool,
) -> PyResult<(Bound<'py, PyDict>, Option<Bound<'py, PyDict>>, Bound<'py, PyDict>, Option<Bound<'py, PyDict>>)> {
    let opts = analyze_options(py, server, threads, exchanges, cross_traffic)?;
    let analysis = with_progress(py, None, progress, |report| pathtwin_trace::analyze_path(&path, &opts, report))?;
    let cols = columns_to_python(py, pathtwin_trace::to_columns(&analysis.conns))?;
    let exchange_cols =
        if exchanges { Some(columns_to_python(py, pathtwin_trace::exchange_columns(&analysis.exchanges))?) } else { None };
    let cross_cols =
        if cross_traffic { Some(columns_to_python(py, pathtwin_trace::cross_traffic_columns(&analysis.cross_traffic))?) } else { None };
    Ok((cols, exchange_cols, stats_to_python(py, &analysis.stats)?, cross_cols))
}

fn analyze_options(py: Python<'_>, server: Option<&str>, threads: usize, exchanges: bool, cross_traffic: bool) -> PyResult<AnalyzeOptions> {
    let mut opts = AnalyzeOptions { threads, exchanges, cross_traffic, ..AnalyzeOptions::default() };
    if let Some(s) = server {
        opts.server = Some(parse_server(s).ok_or_else(|| {
            pathtwin_error(py, format!("--server {s:?}: expected IP, IP:PORT or [IPv6]:PORT"))
        })?);
    }
    Ok(opts)
}

/// Analyzes a capture and writes the connection table to `conns_out` and, if given, the
/// exchange table of the same pass to `exchanges_out` and the connections' cross-traffic
/// profiles to `cross_traffic_out`, as Parquet files that read back as
/// the frames of `pathtwin.trace.analyze` / `workload` read back once written with pyarrow
/// (see `parquet_out`). Returns `{"stats", "connections", "kept", "pruned", "head",
/// "exchanges", "cross_traffic_bins"}`: the capture-wide counts (as `trace_analyze`'s), how many connections
/// there are and how many were kept for replay, `(reason, connections)` of the pruned ones
/// (most frequent first, ties in order of first appearance), the first `head` rows of the
/// connection table as plain lists by column, and the numbers of exchanges and of profile
/// bins. A capture that
/// cannot be read is a `PathtwinError` naming it. Other arguments as for `trace_analyze`.
#[pyfunction]
#[pyo3(signature = (path, conns_out = None, exchanges_out = None, server = None, progress = None, threads = 0, head = 20, cross_traffic_out = None))]
#[allow(clippy::too_many_arguments)]
fn trace_analyze_files<'py>(
    py: Python<'py>,
    path: PathBuf,
    conns_out: Option<PathBuf>,
    exchanges_out: Option<PathBuf>,
    server: Option<&str>,
    progress: Option<PyObject>,
    threads: usize,
    head: usize,
    cross_traffic_out: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = analyze_options(py, server, threads, exchanges_out.is_some(), cross_traffic_out.is_some())?;
    let analysis =
        with_progress(py, Some(&path), progress, |report| pathtwin_trace::analyze_path(&path, &opts, report))?;
    py.allow_threads(|| -> Result<(), String> {
        let cannot = |p: &Path, e: ParquetError| format!("{}: cannot write ({e})", p.display());
        if let Some(p) = &conns_out {
            write_columns(p, &pathtwin_trace::to_columns(&analysis.conns)).map_err(|e| cannot(p, e))?;
        }
        if let Some(p) = &exchanges_out {
            write_columns(p, &pathtwin_trace::exchange_columns(&analysis.exchanges)).map_err(|e| cannot(p, e))?;
        }
        if let Some(p) = &cross_traffic_out {
            write_columns(p, &pathtwin_trace::cross_traffic_columns(&analysis.cross_traffic)).map_err(|e| cannot(p, e))?;
        }
        Ok(())
    })
    .map_err(|e| pathtwin_error(py, e))?;
    let mut pruned: Vec<(&str, usize)> = Vec::new();
    for reason in analysis.conns.iter().filter(|c| !c.kept).map(|c| c.prune_reason.as_deref().unwrap_or("")) {
        match pruned.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => pruned.push((reason, 1)),
        }
    }
    // Stable: equal counts keep their order of first appearance.
    pruned.sort_by(|a, b| b.1.cmp(&a.1));
    let first = pathtwin_trace::to_columns(&analysis.conns[..head.min(analysis.conns.len())]);
    let rows = PyDict::new(py);
    for (name, col) in first {
        let list = match col {
            Column::U64(v) => v.into_pyobject(py)?.into_any(),
            Column::F64(v) => v.into_pyobject(py)?.into_any(),
            Column::Str(v) => v.into_pyobject(py)?.into_any(),
            Column::Bool(v) => v.into_pyobject(py)?.into_any(),
        };
        rows.set_item(name, list)?;
    }
    let out = PyDict::new(py);
    out.set_item("stats", stats_to_python(py, &analysis.stats)?)?;
    out.set_item("connections", analysis.conns.len())?;
    out.set_item("kept", analysis.conns.iter().filter(|c| c.kept).count())?;
    out.set_item("pruned", pruned)?;
    out.set_item("head", rows)?;
    out.set_item("exchanges", analysis.exchanges.len())?;
    out.set_item("cross_traffic_bins", analysis.cross_traffic.len())?;
    Ok(out)
}

/// Writes a trace table as `trace_analyze`'s columns become in pandas and then in pyarrow:
/// counts as INT64, numbers with missing values as nullable DOUBLE, text as nullable UTF-8.
fn write_columns(path: &Path, cols: &[(&'static str, Column)]) -> Result<(), ParquetError> {
    let ints: Vec<Vec<i64>> = cols
        .iter()
        .map(|(_, c)| match c {
            Column::U64(v) => v.iter().map(|&x| x as i64).collect(),
            _ => Vec::new(),
        })
        .collect();
    let refs: Vec<_> = cols
        .iter()
        .zip(&ints)
        .map(|((name, c), ints)| {
            let r = match c {
                Column::U64(_) => ColumnRef::I64(ints),
                Column::F64(v) => ColumnRef::OptF64(v),
                Column::Str(v) => ColumnRef::OptStr(v),
                Column::Bool(v) => ColumnRef::Bool(v),
            };
            (*name, r)
        })
        .collect();
    write_nullable_table(path, &refs)
}

/// The capture-wide counts of an analysis, as a dict.
fn stats_to_python<'py>(py: Python<'py>, s: &CaptureStats) -> PyResult<Bound<'py, PyDict>> {
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
    Ok(stats)
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
    let d = with_progress(py, None, progress, |report| pathtwin_trace::diagnose_path(&path, report))?;
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
    m.add_function(wrap_pyfunction!(trace_analyze_files, m)?)?;
    m.add_function(wrap_pyfunction!(trace_diagnose, m)?)?;
    Ok(())
}
