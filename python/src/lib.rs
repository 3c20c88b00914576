//! `trainmem._engine`: the trainmem engine inside Python. One function,
//! [`run`], answers a `trainmem` command line in-process (the same clap
//! parser and library calls as the binary, no subprocess); the Python
//! package builds the command line from keyword arguments.

use std::ffi::OsString;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    trainmem,
    Error,
    PyValueError,
    "A trainmem error: the one-line message the command line prints after `error: `."
);

/// Runs `trainmem ARGS...` and returns `(report, warnings, exit)`: the text
/// the binary prints to stdout, its `warning:` lines and its exit status
/// (`check` gives 1 when the run does not fit). Bad input raises `Error`.
#[pyfunction]
fn run(py: Python<'_>, args: Vec<String>) -> PyResult<(String, Vec<String>, u8)> {
    let arguments: Vec<OsString> = args.into_iter().map(OsString::from).collect();
    py.detach(|| trainmem::cli::run_args(&arguments))
        .map(|checked| (checked.report, checked.warnings, checked.exit))
        .map_err(Error::new_err)
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
