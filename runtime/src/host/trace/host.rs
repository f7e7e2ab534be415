//! The host's phases of a run on the device's time axis.
//!
//! The host times its phases with its monotonic clock ([`Instant`]); the device stamps its
//! records with its counter. To put both on one axis the host samples the device counter
//! ([`Clock::now_ticks`]) together with an `Instant` twice: just before it submits the
//! programs (the launch anchor) and just after the fence saw both end (the fence anchor).
//! Every host instant maps linearly through those two points (by the counter frequency when
//! there is only one), so the device's records lie between the two anchors on the same axis.
//!
//! On a seeded schedule the counter is virtual ([`Clock::is_virtual`]): it moves only while
//! the host drives the device, so no host instant maps onto it, and any mapping would make the
//! trace depend on wall time. There the host's phases are left out of the trace (the device's
//! records alone make it, byte for byte the same on every run of the seed); `pto run -v` still
//! prints them with their wall-clock times (`docs/profiling.md`, "Seeded schedules").

use std::time::Instant;
use std::vec::Vec;

use pto_hal::Clock;

use super::{HostPhase, HostPhaseTrace, Trace};

/// Most in-flight args-dump drains kept per run (only drains that took something count); past
/// it the drains are counted in the last one kept.
const MAX_DRAINS: usize = 4096;

/// A run's host phases as the host timed them, and the anchors that map them onto the device's
/// ticks. Carried from the run's preparation to its fence.
#[derive(Debug, Default)]
pub(in crate::host) struct HostTimeline {
    phases: Vec<(HostPhase, Instant, Instant)>,
    /// `(host instant, device tick)` samples: at launch, and after the fence.
    anchors: Vec<(Instant, u64)>,
    /// An anchor read a virtual counter (a seeded schedule): the phases map onto no ticks.
    virtual_clock: bool,
}

impl HostTimeline {
    /// Record that the host spent `start..end` in `phase`.
    pub(in crate::host) fn record(&mut self, phase: HostPhase, start: Instant, end: Instant) {
        if phase == HostPhase::DumpDrain && self.phases.len() >= MAX_DRAINS {
            if let Some(last) = self.phases.iter_mut().rev().find(|p| p.0 == HostPhase::DumpDrain) {
                last.2 = end;
            }
            return;
        }
        self.phases.push((phase, start, end));
    }

    /// Record `phase` from `start` until now.
    pub(in crate::host) fn until_now(&mut self, phase: HostPhase, start: Instant) {
        self.record(phase, start, Instant::now());
    }

    /// Sample the device counter with the host's clock (the instant half-way through the read).
    pub(in crate::host) fn anchor(&mut self, clock: &impl Clock) {
        let before = Instant::now();
        let tick = clock.now_ticks();
        let after = Instant::now();
        self.virtual_clock |= clock.is_virtual();
        self.anchors.push((before + (after - before) / 2, tick));
    }

    /// The recorded phases mapped onto device ticks, by start: linearly through the first and
    /// the last anchor (ticks per second measured between them), or through the only anchor at
    /// `freq_hz`; nothing without an anchor, or when an anchor read a virtual counter.
    pub(in crate::host) fn to_ticks(&self, freq_hz: u64) -> Vec<HostPhaseTrace> {
        if self.virtual_clock {
            return Vec::new();
        }
        let (Some(&(i0, t0)), Some(&(i1, t1))) = (self.anchors.first(), self.anchors.last()) else {
            return Vec::new();
        };
        let secs = (i1 - i0).as_secs_f64();
        let rate = if secs > 0.0 && t1 > t0 { (t1 - t0) as f64 / secs } else { freq_hz as f64 };
        let map = |i: Instant| -> u64 {
            let dt = if i >= i0 { (i - i0).as_secs_f64() } else { -(i0 - i).as_secs_f64() };
            (t0 as f64 + dt * rate).round().max(0.0) as u64
        };
        let mut v: Vec<HostPhaseTrace> = self
            .phases
            .iter()
            .map(|&(phase, s, e)| HostPhaseTrace { phase, start: map(s), end: map(e.max(s)) })
            .collect();
        v.sort_by_key(|h| (h.start, h.phase));
        v
    }

    /// Put the host phases into `trace`.
    pub(in crate::host) fn attach(&self, trace: &mut Trace) {
        trace.host = self.to_ticks(trace.freq_hz);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    struct At(u64);
    impl Clock for At {
        fn now_ticks(&self) -> pto_hal::Ticks {
            self.0
        }
        fn freq_hz(&self) -> u64 {
            1_000_000
        }
    }

    #[test]
    fn phases_map_linearly_through_the_anchors() {
        let mut tl = HostTimeline::default();
        tl.anchor(&At(1_000));
        let i0 = tl.anchors[0].0;
        // The second anchor 1 s later reads 2_000_000 ticks more: 2 MHz measured.
        tl.anchors.push((i0 + Duration::from_secs(1), 2_001_000));
        tl.record(HostPhase::Publish, i0 - Duration::from_micros(100), i0);
        tl.record(HostPhase::Fence, i0 + Duration::from_millis(500), i0 + Duration::from_secs(1));
        let v = tl.to_ticks(1_000_000);
        assert_eq!(v[0], HostPhaseTrace { phase: HostPhase::Publish, start: 800, end: 1_000 });
        assert_eq!(v[1], HostPhaseTrace { phase: HostPhase::Fence, start: 1_001_000, end: 2_001_000 });
        // Before the counter's zero, a phase starts at tick 0.
        tl.record(HostPhase::Build, i0 - Duration::from_secs(1), i0 - Duration::from_secs(1));
        assert_eq!(tl.to_ticks(1_000_000)[0], HostPhaseTrace { phase: HostPhase::Build, start: 0, end: 0 });
        assert!(HostTimeline::default().to_ticks(1).is_empty(), "no anchor, no axis");
    }

    #[test]
    fn a_virtual_counter_maps_no_host_phase() {
        struct Virtual;
        impl Clock for Virtual {
            fn now_ticks(&self) -> pto_hal::Ticks {
                7
            }
            fn freq_hz(&self) -> u64 {
                1_000_000
            }
            fn is_virtual(&self) -> bool {
                true
            }
        }
        let mut tl = HostTimeline::default();
        tl.anchor(&Virtual);
        let i = tl.anchors[0].0;
        tl.record(HostPhase::Fence, i, i + Duration::from_millis(1));
        assert!(tl.to_ticks(1_000_000).is_empty(), "wall time has no place on a virtual axis");
    }

    #[test]
    fn drains_past_the_cap_extend_the_last_one() {
        let mut tl = HostTimeline::default();
        let i = Instant::now();
        for k in 0..MAX_DRAINS as u64 + 10 {
            tl.record(HostPhase::DumpDrain, i + Duration::from_micros(k), i + Duration::from_micros(k + 1));
        }
        assert_eq!(tl.phases.len(), MAX_DRAINS);
        assert_eq!(tl.phases.last().unwrap().2, i + Duration::from_micros(MAX_DRAINS as u64 + 10));
    }
}
