//! The a2a3 AICPU agent over heap buffers standing in for GM and for the cores' register
//! windows.
//!
//! The portable parts (GM atomics and copies, register windows, line arithmetic) run on every
//! host. The aarch64 parts — barriers, `dc civac` / `dc cvac` loops, `CTR_EL0`, the generic
//! timer and the whole conformance suite — run on an emulated CPU:
//! `cargo test -p pto-a2a3 --target aarch64-unknown-linux-gnu` (runner in `.cargo/config.toml`).

use pto_a2a3::{A2a3Aicpu, COND_OFFSET, DMB_OFFSET, FAST_PATH_OFFSET, GmRegion, MaintenanceLines, REG_WINDOW_BYTES};
use pto_hal::{GmAddr, GmAtomic, GmMemory, LINE_BYTES, Reg, Registers, line_span};
use pto_target_harness::mem::{Arena, Recorder, Windows, r, w};

const GM_BYTES: usize = 64 * 1024;
const CORES: usize = 4;
const IDLE: u32 = 0x7FFF_FFFD;

/// GM, register windows (core 3 has none), and agents over them.
struct Rig {
    gm: Arena,
    win: Windows,
}

impl Rig {
    fn new() -> Rig {
        Rig { gm: Arena::new(GM_BYTES, 64), win: Windows::new(CORES, REG_WINDOW_BYTES, Some(3)) }
    }
    fn region(&self) -> GmRegion {
        GmRegion::new(self.gm.addr(), self.gm.len()).unwrap()
    }
    fn agent(&self) -> A2a3Aicpu<'_, Recorder> {
        // SAFETY: the GM arena and the window arenas are live, zeroed heap buffers owned by the
        // rig, which outlives the agent (it borrows the rig's base table); they are reached only
        // through agents and the harness's volatile reads. Windows are REG_WINDOW_BYTES long.
        unsafe { A2a3Aicpu::with_observer(self.region(), &self.win.bases, Recorder::default()) }
    }
    /// The scratch the conformance suite uses: the start of GM.
    fn scratch(&self) -> GmAddr {
        self.gm.addr()
    }
}

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
    pto_conformance::range_lines(s, &|addr, len, f| a.maintenance_lines(addr, len).for_each(&mut *f)).unwrap();
}

