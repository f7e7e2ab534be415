//! Time: the device clock and bounded waits.

use pto_hal::{Clock, Events, GmAddr, GmAtomic, Ticks};

use crate::atomic::expect;
use crate::{Check, Failure, Outcome};

/// A host time source for [`clock_rate`]: nanoseconds since an arbitrary fixed origin.
pub trait HostClock {
    /// Nanoseconds since this source's origin. Never decreases.
    fn now_ns(&self) -> u64;
    /// Let at least `micros` microseconds pass (sleeping or spinning).
    fn sleep_us(&self, micros: u64);
}

/// [`HostClock`] over `std::time::Instant` and `std::thread::sleep`.
#[cfg(feature = "std")]
#[derive(Copy, Clone, Debug)]
pub struct StdHostClock {
    origin: std::time::Instant,
}

#[cfg(feature = "std")]
impl Default for StdHostClock {
    fn default() -> Self {
        StdHostClock { origin: std::time::Instant::now() }
    }
}

#[cfg(feature = "std")]
impl StdHostClock {
    /// A source whose origin is now.
    pub fn new() -> Self {
        Self::default()
    }
}

#[cfg(feature = "std")]
impl HostClock for StdHostClock {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
    fn sleep_us(&self, micros: u64) {
        std::thread::sleep(std::time::Duration::from_micros(micros));
    }
}

/// Most reads [`clock`] makes while waiting for the counter to advance.
const ADVANCE_READS: u64 = 50_000_000;

/// The clock is monotonic, advances, has a non-zero frequency, and converts consistently.
pub fn clock<C: Clock + ?Sized>(c: &C) -> Outcome {
    const K: Check = Check::Clock;
    let f = c.freq_hz();
    if f == 0 {
        return Err(Failure::new(K, "counter frequency is non-zero", 1, 0));
    }
    let mut prev = c.now_ticks();
    for _ in 0..10_000 {
        let t = c.now_ticks();
        if t < prev {
            return Err(Failure::new(K, "now_ticks never decreases", prev, t));
        }
        prev = t;
    }
    let t0 = c.now_ticks();
    let mut reads = 0u64;
    while c.now_ticks() == t0 {
        reads += 1;
        if reads >= ADVANCE_READS {
            return Err(Failure::new(K, "now_ticks advances within 50M reads", t0 + 1, t0));
        }
    }
    expect(K, "ticks_from_micros(1 s) is the frequency", f, c.ticks_from_micros(1_000_000))?;
    expect(K, "micros_from_ticks(frequency) is 1 s", 1_000_000, c.micros_from_ticks(f))?;
    let now = c.now_ticks();
    let d = c.deadline_after_micros(1_000);
    if d < now.saturating_add(c.ticks_from_micros(1_000)) {
        return Err(Failure::new(
            K,
            "deadline_after_micros lies at least that far ahead",
            now + c.ticks_from_micros(1_000),
            d,
        ));
    }
    Ok(())
}

/// Relative tolerance of [`clock_rate`], in parts per million: 2 %.
///
/// The interval is bracketed (host read, clock read, host read at each end), so preemption
/// between the reads widens the bracket instead of skewing the estimate; what remains is the
/// disagreement of two oscillators (≤ 100 ppm on real parts, none on the simulator and under
/// qemu, whose counters derive from the host's clock). 2 % still catches every plausible wrong
/// frequency: 50 MHz vs qemu's 62.5 MHz is 25 %, 50 MHz vs 1 GHz a factor of 20.
pub const CLOCK_RATE_TOLERANCE_PPM: u64 = 20_000;

