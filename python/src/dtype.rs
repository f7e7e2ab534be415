//! The runtime's element types by name, and the numpy dtypes that hold them on the host.

use pto::runtime::graph::DType;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// Every element type, by the name the runtime gives it.
pub(crate) const DTYPES: [DType; 12] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U32,
    DType::U8,
    DType::I8,
    DType::F64,
    DType::U64,
    DType::I16,
    DType::U16,
];

/// The element type named `name` (`f32`, `bf16`, ...; numpy's names `float32`, `int64`,
/// `bfloat16`, ... too).
pub(crate) fn parse_dtype(name: &str) -> PyResult<DType> {
    let n = match name {
        "float32" => "f32",
        "float16" | "half" => "f16",
        "bfloat16" => "bf16",
        "float64" | "double" => "f64",
        "int8" => "i8",
        "int16" => "i16",
        "int32" => "i32",
        "int64" => "i64",
        "uint8" => "u8",
        "uint16" => "u16",
        "uint32" => "u32",
        "uint64" => "u64",
        other => other,
    };
    DTYPES.into_iter().find(|d| d.name() == n).ok_or_else(|| {
        let names: Vec<&str> = DTYPES.iter().map(|d| d.name()).collect();
        PyTypeError::new_err(format!("unknown element type {name:?}: expected one of {}", names.join(", ")))
    })
}

/// The numpy dtype name that holds `dtype` on the host (`bf16`: its bits, uint16).
pub(crate) fn numpy_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::BF16 => "uint16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::U32 => "uint32",
        DType::U8 => "uint8",
        DType::I8 => "int8",
        DType::F64 => "float64",
        DType::U64 => "uint64",
        DType::I16 => "int16",
        DType::U16 => "uint16",
    }
}

/// The element type of a numpy array's dtype (`bfloat16` is `ml_dtypes`'), if the runtime has one.
pub(crate) fn dtype_of_numpy(name: &str) -> Option<DType> {
    match name {
        "bfloat16" => Some(DType::BF16),
        "bool" => None,
        n => parse_dtype(n).ok(),
    }
}
