//! Cache maintenance, split by tier, and the per-architecture coherence contract.
//!
//! An AICPU thread maintains its cache by address range ([`AicpuCache`]: `dc civac` / `dc cvac`
//! loops); an AICore by line and as a whole ([`AicoreCache`]: `dcci`). Each agent type
//! implements only its own tier, so no agent carries an operation it cannot perform.

use crate::{GmAddr, LINE_BYTES, line_span};

mod sealed {
    pub trait Sealed {}
}

/// Whether host DMA writes are visible to AICPU loads without maintenance.
///
/// Implemented only by [`HostCoherent`] and [`HostNonCoherent`]. Runtime code never tests the
/// contract with an `if`: it calls [`Contract::observe_host_write`], which is an inlined no-op on
/// coherent builds and an invalidate on non-coherent ones. Only AICPU threads see host DMA
/// through a cache that needs this, so the contract works on [`AicpuCache`].
pub trait Contract: sealed::Sealed + 'static {
    /// `true` when host DMA is visible to AICPU loads as it lands.
    const HOST_COHERENT: bool;
    /// Make bytes the host wrote with DMA visible to the calling AICPU before it reads them.
    fn observe_host_write<M: AicpuCache + ?Sized>(m: &M, addr: GmAddr, len: u64);
    /// Make bytes the AICPU wrote visible to a later host D2H read.
    fn publish_to_host<M: AicpuCache + ?Sized>(m: &M, addr: GmAddr, len: u64);
}

/// The a5 contract: host DMA is coherent with AICPU caches. Uninhabited marker type.
#[derive(Debug)]
pub enum HostCoherent {}

/// The a2a3 contract: AICPU caches may hold stale lines across host DMA. Uninhabited marker.
#[derive(Debug)]
pub enum HostNonCoherent {}

impl sealed::Sealed for HostCoherent {}
impl sealed::Sealed for HostNonCoherent {}

impl Contract for HostCoherent {
    const HOST_COHERENT: bool = true;
    #[inline(always)]
    fn observe_host_write<M: AicpuCache + ?Sized>(_m: &M, _addr: GmAddr, _len: u64) {}
    #[inline(always)]
    fn publish_to_host<M: AicpuCache + ?Sized>(_m: &M, _addr: GmAddr, _len: u64) {}
}

impl Contract for HostNonCoherent {
    const HOST_COHERENT: bool = false;
    #[inline]
    fn observe_host_write<M: AicpuCache + ?Sized>(m: &M, addr: GmAddr, len: u64) {
        m.invalidate_range(addr, len);
    }
    #[inline]
    fn publish_to_host<M: AicpuCache + ?Sized>(m: &M, addr: GmAddr, len: u64) {
        m.flush_range(addr, len);
    }
}

/// AICPU cache maintenance: whole-line operations over address ranges.
///
/// Every range operation rounds out to whole [`LINE_BYTES`] lines and ends with a full
/// barrier. A line written back is written back **whole**, bytes the agent never wrote
/// included: two agents must never write different parts of one line through their caches.
/// Platforms with nothing to do (a5, the coherent simulator) implement the operations as empty
/// `#[inline(always)]` functions.
///
/// Tier: AICPU.
pub trait AicpuCache {
    /// The host-DMA coherence contract of this platform.
    type Contract: Contract;

    /// Clean and invalidate every line covering `[addr, addr+len)` (`dc civac` loop +
    /// `dsb sy`). After it, loads of the range come from memory.
    fn invalidate_range(&self, addr: GmAddr, len: u64);
    /// Clean every line covering the range (`dc cvac` loop + `dsb sy`).
    fn flush_range(&self, addr: GmAddr, len: u64);
}

/// AICore cache maintenance: one line at a time, or the whole cache.
///
/// A line written back is written back **whole** (see [`AicpuCache`]).
///
/// Tier: AICore.
pub trait AicoreCache {
    /// The host-DMA coherence contract of this platform (AICores see host DMA through their
    /// own line operations, which the runtime issues on every contract).
    type Contract: Contract;

    /// Write back the whole line holding `addr` (`dcci … CACHELINE_OUT`).
    fn writeback_line(&self, addr: GmAddr);
    /// Drop the line holding `addr` (`dcci … SINGLE_CACHE_LINE`).
    fn invalidate_line(&self, addr: GmAddr);
    /// Write back and drop every line of this core's cache (`dcci … ENTIRE_DATA_CACHE`).
    fn invalidate_all(&self);
    /// Wait until prior maintenance has completed (`dsb`).
    fn cache_barrier(&self);

    /// Composite: write back every line of `[addr, addr+len)`, then barrier.
    fn publish_lines(&self, addr: GmAddr, len: u64) {
        let (first, n) = line_span(addr, len);
        for i in 0..n {
            self.writeback_line(first.offset(i * LINE_BYTES));
        }
        self.cache_barrier();
    }
    /// Composite: drop every line of `[addr, addr+len)`, then barrier, so the next loads come
    /// from memory.
    fn observe_lines(&self, addr: GmAddr, len: u64) {
        let (first, n) = line_span(addr, len);
        for i in 0..n {
            self.invalidate_line(first.offset(i * LINE_BYTES));
        }
        self.cache_barrier();
    }
    /// Composite: publish the one line holding `addr`.
    fn publish_line(&self, addr: GmAddr) {
        self.writeback_line(addr);
        self.cache_barrier();
    }
    /// Composite: observe the one line holding `addr`.
    fn observe_line(&self, addr: GmAddr) {
        self.invalidate_line(addr);
        self.cache_barrier();
    }
}
