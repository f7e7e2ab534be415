//! The runtime on the real a2a3 AICPU agent, on the target instruction set.
//!
//! Under `cargo test -p pto-a2a3 --target aarch64-unknown-linux-gnu` (qemu user mode, see
//! `.cargo/config.toml`), the runtime's real AICPU programs —
//! `pto_runtime::hbg::aicpu::aicpu_entry::<A2a3Aicpu>` (host-built graph) and
//! `pto_runtime::trb::aicpu_entry::<A2a3Aicpu>` (device-side runtime) — run on AICPU threads
//! built as `A2a3Aicpu` over GM in process memory and register windows as plain memory, with
//! the real `dc civac` / `dc cvac` maintenance, barriers and counter. AICores are threads
//! running the runtime's legacy executor (`pto_runtime::exec::entry::aicore_entry`) over the
//! harness's AICore agent. The host side is the runtime's own (`Device::new_in_process` over
//! `pto_target_harness::platform::OnTarget`). Workloads: `vector` and `chain513`, both
//! runtimes, against host goldens. The device half logs with defmt into a GM log ring
//! (`pto_aarch64::devlog`) that the test drains and decodes with `defmt-decoder` against this
//! executable's own `.defmt` table (`pto_target_harness::devlog`), and checks what was logged.
//! On other targets this file is empty: there is no a2a3 AICPU that is not aarch64.
#![cfg(target_arch = "aarch64")]

use pto_a2a3::{A2a3Aicpu, GmRegion};
use pto_target_harness::devlog;
use pto_target_harness::platform::Chip;
use pto_target_harness::workloads::{dump_chain513, run_all, small_topology};

/// The a2a3 chip as the harness needs it.
struct A2a3;

impl Chip for A2a3 {
    const NAME: &'static str = "a2a3";
    const DMB_OFFSET: u32 = pto_a2a3::DMB_OFFSET;
    const COND_OFFSET: u32 = pto_a2a3::COND_OFFSET;
    const REG_WINDOW_BYTES: u32 = pto_a2a3::REG_WINDOW_BYTES;
    type Contract = pto_a2a3::Contract;
    type Aicpu = A2a3Aicpu<'static>;
    unsafe fn aicpu(gm: GmRegion, windows: &'static [u64]) -> A2a3Aicpu<'static> {
        // SAFETY: the caller upholds `Chip::aicpu`'s contract, which is `A2a3Aicpu::new`'s.
        unsafe { A2a3Aicpu::new(gm, windows) }
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
    let programs = pto_runtime::programs::aicpu_programs::<A2a3Aicpu<'static>>();
    let hbg: pto_hal::AicpuEntry<A2a3Aicpu<'static>> = pto_runtime::hbg::aicpu::aicpu_entry::<A2a3Aicpu<'static>>;
    let trb: pto_hal::AicpuEntry<A2a3Aicpu<'static>> = pto_runtime::trb::aicpu_entry::<A2a3Aicpu<'static>>;
    assert_eq!(programs[0].0, pto_runtime::programs::HBG_AICPU);
    assert_eq!(programs[1].0, pto_runtime::programs::TRB_AICPU);
    assert!(std::ptr::fn_addr_eq(programs[0].1, hbg) && std::ptr::fn_addr_eq(programs[1].1, trb));
}

/// 2 clusters (6 cores), 3 AICPU threads: on the device-side runtime, 1 orchestrator and 2
/// schedulers; on the host-built graph, 3 schedulers (one owning no cluster).
///
/// The device log of those runs, decoded on the host side: every core's handshake in every
/// run, every core released in every run, no fault; and the host's installation of the
/// runtime's device programs.
#[test]
fn vector_and_chain513_on_both_runtimes() {
    let _one = one_at_a_time();
    /// `run_all`: `vector` and `chain513`, each on both runtimes.
    const RUNS: u32 = 4;
    let topology = small_topology(3);
    // Install the ring before the device's first frame, and start from an empty one.
    devlog::take().unwrap_or_else(|e| panic!("a2a3 device log: {e}"));
    run_all::<A2a3>(topology);
    let log = devlog::take().unwrap_or_else(|e| panic!("a2a3 device log: {e}"));
    println!("a2a3 device log: {} lines in {} bytes, e.g.", log.lines.len(), log.bytes);
    for l in log.starting_with("retire:").take(3) {
        println!("  {l}");
    }
    devlog::check_clean_runs(&log, topology.workers(), RUNS).unwrap_or_else(|e| panic!("a2a3 device log: {e}"));
    for program in [pto_runtime::programs::HBG_AICPU, pto_runtime::programs::TRB_AICPU] {
        let want = format!("installed AICPU program {program}");
        assert!(log.starting_with(&want).count() > 0, "a2a3 device log: no `{want}`");
    }
}

/// The args dump on the real a2a3 AICPU agent: `chain513` at `Full` on both runtimes, every
/// payload checked against the golden (task k's output at completion is task k+1's input at
/// dispatch, bit for bit), accounting exact.
#[test]
fn chain513_args_dump_on_both_runtimes() {
    let _one = one_at_a_time();
    dump_chain513::<A2a3>(small_topology(3));
}

/// A device of more clusters than the chip's AICPU agent holds (`MaxClusters`: the chip's own
/// 24) is refused by name when the runtime takes it: the AICPU programs' per-core tables could
/// not hold a launch of it.
#[test]
fn a_device_over_the_chips_bound_is_refused() {
    use pto_hal::AicpuAgent;
    assert_eq!(<A2a3Aicpu<'static> as AicpuAgent>::MAX_CLUSTERS, pto_a2a3::CLUSTERS);
    let topology = pto_hal::Topology { clusters: pto_a2a3::CLUSTERS + 1, aicpu_threads: 2 };
    match pto_target_harness::workloads::open::<A2a3>(topology) {
        Err(pto_runtime::host::Error::Config(
            e @ pto_runtime::host::ConfigError::DeviceOverBound { clusters, bound },
        )) => {
            assert_eq!((clusters, bound), (25, 24));
            assert!(e.to_string().contains("at most 24"), "{e}");
        }
        Err(e) => panic!("refused, but not as a configuration error: {e}"),
        Ok(_) => panic!("a device of 25 clusters was taken over a 24-cluster agent"),
    }
}