/// An AICPU thread has no line maintenance and no whole-cache maintenance (`invalidate_all` needs
/// set/way operations, which EL0 cannot issue): the a2a3 AICPU agent is not an `AicoreCache`, on
/// any target — checked at compile time.
#[test]
fn the_aicpu_agent_has_no_aicore_cache_operations() {
    pto_target_harness::assert_not_impl!(A2a3Aicpu<'static, Recorder>, pto_hal::AicoreCache);
    pto_target_harness::assert_not_impl!(A2a3Aicpu<'static>, pto_hal::AicoreCache);
}

#[test]
fn window_open_and_close_write_the_documented_values_in_order_and_close_reads_back() {
    let rig = Rig::new();
    let a = rig.agent();
    a.open_window(2, IDLE);
    assert_eq!(a.observer().take_mmio(), [w(2, FAST_PATH_OFFSET, 0xE), w(2, DMB_OFFSET, IDLE)]);
    assert_eq!(rig.win.arenas[2].word32(FAST_PATH_OFFSET as usize), 0xE);
    assert_eq!(rig.win.arenas[2].word32(DMB_OFFSET as usize), IDLE);

    a.write_reg(2, Reg::Dmb, 7);
    assert_eq!(a.read_reg(2, Reg::Dmb), 7);
    a.observer().take_mmio();

    a.close_window(2, IDLE);
    assert_eq!(
        a.observer().take_mmio(),
        [w(2, DMB_OFFSET, IDLE), w(2, FAST_PATH_OFFSET, 0xF), r(2, FAST_PATH_OFFSET, 0xF)],
        "close = DMB := idle, FAST_PATH := close, then a read-back of FAST_PATH (same window)"
    );
    assert_eq!(rig.win.arenas[2].word32(FAST_PATH_OFFSET as usize), 0xF);
    assert_eq!(rig.win.arenas[2].word32(DMB_OFFSET as usize), IDLE);
    // Other cores' windows are untouched.
    assert_eq!(rig.win.arenas[1].word32(FAST_PATH_OFFSET as usize), 0);
}

#[test]
fn registers_use_the_chip_offsets() {
    let rig = Rig::new();
    let a = rig.agent();
    a.write_reg(0, Reg::Cond, 0xFFFF_FFFE);
    assert_eq!(rig.win.arenas[0].word32(COND_OFFSET as usize), 0xFFFF_FFFE);
    assert_eq!(a.read_reg(0, Reg::Cond), 0xFFFF_FFFE);
    a.write_reg(1, Reg::Dmb, 0x1234);
    assert_eq!(rig.win.arenas[1].word32(DMB_OFFSET as usize), 0x1234);
    assert_eq!(
        a.observer().take_mmio(),
        [w(0, COND_OFFSET, 0xFFFF_FFFE), r(0, COND_OFFSET, 0xFFFF_FFFE), w(1, DMB_OFFSET, 0x1234)]
    );
    assert_eq!(a.cores(), CORES as u32);
}

#[test]
#[should_panic(expected = "has no register window")]
fn a_core_without_a_window_is_a_fault() {
    let rig = Rig::new();
    rig.agent().read_reg(3, Reg::Cond);
}

#[test]
#[should_panic(expected = "no register window for core")]
fn a_core_beyond_the_table_is_a_fault() {
    let rig = Rig::new();
    rig.agent().write_reg(CORES as u32, Reg::Dmb, 1);
}

#[test]
#[should_panic(expected = "outside the mapped GM region")]
fn gm_access_outside_the_region_is_a_fault() {
    let rig = Rig::new();
    let a = rig.agent();
    let mut b = [0u8; 16];
    a.read(rig.gm.addr().offset(GM_BYTES as u64 - 8), &mut b);
}

#[test]
#[should_panic(expected = "outside the mapped GM region")]
fn atomic_outside_the_region_is_a_fault() {
    let rig = Rig::new();
    rig.agent().query(GmAddr(rig.gm.addr().0 - 64));
}

#[test]
#[should_panic(expected = "misaligned AICPU GM access")]
fn misaligned_atomic_is_a_fault() {
    let rig = Rig::new();
    rig.agent().swap(rig.gm.addr().offset(4), 1);
}

#[test]
fn gm_region_rejects_null_empty_and_wrapping_ranges() {
    assert!(GmRegion::new(GmAddr::NULL, 64).is_none());
    assert!(GmRegion::new(GmAddr(0x1000), 0).is_none());
    assert!(GmRegion::new(GmAddr(u64::MAX - 8), 64).is_none());
    let r = GmRegion::new(GmAddr(0x1000), 0x100).unwrap();
    assert!(r.contains(GmAddr(0x1000), 0x100));
    assert!(r.contains(GmAddr(0x1100), 0));
    assert!(!r.contains(GmAddr(0x10FF), 2));
    assert!(!r.contains(GmAddr(0xFFF), 1));
}

#[test]
fn maintenance_lines_round_out_to_whole_lines() {
    // 64-byte lines: exactly line_span.
    for (addr, len) in [(0x1000u64, 0u64), (0x1003, 1), (0x1003, 0x7E), (0x103F, 2), (0x1040, 0x40), (0x1001, 0x1000)] {
        let (first, n) = line_span(GmAddr(addr), len);
        let got: Vec<u64> = MaintenanceLines::new(GmAddr(addr), len, 64).map(|l| l.0).collect();
        let want: Vec<u64> = (0..n).map(|i| first.0 + i * LINE_BYTES).collect();
        assert_eq!(got, want, "range {addr:#x}+{len}");
        assert_eq!(MaintenanceLines::new(GmAddr(addr), len, 64).len() as u64, n);
    }
    // Other line sizes still cover every byte, and nothing beyond the rounded-out range.
    for line in [32u64, 128, 256] {
        let (addr, len) = (0x1003u64, 0x17Eu64);
        let lines: Vec<u64> = MaintenanceLines::new(GmAddr(addr), len, line).map(|l| l.0).collect();
        assert_eq!(lines[0], addr & !(line - 1));
        assert!(lines.windows(2).all(|p| p[1] == p[0] + line));
        assert!(*lines.last().unwrap() + line >= addr + len);
        assert!(*lines.last().unwrap() < addr + len);
    }
}

/// Everything below needs the aarch64 instructions.
#[cfg(target_arch = "aarch64")]
mod aarch64 {
    use std::time::Instant;

    use embedded_hal::delay::DelayNs;
    use pto_conformance::{Check, Status, StdHostClock, Target};
    use pto_hal::{AicpuAgent, AicpuCache, Clock, GmMemory, HostNonCoherent};

    use super::*;
    use pto_a2a3::GenericTimer;

    fn assert_aicpu_agent<A: AicpuAgent + AicpuCache<Contract = HostNonCoherent>>(_: &A) {}

    #[test]
    fn ctr_el0_reports_64_byte_lines_under_the_chosen_cpu() {
        let rig = Rig::new();
        let a = rig.agent();
        assert_aicpu_agent(&a);
        assert_eq!(a.line_bytes(), 64, "qemu -cpu must report CTR_EL0.DminLine = 4 (see .cargo/config.toml)");
    }

    #[test]
    fn the_whole_conformance_suite() {
        let rig = Rig::new();
        let a = rig.agent();
        let host = StdHostClock::new();
        let stores = || a.observer().stores();
        let lines = |addr: GmAddr, len: u64, f: &mut dyn FnMut(GmAddr)| a.maintenance_lines(addr, len).for_each(f);
        let mut t = Target::new(rig.scratch());
        t.registers = Some((&a as &dyn Registers, 1));
        t.writes = Some(&stores);
        t.range_lines = Some(&lines);
        t.host_clock = Some(&host);
        let start = Instant::now();
        let report = pto_conformance::run_aicpu(&a, &t).unwrap_or_else(|f| panic!("{f}"));
        println!("a2a3 AICPU agent under qemu ({:?}, counter {} Hz):\n{report}", start.elapsed(), a.freq_hz());
        for c in Check::ALL {
            // The AICore cache checks (the agent has no line or whole-cache maintenance) and the
            // AICore register check.
            let want_skip = matches!(
                c,
                Check::GmCoherenceAicore | Check::CacheLines | Check::CacheInvalidateAll | Check::CoreRegistersReset
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
    fn dc_maintenance_runs_on_every_line_of_unaligned_ranges_and_keeps_data() {
        let rig = Rig::new();
        let a = rig.agent();
        let base = rig.gm.addr();
        let pattern: Vec<u8> = (0..GM_BYTES).map(|i| (i * 31 + 7) as u8).collect();
        a.write(base, &pattern);
        // Unaligned ranges, including the region's first and last bytes and the whole region.
        let end = GM_BYTES as u64;
        for (off, len) in [(0, 1), (3, 190), (63, 2), (4097, 8191), (end - 1, 1), (end - 100, 100), (0, end)] {
            let (first, n) = line_span(base.offset(off), len);
            let lines: Vec<GmAddr> = a.maintenance_lines(base.offset(off), len).collect();
            assert_eq!(lines.len() as u64, n);
            assert_eq!(lines.first().copied(), (n > 0).then_some(first));
            a.flush_range(base.offset(off), len);
            a.invalidate_range(base.offset(off), len);
        }
        let mut back = vec![0u8; GM_BYTES];
        a.read(base, &mut back);
        assert!(back == pattern, "maintenance changed data");
    }

    #[test]
    #[should_panic(expected = "outside the mapped GM region")]
    fn maintenance_outside_the_region_is_a_fault() {
        let rig = Rig::new();
        rig.agent().invalidate_range(rig.gm.addr().offset(GM_BYTES as u64 - 4), 8);
    }

    #[test]
    fn handoff_through_a_register_on_two_threads() {
        let rig = Rig::new();
        pto_target_harness::mem::handoff_pair(
            &rig.agent(),
            &rig.agent(),
            rig.gm.addr().offset(8192),
            2,
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
        let t0 = a.now_ticks();
        assert!(t.now_ticks() >= t0);
        let start = Instant::now();
        t.delay_ms(5);
        t.delay_us(300);
        t.delay_ns(1);
        assert!(start.elapsed().as_micros() >= 5_300, "delay returned early: {:?}", start.elapsed());
    }
}
