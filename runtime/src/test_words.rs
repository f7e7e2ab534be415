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
