//! The runtime on the real a5 AICPU agent, on the target instruction set.
//!
//! Under `cargo test -p pto-a5 --target aarch64-unknown-linux-gnu` (qemu user mode, see
//! `.cargo/config.toml`), the runtime's real AICPU programs —
//! `pto_runtime::hbg::aicpu::aicpu_entry::<A5Aicpu>` (host-built graph) and
//! `pto_runtime::trb::aicpu_entry::<A5Aicpu>` (device-side runtime) — run on AICPU threads
//! built as `A5Aicpu` over GM in process memory and register windows as plain memory, with
//! the real barriers and counter (a5 AICPU cache maintenance is empty: host-coherent). AICores are threads
//! running the runtime's legacy executor (`pto_runtime::exec::entry::aicore_entry`) over the
//! harness's AICore agent. The host side is the runtime's own (`Device::new_in_process` over
//! `pto_target_harness::platform::OnTarget`). Workloads: `vector` and `chain513`, both
//! runtimes, against host goldens. The device half logs with defmt into a GM log ring
//! (`pto_aarch64::devlog`) that the test drains and decodes with `defmt-decoder` against this
//! executable's own `.defmt` table (`pto_target_harness::devlog`), and checks what was logged.
//! On other targets this file is empty: there is no a5 AICPU that is not aarch64.
#![cfg(target_arch = "aarch64")]

use pto_a5::{A5Aicpu, GmRegion};
use pto_target_harness::devlog;
use pto_target_harness::platform::Chip;
use pto_target_harness::workloads::{dump_chain513, run_all, small_topology};

/// The a5 chip as the harness needs it.
struct A5;

impl Chip for A5 {
    const NAME: &'static str = "a5";
    const DMB_OFFSET: u32 = pto_a5::DMB_OFFSET;
    const COND_OFFSET: u32 = pto_a5::COND_OFFSET;
    const REG_WINDOW_BYTES: u32 = pto_a5::REG_WINDOW_BYTES;
    type Contract = pto_a5::Contract;
    type Aicpu = A5Aicpu<'static>;
    unsafe fn aicpu(gm: GmRegion, windows: &'static [u64]) -> A5Aicpu<'static> {
        // SAFETY: the caller upholds `Chip::aicpu`'s contract, which is `A5Aicpu::new`'s.
        unsafe { A5Aicpu::new(gm, windows) }
    }
}

/// The device log is one ring for the process: the tests that run the device take turns, so
/// each one's log holds its own runs only.
fn one_at_a_time() -> parking_lot::MutexGuard<'static, ()> {
    static DEVICE: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    DEVICE.lock()
}

/// The runtime's AICPU programs, instantiated for the real agent, are what the harness
/// installs under the runtime's names.
#[test]
fn the_installed_programs_are_the_runtimes_entries_for_the_real_agent() {
    let programs = pto_runtime::programs::aicpu_programs::<A5Aicpu<'static>>();
    let hbg: pto_hal::AicpuEntry<A5Aicpu<'static>> = pto_runtime::hbg::aicpu::aicpu_entry::<A5Aicpu<'static>>;
    let trb: pto_hal::AicpuEntry<A5Aicpu<'static>> = pto_runtime::trb::aicpu_entry::<A5Aicpu<'static>>;
    assert_eq!(programs[0].0, pto_runtime::programs::HBG_AICPU);
    assert_eq!(programs[1].0, pto_runtime::programs::TRB_AICPU);
    assert!(std::ptr::fn_addr_eq(programs[0].1, hbg) && std::ptr::fn_addr_eq(programs[1].1, trb));
}

/// 2 clusters (6 cores), 2 AICPU threads: on the device-side runtime, 1 orchestrator and 1
/// scheduler; on the host-built graph, 2 schedulers.
///
/// The device log of those runs, decoded on the host side: every core's handshake in every
/// run, every core released in every run, no fault; and the host's installation of the
/// runtime's device programs.
#[test]
fn vector_and_chain513_on_both_runtimes() {
    let _one = one_at_a_time();
    /// `run_all`: `vector` and `chain513`, each on both runtimes.
    const RUNS: u32 = 4;
    let topology = small_topology(2);
    // Install the ring before the device's first frame, and start from an empty one.
    devlog::take().unwrap_or_else(|e| panic!("a5 device log: {e}"));
    run_all::<A5>(topology);
    let log = devlog::take().unwrap_or_else(|e| panic!("a5 device log: {e}"));
    println!("a5 device log: {} lines in {} bytes, e.g.", log.lines.len(), log.bytes);
    for l in log.starting_with("retire:").take(3) {
        println!("  {l}");
    }
    devlog::check_clean_runs(&log, topology.workers(), RUNS).unwrap_or_else(|e| panic!("a5 device log: {e}"));
    for program in [pto_runtime::programs::HBG_AICPU, pto_runtime::programs::TRB_AICPU] {
        let want = format!("installed AICPU program {program}");
        assert!(log.starting_with(&want).count() > 0, "a5 device log: no `{want}`");
    }
}

/// The args dump on the real a5 AICPU agent: `chain513` at `Full` on both runtimes, every
/// payload checked against the golden (task k's output at completion is task k+1's input at
/// dispatch, bit for bit), accounting exact.
#[test]
fn chain513_args_dump_on_both_runtimes() {
    let _one = one_at_a_time();
    dump_chain513::<A5>(small_topology(3));
}
