//! The tensor map's tests: [`classify`](super::classify) against a brute-force byte-set
//! oracle, and the map against a linear model and the reachability property callers rely on.

use super::classes::{class_of, class_width};
use super::*;
use crate::graph::{BufferRef, DType, Placement, Tensor};
use pto_hal::GmAddr;
use pto_hal::MAX_TENSOR_DIMS;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform-ish in `[lo, hi]`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.next() as usize % xs.len()]
    }
}

fn region(buffer: u64, elem_bytes: u32, offset: u64, shape: &[u32], strides: &[u32]) -> Region {
    let mut r = Region { buffer, offset, elem_bytes, ndims: shape.len() as u32, shape: [1; 5], strides: [0; 5] };
    r.shape[..shape.len()].copy_from_slice(shape);
    r.strides[..strides.len()].copy_from_slice(strides);
    r
}

/// Row-major strides of a dense shape.
fn dense_strides(dims: &[u32]) -> Vec<u32> {
    let mut st = alloc::vec![1u32; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        st[k] = st[k + 1] * dims[k + 1];
    }
    st
}

/// The box `[lo_k, lo_k + ext_k)` of a dense row-major buffer of shape `dims`.
fn tile(buffer: u64, es: u32, dims: &[u32], lo: &[u32], ext: &[u32]) -> Region {
    let st = dense_strides(dims);
    let off = lo.iter().zip(&st).map(|(&l, &s)| l as u64 * s as u64).sum();
    region(buffer, es, off, ext, &st)
}

