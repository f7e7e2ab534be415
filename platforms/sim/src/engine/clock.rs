//! The host clock the engines read for device time: nanoseconds since the device opened.
//!
//! Every simulated agent reads the clock several times per task (budgets, idle looks, the
//! stall watchdog), and a read through the operating system (`Instant`, the vDSO) costs tens of
//! nanoseconds — a fifth of the coroutine engine's host time per task on a dependency chain.
//! Where the CPU's time-stamp counter is invariant (x86-64 with the invariant-TSC bit: it ticks
//! at one rate in every power state and on every core) and the kernel's own clock runs on it
//! (Linux's current clocksource is `tsc`), the clock reads the counter instead
//! and scales it: the scale is measured once against `Instant`, over the first
//! [`CALIBRATE_NS`] after the device opened (reads in that window go through `Instant`), and
//! anchored where the two agree, so time does not jump when the fast path takes over.
//! Elsewhere every read is an `Instant` read.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::nanos;

/// How long after opening the counter's rate is measured against `Instant` (the error of one
/// read, tens of nanoseconds, is then a few parts per million of the rate).
pub(crate) const CALIBRATE_NS: u64 = 5_000_000;

/// Nanoseconds since an epoch (see the module documentation).
pub(crate) struct HostClock {
    epoch: Instant,
    /// The time-stamp counter at the epoch, when it is invariant.
    tsc_start: Option<u64>,
    /// The counter's scale, once measured.
    scale: OnceLock<Scale>,
}

/// `ns + (counter - tsc) * mult / 2^32`.
struct Scale {
    tsc: u64,
    ns: u64,
    mult: u64,
}

impl HostClock {
    /// A clock whose epoch is now.
    pub(crate) fn new() -> HostClock {
        let tsc_start = counter_usable().then(read_tsc);
        HostClock { epoch: Instant::now(), tsc_start, scale: OnceLock::new() }
    }

    /// Nanoseconds since the epoch.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        let Some(start) = self.tsc_start else {
            return nanos(self.epoch.elapsed());
        };
        if let Some(s) = self.scale.get() {
            // A core whose counter reads a hair behind the anchor's reads the anchor.
            let d = read_tsc().saturating_sub(s.tsc);
            return s.ns.saturating_add(((d as u128 * s.mult as u128) >> 32) as u64);
        }
        let ns = nanos(self.epoch.elapsed());
        if ns >= CALIBRATE_NS {
            let tsc = read_tsc();
            let ticks = tsc.saturating_sub(start);
            if ticks > 0 {
                let mult = ((ns as u128) << 32) / ticks as u128;
                if let Ok(mult) = u64::try_from(mult) {
                    let _ = self.scale.set(Scale { tsc, ns, mult });
                }
            }
        }
        ns
    }

    /// The host instant `ns` nanoseconds after the epoch (a deadline for a host wait).
    pub(crate) fn instant_at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    /// Whether reads go through the time-stamp counter (once calibrated).
    #[cfg(test)]
    fn counter_based(&self) -> bool {
        self.scale.get().is_some()
    }
}

/// Whether the counter can stand in for the host's clock: it is invariant, and the kernel
/// keeps its own monotonic clock on it (Linux checks the counters of all CPUs agree before it
/// picks `tsc`, and leaves it when they drift); on another kernel, or when that cannot be read,
/// every read goes through `Instant`.
fn counter_usable() -> bool {
    invariant_tsc()
        && std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|s| s.trim() == "tsc")
}

/// Whether the CPU's time-stamp counter runs at one rate always and on every core.
#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    // Leaf 0x8000_0007, EDX bit 8: invariant TSC (Intel and AMD), when the leaf exists.
    __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn invariant_tsc() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn read_tsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU, reads a counter and touches no memory.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn read_tsc() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads never go back, before, across and after the switch to the counter, and the
    /// counter-based time keeps to `Instant`'s: within 1 % over a 20 ms sleep (the invariant
    /// the engines rely on: budgets and waits measured in host time).
    #[test]
    fn the_clock_is_monotonic_and_keeps_to_the_hosts_time() {
        let c = HostClock::new();
        let mut last = 0;
        // Until the clock itself reads past the calibration window: the read that first finds
        // itself there calibrates, however long the host was preempted between two reads (a
        // loop timed by another instant could end with no read after the window on a loaded
        // host).
        while last < CALIBRATE_NS + 1_000_000 {
            let now = c.now_ns();
            assert!(now >= last, "went back: {last} then {now}");
            last = now;
        }
        if counter_usable() {
            assert!(c.counter_based(), "calibrated after {CALIBRATE_NS} ns");
        }
        // Each read bracketed by host instants, so a preemption between them widens the
        // bounds instead of failing the check on a loaded host.
        let (i0, a, i1) = (Instant::now(), c.now_ns(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (i2, b, i3) = (Instant::now(), c.now_ns(), Instant::now());
        let (shortest, longest) = (nanos(i2 - i1) as f64, nanos(i3 - i0) as f64);
        let ours = b.checked_sub(a).expect("monotonic") as f64;
        assert!(
            ours >= shortest * 0.99 && ours <= longest * 1.01,
            "20 ms of host time read as {ours} ns (host: between {shortest} and {longest} ns)"
        );
    }
}
