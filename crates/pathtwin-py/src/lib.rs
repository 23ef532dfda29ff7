//! `pathtwin._native`: the PyO3 bindings, and the only crate that knows Python.
//!
//! Each engine has its own module here (`sim`, `emu`, `trace`) with a `register` function,
//! beside `model` (the schema and the model's rules Python needs) and `tables` (result tables
//! to Parquet and to Python, for both engines); Python exceptions are made only in this
//! crate. Config is passed in as TOML text or JSON
//! (from Python dicts) and parsed by the one schema in `pathtwin-core`.

use pyo3::prelude::*;

mod emu;
mod model;
mod parquet_out;
mod sim;
mod tables;
mod trace;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    model::register(m)?;
    sim::register(m)?;
    emu::register(m)?;
    trace::register(m)?;
    m.add_function(wrap_pyfunction!(tables::table_columns, m)?)?;
    Ok(())
}
