//! The two entry points, one per tier: every single-agent check an agent of that tier supports.

use pto_hal::{AicoreCache, AicpuCache, Barriers, Clock, CoreRegisters, Events, GmAddr, GmAtomic, GmMemory, Registers};

use crate::{Check, Failure, HostClock, LinesOf, Report, Status};

/// Bytes of scratch GM the suite needs, 64-aligned and used by nothing else while it runs.
/// Its contents on entry do not matter.
pub const SCRATCH_BYTES: u64 = 4096;

/// What [`run_aicpu`] / [`run_aicore`] may use besides the agent, and what the platform can
/// report. The tier is the entry point's, not a field: an agent only has its own tier's cache
/// maintenance, so the type system picks the tier-specific checks.
#[derive(Copy, Clone)]
pub struct Target<'a> {
    /// [`SCRATCH_BYTES`] of GM, 64-aligned, exclusive to the suite while it runs.
    pub scratch: GmAddr,
    /// AICPU register windows and a core no program runs on, for [`crate::registers`].
    pub registers: Option<(&'a dyn Registers, u32)>,
    /// The AICore's own registers at the start of its launch, for [`crate::core_registers_reset`].
    pub core_registers: Option<&'a dyn CoreRegisters>,
    /// The platform's running count of its `GmAtomic` stores, for [`crate::gm_atomic_writes`].
    pub writes: Option<&'a dyn Fn() -> u64>,
    /// The lines the platform's range operations maintain, for [`crate::range_lines`].
    pub range_lines: Option<&'a LinesOf<'a>>,
    /// A host time source, for [`crate::clock_rate`].
    pub host_clock: Option<&'a dyn HostClock>,
    /// The frequency the platform documents, checked by [`crate::clock_rate`] when set.
    pub expected_hz: Option<u64>,
}

impl core::fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Target")
            .field("scratch", &self.scratch)
            .field("registers", &self.registers.map(|(_, core)| core))
            .field("core_registers", &self.core_registers.is_some())
            .field("writes", &self.writes.is_some())
            .field("range_lines", &self.range_lines.is_some())
            .field("host_clock", &self.host_clock.is_some())
            .field("expected_hz", &self.expected_hz)
            .finish()
    }
}

impl<'a> Target<'a> {
    /// A target with only scratch memory: every optional check is skipped.
    pub fn new(scratch: GmAddr) -> Target<'a> {
        Target {
            scratch,
            registers: None,
            core_registers: None,
            writes: None,
            range_lines: None,
            host_clock: None,
            expected_hz: None,
        }
    }
}

/// The tier an agent belongs to, which decides its cache maintenance: [`AicpuCache`] or
/// [`AicoreCache`]. [`run_aicpu`] and [`run_aicore`] are the suite at each tier; runners that
/// handle both tiers (reporting, publishing results) can name the tier with it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Tier {
    /// An AICPU thread: range maintenance (`invalidate_range` / `flush_range`) only — no line
    /// ops and no whole-cache maintenance (none exists at EL0).
    Aicpu,
    /// An AICore: the line ops, their composites and `invalidate_all`; no range maintenance.
    Aicore,
}

/// Window of [`crate::clock_rate`] in the suite: 20 ms.
const RATE_WINDOW_US: u64 = 20_000;

