//! The span-class index behind the tensor map: one buffer's live writers, grouped by the
//! power-of-two class of their byte span and ordered by first byte within a class, and the
//! scan that visits only the entries of each class that can reach a queried byte range (the
//! cost note of the [tensor map](super) says why that bound holds).

use alloc::collections::BTreeMap;

use crate::region::Region;

/// One live writer.
#[derive(Copy, Clone, Debug)]
pub(super) struct Entry<P> {
    /// One past the last byte of the bounding range (the start is in the key).
    pub(super) end: u64,
    /// The writer's region.
    pub(super) region: Region,
    /// The writer.
    pub(super) producer: P,
}

/// Key of an entry inside its span class: first byte, then insertion sequence number.
pub(super) type Key = (u64, u64);

/// One buffer's entries: span class → entries of that class ordered by first byte.
pub(super) type Classes<P> = BTreeMap<u8, BTreeMap<Key, Entry<P>>>;

/// Span class of a byte span: the smallest `c` with `span ≤ 2^c`.
pub(super) fn class_of(span: u64) -> u8 {
    if span <= 1 { 0 } else { (u64::BITS - (span - 1).leading_zeros()) as u8 }
}

/// Largest span in class `c`.
pub(super) fn class_width(c: u8) -> u64 {
    if c >= 64 { u64::MAX } else { 1 << c }
}

/// Visit every entry of `classes` whose bounding range can overlap `[s, e)` (and a few that
/// cannot, see the tensor map's cost note), calling `f(class, key, entry)` for those whose
/// bounding range really does; returns how many entries were examined.
pub(super) fn scan<P>(classes: &Classes<P>, s: u64, e: u64, mut f: impl FnMut(u8, &Key, &Entry<P>)) -> usize {
    let mut visited = 0;
    for (&c, entries) in classes {
        // An entry of span `≤ w` that reaches byte `s` starts at `s - (w - 1)` or later.
        let lo = s.saturating_sub(class_width(c) - 1);
        for (key, ent) in entries.range((lo, 0)..(e, 0)) {
            visited += 1;
            if ent.end > s {
                f(c, key, ent);
            }
        }
    }
    visited
}

/// Remove `keys` from `classes`, dropping classes left empty.
pub(super) fn remove_keys<P>(classes: &mut Classes<P>, keys: &[(u8, Key)]) {
    for (c, key) in keys {
        if let Some(entries) = classes.get_mut(c) {
            entries.remove(key);
            if entries.is_empty() {
                classes.remove(c);
            }
        }
    }
}
