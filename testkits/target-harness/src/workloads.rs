//! The `vector` and `chain513` workloads on an [`OnTarget`] device, on both runtimes, checked
//! against goldens computed on the host.
//!
//! The kernels, orchestrations and goldens are the examples' own, from `pto-testkit` (generic
//! over the platform; it does not depend on the `pto` facade).

use std::time::Instant;

use pto_hal::Topology;
use pto_runtime::host::{Device, Error, Timeouts};
use pto_runtime::orch::RuntimeKind;

use crate::platform::{Chip, Config, OnTarget, TargetDevice};

/// The runtime's host device over an on-target device of chip `C`.
pub type TargetRuntime<C> = Device<OnTarget<C>>;

/// A small device: few threads, so an emulated run on a small machine finishes quickly.
pub fn small_topology(aicpu_threads: u32) -> Topology {
    Topology { clusters: 2, aicpu_threads }
}

/// Budgets for an emulated device that shares the machine with other work: generous, so a
/// slow scheduler is not mistaken for a hang (a real hang still ends in a watchdog error).
pub fn emulated_timeouts() -> Timeouts {
    Timeouts::new(60_000_000, 20_000_000, 180_000_000)
}

/// Open an on-target device of chip `C` with `topology` and 64 MiB of GM, and hand it to the
/// runtime's host the way the simulator is: `Device::new_in_process` installs the runtime's
/// device programs and loads them by name.
pub fn open<C: Chip>(topology: Topology) -> Result<TargetRuntime<C>, Error> {
    let dev = TargetDevice::<C>::open(Config { topology, gm_bytes: 64 << 20 });
    Device::new_in_process(dev, emulated_timeouts())
}

/// Open a device of chip `C` with `topology`, run `vector` and `chain513` on both runtimes,
/// print a line per run, and panic with the first failure (run error or golden mismatch).
pub fn run_all<C: Chip>(topology: Topology) {
    let start = Instant::now();
    let dev = open::<C>(topology).unwrap_or_else(|e| panic!("{}: open: {e}", C::NAME));
    let k = pto_testkit::Kernels::register(&dev).unwrap_or_else(|e| panic!("{}: register: {e}", C::NAME));
    for rt in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
        for (outcome, tasks) in [(pto_testkit::vector(&dev, &k, rt), 5), (pto_testkit::chain513(&dev, &k, rt), 513)] {
            match outcome {
                Ok(o) => {
                    assert_eq!(o.report.tasks, tasks, "{}: {} on {} completed every task", C::NAME, o.name, rt.name());
                    assert_eq!(o.report.cores, u64::from(topology.workers()), "{}: every core took part", C::NAME);
                    assert_eq!(o.report.released, u64::from(topology.workers()), "{}: every core released", C::NAME);
                    println!("{}", o.summary(C::NAME));
                }
                Err(e) => panic!("{} on target, {}: {e}", C::NAME, rt.name()),
            }
        }
    }
    println!("{}: both workloads on both runtimes in {:?}", C::NAME, start.elapsed());
}

/// Open a device of chip `C` with `topology` and run `chain513` on both runtimes with the
/// args dump at `Full` (a 4 MiB arena per AICPU thread, so the lanes fit the emulated GM and
/// back-pressure is exercised): the real AICPU agent captures every task boundary into its
/// lane, the host collects while the run is in flight, and the payloads are checked against
/// the golden ([`pto_testkit::check_chain513_dump`]).
pub fn dump_chain513<C: Chip>(topology: Topology) {
    use pto_runtime::dump::DumpLevel;
    let dev = open::<C>(topology).unwrap_or_else(|e| panic!("{}: open: {e}", C::NAME));
    let k = pto_testkit::Kernels::register(&dev).unwrap_or_else(|e| panic!("{}: register: {e}", C::NAME));
    let dir = std::env::temp_dir().join(format!("pto-target-dump-{}-{}", C::NAME, std::process::id()));
    for rt in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
        let start = Instant::now();
        let o = pto_testkit::dumped_with_arena(Some(DumpLevel::Full), Some(dir.clone()), Some(4 << 20), || {
            pto_testkit::chain513(&dev, &k, rt)
        })
        .unwrap_or_else(|e| panic!("{} on target, {} with the dump: {e}", C::NAME, rt.name()));
        let rep = o.report.dump.unwrap_or_else(|| panic!("{}: the run carries no dump report", C::NAME));
        let d = pto_runtime::host::dump::Dump::open(&rep.dir).unwrap_or_else(|e| panic!("{}: {e}", C::NAME));
        let n = pto_testkit::check_chain513_dump(&d)
            .unwrap_or_else(|e| panic!("{} on target, {}: args dump: {e}", C::NAME, rt.name()));
        println!(
            "{}: chain513 on {} dumped {n} records ({} payload bytes) in {:?}",
            C::NAME,
            rt.name(),
            rep.payload_bytes,
            start.elapsed()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
