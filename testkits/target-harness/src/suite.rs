//! The runtime's on-target suite, one for both chips: [`runtime_on_target!`](crate::runtime_on_target)
//! expands, in a chip crate's integration test, into that chip's `Chip` implementation and the
//! suite's tests over it. Each chip's test file is the macro's call and its own doc.

/// The runtime's on-target suite for one chip, expanded in the chip crate's integration test
/// (compiled for aarch64 only, with the harness's `defmt` feature: the tests decode the device
/// log).
///
/// It defines the chip type `$chip` implementing `pto_target_harness::platform::Chip` over the
/// chip crate `$krate` (its `DMB_OFFSET`, `COND_OFFSET`, `REG_WINDOW_BYTES`, `CLUSTERS`,
/// `Contract`, `GmRegion` and AICPU agent `$agent`, whose `new` is the agent's constructor), and
/// these tests:
///
/// * the runtime's AICPU programs, instantiated for the real agent, are what the harness
///   installs under the runtime's names;
/// * `vector` and `chain513` on both runtimes on 2 clusters (6 cores) and `$threads` AICPU
///   threads, and the device log of those runs: every core's handshake and release in every
///   run, no fault, the runtime's programs installed;
/// * `chain513`'s args dump at `Full` on both runtimes against the golden;
/// * a device of one cluster more than the chip's agent holds is refused by name when the
///   runtime takes it.
///
/// The tests that run the device take turns: the device log is one ring for the process.
///
/// ```ignore
/// pto_target_harness::runtime_on_target! {
///     /// The a2a3 chip as the harness needs it.
///     chip A2a3 = "a2a3", crate pto_a2a3, agent A2a3Aicpu, threads 3
/// }
/// ```
#[macro_export]
macro_rules! runtime_on_target {
    (
        $(#[$doc:meta])*
        chip $chip:ident = $name:literal, crate $krate:ident, agent $agent:ident, threads $threads:literal
    ) => {
        $(#[$doc])*
        struct $chip;

        impl $crate::platform::Chip for $chip {
            const NAME: &'static str = $name;
            const DMB_OFFSET: u32 = $krate::DMB_OFFSET;
            const COND_OFFSET: u32 = $krate::COND_OFFSET;
            const REG_WINDOW_BYTES: u32 = $krate::REG_WINDOW_BYTES;
            type Contract = $krate::Contract;
            type Aicpu = $krate::$agent<'static>;
            unsafe fn aicpu(gm: $krate::GmRegion, windows: &'static [u64]) -> $krate::$agent<'static> {
                // SAFETY: the caller upholds `Chip::aicpu`'s contract, which is the agent's
                // constructor's.
                unsafe { $krate::$agent::new(gm, windows) }
            }
        }

        /// The device log is one ring for the process: the tests that run the device take
        /// turns, so each one's log holds its own runs only.
        fn one_at_a_time() -> $crate::deps::parking_lot::MutexGuard<'static, ()> {
            static DEVICE: $crate::deps::parking_lot::Mutex<()> = $crate::deps::parking_lot::Mutex::new(());
            DEVICE.lock()
        }

        /// The runtime's AICPU programs, instantiated for the real agent, are what the harness
        /// installs under the runtime's names.
        #[test]
        fn the_installed_programs_are_the_runtimes_entries_for_the_real_agent() {
            use $crate::deps::{pto_hal, pto_runtime};
            let programs = pto_runtime::programs::aicpu_programs::<$krate::$agent<'static>>();
            let hbg: pto_hal::AicpuEntry<$krate::$agent<'static>> =
                pto_runtime::hbg::aicpu::aicpu_entry::<$krate::$agent<'static>>;
            let trb: pto_hal::AicpuEntry<$krate::$agent<'static>> =
                pto_runtime::trb::aicpu_entry::<$krate::$agent<'static>>;
            assert_eq!(programs[0].0, pto_runtime::programs::HBG_AICPU);
            assert_eq!(programs[1].0, pto_runtime::programs::TRB_AICPU);
            assert!(std::ptr::fn_addr_eq(programs[0].1, hbg) && std::ptr::fn_addr_eq(programs[1].1, trb));
        }

        /// 2 clusters (6 cores) and the suite's AICPU threads: on the device-side runtime, 1
        /// orchestrator and the others schedulers; on the host-built graph, every thread a
        /// scheduler (a third thread owns no cluster).
        ///
        /// The device log of those runs, decoded on the host side: every core's handshake in
        /// every run, every core released in every run, no fault; and the host's installation
        /// of the runtime's device programs.
        #[test]
        fn vector_and_chain513_on_both_runtimes() {
            use $crate::devlog;
            use $crate::deps::pto_runtime;
            let _one = one_at_a_time();
            /// `run_all`: `vector` and `chain513`, each on both runtimes.
            const RUNS: u32 = 4;
            let topology = $crate::workloads::small_topology($threads);
            // Install the ring before the device's first frame, and start from an empty one.
            devlog::take().unwrap_or_else(|e| panic!("{} device log: {e}", $name));
            $crate::workloads::run_all::<$chip>(topology);
            let log = devlog::take().unwrap_or_else(|e| panic!("{} device log: {e}", $name));
            println!("{} device log: {} lines in {} bytes, e.g.", $name, log.lines.len(), log.bytes);
            for l in log.starting_with("retire:").take(3) {
                println!("  {l}");
            }
            devlog::check_clean_runs(&log, topology.workers(), RUNS)
                .unwrap_or_else(|e| panic!("{} device log: {e}", $name));
            for program in [pto_runtime::programs::HBG_AICPU, pto_runtime::programs::TRB_AICPU] {
                let want = format!("installed AICPU program {program}");
                assert!(log.starting_with(&want).count() > 0, "{} device log: no `{want}`", $name);
            }
        }

        /// The args dump on the real AICPU agent: `chain513` at `Full` on both runtimes, every
        /// payload checked against the golden (task k's output at completion is task k+1's
        /// input at dispatch, bit for bit), accounting exact.
        #[test]
        fn chain513_args_dump_on_both_runtimes() {
            let _one = one_at_a_time();
            $crate::workloads::dump_chain513::<$chip>($crate::workloads::small_topology(3));
        }

        /// A device of more clusters than the chip's AICPU agent holds (`MaxClusters`: the
        /// chip's own `CLUSTERS`) is refused by name when the runtime takes it: the AICPU
        /// programs' per-core tables could not hold a launch of it.
        #[test]
        fn a_device_over_the_chips_bound_is_refused() {
            use $crate::deps::pto_hal::{self, AicpuAgent};
            use $crate::deps::pto_runtime::host::{ConfigError, Error};
            assert_eq!(<$krate::$agent<'static> as AicpuAgent>::MAX_CLUSTERS, $krate::CLUSTERS);
            let topology = pto_hal::Topology { clusters: $krate::CLUSTERS + 1, aicpu_threads: 2 };
            match $crate::workloads::open::<$chip>(topology) {
                Err(Error::Config(e @ ConfigError::DeviceOverBound { clusters, bound })) => {
                    assert_eq!((clusters, bound), ($krate::CLUSTERS + 1, $krate::CLUSTERS));
                    let want = format!("at most {}", $krate::CLUSTERS);
                    assert!(e.to_string().contains(&want), "{e}");
                }
                Err(e) => panic!("refused, but not as a configuration error: {e}"),
                Ok(_) => panic!(
                    "a device of {} clusters was taken over a {}-cluster agent",
                    $krate::CLUSTERS + 1,
                    $krate::CLUSTERS
                ),
            }
        }
    };
}
