//! The a5 AICPU agent over heap buffers standing in for GM and for the cores' register
//! windows.
//!
//! The portable parts (GM atomics and copies, register windows, empty cache maintenance) run on
//! every host. The aarch64 parts — barriers, the generic timer and the whole conformance suite —
//! run on an emulated CPU: `cargo test -p pto-a5 --target aarch64-unknown-linux-gnu` (runner in
//! `.cargo/config.toml`).

use pto_a5::{A5Aicpu, COND_OFFSET, DMB_OFFSET, GmRegion, REG_WINDOW_BYTES};
use pto_hal::{AicpuCache, GmAddr, GmAtomic, GmMemory, HostCoherent, Reg, Registers};
use pto_target_harness::mem::{Arena, Recorder, Windows, r, w};

const GM_BYTES: usize = 64 * 1024;
const CORES: usize = 3;
const IDLE: u32 = 0x7FFF_FFFD;

/// GM, register windows (core 2 has none), and agents over them.
struct Rig {
    gm: Arena,
    win: Windows,
}

impl Rig {
    fn new() -> Rig {
        Rig { gm: Arena::new(GM_BYTES, 64), win: Windows::new(CORES, REG_WINDOW_BYTES, Some(2)) }
    }
    fn agent(&self) -> A5Aicpu<'_, Recorder> {
        let region = GmRegion::new(self.gm.addr(), self.gm.len()).unwrap();
        // SAFETY: the GM arena and the window arenas are live, zeroed heap buffers owned by the
        // rig, which outlives the agent (it borrows the rig's base table); they are reached only
        // through agents and the harness's volatile reads. Windows are REG_WINDOW_BYTES long.
        unsafe { A5Aicpu::with_observer(region, &self.win.bases, Recorder::default()) }
    }
    fn scratch(&self) -> GmAddr {
        self.gm.addr()
    }
}

fn assert_coherent<A: AicpuCache<Contract = HostCoherent>>(_: &A) {}

#[test]
fn conformance_portable_parts() {
    let rig = Rig::new();
    let a = rig.agent();
    let s = rig.scratch();
    pto_conformance::gm_atomic(&a, s).unwrap();
    pto_conformance::gm_atomic_writes(&a, s, &|| a.observer().stores()).unwrap();
    pto_conformance::hal_default_rmw_writes(&a, s).unwrap();
    pto_conformance::gm_memory(&a, s).unwrap();
    pto_conformance::registers(&a, 1).unwrap();
    pto_conformance::cache_ranges(&a, s).unwrap();
    pto_conformance::gm_coherence_aicpu(&a, s).unwrap();
    // `cache_lines` and `cache_invalidate_all` are AICore checks: an AICPU agent has no line or
    // whole-cache maintenance (see `the_aicpu_agent_has_no_aicore_cache_operations`).
}