/// Run every single-agent check an AICPU agent supports on `t`, in [`Check::ALL`] order, and
/// stop at the first failure. The report says which checks ran and why the others were
/// skipped — the AICore cache checks ([`Check::GmCoherenceAicore`], [`Check::CacheLines`],
/// [`Check::CacheInvalidateAll`]) always are; the two-party [`handoff`](crate::handoff) checks
/// are never run here (runners record them).
pub fn run_aicpu<A>(agent: &A, t: &Target<'_>) -> Result<Report, Failure>
where
    A: GmAtomic + GmMemory + AicpuCache + Barriers + Clock + Events + ?Sized,
{
    run_tier(agent, t, |r, s| {
        pass(r, Check::GmCoherenceAicpu, crate::gm_coherence_aicpu(agent, s))?;
        r.record(Check::GmCoherenceAicore, Status::Skipped("AICore check; this is an AICPU agent"));
        pass(r, Check::CacheRanges, crate::cache_ranges(agent, s))?;
        r.record(Check::CacheLines, Status::Skipped("line maintenance is an AICore operation (AicoreCache)"));
        r.record(Check::CacheInvalidateAll, Status::Skipped("whole-cache maintenance is an AICore operation"));
        Ok(())
    })
}

/// Run every single-agent check an AICore agent supports on `t`, in [`Check::ALL`] order, and
/// stop at the first failure. The AICPU cache checks ([`Check::GmCoherenceAicpu`],
/// [`Check::CacheRanges`]) are always skipped; see [`run_aicpu`] for the rest.
pub fn run_aicore<A>(agent: &A, t: &Target<'_>) -> Result<Report, Failure>
where
    A: GmAtomic + GmMemory + AicoreCache + Barriers + Clock + Events + ?Sized,
{
    run_tier(agent, t, |r, s| {
        r.record(Check::GmCoherenceAicpu, Status::Skipped("AICPU check; this is an AICore agent"));
        pass(r, Check::GmCoherenceAicore, crate::gm_coherence_aicore(agent, s))?;
        r.record(Check::CacheRanges, Status::Skipped("range maintenance is an AICPU operation (AicpuCache)"));
        pass(r, Check::CacheLines, crate::cache_lines(agent, s))?;
        pass(r, Check::CacheInvalidateAll, crate::cache_invalidate_all(agent, s))?;
        Ok(())
    })
}

/// The tier-independent checks around `tier_checks` (which runs or skips the checks from
/// [`Check::GmCoherenceAicpu`] to [`Check::CacheInvalidateAll`] on the scratch), in
/// [`Check::ALL`] order.
fn run_tier<A>(
    agent: &A,
    t: &Target<'_>,
    tier_checks: impl FnOnce(&mut Report, GmAddr) -> Result<(), Failure>,
) -> Result<Report, Failure>
where
    A: GmAtomic + GmMemory + Barriers + Clock + Events + ?Sized,
{
    if !t.scratch.is_aligned(64) || t.scratch.is_null() {
        return Err(Failure::new(Check::GmAtomic, "scratch is a non-null 64-aligned address", 0, t.scratch.0));
    }
    let s = t.scratch;
    let mut r = Report::new();
    pass(&mut r, Check::GmAtomic, crate::gm_atomic(agent, s))?;
    match t.writes {
        Some(w) => pass(&mut r, Check::RmwNoIdleWrites, crate::gm_atomic_writes(agent, s, w))?,
        None => r.record(Check::RmwNoIdleWrites, Status::Skipped("the platform cannot count its GmAtomic stores")),
    }
    pass(&mut r, Check::HalDefaultRmwWrites, crate::hal_default_rmw_writes(agent, s))?;
    pass(&mut r, Check::GmMemory, crate::gm_memory(agent, s))?;
    tier_checks(&mut r, s)?;
    match t.range_lines {
        Some(f) => pass(&mut r, Check::RangeLines, crate::range_lines(s, f))?,
        None => {
            r.record(Check::RangeLines, Status::Skipped("the platform cannot report the lines its range ops touch"))
        }
    }
    pass(&mut r, Check::Barriers, crate::barriers(agent))?;
    match t.registers {
        Some((regs, core)) => pass(&mut r, Check::Registers, crate::registers(regs, core))?,
        None => r.record(Check::Registers, Status::Skipped("no AICPU register window given")),
    }
    match t.core_registers {
        Some(regs) => pass(&mut r, Check::CoreRegistersReset, crate::core_registers_reset(regs))?,
        None => r.record(Check::CoreRegistersReset, Status::Skipped("no AICore registers given")),
    }
    pass(&mut r, Check::Clock, crate::clock(agent))?;
    match t.host_clock {
        Some(h) => pass(&mut r, Check::ClockRate, crate::clock_rate(agent, h, RATE_WINDOW_US, t.expected_hz))?,
        None => r.record(Check::ClockRate, Status::Skipped("no host time source")),
    }
    pass(&mut r, Check::Events, crate::events(agent, s))?;
    Ok(r)
}

fn pass(r: &mut Report, c: Check, out: crate::Outcome) -> Result<(), Failure> {
    out?;
    r.record(c, Status::Passed);
    Ok(())
}
