//! Element data types: the tag a buffer carries and the Rust types a kernel reads it as.

/// Element data types.
// Under `std` the host's documents (`host::documents`: the args-dump manifest) name a dtype in
// lowercase (`"f32"`, `"bf16"`, …). A derive under the feature rather than a host-side mirror:
// the names sit beside the variants they name, a new variant is named by the same attribute
// (a mirror would need its own variant and two conversions), and a `no_std` build compiles no
// serde at all. `host::documents` tests that each name equals `DType`'s Rust element name.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, num_enum::IntoPrimitive, num_enum::TryFromPrimitive)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
#[repr(u32)]
pub enum DType {
    /// 32-bit float.
    F32 = 0,
    /// 16-bit float (stored as raw `u16`).
    F16 = 1,
    /// bfloat16 (stored as raw `u16`).
    BF16 = 2,
    /// 32-bit signed integer.
    I32 = 3,
    /// 64-bit signed integer.
    I64 = 4,
    /// 32-bit unsigned integer.
    U32 = 5,
    /// 8-bit unsigned integer.
    U8 = 6,
    /// 8-bit signed integer.
    I8 = 7,
    /// 64-bit float.
    F64 = 8,
    /// 64-bit unsigned integer.
    U64 = 9,
    /// 16-bit signed integer.
    I16 = 10,
    /// 16-bit unsigned integer.
    U16 = 11,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> u32 {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The element type's name, as Rust spells it (`f32`, `bf16`, …) and as the args-dump
    /// manifest and `pto dump` write it.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U32 => "u32",
            DType::U8 => "u8",
            DType::I8 => "i8",
            DType::F64 => "f64",
            DType::U64 => "u64",
            DType::I16 => "i16",
            DType::U16 => "u16",
        }
    }
}

/// Rust element types that map onto a [`DType`].
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The matching data type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => { $(impl Element for $t { const DTYPE: DType = DType::$d; })* };
}
element!(f32 => F32, f64 => F64, i32 => I32, u32 => U32, i64 => I64, u64 => U64, i8 => I8, u8 => U8, i16 => I16, u16 => U16);
// Half precision, from the `half` crate (IEEE 754 binary16 and bfloat16, little-endian like
// every other element type).
element!(half::f16 => F16, half::bf16 => BF16);