/// An AICPU thread has no line maintenance and no whole-cache maintenance: the a5 AICPU agent is
/// not an `AicoreCache`, on any target — checked at compile time.
#[test]
fn the_aicpu_agent_has_no_aicore_cache_operations() {
    pto_target_harness::assert_not_impl!(A5Aicpu<'static, Recorder>, pto_hal::AicoreCache);
    pto_target_harness::assert_not_impl!(A5Aicpu<'static>, pto_hal::AicoreCache);
}

#[test]
fn window_open_is_dmb_idle_and_close_reads_dmb_back() {
    let rig = Rig::new();
    let a = rig.agent();
    a.open_window(1, IDLE);
    assert_eq!(a.observer().take_mmio(), [w(1, DMB_OFFSET, IDLE)], "a5 has no fast path: open = DMB := idle");
    a.write_reg(1, Reg::Dmb, 9);
    a.observer().take_mmio();
    a.close_window(1, IDLE);
    assert_eq!(
        a.observer().take_mmio(),
        [w(1, DMB_OFFSET, IDLE), r(1, DMB_OFFSET, IDLE)],
        "close = DMB := idle, then a read-back of DMB (same 4 KiB granule; COND is not)"
    );
    assert_eq!(rig.win.arenas[1].word32(DMB_OFFSET as usize), IDLE);
    assert_eq!(DMB_OFFSET / 4096, 0, "DMB and its read-back share the window's first granule");
}

#[test]
fn registers_use_the_chip_offsets() {
    let rig = Rig::new();
    let a = rig.agent();
    a.write_reg(0, Reg::Cond, 0xFFFF_FFFF);
    assert_eq!(rig.win.arenas[0].word32(COND_OFFSET as usize), 0xFFFF_FFFF);
    assert_eq!(a.read_reg(0, Reg::Cond), 0xFFFF_FFFF);
    assert_eq!(a.observer().take_mmio(), [w(0, COND_OFFSET, 0xFFFF_FFFF), r(0, COND_OFFSET, 0xFFFF_FFFF)]);
    assert_eq!(a.cores(), CORES as u32);
}

#[test]
fn cache_maintenance_is_empty() {
    let rig = Rig::new();
    let a = rig.agent();
    assert_coherent(&a);
    // Empty operations touch nothing: not even addresses outside GM fault, nothing is observed.
    for addr in [GmAddr(8), GmAddr(1 << 62), rig.gm.addr().offset(3)] {
        a.invalidate_range(addr, 1 << 40);
        a.flush_range(addr, 100);
        a.invalidate_range(addr, 0);
        a.flush_range(addr, 0);
    }
    assert_eq!(a.observer().stores(), 0);
    assert!(a.observer().take_mmio().is_empty());
}

#[test]
#[should_panic(expected = "has no register window")]
fn a_core_without_a_window_is_a_fault() {
    let rig = Rig::new();
    rig.agent().read_reg(2, Reg::Dmb);
}

#[test]
#[should_panic(expected = "outside the mapped GM region")]
fn gm_access_outside_the_region_is_a_fault() {
    let rig = Rig::new();
    rig.agent().write(rig.gm.addr().offset(GM_BYTES as u64), &[1]);
}

#[test]
#[should_panic(expected = "misaligned AICPU GM access")]
fn misaligned_u32_store_is_a_fault() {
    let rig = Rig::new();
    rig.agent().store_direct_u32(rig.gm.addr().offset(2), 1);
}

/// Everything below needs the aarch64 instructions.
#[cfg(target_arch = "aarch64")]
mod aarch64 {
    use std::time::Instant;

    use embedded_hal::delay::DelayNs;
    use pto_conformance::{Check, Status, StdHostClock, Target};
    use pto_hal::{AicpuAgent, Clock};

    use super::*;
    use pto_a5::GenericTimer;

    fn assert_aicpu_agent<A: AicpuAgent>(_: &A) {}

    #[test]
    fn the_whole_conformance_suite() {
        let rig = Rig::new();
        let a = rig.agent();
        assert_aicpu_agent(&a);
        let host = StdHostClock::new();
        let stores = || a.observer().stores();
        let mut t = Target::new(rig.scratch());
        t.registers = Some((&a as &dyn Registers, 1));
        t.writes = Some(&stores);
        t.host_clock = Some(&host);
        let start = Instant::now();
        let report = pto_conformance::run_aicpu(&a, &t).unwrap_or_else(|f| panic!("{f}"));
        println!("a5 AICPU agent under qemu ({:?}, counter {} Hz):\n{report}", start.elapsed(), a.freq_hz());
        for c in Check::ALL {
            // The AICore cache checks and register check; and a5 maintains nothing, so it has no
            // lines to report.
            let want_skip = matches!(
                c,
                Check::GmCoherenceAicore
                    | Check::CacheLines
                    | Check::CacheInvalidateAll
                    | Check::CoreRegistersReset
                    | Check::RangeLines
            );
            let two_party = matches!(c, Check::HandoffRegister | Check::HandoffGmFlag);
            match report.status(c) {
                Status::Passed => assert!(!want_skip && !two_party, "{c} should not have run"),
                Status::Skipped(_) => assert!(want_skip, "{c} skipped"),
                Status::NotRun => assert!(two_party, "{c} not run"),
            }
        }
    }

    #[test]
    fn handoff_through_a_register_on_two_threads() {
        let rig = Rig::new();
        pto_target_harness::mem::handoff_pair(
            &rig.agent(),
            &rig.agent(),
            rig.gm.addr().offset(8192),
            1,
            false,
            "register",
        );
    }

    #[test]
    fn handoff_through_a_gm_flag_on_two_threads() {
        let rig = Rig::new();
        pto_target_harness::mem::handoff_pair(
            &rig.agent(),
            &rig.agent(),
            rig.gm.addr().offset(16384),
            0,
            true,
            "GM-flag",
        );
    }

    #[test]
    fn generic_timer_is_the_agents_clock_and_delays_at_least_as_asked() {
        let rig = Rig::new();
        let a = rig.agent();
        let mut t = GenericTimer;
        assert_eq!(a.freq_hz(), t.freq_hz());
        let start = Instant::now();
        t.delay_us(2_500);
        assert!(start.elapsed().as_micros() >= 2_500, "delay returned early: {:?}", start.elapsed());
    }
}
