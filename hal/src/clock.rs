//! Device time.

/// A count of device counter ticks.
pub type Ticks = u64;

/// A monotonic device counter and its frequency. Watchdog budgets are expressed in ticks.
///
/// Tier: host (sim only), AICPU, AICore. a2a3 counts at 50 MHz, a5 at 1 GHz.
pub trait Clock {
    /// The current counter value. Never decreases.
    fn now_ticks(&self) -> Ticks;
    /// Counter frequency in Hz.
    fn freq_hz(&self) -> u64;

    /// `micros` microseconds as ticks of this clock (saturating).
    ///
    /// ```
    /// # use pto_hal::{Clock, Ticks};
    /// struct Fifty;
    /// impl Clock for Fifty {
    ///     fn now_ticks(&self) -> Ticks { 0 }
    ///     fn freq_hz(&self) -> u64 { 50_000_000 }
    /// }
    /// assert_eq!(Fifty.ticks_from_micros(1_000), 50_000);
    /// ```
    fn ticks_from_micros(&self, micros: u64) -> Ticks {
        ((micros as u128 * self.freq_hz() as u128) / 1_000_000).min(u64::MAX as u128) as u64
    }

    /// `ticks` of this clock as microseconds.
    fn micros_from_ticks(&self, ticks: Ticks) -> u64 {
        ((ticks as u128 * 1_000_000) / self.freq_hz().max(1) as u128) as u64
    }

    /// `ticks` of this clock as nanoseconds (saturating).
    ///
    /// ```
    /// # use pto_hal::{Clock, Ticks};
    /// struct Fifty;
    /// impl Clock for Fifty {
    ///     fn now_ticks(&self) -> Ticks { 0 }
    ///     fn freq_hz(&self) -> u64 { 50_000_000 }
    /// }
    /// assert_eq!(Fifty.nanos_from_ticks(3), 60);
    /// ```
    fn nanos_from_ticks(&self, ticks: Ticks) -> u64 {
        ((ticks as u128 * 1_000_000_000) / self.freq_hz().max(1) as u128).min(u64::MAX as u128) as u64
    }

    /// A deadline `micros` from now.
    fn deadline_after_micros(&self, micros: u64) -> Ticks {
        self.now_ticks().saturating_add(self.ticks_from_micros(micros))
    }

    /// Whether the counter is a virtual clock that wall time does not move (a simulator's
    /// seeded schedule, whose device runs only while the host waits for it): no host instant
    /// maps onto it. `false` by default: a chip's counter, or a free-running simulator's.
    fn is_virtual(&self) -> bool {
        false
    }
}