/// The clock's frequency agrees with a host time source over `window_us` microseconds (the
/// suite uses 20 000), within [`CLOCK_RATE_TOLERANCE_PPM`] plus two ticks and two microseconds
/// of quantisation. With `expected_hz`, the reported frequency must also equal it exactly.
///
/// On a failure, `expected` is the bound (in ns) the clock's elapsed time broke and `observed`
/// the clock's elapsed time in ns.
pub fn clock_rate<C: Clock + ?Sized>(c: &C, host: &dyn HostClock, window_us: u64, expected_hz: Option<u64>) -> Outcome {
    const K: Check = Check::ClockRate;
    let f = c.freq_hz();
    if let Some(want) = expected_hz {
        expect(K, "freq_hz is the platform's documented frequency", want, f)?;
    }
    if f == 0 {
        return Err(Failure::new(K, "counter frequency is non-zero", 1, 0));
    }
    let h0 = host.now_ns();
    let t0 = c.now_ticks();
    let h0b = host.now_ns();
    host.sleep_us(window_us);
    let h1 = host.now_ns();
    let t1 = c.now_ticks();
    let h1b = host.now_ns();
    let clock_ns = ((t1.wrapping_sub(t0)) as u128 * 1_000_000_000 / f as u128) as u64;
    let slack = (2 * 1_000_000_000 / f).max(1) + 2_000;
    let lower = (h1.saturating_sub(h0b)) as u128 * (1_000_000 - CLOCK_RATE_TOLERANCE_PPM) as u128 / 1_000_000;
    let upper = (h1b.saturating_sub(h0)) as u128 * (1_000_000 + CLOCK_RATE_TOLERANCE_PPM) as u128 / 1_000_000;
    let lower = (lower as u64).saturating_sub(slack);
    let upper = upper as u64 + slack;
    if clock_ns < lower {
        return Err(Failure::new(
            K,
            "clock runs slow against the host (elapsed ns below the bracket)",
            lower,
            clock_ns,
        ));
    }
    if clock_ns > upper {
        return Err(Failure::new(
            K,
            "clock runs fast against the host (elapsed ns above the bracket)",
            upper,
            clock_ns,
        ));
    }
    Ok(())
}

/// Bounded waits: a passed deadline returns, a changed word returns, and waiting for an
/// unchanged word or for an event that never comes ends by its deadline (callers loop over
/// spurious returns, as runtime code does). "Returns promptly" and "overshoot" are bounded by
/// one second of the agent's clock. Uses the word at byte `1152` of `scratch`.
pub fn events<E: Events + Clock + GmAtomic + ?Sized>(e: &E, scratch: GmAddr) -> Outcome {
    const K: Check = Check::Events;
    let word = scratch.offset(1152);
    let second = e.freq_hz();
    let elapsed_since = |t0: Ticks| e.now_ticks().wrapping_sub(t0);

    e.send_event();
    let t0 = e.now_ticks();
    e.wait_for_event(t0);
    if elapsed_since(t0) > second {
        return Err(Failure::new(
            K,
            "wait_for_event with a passed deadline returns within 1 s (ticks)",
            second,
            elapsed_since(t0),
        ));
    }
    e.store_direct(word, 41);
    let t0 = e.now_ticks();
    e.wait_for_word(word, 40, t0.saturating_add(60 * second));
    if elapsed_since(t0) > second {
        return Err(Failure::new(
            K,
            "wait_for_word on a changed word returns within 1 s (ticks)",
            second,
            elapsed_since(t0),
        ));
    }
    for (what, by_word) in
        [("wait_for_word ends by its deadline (+1 s)", true), ("wait_for_event ends by its deadline (+1 s)", false)]
    {
        let t0 = e.now_ticks();
        let deadline = t0.saturating_add(e.ticks_from_micros(2_000));
        loop {
            if by_word {
                e.wait_for_word(word, 41, deadline);
            } else {
                e.wait_for_event(deadline);
            }
            let now = e.now_ticks();
            if now > deadline.saturating_add(second) {
                return Err(Failure::new(K, what, deadline.saturating_add(second), now));
            }
            if now >= deadline {
                break;
            }
        }
    }
    expect(K, "waits leave the word", 41, e.query(word))
}
