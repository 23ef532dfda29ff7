//! Result tables across the boundary, for both engines: each [`Table`] (its schema from
//! `pathtwin_core::results`) is written as `<name>.parquet` by the one Parquet writer, or
//! handed to Python as `{column: list}` without copying row by row.

use std::path::Path;

use pathtwin_core::table::{Column, Table};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use parquet::errors::ParquetError;

use crate::parquet_out::{write_nullable_groups, write_table as write_required, ColumnRef};

fn column_ref(c: &Column) -> ColumnRef<'_> {
    match c {
        Column::F64(v) => ColumnRef::F64(v),
        Column::I64(v) => ColumnRef::I64(v),
        Column::Str(v) => ColumnRef::Str(v),
        Column::Category(c) => ColumnRef::Category { values: c.values().collect(), keys: c.keys() },
        Column::OptF64(v) => ColumnRef::OptF64(v),
        Column::OptI64(v) => ColumnRef::OptI64(v),
        Column::OptStr(v) => ColumnRef::OptStr(v),
    }
}

/// Whether a table has columns that may lack values: its file then has every column
/// OPTIONAL, as pyarrow writes a pandas frame; otherwise every column is REQUIRED.
fn nullable(t: &Table) -> bool {
    t.columns.iter().any(|(_, c)| matches!(c, Column::OptF64(_) | Column::OptI64(_) | Column::OptStr(_)))
}

/// The one-line error of a table that could not be written.
fn cannot_write(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: cannot write ({e})", path.display())
}

/// Runs `write` on `<path>.partial` and renames that to `path` once it is complete, so that
/// a table that could not be written whole (a full disk) leaves no truncated file that a
/// reader would take for the table: the partial file is removed and the error returned.
fn whole_or_nothing(path: &Path, write: impl FnOnce(&Path) -> Result<(), ParquetError>) -> Result<(), String> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let done = write(&partial).map_err(|e| cannot_write(path, e)).and_then(|()| std::fs::rename(&partial, path).map_err(|e| cannot_write(path, e)));
    if done.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    done
}

/// Writes `table` as the Parquet file `path` (whole or not at all).
pub fn write(path: &Path, table: &Table) -> Result<(), String> {
    let columns: Vec<_> = table.columns.iter().map(|(n, c)| (n.as_str(), column_ref(c))).collect();
    whole_or_nothing(path, |to| if nullable(table) { write_nullable_groups(to, 1, &|_, emit| emit(&columns)) } else { write_required(to, &columns) })
}

/// Writes a table of `groups` row groups as the Parquet file `path` (whole or not at all),
/// building one group's rows at a time (`group(g)`, with the same schema every time): a long
/// run's series is never held twice. Its columns are OPTIONAL (the long tables this is for
/// lack values).
pub fn write_groups(path: &Path, groups: usize, group: &dyn Fn(usize) -> Table) -> Result<(), String> {
    whole_or_nothing(path, |to| {
        write_nullable_groups(to, groups, &|g, emit| {
            let t = group(g);
            let columns: Vec<_> = t.columns.iter().map(|(n, c)| (n.as_str(), column_ref(c))).collect();
            emit(&columns)
        })
    })
}

/// Writes each `(name, table)` as `<dir>/<name>.parquet`, every one that can be: a table
/// that cannot be written (a full disk) does not stop the smaller ones after it. Returns the
/// names written and the one-line errors of the others.
pub fn write_all<'n>(dir: &Path, tables: &[(&'n str, &Table)]) -> (Vec<&'n str>, Vec<String>) {
    let (mut written, mut failed) = (Vec::new(), Vec::new());
    for (name, t) in tables {
        match write(&dir.join(format!("{name}.parquet")), t) {
            Ok(()) => written.push(*name),
            Err(why) => failed.push(why),
        }
    }
    (written, failed)
}

/// Column names of table `name` as `engine` ("sim" or "emu") writes it
/// (`pathtwin_core::results`), for Python code that checks or reads a table by its columns.
#[pyfunction]
pub fn table_columns(engine: &str, name: &str) -> PyResult<Vec<&'static str>> {
    let schema = pathtwin_core::results::schema(engine, name)
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("the {engine} engine writes no table {name:?}")))?;
    Ok(schema.iter().map(|(n, _)| *n).collect())
}

/// `{column: list}` of `t`; a missing value is `None`.
pub fn to_dict<'py>(py: Python<'py>, t: &Table) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, col) in &t.columns {
        match col {
            Column::F64(v) => d.set_item(name, v)?,
            Column::I64(v) => d.set_item(name, v)?,
            Column::Str(v) => d.set_item(name, v)?,
            Column::Category(c) => {
                // One Python string per value, shared by its rows.
                let values: Vec<Bound<'py, PyString>> = c.values().map(|s| PyString::new(py, s)).collect();
                d.set_item(name, PyList::new(py, c.keys().iter().map(|&k| &values[k as usize]))?)?
            }
            Column::OptF64(v) => d.set_item(name, v)?,
            Column::OptI64(v) => d.set_item(name, v)?,
            Column::OptStr(v) => d.set_item(name, v)?,
        }
    }
    Ok(d)
}
