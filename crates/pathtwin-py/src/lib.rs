//! `pathtwin._native`: the PyO3 bindings, and the only crate that knows Python.
//!
//! Each engine has its own module here (`sim`, `emu`, `trace`) with a `register` function;
//! Python exceptions are made only in this crate. Config is passed in as TOML text or JSON
//! (from Python dicts) and parsed by the one schema in `pathtwin-core`.

use pyo3::prelude::*;

mod emu;
mod parquet_out;
mod sim;
mod tables;
mod trace;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    sim::register(m)?;
    emu::register(m)?;
    trace::register(m)?;
    Ok(())
}
