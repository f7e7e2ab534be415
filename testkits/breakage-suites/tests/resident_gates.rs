//! The resident executor's start and exit edges, each shown with the broken variant that the
//! check catches: a RELEASE a previous run left in a core's teardown gate never releases that
//! core in the next run; the handshake line has one writer (the reference's three-writer line
//! is caught by the faithful model); a resident core's exit leaves no dirty line.
//!
//! Breakage is process-wide, so every test here takes `SERIAL` first.

use parking_lot::Mutex;

use pto::board::{Board, SimA2a3, SimA5};
use pto::hal::{HostPlatform, Platform};
use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::host::{self, Timeouts};
use pto_sim::{CacheModel, Missing, SimError};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> parking_lot::MutexGuard<'static, ()> {
    SERIAL.lock()
}

fn resident() -> RunConfig {
    RunConfig::default().with_executor(pto::Executor::Resident)
}

/// `n` AIV tasks that each add 1 to the same 16-float row (a chain).
fn chain<P: Platform>(dev: &host::Device<P>, n: u32) -> (host::DeviceTensor<P>, host::Graph<P>) {
    pto_testkit::add1_chain(dev, n).unwrap_or_else(|e| panic!("build the chain: {e}"))
}

/// A device of board `B` with short budgets: watchdog and exit 100 ms (a core escalates a
/// wait after 300 ms), host stream budget 1 s.
fn short<B: Board>() -> host::Device<B::Platform>
where
    B::Platform: Platform,
{
    let raw = B::open().unwrap_or_else(|e| panic!("open: {e}"));
    host::Device::new_in_process(raw, Timeouts::new(100_000, 100_000, 1_000_000)).unwrap()
}

/// A device of board `B` under the faithful cache model, no random eviction.
fn faithful<B: Board>() -> host::Device<B::Platform>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: Faithful,
{
    let raw = B::open().unwrap_or_else(|e| panic!("open: {e}"));
    raw.faithful();
    host::Device::new_in_process(raw, Timeouts::new(2_000_000, 1_000_000, 30_000_000)).unwrap()
}

trait Faithful {
    fn faithful(&self);
}

impl<C: pto::hal::Contract> Faithful for pto_sim::SimDevice<C> {
    fn faithful(&self) {
        self.set_cache_model(CacheModel::Faithful { seed: 7, evict_per_mille: 0 }).unwrap();
    }
}

/// The coherence violation a failed run carries, if any.
fn violation<T>(r: &Result<T, Error>) -> Option<pto_sim::Violation> {
    let e = r.as_ref().err()?;
    let e = match e {
        Error::Device(d) if d.also.is_some() => d.also.as_deref().unwrap(),
        other => other,
    };
    match e.platform_error::<SimError>().or_else(|| r.as_ref().err()?.platform_error::<SimError>()) {
        Some(SimError::Coherence(v)) => Some(v.clone()),
        _ => None,
    }
}

/// Run N releases every core with its epoch; run N+1's AICPU releases none (fault injection).
/// Each core of run N+1 finds run N's RELEASE in its gate and must not take it: it waits,
/// escalates RELEASE_TIMEOUT at its gate, and the run fails (the device is then unusable: its
/// cores are still waiting for an AICPU that is gone). The broken variant — a gate that takes
/// any release — lets run N+1's cores leave on run N's RELEASE: the run "succeeds".
#[test]
fn a_release_left_by_run_n_never_releases_a_core_in_run_n_plus_1() {
    let _s = serial();
    let dev = short::<SimA5>();
    let (_y, g) = chain(&dev, 4);
    assert_eq!(dev.run_with(&g, &resident()).unwrap().executor, pto::Executor::Resident);
    let r = {
        let _b = breakage::activate(breakage::SKIP_RELEASE);
        let r = dev.run_with(&g, &resident());
        // The cores keep waiting after the run failed: leave the switch on until they have
        // certainly read their gates again (the switch only changes the AICPU's stores).
        std::thread::sleep(std::time::Duration::from_millis(100));
        r
    };
    match &r {
        Err(Error::Device(d)) => {
            assert_eq!(d.code.name(), "RELEASE_TIMEOUT", "{d}");
            assert_eq!(d.site, pto::runtime::codes::Site::Gate, "{d}");
            assert!(d.core.is_some(), "the waiting core is named: {d}");
        }
        other => panic!("expected RELEASE_TIMEOUT at a gate, got {other:?}"),
    }
    assert!(matches!(dev.run(&g), Err(Error::Unusable(_))), "no core was released early");

    // The broken gate: the same sequence succeeds, which is the bug.
    let dev = short::<SimA5>();
    let (_y, g) = chain(&dev, 4);
    dev.run_with(&g, &resident()).unwrap();
    let _b = breakage::activate(breakage::SKIP_RELEASE | breakage::GATE_ANY_EPOCH);
    let r = dev.run_with(&g, &resident());
    assert!(r.is_ok(), "a gate that takes any release lets the cores leave on run N's: {r:?}");
}

/// The handshake line has one writer, the core: resident runs under the faithful model find no
/// violation (on both chips). The reference's line, which the AICPU also writes after
/// accepting the report, is caught as a whole-line violation on the resident route too.
#[test]
fn the_resident_handshake_line_has_one_writer() {
    let _s = serial();
    fn ours<B: Board>()
    where
        B::Platform: Platform,
        <B::Platform as HostPlatform>::Device: Faithful,
    {
        let dev = faithful::<B>();
        let (y, g) = chain(&dev, 6);
        for _ in 0..3 {
            let r = dev.run_with(&g, &resident()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.executor, pto::Executor::Resident);
        }
        assert_eq!(y.read::<f32>().unwrap(), vec![18.0; 16]);
    }
    ours::<SimA5>();
    ours::<SimA2a3>();
    let dev = faithful::<SimA5>();
    let (_y, g) = chain(&dev, 2);
    dev.run_with(&g, &resident()).unwrap();
    let _b = breakage::activate(breakage::SHARED_HANDSHAKE_LINE);
    let r = dev.run_with(&g, &resident());
    let v = violation(&r).unwrap_or_else(|| panic!("expected a coherence violation, got {r:?}"));
    assert_eq!(v.missing, Missing::WholeLineRule, "{v}");
    assert!(v.agent.starts_with("aicpu") && v.last_writer.starts_with("core"), "{v}");
}

/// A resident core's exit leaves no dirty line: the faithful model checks every agent's cache
/// at every register hand-off and when its program ends, and resident runs pass. The
/// reference's resident exit (a handshake write with no final write-back) is reported at the
/// core's EXITED hand-off as a dirty line.
#[test]
fn a_resident_exit_leaves_no_dirty_line() {
    let _s = serial();
    let dev = faithful::<SimA5>();
    let (_y, g) = chain(&dev, 6);
    dev.run_with(&g, &resident()).unwrap();
    assert!(dev.platform().take_violations().is_empty());
    let _b = breakage::activate(breakage::RESIDENT_EXIT_DIRTY);
    let r = dev.run_with(&g, &resident());
    let v = violation(&r).unwrap_or_else(|| panic!("expected a coherence violation, got {r:?}"));
    // The first place the model sees it: the EXITED register hand-off with the line still
    // dirty, or (had the core signalled nothing after it) its program's end.
    assert!(matches!(v.missing, Missing::WriteBackBeforeSignal | Missing::WriteBack), "{v}");
    assert!(v.agent.starts_with("core") && v.last_writer.starts_with(&v.agent), "{v}");
}
