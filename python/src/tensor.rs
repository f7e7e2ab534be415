//! Device tensors as Python objects, and their data as numpy arrays.
//!
//! Every element type of the runtime maps onto a numpy dtype: `f32` float32, `f64` float64,
//! `f16` float16 (`half::f16`), integers to their numpy integers, and `bf16` — which numpy does
//! not have — to its raw bits as uint16 (an `ml_dtypes.bfloat16` array is accepted on the way in,
//! and `read(bf16="float32")` / `read(bf16="ml_dtypes")` give values on the way out).

use std::sync::Arc;

use numpy::{PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pto::half::bf16;
use pto::runtime::graph::DType;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::board::{DynDevice, DynTensor, HostData, with_data};
use crate::dtype::numpy_name;
use crate::errors::IntoPy;

/// A typed host vector from a numpy array already of the host dtype of `dtype` and contiguous.
fn host_data(arr: &Bound<'_, PyUntypedArray>, dtype: DType) -> PyResult<HostData> {
    fn typed<T: numpy::Element + Copy>(arr: &Bound<'_, PyUntypedArray>) -> PyResult<Vec<T>> {
        let a = arr.downcast::<PyArrayDyn<T>>()?;
        let ro = a.readonly();
        Ok(match ro.as_slice() {
            Ok(s) => s.to_vec(),
            Err(_) => ro.as_array().iter().cloned().collect(),
        })
    }
    Ok(match dtype {
        DType::F32 => HostData::F32(typed(arr)?),
        DType::F16 => HostData::F16(typed(arr)?),
        DType::BF16 => HostData::BF16(typed::<u16>(arr)?.into_iter().map(bf16::from_bits).collect()),
        DType::I32 => HostData::I32(typed(arr)?),
        DType::I64 => HostData::I64(typed(arr)?),
        DType::U32 => HostData::U32(typed(arr)?),
        DType::U8 => HostData::U8(typed(arr)?),
        DType::I8 => HostData::I8(typed(arr)?),
        DType::F64 => HostData::F64(typed(arr)?),
        DType::U64 => HostData::U64(typed(arr)?),
        DType::I16 => HostData::I16(typed(arr)?),
        DType::U16 => HostData::U16(typed(arr)?),
    })
}

/// A 1-D numpy array of `data` (`bf16` as its bits, uint16).
fn to_numpy<'py>(py: Python<'py>, data: HostData) -> Bound<'py, PyAny> {
    match data {
        HostData::BF16(v) => PyArray1::from_vec(py, v.into_iter().map(bf16::to_bits).collect::<Vec<u16>>()).into_any(),
        other => with_data!(other, v => PyArray1::from_vec(py, v).into_any()),
    }
}

/// Convert `data` (anything `numpy.asarray` takes: an array, a list, an object with
/// `__array__` or `__dlpack__`) to a contiguous numpy array holding elements of `dtype`.
///
/// `convert`: cast with numpy's same-kind rule (floats to `bf16` by round-to-nearest-even);
/// otherwise the array must already be of `dtype`'s host dtype (`bf16`: uint16 bits or an
/// `ml_dtypes.bfloat16` array).
pub(crate) fn host_array<'py>(
    data: &Bound<'py, PyAny>,
    dtype: DType,
    convert: bool,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let py = data.py();
    let np = py.import("numpy")?;
    let mut arr = if data.hasattr("__dlpack__")? && !data.is_instance(&np.getattr("ndarray")?)? {
        np.call_method1("from_dlpack", (data,))?
    } else {
        np.call_method1("asarray", (data,))?
    };
    let have: String = arr.getattr("dtype")?.getattr("name")?.extract()?;
    let want = numpy_name(dtype);
    if dtype == DType::BF16 && have == "bfloat16" {
        arr = arr.call_method1("view", (np.getattr("uint16")?,))?;
    } else if dtype == DType::BF16 && have != "uint16" {
        let is_float = matches!(have.as_str(), "float16" | "float32" | "float64");
        if !(convert && is_float) {
            return Err(PyTypeError::new_err(format!(
                "a bf16 tensor takes uint16 bits or an ml_dtypes.bfloat16 array{}, got {have}",
                if convert { " or floats" } else { " (convert floats with pto.bf16_from_float)" }
            )));
        }
        arr = bf16_from_float(py, &arr)?.into_any();
    } else if have != want {
        let can = np.call_method1("can_cast", (arr.getattr("dtype")?, want, "same_kind"))?.extract::<bool>()?;
        if !(convert && can) {
            return Err(PyTypeError::new_err(format!(
                "a {} tensor takes a {want} array, got {have}{}",
                dtype.name(),
                if convert { " (not castable under numpy's same_kind rule)" } else { "; convert it with .astype" }
            )));
        }
        arr = arr.call_method1("astype", (want,))?;
    }
    let arr = np.call_method1("ascontiguousarray", (arr,))?;
    Ok(arr.downcast_into::<PyUntypedArray>()?)
}

