//! `trainmem._engine`: the trainmem engine inside Python. [`call`] answers
//! any command asked with a dict of keywords (`trainmem::cli::call`: the
//! typed request and the command's arguments built from the dict through
//! serde, as the web API's JSON is read); [`help`] gives a command's
//! `--help` text from clap's definition. No command line is built and no
//! subprocess runs.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;

create_exception!(
    trainmem,
    Error,
    PyValueError,
    "A trainmem error: the one-line message the command line prints after `error: `."
);

/// One keyword's value as the engine reads it: text, `True` for a switch,
/// or a list of texts for a repeated flag.
fn value_of(key: &str, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(on) = value.extract::<bool>() {
        return Ok(Value::Bool(on));
    }
    if let Ok(text) = value.extract::<String>() {
        return Ok(Value::String(text));
    }
    if let Ok(items) = value.cast::<PyList>() {
        return items
            .iter()
            .map(|item| item.extract::<String>().map(Value::String))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array)
            .map_err(|_| {
                Error::new_err(format!(
                    "keyword `{key}` has a list of other than str; accepted: a list of str"
                ))
            });
    }
    Err(Error::new_err(format!(
        "keyword `{key}` is not a str, True or a list of str; accepted: those"
    )))
}

/// Answers `trainmem COMMAND` with `positional` arguments (check's files)
/// and `options`, a dict of flags' long names (`micro-batch`) to their
/// values, in order; returns `(report, warnings, exit)`: the text the
/// binary prints to stdout, its `warning:` lines and its exit status
/// (`check` gives 1 when the run does not fit). Bad input raises `Error`.
/// The commands it takes are `COMMANDS`.
#[pyfunction]
fn call(
    py: Python<'_>,
    command: String,
    positional: Vec<String>,
    options: &Bound<'_, PyDict>,
) -> PyResult<(String, Vec<String>, u8)> {
    let pairs = options
        .iter()
        .map(|(key, value)| {
            let key: String = key.extract()?;
            let value = value_of(&key, &value)?;
            Ok((key, value))
        })
        .collect::<PyResult<Vec<(String, Value)>>>()?;
    py.detach(|| trainmem::cli::call(&command, &positional, &pairs))
        .map(|checked| (checked.report, checked.warnings, checked.exit))
        .map_err(Error::new_err)
}

/// The text `trainmem COMMAND --help` prints (`trainmem --help` for
/// `None`; `-h`'s short form with `long=False`). An unknown command raises
/// `Error`.
#[pyfunction]
#[pyo3(signature = (command=None, long=true))]
fn help(command: Option<String>, long: bool) -> PyResult<String> {
    trainmem::cli::help(command.as_deref(), long).map_err(Error::new_err)
}

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_function(wrap_pyfunction!(help, m)?)?;
    m.add("COMMANDS", trainmem::cli::commands())?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
