//! Access to device global memory (GM).

use crate::GmAddr;

/// 64-bit operations on one GM word that bypass every cache.
///
/// The only way to touch a word that more than one agent writes. Addresses must be 8-byte
/// aligned (4-byte for the `u32` store). A word is accessed at one width by every agent at a
/// time: `store_direct_u32` and `query_u32_pair` on a word other agents access as one `u64`
/// concurrently is a mixed-size access, which the hardware defines but Rust's memory model does
/// not; protocols keep such words to one width while they are shared. No 128-bit and no 8/16-bit atomics exist on the
/// AICore; this trait deliberately offers none.
///
/// Tier: AICPU, AICore. Ordering: each operation is single-copy atomic; RMW operations are
/// acquire-release on the word. Ordering against plain (cached) accesses needs [`Barriers`](crate::Barriers).
pub trait GmAtomic {
    /// Device-direct load of a word (`ld_dev`). Never served from a cache.
    fn query(&self, addr: GmAddr) -> u64;
    /// Device-direct store of a word (`st_dev` + store barrier). Not a line write-back, so it
    /// cannot clobber neighbouring bytes.
    fn store_direct(&self, addr: GmAddr, value: u64);
    /// Device-direct store of a 32-bit word.
    fn store_direct_u32(&self, addr: GmAddr, value: u32);
    /// Atomic exchange; returns the previous value.
    fn swap(&self, addr: GmAddr, value: u64) -> u64;
    /// Atomic add (wrapping); returns the previous value.
    fn fetch_add(&self, addr: GmAddr, value: u64) -> u64;
    /// Compare-and-swap; returns the value observed. It succeeded iff that equals `expected`.
    fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64;
    /// Single-copy load of two adjacent `u32` words (one 64-bit device load): `(low, high)`.
    fn query_u32_pair(&self, addr: GmAddr) -> (u32, u32) {
        let v = self.query(addr);
        (v as u32, (v >> 32) as u32)
    }
    /// Set `bits`; a CAS loop that does **not** write when the bits are already set.
    /// Returns the previous value.
    fn fetch_or(&self, addr: GmAddr, bits: u64) -> u64 {
        let mut cur = self.query(addr);
        loop {
            if cur & bits == bits {
                return cur;
            }
            let seen = self.compare_exchange(addr, cur, cur | bits);
            if seen == cur {
                return cur;
            }
            cur = seen;
        }
    }
    /// Clear every bit not in `mask`; a CAS loop that does not write when nothing would change.
    /// Returns the previous value.
    fn fetch_and(&self, addr: GmAddr, mask: u64) -> u64 {
        let mut cur = self.query(addr);
        loop {
            if cur & mask == cur {
                return cur;
            }
            let seen = self.compare_exchange(addr, cur, cur & mask);
            if seen == cur {
                return cur;
            }
            cur = seen;
        }
    }
}

/// Plain (cached) loads and stores of GM, as an agent's load/store unit performs them.
///
/// On a platform with agent caches a store lands in the agent's cache line and reaches memory
/// only at a write-back; a load may be served from a stale line. Publication therefore needs
/// the tier's cache maintenance ([`AicpuCache`](crate::AicpuCache), [`AicoreCache`](crate::AicoreCache)) and [`Barriers`](crate::Barriers).
///
/// Tier: host (sim only, for tests), AICPU, AICore. The trait is object safe: kernels see it
/// as `&dyn GmMemory`.
pub trait GmMemory {
    /// Copy `dst.len()` bytes starting at `addr` into `dst`.
    fn read(&self, addr: GmAddr, dst: &mut [u8]);
    /// Copy `src` into GM starting at `addr`.
    fn write(&self, addr: GmAddr, src: &[u8]);
}

/// Typed helpers over [`GmMemory`], for every implementation including `dyn GmMemory`.
pub trait GmMemoryExt: GmMemory {
    /// Read a little-endian `u64` at `addr`.
    #[inline]
    fn read_u64(&self, addr: GmAddr) -> u64 {
        let mut b = [0u8; 8];
        self.read(addr, &mut b);
        u64::from_le_bytes(b)
    }
    /// Read a little-endian `u32` at `addr`.
    #[inline]
    fn read_u32(&self, addr: GmAddr) -> u32 {
        let mut b = [0u8; 4];
        self.read(addr, &mut b);
        u32::from_le_bytes(b)
    }
    /// Write a little-endian `u64` at `addr`.
    #[inline]
    fn write_u64(&self, addr: GmAddr, v: u64) {
        self.write(addr, &v.to_le_bytes());
    }
    /// Write a little-endian `u32` at `addr`.
    #[inline]
    fn write_u32(&self, addr: GmAddr, v: u32) {
        self.write(addr, &v.to_le_bytes());
    }
}

impl<T: GmMemory + ?Sized> GmMemoryExt for T {}