/// bf16 bits (uint16) of the floats in `values`, rounded to nearest, ties to even.
pub(crate) fn bf16_from_float<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArrayDyn<u16>>> {
    let np = py.import("numpy")?;
    let a = np.call_method1("ascontiguousarray", (values, "float32"))?;
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    let a = a.downcast_into::<PyArrayDyn<f32>>()?;
    let bits: Vec<u16> = a.readonly().as_array().iter().map(|&x| bf16::from_f32(x).to_bits()).collect();
    PyArray1::from_vec(py, bits).reshape(shape)
}

/// float32 values of bf16 bits (uint16), exactly.
pub(crate) fn bf16_to_float<'py>(py: Python<'py>, bits: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let np = py.import("numpy")?;
    let a = np.call_method1("asarray", (bits,))?;
    let have: String = a.getattr("dtype")?.getattr("name")?.extract()?;
    let a = match have.as_str() {
        "uint16" => a,
        "bfloat16" => a.call_method1("view", (np.getattr("uint16")?,))?,
        other => {
            return Err(PyTypeError::new_err(format!("bf16 bits are uint16 (or ml_dtypes.bfloat16), got {other}")));
        }
    };
    let a = np.call_method1("ascontiguousarray", (a,))?;
    let shape: Vec<usize> = a.getattr("shape")?.extract()?;
    let a = a.downcast_into::<PyArrayDyn<u16>>()?;
    let vals: Vec<f32> = a.readonly().as_array().iter().map(|&b| bf16::from_bits(b).to_f32()).collect();
    PyArray1::from_vec(py, vals).reshape(shape)
}

/// A tensor in device memory. Its memory is freed when the last reference (this object, or a
/// run in flight that names it) goes.
#[pyclass(name = "Tensor", module = "pto", frozen)]
pub(crate) struct PyTensor {
    pub(crate) inner: Arc<dyn DynTensor>,
    pub(crate) device: Arc<dyn DynDevice>,
    shape: Vec<u32>,
    dtype: DType,
}

impl std::fmt::Debug for PyTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor").field("shape", &self.shape).field("dtype", &self.dtype).finish_non_exhaustive()
    }
}

impl PyTensor {
    /// A new tensor of `dtype` and `shape` on `device`, zeroed.
    pub(crate) fn alloc(
        py: Python<'_>,
        device: &Arc<dyn DynDevice>,
        dtype: DType,
        shape: Vec<u32>,
    ) -> PyResult<PyTensor> {
        let d = device.clone();
        let s = shape.clone();
        let inner = py.allow_threads(move || d.alloc(dtype, &s)).py()?;
        Ok(PyTensor { inner, device: device.clone(), shape, dtype })
    }

    /// The serial of the tensor's device.
    pub(crate) fn device_serial(&self) -> u64 {
        self.device.serial()
    }

    fn elems(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product()
    }

    /// Copy `arr` (of the tensor's host dtype, contiguous: see [`host_array`]) to the device.
    pub(crate) fn write_array(&self, py: Python<'_>, arr: &Bound<'_, PyUntypedArray>) -> PyResult<()> {
        let shape: Vec<u64> = arr.shape().iter().map(|&d| d as u64).collect();
        let want: Vec<u64> = self.shape.iter().map(|&d| d as u64).collect();
        let count: u64 = shape.iter().product();
        if shape != want && !(shape.len() == 1 && count == self.elems()) {
            return Err(PyValueError::new_err(format!(
                "a tensor of shape {:?} takes an array of that shape (or flat, {} elements), got shape {shape:?}",
                self.shape,
                self.elems()
            )));
        }
        let data = host_data(arr, self.dtype)?;
        let t = self.inner.clone();
        py.allow_threads(move || t.write(&data)).py()
    }
}

