//! `pto._native`: the Python extension of pto-rt (built by maturin; the `pto` package
//! re-exports it). It opens the simulated boards by name, moves tensors in and out as numpy
//! arrays, registers the Rust kernels the package ships, runs the built-in workloads and graphs
//! built from Python on both runtimes and executors, and returns reports, traces and dumps as
//! Python objects. See `docs/python.md`.

mod board;
mod device;
mod dtype;
mod errors;
mod graph;
mod report;
mod spec;
mod tensor;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The built-in workloads (`pto run NAME`), in the order `pto_testkit::examples` lists them.
pub(crate) const WORKLOADS: [&str; 7] =
    ["mix", "vector", "chain513", "bgemm", "paged_attention_small", "tiny_rings", "manual_scope"];

/// The simulated boards' names.
#[pyfunction]
fn boards() -> Vec<&'static str> {
    board::BOARDS.to_vec()
}

/// The built-in workloads' names.
#[pyfunction]
fn workloads() -> Vec<&'static str> {
    WORKLOADS.to_vec()
}

/// The kernels the package ships: `{name: {"core": "aiv"|"aic", "doc": ...}}`.
#[pyfunction]
fn kernels(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (name, core, _, doc) in device::KERNELS {
        let k = PyDict::new(py);
        k.set_item("core", if core == pto::hal::CoreType::Aic { "aic" } else { "aiv" })?;
        k.set_item("doc", doc)?;
        d.set_item(name, k)?;
    }
    Ok(d)
}

/// Every element type's name.
#[pyfunction]
fn dtypes() -> Vec<&'static str> {
    dtype::DTYPES.iter().map(|d| d.name()).collect()
}

/// bf16 bits (uint16, same shape) of float values, rounded to nearest, ties to even.
#[pyfunction]
fn bf16_from_float<'py>(py: Python<'py>, values: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    Ok(tensor::bf16_from_float(py, values)?.into_any())
}

/// float32 values (same shape) of bf16 bits (uint16 or `ml_dtypes.bfloat16`), exactly.
#[pyfunction]
fn bf16_to_float<'py>(py: Python<'py>, bits: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    Ok(tensor::bf16_to_float(py, bits)?.into_any())
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(device::open, m)?)?;
    m.add_function(wrap_pyfunction!(boards, m)?)?;
    m.add_function(wrap_pyfunction!(workloads, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(dtypes, m)?)?;
    m.add_function(wrap_pyfunction!(bf16_from_float, m)?)?;
    m.add_function(wrap_pyfunction!(bf16_to_float, m)?)?;
    m.add_function(wrap_pyfunction!(graph::arg_in, m)?)?;
    m.add_function(wrap_pyfunction!(graph::arg_out, m)?)?;
    m.add_function(wrap_pyfunction!(graph::arg_inout, m)?)?;
    m.add_function(wrap_pyfunction!(graph::arg_output_existing, m)?)?;
    m.add_function(wrap_pyfunction!(graph::arg_nodep, m)?)?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<graph::PyGraph>()?;
    m.add_class::<graph::PyKernel>()?;
    m.add_class::<graph::PyLocal>()?;
    m.add_class::<tensor::PyView>()?;
    m.add_class::<graph::PyArg>()?;
    m.add_class::<report::PyRunReport>()?;
    m.add_class::<report::PyTrace>()?;
    m.add_class::<report::PyDumpReport>()?;
    m.add_class::<report::PyDump>()?;
    m.add_class::<report::PyWorkloadResult>()?;
    Ok(())
}
