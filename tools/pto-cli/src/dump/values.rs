//! The values of an args-dump payload: each element decoded from its dtype's little-endian bytes
//! (f16 and bf16 widened exactly to f32), written as Rust spells it in text and as exact
//! numbers in JSON.

use pto::runtime::graph::DType;
use pto::runtime::host::dump::{Dump, Record};

/// One element of a payload, as wide as its dtype needs: f16 and bf16 widen exactly to f32,
/// the narrower integers to 64 bits.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(super) enum Elem {
    F32(f32),
    F64(f64),
    I64(i64),
    U64(u64),
}

impl std::fmt::Display for Elem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Elem::F32(v) => write!(f, "{v}"),
            Elem::F64(v) => write!(f, "{v}"),
            Elem::I64(v) => write!(f, "{v}"),
            Elem::U64(v) => write!(f, "{v}"),
        }
    }
}

/// A JSON number: integers exactly over the whole 64-bit range, floats as the shortest text that
/// reads back as the same value of their width. JSON has no NaN or infinity: those are the
/// strings `"NaN"`, `"inf"` and `"-inf"`.
impl serde::Serialize for Elem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Elem::F32(v) if v.is_finite() => s.serialize_f32(v),
            Elem::F64(v) if v.is_finite() => s.serialize_f64(v),
            Elem::I64(v) => s.serialize_i64(v),
            Elem::U64(v) => s.serialize_u64(v),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

/// An IEEE half-precision value's bits widened to f32 (exactly: every f16 is an f32).
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        0 => {
            // Zero or subnormal: man × 2^-24, exact in f32.
            let v = man as f32 * f32::from_bits(0x3380_0000);
            if sign != 0 { -v } else { v }
        }
        0x1f => f32::from_bits(sign | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(sign | ((exp + 127 - 15) << 23) | (man << 13)),
    }
}

/// One element of `dtype` from its little-endian bytes (`c.len() == dtype.size()`).
fn elem(dtype: DType, c: &[u8]) -> Elem {
    fn le<const W: usize>(c: &[u8]) -> [u8; W] {
        let mut a = [0u8; W];
        a.copy_from_slice(c);
        a
    }
    match dtype {
        DType::F32 => Elem::F32(f32::from_le_bytes(le(c))),
        DType::F16 => Elem::F32(f16_to_f32(u16::from_le_bytes(le(c)))),
        DType::BF16 => Elem::F32(f32::from_bits(u32::from(u16::from_le_bytes(le(c))) << 16)),
        DType::F64 => Elem::F64(f64::from_le_bytes(le(c))),
        DType::I8 => Elem::I64(i8::from_le_bytes(le(c)).into()),
        DType::I16 => Elem::I64(i16::from_le_bytes(le(c)).into()),
        DType::I32 => Elem::I64(i32::from_le_bytes(le(c)).into()),
        DType::I64 => Elem::I64(i64::from_le_bytes(le(c))),
        DType::U8 => Elem::U64(u8::from_le_bytes(le(c)).into()),
        DType::U16 => Elem::U64(u16::from_le_bytes(le(c)).into()),
        DType::U32 => Elem::U64(u32::from_le_bytes(le(c)).into()),
        DType::U64 => Elem::U64(u64::from_le_bytes(le(c))),
    }
}

/// The first `n` elements of `bytes` as `dtype`, and whether it holds more.
fn decode(dtype: DType, bytes: &[u8], n: usize) -> (Vec<Elem>, bool) {
    let w = dtype.size() as usize;
    let v = bytes.chunks_exact(w).take(n).map(|c| elem(dtype, c)).collect();
    (v, bytes.len() / w > n)
}

