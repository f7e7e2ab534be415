//! How the runtime's errors reach Python: each [`pto::Error`] becomes an instance of one of the
//! exception classes of `pto._errors` (a latched device fault becomes `pto.DeviceError` with its
//! code, site, task, core and detail as attributes).

use pto::runtime::host::DeviceError;
use pto_testkit::Failure;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::report::PyTrace;

/// The exception class `name` of `pto._errors`, called with `message` and `kwargs`.
fn raise(py: Python<'_>, name: &str, message: String, kwargs: Option<&Bound<'_, PyDict>>) -> PyErr {
    let made =
        py.import("pto._errors").and_then(|m| m.getattr(name)).and_then(|class| class.call((message.clone(),), kwargs));
    match made {
        Ok(instance) => PyErr::from_value(instance),
        // The package's own module is missing or broken: still say what went wrong.
        Err(e) => PyErr::new::<pyo3::exceptions::PyRuntimeError, _>(format!("{message} (and pto._errors: {e})")),
    }
}

/// `pto.DeviceError` for a latched fault, its fields as attributes.
fn device_error(py: Python<'_>, text: String, d: &DeviceError) -> PyErr {
    let kwargs = PyDict::new(py);
    let fields = || -> PyResult<()> {
        kwargs.set_item("code", d.code.value())?;
        kwargs.set_item("code_name", d.code.name())?;
        kwargs.set_item("site", d.site.name())?;
        kwargs.set_item("task", d.task)?;
        kwargs.set_item("core", d.core)?;
        kwargs.set_item("detail", d.detail)?;
        kwargs.set_item("kernel", d.kernel.clone())?;
        kwargs.set_item("device_message", d.message.clone())?;
        kwargs.set_item("description", d.code.description())?;
        kwargs.set_item("hint", d.code.hint())?;
        kwargs.set_item("also", d.also.as_ref().map(|e| e.to_string()))?;
        let trace = match &d.trace {
            Some(t) => Some(Py::new(py, PyTrace::new((**t).clone()))?),
            None => None,
        };
        kwargs.set_item("trace", trace)?;
        Ok(())
    };
    if let Err(e) = fields() {
        return e;
    }
    raise(py, "DeviceError", text, Some(&kwargs))
}

/// The Python exception for a runtime error.
pub(crate) fn to_py(e: pto::Error) -> PyErr {
    Python::with_gil(|py| {
        let text = e.to_string();
        match &e {
            pto::Error::Device(d) => device_error(py, text, d),
            pto::Error::Graph(_) => raise(py, "GraphError", text, None),
            pto::Error::Config(_) => raise(py, "ConfigError", text, None),
            pto::Error::Kernel { .. } => raise(py, "KernelError", text, None),
            pto::Error::Size { .. } => PyValueError::new_err(text),
            pto::Error::Dtype { .. } => PyTypeError::new_err(text),
            _ => raise(py, "PtoError", text, None),
        }
    })
}

/// The Python exception for a failed workload: its run's error, or `pto.GoldenMismatch`.
pub(crate) fn failure_to_py(f: Failure) -> PyErr {
    match f {
        Failure::Run(e) => to_py(e),
        Failure::Golden(why) => {
            Python::with_gil(|py| raise(py, "GoldenMismatch", format!("golden mismatch: {why}"), None))
        }
    }
}

/// `pto.ConfigError` with `message` (a bad option given from Python).
pub(crate) fn config_error(message: impl Into<String>) -> PyErr {
    Python::with_gil(|py| raise(py, "ConfigError", message.into(), None))
}

/// `pto.PtoError` with `message`.
pub(crate) fn pto_error(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, "PtoError", message.into(), None)
}

/// `pto.KernelError` with `message` (a kernel that cannot be registered).
pub(crate) fn kernel_error(message: impl Into<String>) -> PyErr {
    Python::with_gil(|py| raise(py, "KernelError", message.into(), None))
}

/// `pto.GraphError` with `message` (a graph built from Python that cannot run).
pub(crate) fn graph_error(message: impl Into<String>) -> PyErr {
    Python::with_gil(|py| raise(py, "GraphError", message.into(), None))
}

/// A result of the runtime, with its error as a Python exception.
pub(crate) trait IntoPy<T> {
    /// Convert the error.
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, pto::Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