#[pymethods]
impl PyTensor {
    /// Extents.
    #[getter]
    fn shape(&self) -> Vec<u32> {
        self.shape.clone()
    }
    /// The element type's name (`f32`, `f16`, `bf16`, `i32`, ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }
    /// The numpy dtype name `read` returns (`bf16`: `uint16`, its bits).
    #[getter]
    fn numpy_dtype(&self) -> &'static str {
        numpy_name(self.dtype)
    }
    /// Bytes of the tensor.
    #[getter]
    fn nbytes(&self) -> u64 {
        self.elems() * self.dtype.size() as u64
    }
    /// Elements of the tensor.
    #[getter]
    fn size(&self) -> u64 {
        self.elems()
    }
    /// The device address of its first element.
    #[getter]
    fn addr(&self) -> u64 {
        self.inner.addr()
    }

    /// Copy `data` to the device: a numpy array (or anything `numpy.asarray` takes) of the
    /// tensor's host dtype and shape (or flat with as many elements). `cast=True` casts under
    /// numpy's same-kind rule first (floats to bf16 round to nearest even).
    #[pyo3(signature = (data, *, cast = false))]
    fn write(&self, py: Python<'_>, data: &Bound<'_, PyAny>, cast: bool) -> PyResult<()> {
        let arr = host_array(data, self.dtype, cast)?;
        self.write_array(py, &arr)
    }

    /// Copy the tensor back as a numpy array of its shape. A bf16 tensor gives its bits as
    /// uint16 (`bf16="bits"`, the default), its values as float32 (`bf16="float32"`, exact), or
    /// an `ml_dtypes.bfloat16` array (`bf16="ml_dtypes"`, which needs that package).
    #[pyo3(signature = (*, bf16 = "bits"))]
    fn read<'py>(&self, py: Python<'py>, bf16: &str) -> PyResult<Bound<'py, PyAny>> {
        if !matches!(bf16, "bits" | "float32" | "ml_dtypes") {
            return Err(PyValueError::new_err(format!(
                "bf16={bf16:?}: expected \"bits\", \"float32\" or \"ml_dtypes\""
            )));
        }
        let t = self.inner.clone();
        let data = py.allow_threads(move || t.read()).py()?;
        let shape: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        let arr = to_numpy(py, data).call_method1("reshape", (shape,))?;
        if self.dtype != DType::BF16 {
            return Ok(arr);
        }
        match bf16 {
            "float32" => Ok(bf16_to_float(py, &arr)?.into_any()),
            "ml_dtypes" => {
                let ml = py.import("ml_dtypes").map_err(|e| {
                    pyo3::exceptions::PyImportError::new_err(format!(
                        "read(bf16=\"ml_dtypes\") needs the ml_dtypes package ({e}); bf16=\"bits\" or \"float32\" do not"
                    ))
                })?;
                arr.call_method1("view", (ml.getattr("bfloat16")?,))
            }
            _ => Ok(arr),
        }
    }

    /// A view: `shape` elements from `offsets`, as a task argument.
    fn view(slf: &Bound<'_, Self>, offsets: Vec<u32>, shape: Vec<u32>) -> PyView {
        PyView::new(slf.clone().into_any().unbind(), offsets, shape)
    }

    /// The array protocol: `numpy.asarray(tensor)` reads the tensor (bf16 as uint16 bits).
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if copy == Some(false) {
            return Err(PyValueError::new_err("a device tensor cannot be viewed without a copy (copy=False)"));
        }
        let a = self.read(py, "bits")?;
        match dtype {
            Some(d) => a.call_method1("astype", (d,)),
            None => Ok(a),
        }
    }

    fn __len__(&self) -> usize {
        self.shape.first().copied().unwrap_or(0) as usize
    }

    fn __repr__(&self) -> String {
        format!("Tensor(shape={:?}, dtype={}, board={})", self.shape, self.dtype.name(), self.device.board())
    }
}

/// A view of a device tensor or a local: `shape` elements from `offsets`, as a task argument.
#[pyclass(name = "View", module = "pto", frozen)]
#[derive(Debug)]
pub(crate) struct PyView {
    pub(crate) base: Py<PyAny>,
    /// Offsets of the view's first element, per dimension.
    #[pyo3(get)]
    pub(crate) offsets: Vec<u32>,
    /// Extents of the view.
    #[pyo3(get)]
    pub(crate) shape: Vec<u32>,
}

impl PyView {
    /// A view of `base` (a `Tensor` or a `Local`).
    pub(crate) fn new(base: Py<PyAny>, offsets: Vec<u32>, shape: Vec<u32>) -> PyView {
        PyView { base, offsets, shape }
    }
}