/// The exact byte set of a region, as flags over `nbytes` bytes.
fn byte_set(r: &Region, nbytes: usize) -> Vec<bool> {
    let mut set = alloc::vec![false; nbytes];
    if r.is_void() {
        return set;
    }
    let n = r.dims();
    let mut idx = [0u32; MAX_TENSOR_DIMS];
    loop {
        let el = r.offset + (0..n).map(|k| idx[k] as u64 * r.strides[k] as u64).sum::<u64>();
        for b in 0..r.elem_bytes as u64 {
            set[(el * r.elem_bytes as u64 + b) as usize] = true;
        }
        let mut k = n;
        loop {
            if k == 0 {
                return set;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < r.shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// The precise three-way answer, from byte sets.
fn truth(new: &Region, old: &Region, nbytes: usize) -> Overlap {
    let a = byte_set(new, nbytes);
    let b = byte_set(old, nbytes);
    if !a.iter().zip(&b).any(|(&x, &y)| x && y) {
        Overlap::None
    } else if b.iter().zip(&a).all(|(&y, &x)| !y || x) {
        Overlap::Covered
    } else {
        Overlap::Partial
    }
}

/// Whether `got` is an allowed answer when the precise one is `want`: `None` and
/// `Covered` must be right, `Partial` is always a safe answer.
fn sound(got: Overlap, want: Overlap) -> bool {
    got == Overlap::Partial || got == want
}

const BUF_BYTES: u64 = 192;

/// A random sub-box of a dense row-major buffer (the exact test's home ground).
fn random_tile(rng: &mut Rng, es: u32) -> Region {
    let dims: &[u32] = match rng.range(0, 2) {
        0 => &[6, 8],
        1 => &[48],
        _ => &[3, 4, 4],
    };
    let scale = 4 / es; // keep the buffer at 192 bytes for every element size
    let mut dims = dims.to_vec();
    *dims.last_mut().unwrap() *= scale;
    let mut lo = Vec::new();
    let mut ext = Vec::new();
    for &d in &dims {
        let l = rng.range(0, d as u64 - 1) as u32;
        lo.push(l);
        ext.push(rng.range(1, (d - l) as u64) as u32);
    }
    tile(1, es, &dims, &lo, &ext)
}

/// A random strided region inside the buffer: arbitrary strides (zero, unsorted,
/// overlapping, non-nested), offsets that wrap rows, ranks 1 to 5.
fn random_strided(rng: &mut Rng, es: u32) -> Region {
    let elems = BUF_BYTES / es as u64;
    loop {
        let n = rng.range(1, 5) as usize;
        let mut shape = Vec::new();
        let mut st = Vec::new();
        for _ in 0..n {
            shape.push(rng.range(1, if n > 3 { 2 } else { 5 }) as u32);
            st.push(match rng.range(0, 3) {
                0 => rng.pick(&[0u32, 1, 2, 4, 8, 16]),
                _ => rng.range(0, 12) as u32,
            });
        }
        let reach: u64 = shape.iter().zip(&st).map(|(&d, &s)| (d as u64 - 1) * s as u64).sum();
        if reach + 1 > elems {
            continue;
        }
        let off = rng.range(0, elems - reach - 1);
        return region(1, es, off, &shape, &st);
    }
}

/// A 2-D `[.., 8 * 4 / es]`-strided view at an arbitrary offset: nested strides, but the
/// box may run past the end of a row.
fn random_wrapping(rng: &mut Rng, es: u32) -> Region {
    let row = 8 * 4 / es;
    let elems = BUF_BYTES / es as u64;
    loop {
        let h = rng.range(1, 3) as u32;
        let w = rng.range(1, row as u64) as u32;
        let reach = (h as u64 - 1) * row as u64 + w as u64 - 1;
        if reach + 1 > elems {
            continue;
        }
        let off = rng.range(0, elems - reach - 1);
        return region(1, es, off, &[h, w], &[row, 1]);
    }
}

fn random_region(rng: &mut Rng) -> Region {
    let es = rng.pick(&[1u32, 2, 4]);
    match rng.range(0, 3) {
        0 | 1 => random_tile(rng, es),
        2 => random_strided(rng, es),
        _ => random_wrapping(rng, es),
    }
}

#[test]
fn classify_is_sound_against_brute_force() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut seen = [0usize; 3];
    for i in 0..40_000 {
        let a = random_region(&mut rng);
        // Half the pairs share the element size and layout family, to hit the exact test.
        let b = if i % 2 == 0 { random_region(&mut rng) } else { random_tile(&mut rng, a.elem_bytes) };
        for (new, old) in [(a, b), (b, a)] {
            let got = classify(&new, &old);
            let want = truth(&new, &old, BUF_BYTES as usize);
            assert!(sound(got, want), "classify({new:?}, {old:?}) = {got:?}, brute force says {want:?}");
            seen[got as usize] += 1;
        }
    }
    assert!(seen.iter().all(|&n| n > 1000), "every outcome exercised: {seen:?}");
}

#[test]
fn classify_is_exact_on_tiles_of_one_layout() {
    let mut rng = Rng(42);
    for _ in 0..20_000 {
        let es = rng.pick(&[1u32, 2, 4]);
        let a = random_tile(&mut rng, es);
        let b = loop {
            let b = random_tile(&mut rng, es);
            if b.ndims == a.ndims {
                break b;
            }
        };
        assert_eq!(classify(&a, &b), truth(&a, &b, BUF_BYTES as usize), "{a:?} vs {b:?}");
    }
}

#[test]
fn classify_exact_cases() {
    let d = [8, 8];
    let left = tile(1, 4, &d, &[0, 0], &[8, 4]);
    let right = tile(1, 4, &d, &[0, 4], &[8, 4]);
    // Column tiles of the same rows: bounding ranges overlap, elements do not.
    assert_eq!(classify(&left, &right), Overlap::None);
    assert_eq!(classify(&right, &left), Overlap::None);
    let big = tile(1, 4, &d, &[1, 1], &[6, 6]);
    let small = tile(1, 4, &d, &[2, 3], &[3, 2]);
    assert_eq!(classify(&big, &small), Overlap::Covered);
    assert_eq!(classify(&small, &big), Overlap::Partial);
    assert_eq!(classify(&big, &big), Overlap::Covered);
    // Different buffers never overlap.
    let mut other = big;
    other.buffer = 2;
    assert_eq!(classify(&other, &big), Overlap::None);
    // A view running past its row: `[2, 4]` at (0, 6) touches (1, 0) and (1, 1).
    let wrapped = region(1, 4, 6, &[2, 4], &[8, 1]);
    let row1 = tile(1, 4, &d, &[1, 0], &[1, 4]);
    assert_eq!(classify(&wrapped, &row1), Overlap::Partial);
    assert_eq!(classify(&row1, &wrapped), Overlap::Partial);
    // A dense whole covers any view of another rank or element size.
    let whole = region(1, 1, 0, &[256], &[1]);
    assert_eq!(classify(&whole, &small), Overlap::Covered);
    assert_eq!(classify(&small, &whole), Overlap::Partial);
    // Overlapping strides that still fill their range count as dense.
    let folded = region(1, 4, 0, &[3, 4], &[2, 1]);
    assert!(folded.is_dense());
    assert_eq!(classify(&tile(1, 4, &d, &[0, 0], &[1, 4]), &folded), Overlap::Partial);
    assert_eq!(classify(&folded, &tile(1, 4, &d, &[0, 0], &[1, 8])), Overlap::Covered);
    // A zero-sized region overlaps nothing.
    let mut void = big;
    void.shape[0] = 0;
    assert_eq!(classify(&void, &big), Overlap::None);
    assert_eq!(classify(&big, &void), Overlap::None);
}

#[test]
fn region_of_tensor() {
    let buf = BufferRef {
        device: 0,
        id: 7,
        placement: Placement::External(GmAddr(0x1000)),
        bytes: 64 * 4,
        dtype: DType::F32,
    };
    let t = Tensor::whole(buf, &[8, 8]).unwrap().view(&[2, 4], &[3, 4]).unwrap();
    let r = t.region();
    assert_eq!(r.buffer, 7);
    assert_eq!(r.elem_bytes, 4);
    assert_eq!(r.offset, 2 * 8 + 4);
    assert_eq!(r.byte_range(), t.byte_range());
}

fn rows(buffer: u64, lo: u32, n: u32) -> Region {
    tile(buffer, 4, &[8, 16], &[lo, 0], &[n, 16])
}

fn found(m: &TensorMap<u32>, r: &Region) -> Vec<u32> {
    let mut out = Vec::new();
    m.lookup(r, &mut out);
    out.sort_unstable();
    out
}

#[test]
fn read_after_write() {
    let mut m = TensorMap::new(usize::MAX);
    m.insert(&rows(1, 0, 4), 1).unwrap();
    assert_eq!(found(&m, &rows(1, 2, 1)), [1]);
    assert_eq!(found(&m, &rows(1, 5, 3)), [0u32; 0]);
    assert_eq!(found(&m, &rows(2, 0, 8)), [0u32; 0], "another buffer");
}

#[test]
fn write_after_write_covered_replaces() {
    let mut m = TensorMap::new(usize::MAX);
    m.insert(&rows(1, 0, 8), 1).unwrap();
    assert_eq!(found(&m, &rows(1, 0, 8)), [1], "the second writer's own lookup");
    m.insert(&rows(1, 0, 8), 2).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(found(&m, &rows(1, 0, 8)), [2]);
}

#[test]
fn write_after_write_partial_keeps_both() {
    let mut m = TensorMap::new(usize::MAX);
    m.insert(&rows(1, 0, 8), 1).unwrap();
    m.insert(&rows(1, 3, 1), 2).unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(found(&m, &rows(1, 0, 8)), [1, 2]);
    // Entries are not split: task 1's entry still spans row 3.
    assert_eq!(found(&m, &rows(1, 3, 1)), [1, 2]);
    assert_eq!(found(&m, &rows(1, 5, 1)), [1]);
}

#[test]
fn column_tiles_are_told_apart() {
    let d = [8, 8];
    let mut m = TensorMap::new(usize::MAX);
    m.insert(&tile(1, 4, &d, &[0, 0], &[8, 4]), 1).unwrap();
    m.insert(&tile(1, 4, &d, &[0, 4], &[8, 4]), 2).unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(found(&m, &tile(1, 4, &d, &[2, 0], &[3, 4])), [1]);
    assert_eq!(found(&m, &tile(1, 4, &d, &[2, 5], &[3, 2])), [2]);
    assert_eq!(found(&m, &tile(1, 4, &d, &[2, 3], &[1, 2])), [1, 2]);
}

#[test]
fn pruning_and_capacity() {
    let mut m = TensorMap::new(8);
    for t in 0..8u32 {
        m.insert(&rows(1, t, 1), t).unwrap();
    }
    assert_eq!(m.insert(&rows(1, 0, 1), 100), Ok(()), "covers row 0: replaces it");
    assert_eq!(m.len(), 8);
    assert_eq!(m.insert(&rows(2, 0, 1), 9), Err(MapFull));
    assert_eq!(m.len(), 8, "a refused insert changes nothing");
    let mut out = Vec::new();
    m.lookup_pruning(&rows(1, 0, 8), |p| p < 5, &mut out);
    out.sort_unstable();
    assert_eq!(out, [5, 6, 7, 100]);
    assert_eq!(m.len(), 4);
    m.insert(&rows(2, 0, 1), 9).unwrap();
    assert_eq!(m.prune(|p| p == 100 || p == 6), 2);
    assert_eq!(m.prune(|p| p == 100), 0);
    assert_eq!(m.len(), 3);
    assert_eq!(found(&m, &rows(1, 0, 8)), [5, 7]);
    assert_eq!(m.prune(|_| true), 3);
    assert!(m.is_empty());
    assert!(m.bufs.is_empty(), "empty buffers are dropped");
    m.insert(&rows(1, 0, 1), 1).unwrap();
    m.clear();
    assert!(m.is_empty() && found(&m, &rows(1, 0, 8)).is_empty());
    assert!(TensorMap::<u64>::new(0).insert(&rows(1, 0, 1), 1).is_err());
}

#[test]
fn lookup_pruning_leaves_disjoint_entries() {
    let mut m = TensorMap::new(usize::MAX);
    m.insert(&rows(1, 0, 1), 1u64).unwrap();
    m.insert(&rows(1, 4, 1), 2).unwrap();
    let mut out = Vec::new();
    m.lookup_pruning(&rows(1, 0, 2), |_| true, &mut out);
    assert!(out.is_empty());
    assert_eq!(m.len(), 1);
    m.lookup_pruning(&rows(1, 4, 1), |_| true, &mut out);
    assert!(m.is_empty() && m.bufs.is_empty());
}

/// Many views of one buffer: each call examines a bounded number of entries, also with a
/// whole-buffer writer sitting underneath all of them.
#[test]
fn scans_stay_small() {
    const N: u32 = 20_000;
    for with_whole in [false, true] {
        let mut m = TensorMap::new(usize::MAX);
        let row = |i: u32| region(3, 4, i as u64 * 16, &[1, 16], &[16, 1]);
        let whole = region(3, 4, 0, &[N, 16], &[16, 1]);
        if with_whole {
            m.insert(&whole, u32::MAX).unwrap();
        }
        let mut out = Vec::new();
        let mut worst = 0;
        for i in 0..N {
            out.clear();
            worst = worst.max(m.lookup_counted(&row(i), &mut out));
            assert_eq!(out, if with_whole { alloc::vec![u32::MAX] } else { alloc::vec![] });
            let (res, visited) = m.insert_counted(&row(i), i);
            res.unwrap();
            worst = worst.max(visited);
        }
        for i in 0..N {
            out.clear();
            worst = worst.max(m.lookup_counted(&row(i), &mut out));
            out.sort_unstable();
            assert_eq!(out, if with_whole { alloc::vec![i, u32::MAX] } else { alloc::vec![i] });
        }
        assert_eq!(m.len(), N as usize + with_whole as usize);
        assert!(worst <= 3, "a scan examined {worst} entries");
        // Rewriting the whole buffer replaces every entry and leaves one.
        let (res, _) = m.insert_counted(&whole, 0);
        res.unwrap();
        assert_eq!(m.len(), 1);
    }
}

/// Random operations against a list-based model with the same removal rule.
#[test]
fn map_matches_a_linear_model() {
    let mut rng = Rng(7);
    for round in 0..200 {
        let cap = if round % 3 == 0 { 10 } else { usize::MAX };
        let mut m = TensorMap::new(cap);
        let mut model: Vec<(Region, u32)> = Vec::new();
        for op in 0..120u32 {
            let mut r = random_region(&mut rng);
            r.buffer = rng.range(1, 2);
            match rng.range(0, 9) {
                0..=4 => {
                    let covered = model.iter().filter(|(o, _)| classify(&r, o) == Overlap::Covered).count();
                    let res = m.insert(&r, op);
                    if model.len() - covered >= cap {
                        assert_eq!(res, Err(MapFull));
                    } else {
                        res.unwrap();
                        model.retain(|(o, _)| classify(&r, o) != Overlap::Covered);
                        model.push((r, op));
                    }
                }
                5..=6 => {
                    let mut want: Vec<u32> =
                        model.iter().filter(|(o, _)| classify(&r, o) != Overlap::None).map(|e| e.1).collect();
                    want.sort_unstable();
                    assert_eq!(found(&m, &r), want);
                }
                7 => {
                    let cut = op.saturating_sub(rng.range(0, 40) as u32);
                    let mut want: Vec<u32> = model
                        .iter()
                        .filter(|(o, p)| classify(&r, o) != Overlap::None && *p >= cut)
                        .map(|e| e.1)
                        .collect();
                    want.sort_unstable();
                    model.retain(|(o, p)| classify(&r, o) == Overlap::None || *p >= cut);
                    let mut out = Vec::new();
                    m.lookup_pruning(&r, |p| p < cut, &mut out);
                    out.sort_unstable();
                    assert_eq!(out, want);
                }
                _ => {
                    let cut = op.saturating_sub(rng.range(0, 60) as u32);
                    let before = model.len();
                    model.retain(|(_, p)| *p >= cut);
                    assert_eq!(m.prune(|p| p < cut), before - model.len());
                }
            }
            assert_eq!(m.len(), model.len());
        }
    }
}

/// The property callers rely on: when every writer looks its region up before it is
/// inserted, a reader reaches (directly or through recorded write-after-write edges)
/// every earlier writer that shares a byte with it.
#[test]
fn readers_reach_every_overlapping_writer() {
    let mut rng = Rng(0xDEAD_BEEF);
    for _ in 0..300 {
        let mut m = TensorMap::new(usize::MAX);
        let mut writers: Vec<(Vec<bool>, Vec<usize>)> = Vec::new();
        for _ in 0..40 {
            let r = random_region(&mut rng);
            let mut deps = Vec::new();
            m.lookup(&r, &mut deps);
            let id = writers.len();
            m.insert(&r, id).unwrap();
            writers.push((byte_set(&r, BUF_BYTES as usize), deps));

            let reader = random_region(&mut rng);
            let bytes = byte_set(&reader, BUF_BYTES as usize);
            let mut reached = alloc::vec![false; writers.len()];
            let mut stack = Vec::new();
            m.lookup(&reader, &mut stack);
            while let Some(w) = stack.pop() {
                if !core::mem::replace(&mut reached[w], true) {
                    stack.extend_from_slice(&writers[w].1);
                }
            }
            for (w, (set, _)) in writers.iter().enumerate() {
                let shares = set.iter().zip(&bytes).any(|(&a, &b)| a && b);
                assert!(!shares || reached[w], "reader {reader:?} misses writer {w}");
            }
        }
    }
}

#[test]
fn span_classes() {
    assert_eq!(class_of(1), 0);
    assert_eq!(class_of(2), 1);
    assert_eq!(class_of(3), 2);
    assert_eq!(class_of(64), 6);
    assert_eq!(class_of(65), 7);
    assert_eq!(class_of(u64::MAX), 64);
    for span in [1u64, 2, 3, 63, 64, 65, 1 << 40, u64::MAX] {
        assert!(span <= class_width(class_of(span)));
    }
}
