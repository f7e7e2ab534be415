//! The AICore-side breakage classes of the coherence suite, with the legacy executor's AICore
//! program in C (`pto-aicore-c`, `AicoreProgram::Native`): the C executor honours the same
//! `breakage` switches (passed to it as `PTO_BREAK_*` bits), and the faithful cache model,
//! which sees every one of its accesses through the simulator backend's callbacks, catches
//! each broken variant — every time, over repeated runs — while the correct program passes the
//! same runs.
//!
//! Breakage is process-wide, so every test here takes `SERIAL` first.

use parking_lot::Mutex;

use pto::board::{Board, SimA2a3, SimA5};
use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::host::{self, Timeouts};
use pto_sim::{CacheModel, Missing, SimError};

mod scenes;
use scenes::rows_graph;

static SERIAL: Mutex<()> = Mutex::new(());

/// How many times each broken variant runs: it must be caught every time.
const REPS: usize = 5;

/// A device of board `B` with short budgets, the faithful cache model without random
/// eviction (deterministic), and the C AICore program installed.
fn faithful<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>() -> host::Device<pto_sim::Sim<C>> {
    let raw = B::open().unwrap_or_else(|e| panic!("open: {e}"));
    raw.set_cache_model(CacheModel::Faithful { seed: 7, evict_per_mille: 0 }).unwrap();
    pto_aicore_c::install::<B::Platform>(&raw).unwrap();
    host::Device::new_in_process(raw, Timeouts::new(2_000_000, 1_000_000, 30_000_000)).unwrap()
}

/// The C AICore program (legacy executor).
fn native() -> RunConfig {
    RunConfig::default().with_aicore(AicoreProgram::Native)
}

/// The coherence violation a failed run carries (its own error, or the cause riding along
/// with the runtime's fault).
fn violation(e: &Error) -> Option<Missing> {
    let of = |e: &Error| match e.platform_error::<SimError>() {
        Some(SimError::Coherence(v)) => Some(v.missing),
        _ => None,
    };
    match e {
        Error::Device(d) => of(e).or_else(|| d.also.as_deref().and_then(of)),
        _ => of(e),
    }
}

/// `r` failed with a coherence violation of class `missing`.
fn assert_caught<T: std::fmt::Debug>(r: Result<T, Error>, missing: Missing, what: &str) {
    match &r {
        Err(e) => assert_eq!(violation(e), Some(missing), "{what}: {e:?}"),
        Ok(v) => panic!("{what}: not caught (the run passed: {v:?})"),
    }
}

/// The correct C program passes the runs the broken variants fail, on both chip boards.
#[test]
fn the_correct_c_program_passes_the_suites_runs() {
    let _s = SERIAL.lock();
    fn on<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>() {
        let dev = faithful::<B, C>();
        let (y, g) = rows_graph(&dev, 12);
        for _ in 0..REPS {
            dev.run_with(&g, &native().with_clusters(1).with_aicpu_threads(1)).unwrap();
        }
        let v = y.read::<f32>().unwrap();
        assert_eq!(v, vec![REPS as f32; 12 * 16]);
        assert_eq!(dev.platform().take_violations(), vec![]);
    }
    on::<SimA2a3, _>();
    on::<SimA5, _>();
}

/// Class 3: the C program never writes back its handshake report.
#[test]
fn unpublished_report_is_caught() {
    let _s = SERIAL.lock();
    let dev = faithful::<SimA2a3, _>();
    let (_y, g) = rows_graph(&dev, 2);
    dev.run_with(&g, &native()).unwrap();
    let _b = breakage::activate(breakage::SKIP_REPORT_PUBLISH);
    for rep in 0..REPS {
        assert_caught(dev.run_with(&g, &native()), Missing::WriteBack, &format!("rep {rep}"));
        let v = dev.platform().take_violations();
        assert!(v.iter().any(|v| v.agent.starts_with("core")), "{v:?}");
    }
}

/// Class 4: the C program writes FIN before it writes the kernel's output back — with Rust
/// kernels and with native ones, on both chip boards.
#[test]
fn fin_before_write_back_is_caught() {
    let _s = SERIAL.lock();
    fn on<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>(kernel: &str) {
        let dev = faithful::<B, C>();
        if kernel == "native" {
            pto_testkit::native::register_native(&dev, "add1", CoreType::Aiv, "add1").unwrap();
        }
        let (y, g) = rows_graph(&dev, 8);
        dev.run_with(&g, &native()).unwrap();
        assert_eq!(y.read::<f32>().unwrap(), vec![1.0; 128]);
        let _b = breakage::activate(breakage::FIN_BEFORE_PUBLISH);
        for rep in 0..REPS {
            let what = format!("{} {kernel} kernels rep {rep}", B::NAME);
            assert_caught(dev.run_with(&g, &native()), Missing::WriteBackBeforeSignal, &what);
        }
    }
    on::<SimA2a3, _>("rust");
    on::<SimA5, _>("rust");
    on::<SimA2a3, _>("native");
}

