//! Tables sized by the platform's topology bound: one entry per core of at most `N` clusters,
//! in storage whose size is a type (`GenericArray`), fixed when the program is compiled for the
//! platform (`AicpuAgent::MaxClusters`).
//!
//! The AICPU programs' per-core and per-cluster tables (the legacy scheduler's core slots, its
//! idle lists and dispatch batch, the capture service's requests) live here instead of in
//! vectors grown per run: their size is known before the run starts, a push past it is a
//! refused value rather than a reallocation, and no index can pass the bound the launch was
//! checked against (a launch naming more clusters is refused at boot, `TOPOLOGY_BOUND`).
//! Per-task state, sized by the graph or the rings, stays on the heap.

use core::ops::{Deref, DerefMut};

use pto_hal::generic_array::{ArrayLength, GenericArray};

/// Cores of a cluster: one AIC and two AIVs.
pub const CORES_PER_CLUSTER: usize = 3;

/// A list of at most `3 * N` values (one per core of `N` clusters) in fixed storage: a
/// `Vec` whose capacity is a type. Reads and writes go through the slice of the values
/// pushed so far (`Deref`).
pub struct PerCore<T, N: ArrayLength> {
    slots: GenericArray<[T; CORES_PER_CLUSTER], N>,
    len: usize,
}

impl<T: Copy + Default, N: ArrayLength> PerCore<T, N> {
    /// How many values it holds at most.
    pub const CAPACITY: usize = CORES_PER_CLUSTER * N::USIZE;

    /// An empty list.
    pub fn new() -> Self {
        PerCore { slots: GenericArray::default(), len: 0 }
    }

    /// Append `v`; `Err(v)` when the list is full.
    pub fn push(&mut self, v: T) -> Result<(), T> {
        match self.slots.as_mut_slice().as_flattened_mut().get_mut(self.len) {
            Some(slot) => {
                *slot = v;
                self.len += 1;
                Ok(())
            }
            None => Err(v),
        }
    }

    /// Remove and return the last value.
    pub fn pop(&mut self) -> Option<T> {
        self.len = self.len.checked_sub(1)?;
        self.slots.as_slice().as_flattened().get(self.len).copied()
    }

    /// Remove every value.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Keep only the values for which `keep` holds, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut kept = 0;
        for i in 0..self.len {
            let v = self[i];
            if keep(&v) {
                self[kept] = v;
                kept += 1;
            }
        }
        self.len = kept;
    }
}

impl<T: Copy + Default, N: ArrayLength> Default for PerCore<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, N: ArrayLength> Deref for PerCore<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.slots.as_slice().as_flattened()[..self.len]
    }
}

impl<T, N: ArrayLength> DerefMut for PerCore<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.slots.as_mut_slice().as_flattened_mut()[..self.len]
    }
}

impl<'l, T, N: ArrayLength> IntoIterator for &'l PerCore<T, N> {
    type Item = &'l T;
    type IntoIter = core::slice::Iter<'l, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: core::fmt::Debug, N: ArrayLength> core::fmt::Debug for PerCore<T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pto_hal::typenum::U2;

    #[test]
    fn holds_three_values_per_cluster_and_refuses_the_next() {
        let mut l = PerCore::<u32, U2>::new();
        assert_eq!(PerCore::<u32, U2>::CAPACITY, 6);
        for v in 0..6 {
            assert_eq!(l.push(v), Ok(()));
        }
        assert_eq!(l.push(6), Err(6), "full: the value comes back, nothing grows");
        assert_eq!(&*l, &[0, 1, 2, 3, 4, 5]);
        l.retain(|&v| v % 2 == 1);
        assert_eq!(&*l, &[1, 3, 5]);
        l.reverse();
        assert_eq!(l.pop(), Some(1));
        assert_eq!(&*l, &[5, 3]);
        l.clear();
        assert_eq!(l.pop(), None);
        assert!(l.is_empty());
    }
}
