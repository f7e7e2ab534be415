//! Property: shapes, strides, offsets and configurations near the integer limits never panic
//! (CI runs this suite in debug, where overflow panics, and in release, where it would wrap),
//! and no view is ever accepted whose bytes leave its buffer.

use proptest::prelude::*;
use pto::hal::{GmAddr, MAX_TENSOR_DIMS};
use pto::prelude::*;
use pto::runtime::graph::{BufferRef, Placement, shape_bytes};
use pto::runtime::host::Timeouts;

/// A `u32` that is often at or near a limit.
fn edgy_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => 0u32..8,
        2 => prop::sample::select(vec![
            u32::MAX, u32::MAX - 1, 1 << 31, (1 << 31) - 1, (1 << 31) + 1, 1 << 16, 65535, 2147418113, 2147549185,
        ]),
        2 => any::<u32>(),
    ]
}

/// A `u64` that is often at or near a limit.
fn edgy_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..4096,
        2 => prop::sample::select(vec![
            u64::MAX, u64::MAX - 63, 1 << 63, (1 << 62) - 1024, 1 << 62, 1 << 40, (1 << 32) - 1, 1 << 32,
        ]),
        2 => any::<u64>(),
    ]
}

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![DType::U8, DType::F16, DType::F32, DType::F64])
}

fn buffer(bytes: u64, dtype: DType) -> BufferRef {
    BufferRef { device: 1, id: 1, placement: Placement::External(GmAddr(0x1000)), bytes, dtype }
}

/// The view's bytes, computed independently in 128-bit arithmetic.
fn reach(t: &Tensor) -> Option<(u128, u128)> {
    let n = t.ndims as usize;
    if n == 0 || n > MAX_TENSOR_DIMS || t.shape[..n].contains(&0) {
        return None;
    }
    let es = t.dtype().size() as u128;
    let last: u128 = t.offset as u128 + (0..n).map(|k| (t.shape[k] as u128 - 1) * t.strides[k] as u128).sum::<u128>();
    Some((t.offset as u128 * es, (last + 1) * es))
}

fn inside(t: &Tensor) -> bool {
    reach(t).is_some_and(|(_, end)| end <= t.buffer.bytes as u128)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn dense_shapes_never_wrap(dt in dtype(), shape in prop::collection::vec(edgy_u32(), 0..7)) {
        if let Ok(bytes) = shape_bytes(dt, &shape) {
            let exact: u128 = shape.iter().map(|&d| d as u128).product::<u128>() * dt.size() as u128;
            prop_assert_eq!(bytes as u128, exact);
            if let Ok(t) = Tensor::whole(buffer(bytes, dt), &shape) {
                prop_assert!(inside(&t));
            }
        }
    }

    #[test]
    fn strided_views_stay_inside_their_buffer(
        dt in dtype(),
        bytes in edgy_u64(),
        offset in edgy_u64(),
        dims in prop::collection::vec((edgy_u32(), edgy_u32()), 1..6),
    ) {
        let shape: Vec<u32> = dims.iter().map(|d| d.0).collect();
        let strides: Vec<u32> = dims.iter().map(|d| d.1).collect();
        if let Ok(t) = Tensor::strided(buffer(bytes, dt), dt, offset, &shape, &strides) {
            prop_assert!(inside(&t), "accepted a view outside its buffer: {:?}", t);
            prop_assert!(t.checked_byte_range().is_some());
        }
    }

    #[test]
    fn sub_views_and_altered_views_are_checked_at_submission(
        rows in 1u32..64,
        cols in 1u32..64,
        off in (edgy_u32(), edgy_u32()),
        ext in (edgy_u32(), edgy_u32()),
        forged_offset in edgy_u64(),
        forged_shape in edgy_u32(),
    ) {
        let bytes = rows as u64 * cols as u64 * 4;
        let t = Tensor::whole(buffer(bytes, DType::F32), &[rows, cols]).unwrap();
        if let Ok(v) = t.view(&[off.0, off.1], &[ext.0, ext.1]) {
            prop_assert!(inside(&v));
        }
        // Fields altered by hand: the task check refuses whatever leaves the buffer.
        let mut f = t;
        f.offset = forged_offset;
        f.shape[0] = forged_shape;
        let ok = Task::aiv(FuncId(0)).inout(&f).validate(0).is_ok();
        prop_assert_eq!(ok, inside(&f));
    }

    #[test]
    fn ring_configurations_never_wrap(heap in prop::array::uniform4(edgy_u64()), window in edgy_u32(), pool in edgy_u32()) {
        let mut r = RingConfig::uniform(window, 64, pool);
        r.heap = heap;
        if let Ok(total) = r.validate() {
            prop_assert_eq!(total as u128, heap.iter().map(|&h| h as u128).sum::<u128>());
            prop_assert!(heap.iter().all(|&h| h >= 64 && h % 64 == 0));
        }
    }

    #[test]
    fn budget_chains_never_wrap(w in edgy_u64(), e in edgy_u64(), s in edgy_u64()) {
        let t = Timeouts::new(w, e, s);
        if t.validate().is_ok() {
            prop_assert!((w as u128 * 2 + e as u128) < (s as u128) && w > 0 && e > 0);
        }
    }
}
