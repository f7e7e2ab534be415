//! Test support: a word-addressed GM stand-in for unit tests.

extern crate std;

use pto_hal::GmAddr;
use std::sync::Mutex;

/// GM words in a map: `GmAtomic` and `Barriers` for unit tests of device-side protocols
/// (every access serialised by one lock; barriers do nothing).
#[derive(Default)]
pub(crate) struct Words(Mutex<std::collections::BTreeMap<u64, u64>>);

impl pto_hal::GmAtomic for Words {
    fn query(&self, addr: GmAddr) -> u64 {
        self.0.lock().unwrap().get(&addr.0).copied().unwrap_or(0)
    }
    fn store_direct(&self, addr: GmAddr, value: u64) {
        self.0.lock().unwrap().insert(addr.0, value);
    }
    fn store_direct_u32(&self, addr: GmAddr, value: u32) {
        self.store_direct(addr, u64::from(value));
    }
    fn swap(&self, addr: GmAddr, value: u64) -> u64 {
        self.0.lock().unwrap().insert(addr.0, value).unwrap_or(0)
    }
    fn fetch_add(&self, addr: GmAddr, value: u64) -> u64 {
        let mut m = self.0.lock().unwrap();
        let v = m.entry(addr.0).or_insert(0);
        let old = *v;
        *v = old.wrapping_add(value);
        old
    }
    fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64 {
        let mut m = self.0.lock().unwrap();
        let v = m.entry(addr.0).or_insert(0);
        let old = *v;
        if old == expected {
            *v = desired;
        }
        old
    }
}

impl pto_hal::Barriers for Words {
    fn rmb(&self) {}
    fn wmb(&self) {}
    fn store_store(&self) {}
    fn full(&self) {}
    fn store_barrier(&self) {}
}

/// An AICPU thread over [`Words`], for unit tests that run an AICPU program: GM bytes are the
/// words' bytes (little-endian), maintenance and registers do nothing, the clock counts its
/// reads, waiting and delays return at once. Its bound is two clusters.
#[derive(Default)]
pub(crate) struct WordsAicpu {
    pub gm: Words,
    clock: crate::sync::AtomicU64,
}

impl pto_hal::GmAtomic for WordsAicpu {
    fn query(&self, addr: GmAddr) -> u64 {
        self.gm.query(addr)
    }
    fn store_direct(&self, addr: GmAddr, value: u64) {
        self.gm.store_direct(addr, value)
    }
    fn store_direct_u32(&self, addr: GmAddr, value: u32) {
        let w = GmAddr(addr.0 & !7);
        let shift = (addr.0 & 4) * 8;
        let old = self.gm.query(w);
        self.gm.store_direct(w, (old & !(0xFFFF_FFFF << shift)) | (u64::from(value) << shift));
    }
    fn swap(&self, addr: GmAddr, value: u64) -> u64 {
        self.gm.swap(addr, value)
    }
    fn fetch_add(&self, addr: GmAddr, value: u64) -> u64 {
        self.gm.fetch_add(addr, value)
    }
    fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64 {
        self.gm.compare_exchange(addr, expected, desired)
    }
}

impl pto_hal::GmMemory for WordsAicpu {
    fn read(&self, addr: GmAddr, dst: &mut [u8]) {
        for (i, b) in dst.iter_mut().enumerate() {
            let at = addr.0 + i as u64;
            *b = (pto_hal::GmAtomic::query(&self.gm, GmAddr(at & !7)) >> ((at & 7) * 8)) as u8;
        }
    }
    fn write(&self, addr: GmAddr, src: &[u8]) {
        let mut m = self.gm.0.lock().unwrap();
        for (i, &b) in src.iter().enumerate() {
            let at = addr.0 + i as u64;
            let w = m.entry(at & !7).or_insert(0);
            let shift = (at & 7) * 8;
            *w = (*w & !(0xFF << shift)) | (u64::from(b) << shift);
        }
    }
}

impl pto_hal::Barriers for WordsAicpu {
    fn rmb(&self) {}
    fn wmb(&self) {}
    fn store_store(&self) {}
    fn full(&self) {}
    fn store_barrier(&self) {}
}

impl pto_hal::AicpuCache for WordsAicpu {
    type Contract = pto_hal::HostCoherent;
    fn invalidate_range(&self, _addr: GmAddr, _len: u64) {}
    fn flush_range(&self, _addr: GmAddr, _len: u64) {}
}

impl pto_hal::Registers for WordsAicpu {
    fn read_reg(&self, _core: u32, _reg: pto_hal::Reg) -> u32 {
        0
    }
    fn write_reg(&self, _core: u32, _reg: pto_hal::Reg, _value: u32) {}
    fn open_window(&self, _core: u32, _idle: u32) {}
    fn close_window(&self, _core: u32, _idle: u32) {}
}

impl pto_hal::Clock for WordsAicpu {
    fn now_ticks(&self) -> pto_hal::Ticks {
        self.clock.fetch_add(1, crate::sync::Ordering::Relaxed)
    }
    fn freq_hz(&self) -> u64 {
        1_000_000
    }
}

impl pto_hal::Events for WordsAicpu {
    fn wait_for_event(&self, _deadline: pto_hal::Ticks) {
        std::thread::yield_now();
    }
    fn send_event(&self) {}
    fn wait_for_word(&self, _addr: GmAddr, _seen: u64, _deadline: pto_hal::Ticks) {
        std::thread::yield_now();
    }
}

/// No time passes in a delay of [`WordsAicpu`].
pub(crate) struct NoDelay;

impl pto_hal::DelayNs for NoDelay {
    fn delay_ns(&mut self, _ns: u32) {}
}

impl pto_hal::Pause for WordsAicpu {
    type Delay = NoDelay;
    fn delay(&self) -> NoDelay {
        NoDelay
    }
}

impl pto_hal::AicpuAgent for WordsAicpu {
    type MaxClusters = pto_hal::typenum::U2;
    fn resolve_program<F: Copy + 'static>(&self, _handle: u64) -> Option<F> {
        None
    }
    fn run_program(&self, body: &mut dyn FnMut()) -> Result<(), pto_hal::KernelFault> {
        body();
        Ok(())
    }
}