/// Class 5: the C program reads its dispatch payload through its cache without invalidating.
#[test]
fn cached_payload_read_without_invalidate_is_caught() {
    let _s = SERIAL.lock();
    let cfg = native().with_clusters(1).with_aicpu_threads(1);
    let dev = faithful::<SimA2a3, _>();
    let (_y, g) = rows_graph(&dev, 12);
    dev.run_with(&g, &cfg).unwrap();
    let _b = breakage::activate(breakage::SKIP_PAYLOAD_OBSERVE);
    for rep in 0..REPS {
        assert_caught(dev.run_with(&g, &cfg), Missing::Invalidate, &format!("rep {rep}"));
    }
}

/// Class 7 (device-side runtime): the C program reads a reused argument record through the
/// line it cached for an earlier record (it skipped the invalidate) — with the orchestrator
/// ahead of the cores and behind them (records rewritten in place each iteration).
#[test]
fn a_reused_argument_record_read_through_a_stale_line_is_caught() {
    let _s = SERIAL.lock();
    for pace in scenes::PACES {
        let run = |broken: bool| scenes::run_reused_records(&faithful::<SimA2a3, _>(), native(), pace, broken);
        let (ok, y, x_h) = run(false);
        ok.unwrap();
        assert_eq!(y, x_h.iter().map(|v| v + 2.0).collect::<Vec<f32>>());
        for rep in 0..REPS {
            let (broken, _, _) = run(true);
            assert_caught(broken, Missing::Invalidate, &format!("{pace:?} rep {rep}"));
        }
    }
}

/// Write 5.0 over every element of tensor 0, then fault.
fn k_write_then_fault(k: &mut dyn KernelContext) {
    let n = k.load::<f32>(0).len();
    k.store(0, &vec![5.0f32; n]);
    panic!("deliberate fault after writing");
}

/// One task whose kernel writes its row and faults, on the C program: the run's error and the
/// host's read-back of the row.
fn write_then_fault(dev: &host::Device<<SimA2a3 as Board>::Platform>) -> (Error, Result<Vec<f32>, Error>) {
    let f = dev
        .func("write_then_fault")
        .unwrap_or_else(|| dev.register_kernel("write_then_fault", CoreType::Aiv, k_write_then_fault).unwrap());
    let y = dev.alloc::<f32>(&[1, 16]).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(f).inout(&y.tensor())).map(|_| ())).unwrap();
    let e = dev.run_with(&g, &native()).expect_err("the kernel faults");
    (e, y.read::<f32>())
}

/// The C program's fault exit writes back what the kernel wrote: the error is the kernel's
/// fault alone and the host reads the row; dropping that write-back
/// (`FAULT_EXIT_SKIPS_PUBLISH`) is caught every time.
#[test]
fn fault_exit_without_write_back_is_caught_and_the_correct_one_passes() {
    let _s = SERIAL.lock();
    let dev = faithful::<SimA2a3, _>();
    for rep in 0..REPS {
        let (e, read) = write_then_fault(&dev);
        match &e {
            Error::Device(d) => {
                assert_eq!(d.code, ErrorCode::Device(pto::runtime::codes::DeviceFault::KernelFault), "{e}");
                assert!(d.message.contains("deliberate fault after writing"), "{e}");
                assert!(d.also.is_none(), "rep {rep}: a violation rides along: {e:?}");
            }
            other => panic!("rep {rep}: expected the kernel's fault, got {other:?}"),
        }
        assert_eq!(read.unwrap(), vec![5.0; 16], "rep {rep}");
    }
    let _b = breakage::activate(breakage::FAULT_EXIT_SKIPS_PUBLISH);
    for rep in 0..REPS {
        let (e, read) = write_then_fault(&dev);
        let v = violation(&e).or_else(|| read.as_ref().err().and_then(violation));
        assert!(
            matches!(v, Some(Missing::WriteBack | Missing::WriteBackBeforeSignal)),
            "rep {rep}: not caught: run {e:?}, read {read:?}"
        );
        dev.platform().take_violations();
    }
}