/// The first `n` values of a record's payload, and whether the payload holds more: `None`
/// without a payload or with a dtype code this build does not know.
pub(super) fn first_values(d: &Dump, r: &Record, n: usize) -> Option<(Vec<Elem>, bool)> {
    if r.payload_len == 0 {
        return None;
    }
    Some(decode(r.dtype?, d.bytes(r), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DTYPES: [DType; 12] = [
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

    /// `values` of `dtype` decoded and written as `pto dump --json` writes them.
    fn json(dtype: DType, bytes: &[u8]) -> String {
        let (v, more) = decode(dtype, bytes, usize::MAX);
        assert!(!more);
        serde_json::to_string(&v).unwrap()
    }

    #[test]
    fn every_dtype_decodes_to_json_numbers() {
        let b = |v: &[&[u8]]| v.concat();
        assert_eq!(json(DType::F32, &b(&[&1.5f32.to_le_bytes(), &0.1f32.to_le_bytes()])), "[1.5,0.1]");
        assert_eq!(json(DType::F64, &b(&[&(-2.25f64).to_le_bytes(), &0.1f64.to_le_bytes()])), "[-2.25,0.1]");
        // f16: 1.0, -2.5, 65504 (the largest), 2^-24 (the smallest subnormal), -0.
        let h: Vec<u8> = [0x3c00u16, 0xc100, 0x7bff, 0x0001, 0x8000].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(json(DType::F16, &h), "[1.0,-2.5,65504.0,5.9604645e-8,-0.0]");
        // bf16: the top half of an f32.
        let bf: Vec<u8> =
            [1.0f32, -3.0, 0.15625].iter().flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes()).collect();
        assert_eq!(json(DType::BF16, &bf), "[1.0,-3.0,0.15625]");
        assert_eq!(json(DType::I8, &[0x80, 0x7f]), "[-128,127]");
        assert_eq!(json(DType::U8, &[0xff, 0]), "[255,0]");
        assert_eq!(json(DType::I16, &i16::MIN.to_le_bytes()), "[-32768]");
        assert_eq!(json(DType::U16, &u16::MAX.to_le_bytes()), "[65535]");
        assert_eq!(json(DType::I32, &i32::MIN.to_le_bytes()), "[-2147483648]");
        assert_eq!(json(DType::U32, &u32::MAX.to_le_bytes()), "[4294967295]");
        // 64-bit integers beyond 2^53 stay exact JSON integers.
        let i = b(&[&i64::MIN.to_le_bytes(), &((1i64 << 53) + 1).to_le_bytes()]);
        assert_eq!(json(DType::I64, &i), "[-9223372036854775808,9007199254740993]");
        let u = b(&[&u64::MAX.to_le_bytes(), &((1u64 << 53) + 1).to_le_bytes()]);
        assert_eq!(json(DType::U64, &u), "[18446744073709551615,9007199254740993]");
        let v: serde_json::Value = serde_json::from_str(&json(DType::U64, &u)).unwrap();
        assert_eq!(v[0].as_u64(), Some(u64::MAX));
        // No NaN or infinity in JSON: strings.
        let nf = b(&[&f32::NAN.to_le_bytes(), &f32::INFINITY.to_le_bytes(), &f32::NEG_INFINITY.to_le_bytes()]);
        assert_eq!(json(DType::F32, &nf), r#"["NaN","inf","-inf"]"#);
        assert_eq!(json(DType::F16, &0x7c00u16.to_le_bytes()), r#"["inf"]"#);
        assert_eq!(json(DType::F64, &f64::NAN.to_le_bytes()), r#"["NaN"]"#);
        for d in DTYPES {
            // Every dtype decodes (no "no decoder"), one element per `size` bytes.
            let (v, more) = decode(d, &vec![0u8; 3 * d.size() as usize], 2);
            assert_eq!((v.len(), more), (2, true), "{d:?}");
        }
    }

    #[test]
    fn text_values_are_the_rust_spelling() {
        let (v, _) = decode(DType::F32, &0.1f32.to_le_bytes(), 1);
        assert_eq!(v[0].to_string(), "0.1");
        let (v, _) = decode(DType::U64, &u64::MAX.to_le_bytes(), 1);
        assert_eq!(v[0].to_string(), "18446744073709551615");
    }

    #[test]
    fn every_f16_widens_exactly() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            let sign = h >> 15 == 1;
            let (exp, man) = (i32::from((h >> 10) & 0x1f), f64::from(h & 0x3ff));
            let want = match exp {
                0 => man * 2f64.powi(-24),
                0x1f if man == 0.0 => f64::INFINITY,
                0x1f => f64::NAN,
                _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
            };
            let want = if sign { -want } else { want };
            if want.is_nan() {
                assert!(f.is_nan(), "{h:#06x}");
            } else {
                assert_eq!(f64::from(f), want, "{h:#06x}");
                assert_eq!(f.is_sign_negative(), sign, "{h:#06x}");
            }
        }
    }

    #[test]
    fn dtype_names_are_the_manifests() {
        for d in DTYPES {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name(), "{d:?}");
        }
    }
}
