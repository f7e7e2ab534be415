//! The HAL conformance suite (`pto-conformance`) on the simulator, in process.
//!
//! Every check runs where the runtime's code runs: inside an AICPU launch (both AICPU threads
//! run `run_aicpu`, then hand a payload to each other through a core's DMB and through a GM flag)
//! and inside an AICore launch (every core runs `run_aicore`, after checking that
//! its launch reset DMB; core 0 is also the consumer of an AICPU → AICore register hand-off, the
//! dispatch protocol: payload, `wmb`, DMB; DMB, `rmb`, `observe_lines`, payload). The host-side
//! clock is checked against `std::time::Instant` too.
//!
//! The test programs are installed in the simulated device under their own names
//! ([`Platform::install_aicpu_program`]), looked up with [`Loader::load_program`] and launched
//! by the handle it returns, as the runtime launches its programs.
//!
//! Device programs report through GM: each agent writes a result slot (status, the checks that
//! passed and were skipped, and an encoded `Failure`), which the host reads after the launch.
//!
//! Cache models: one line per model in the `conformance_on!` invocation at the bottom. The
//! simulator also honours `PTO_SIM_CACHE` at open, so `PTO_SIM_CACHE=faithful cargo test -p
//! pto-sim --test conformance` runs every line on the faithful model.

use pto_conformance::handoff::{self, Handoff, RegisterSignal};
use pto_conformance::{Check, FailureRecord, Outcome, Report, SCRATCH_BYTES, Status, StdHostClock, Target};
use pto_hal::{
    AicoreAgent, AicoreCache, AicoreLaunch, AicoreStream, AicpuAgent, AicpuCache, AicpuLaunch, AicpuStream, Clock,
    Contract, DeviceMemory, Events, GmAddr, GmMemory, HostCoherent, HostNonCoherent, HostPlatform, Loader, Platform,
    ProgramKind, Registers, Stream, Topology,
};
use pto_sim::{Sim, SimAicpu, SimConfig, SimCore, SimDevice};

/// Counter frequency of the simulated devices (the a2a3 frequency).
const FREQ: u64 = 50_000_000;
/// A small device: 2 clusters (6 cores), 2 AICPU threads.
const TOPO: Topology = Topology { clusters: 2, aicpu_threads: 2 };
/// Rounds of each hand-off.
const ROUNDS: u32 = 1_000;
/// Budget of every wait inside a check.
const TIMEOUT_US: u64 = 20_000_000;
/// Budget of the host's wait for a whole launch: every model's hand-offs, with every test of this
/// file running at once on a two-core machine (the faithful model's are the slow ones).
const HOST_BUDGET_US: u64 = 180_000_000;

// GM layout of a run, as offsets from the allocation (the launch argument).
const SLOT_BYTES: u64 = 256;
const SLOTS: u64 = 16;
/// Slot of AICPU thread `t`: `t`; of AICore worker `w`: `AICORE_SLOT0 + w`.
const AICORE_SLOT0: u64 = 8;
const HANDOFF: u64 = SLOTS * SLOT_BYTES;
const REG_DATA: u64 = HANDOFF;
const REG_ACK: u64 = HANDOFF + 512;
const FLAG_DATA: u64 = HANDOFF + 1024;
const FLAG_ACK: u64 = HANDOFF + 1536;
const FLAG_WORD: u64 = HANDOFF + 1600;
const CORE_DATA: u64 = HANDOFF + 2048;
const CORE_ACK: u64 = HANDOFF + 2560;
/// The consumer core's physical id + 1, published by the core (0 until then).
const CORE_PHYS: u64 = HANDOFF + 2624;
const SCRATCH0: u64 = HANDOFF + 4096;
const RUN_BYTES: u64 = SCRATCH0 + SLOTS * SCRATCH_BYTES;

// Result slot layout.
const ST_PASSED: u64 = 1;
const ST_FAILED: u64 = 2;

fn scratch(args: GmAddr, slot: u64) -> GmAddr {
    args.offset(SCRATCH0 + slot * SCRATCH_BYTES)
}

fn mask(report: &Report, pick: impl Fn(Status) -> bool) -> u64 {
    Check::ALL.iter().filter(|&&c| pick(report.status(c))).fold(0, |m, &c| m | 1 << c as u8)
}

/// Names the test programs are installed under.
const AICPU_SUITE: &str = "conformance_aicpu_suite";
const AICORE_SUITE: &str = "conformance_aicore_suite";
const DISPATCH: &str = "conformance_dispatch";

/// Agent `slot`'s result: `[status, passed mask, skipped mask, 0, failure (128 B)]`.
fn encode(out: Result<Report, pto_conformance::Failure>) -> [u8; SLOT_BYTES as usize] {
    let mut b = [0u8; SLOT_BYTES as usize];
    match out {
        Ok(r) => {
            b[0..8].copy_from_slice(&ST_PASSED.to_le_bytes());
            b[8..16].copy_from_slice(&mask(&r, |s| s == Status::Passed).to_le_bytes());
            b[16..24].copy_from_slice(&mask(&r, |s| matches!(s, Status::Skipped(_))).to_le_bytes());
        }
        Err(f) => {
            b[0..8].copy_from_slice(&ST_FAILED.to_le_bytes());
            b[32..160].copy_from_slice(&f.encode());
        }
    }
    b
}

/// Write an AICPU agent's result to `slot` and do what its contract asks before a host read.
fn publish_aicpu<A: GmMemory + AicpuCache + ?Sized>(
    a: &A,
    args: GmAddr,
    slot: u64,
    out: Result<Report, pto_conformance::Failure>,
) {
    let at = args.offset(slot * SLOT_BYTES);
    a.write(at, &encode(out));
    <A::Contract as Contract>::publish_to_host(a, at, SLOT_BYTES);
}

/// Write an AICore's result to `slot` and write its lines back for the host's D2H copy.
fn publish_aicore<A: GmMemory + AicoreCache + ?Sized>(
    a: &A,
    args: GmAddr,
    slot: u64,
    out: Result<Report, pto_conformance::Failure>,
) {
    let at = args.offset(slot * SLOT_BYTES);
    a.write(at, &encode(out));
    a.publish_lines(at, SLOT_BYTES);
}

/// Fold `out` of a two-party check into `r`.
fn two_party(
    r: Result<Report, pto_conformance::Failure>,
    check: Check,
    out: Outcome,
) -> Result<Report, pto_conformance::Failure> {
    let mut r = r?;
    out?;
    r.record(check, Status::Passed);
    Ok(r)
}

/// The simulator counts each agent's `GmAtomic` stores, so the "no idle write" check runs here.
trait CountsStores {
    fn stores(&self) -> u64;
}

impl<C: Contract> CountsStores for SimAicpu<C> {
    fn stores(&self) -> u64 {
        self.gm_atomic_stores()
    }
}

impl<C: Contract> CountsStores for SimCore<C> {
    fn stores(&self) -> u64 {
        self.gm_atomic_stores()
    }
}

/// A short bounded wait: parks the simulated agent for up to 20 µs.
fn relax<A: Events + Clock + ?Sized>(a: &A) -> impl Fn() + '_ {
    move || a.wait_for_event(a.now_ticks().saturating_add(a.ticks_from_micros(20)))
}

/// AICPU program of the AICPU suite: `run_aicpu`, then thread 0 publishes to thread 1 through
/// core 5's DMB (no program runs on the cores) and thread 1 publishes back through a GM flag.
fn aicpu_entry<A: AicpuAgent + CountsStores>(a: &A, l: AicpuLaunch<'_>) -> i32 {
    let host = StdHostClock::new();
    let s = scratch(l.args, l.thread_idx as u64);
    let mut t = Target::new(s);
    let writes = || a.stores();
    t.writes = Some(&writes);
    t.registers = Some((a as &dyn Registers, l.thread_idx));
    t.host_clock = Some(&host);
    t.expected_hz = Some(a.freq_hz());
    let mut out = pto_conformance::run_aicpu(a, &t);
    let relax = relax(a);
    let reg =
        Handoff { data: l.args.offset(REG_DATA), ack: l.args.offset(REG_ACK), rounds: ROUNDS, timeout_us: TIMEOUT_US };
    let flag = Handoff {
        data: l.args.offset(FLAG_DATA),
        ack: l.args.offset(FLAG_ACK),
        rounds: ROUNDS,
        timeout_us: TIMEOUT_US,
    };
    let sig = RegisterSignal { core: TOPO.workers() - 1 };
    let fw = l.args.offset(FLAG_WORD);
    if l.thread_idx == 0 {
        out = two_party(out, Check::HandoffRegister, handoff::publish_via_register(a, &reg, sig, &relax));
        out = two_party(out, Check::HandoffGmFlag, handoff::observe_via_gm_flag(a, &flag, fw, &relax));
    } else {
        out = two_party(out, Check::HandoffRegister, handoff::observe_via_register_aicpu(a, &reg, sig, &relax));
        out = two_party(out, Check::HandoffGmFlag, handoff::publish_via_gm_flag(a, &flag, fw, &relax));
    }
    let ok = out.is_ok();
    publish_aicpu(a, l.args, l.thread_idx as u64, out);
    if ok { 0 } else { 1 }
}

/// AICore program: DMB reset check (first), `run_aicore`; worker 0 then
/// consumes the AICPU → AICore register hand-off on its own DMB.
fn aicore_entry<A: AicoreAgent + CountsStores>(a: &A, l: AicoreLaunch) -> i32 {
    let host = StdHostClock::new();
    let mut out = pto_conformance::core_registers_reset(a).map(|()| {
        let mut r = Report::new();
        r.record(Check::CoreRegistersReset, Status::Passed);
        r
    });
    if let Ok(mut r) = out {
        let mut t = Target::new(scratch(l.args, AICORE_SLOT0 + l.block_idx as u64));
        let writes = || a.stores();
        t.writes = Some(&writes);
        t.host_clock = Some(&host);
        t.expected_hz = Some(a.freq_hz());
        out = pto_conformance::run_aicore(a, &t).map(|r2| {
            r.merge(&r2);
            r
        });
    }
    if l.block_idx == 0 {
        let h = Handoff {
            data: l.args.offset(CORE_DATA),
            ack: l.args.offset(CORE_ACK),
            rounds: ROUNDS,
            timeout_us: TIMEOUT_US,
        };
        a.store_direct(l.args.offset(CORE_PHYS), l.physical_core_id as u64 + 1);
        if out.is_ok() {
            out = two_party(out, Check::HandoffRegister, handoff::observe_via_register_aicore(a, &h, &relax(a)));
        } else {
            // Do not leave the dispatcher waiting out its budget.
            a.store_direct(h.ack, handoff::ABORT);
        }
    }
    let slot = AICORE_SLOT0 + l.block_idx as u64;
    a.publish_lines(scratch(l.args, slot), SCRATCH_BYTES);
    let ok = out.is_ok();
    publish_aicore(a, l.args, slot, out);
    if ok { 0 } else { 1 }
}

/// AICPU program of the AICore suite: wait for core 0's physical id, then publish to it.
fn dispatch_entry<A: AicpuAgent>(a: &A, l: AicpuLaunch<'_>) -> i32 {
    let deadline = a.deadline_after_micros(TIMEOUT_US);
    let phys = loop {
        let v = a.query(l.args.offset(CORE_PHYS));
        if v != 0 {
            break Ok(v as u32 - 1);
        }
        if a.now_ticks() >= deadline {
            break Err(pto_conformance::Failure::new(Check::HandoffRegister, "core 0 published its physical id", 1, 0));
        }
        a.wait_for_word(l.args.offset(CORE_PHYS), 0, a.now_ticks().saturating_add(a.ticks_from_micros(100)));
    };
    let h = Handoff {
        data: l.args.offset(CORE_DATA),
        ack: l.args.offset(CORE_ACK),
        rounds: ROUNDS,
        timeout_us: TIMEOUT_US,
    };
    let out = phys.and_then(|core| handoff::publish_via_register(a, &h, RegisterSignal { core }, &relax(a)));
    let out = two_party(Ok(Report::new()), Check::HandoffRegister, out);
    let ok = out.is_ok();
    publish_aicpu(a, l.args, 0, out);
    if ok { 0 } else { 1 }
}

/// Open a device, allocate (zeroed) run memory.
fn open<C: Contract>(config: SimConfig) -> (SimDevice<C>, GmAddr) {
    let dev = SimDevice::<C>::open(TOPO, config).expect("open the simulated device");
    let args = dev.alloc(RUN_BYTES, 64).expect("run memory");
    dev.memset(args, 0, RUN_BYTES).unwrap();
    (dev, args)
}

/// Read agent `slot`'s result; panic with the failure it reports.
fn result<C: Contract>(
    dev: &SimDevice<C>,
    args: GmAddr,
    slot: u64,
    who: &str,
    launch: &Result<(), pto_sim::SimError>,
) -> (u64, u64) {
    let mut b = [0u8; SLOT_BYTES as usize];
    dev.copy_d2h(&mut b, args.offset(slot * SLOT_BYTES)).unwrap();
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    match word(0) {
        ST_PASSED => (word(8), word(16)),
        ST_FAILED => {
            let f = FailureRecord::decode(b[32..160].try_into().unwrap()).expect("an encoded failure");
            panic!("{who}: {f}")
        }
        other => panic!("{who} wrote no result (status word {other}); the launch reported {launch:?}"),
    }
}

fn print(who: &str, passed: u64, skipped: u64) {
    let names = |m: u64| Check::ALL.iter().filter(|&&c| m & (1 << c as u8) != 0).map(|c| c.name()).collect::<Vec<_>>();
    println!("{who}: passed {:?}; skipped {:?}", names(passed), names(skipped));
}

fn aicpu_suite<C: Contract>(config: SimConfig) {
    let (dev, args) = open::<C>(config);
    <Sim<C> as Platform>::install_aicpu_program(&dev, AICPU_SUITE, aicpu_entry::<SimAicpu<C>>).unwrap();
    let program = dev.load_program(ProgramKind::Aicpu, AICPU_SUITE).expect("the installed AICPU suite");
    let (mut aicpu, _aicore) = <Sim<C> as HostPlatform>::create_streams(&dev).unwrap();
    aicpu.launch_aicpu(program, args, TOPO.aicpu_threads).unwrap();
    let done = aicpu.synchronize(HOST_BUDGET_US);
    for t in 0..TOPO.aicpu_threads as u64 {
        let (passed, skipped) = result(&dev, args, t, &format!("AICPU thread {t}"), &done);
        print(&format!("AICPU thread {t}"), passed, skipped);
        for c in [
            Check::GmAtomic,
            Check::GmCoherenceAicpu,
            Check::CacheRanges,
            Check::Registers,
            Check::ClockRate,
            Check::HandoffRegister,
            Check::HandoffGmFlag,
        ] {
            assert!(passed & (1 << c as u8) != 0, "AICPU thread {t}: {c} did not pass");
        }
        for c in [Check::GmCoherenceAicore, Check::CacheLines, Check::CacheInvalidateAll] {
            assert!(skipped & (1 << c as u8) != 0, "AICPU thread {t}: the AICore check {c} is skipped");
        }
    }
    done.expect("the AICPU launch reports success");
}

fn aicore_suite<C: Contract>(config: SimConfig) {
    let (dev, args) = open::<C>(config);
    <Sim<C> as Platform>::install_aicore_program(&dev, AICORE_SUITE, aicore_entry::<SimCore<C>>).unwrap();
    <Sim<C> as Platform>::install_aicpu_program(&dev, DISPATCH, dispatch_entry::<SimAicpu<C>>).unwrap();
    let suite = dev.load_program(ProgramKind::Aicore, AICORE_SUITE).expect("the installed AICore suite");
    let dispatch = dev.load_program(ProgramKind::Aicpu, DISPATCH).expect("the installed dispatcher");
    let (mut aicpu, mut aicore) = <Sim<C> as HostPlatform>::create_streams(&dev).unwrap();
    // AICore first, then AICPU, as the runtime launches.
    aicore.launch_aicore(suite, args, TOPO.clusters).unwrap();
    aicpu.launch_aicpu(dispatch, args, 1).unwrap();
    let cores = aicore.synchronize(HOST_BUDGET_US);
    let cpu = aicpu.synchronize(HOST_BUDGET_US);
    for w in 0..TOPO.workers() as u64 {
        let (passed, skipped) = result(&dev, args, AICORE_SLOT0 + w, &format!("AICore worker {w}"), &cores);
        print(&format!("AICore worker {w}"), passed, skipped);
        for c in [
            Check::CoreRegistersReset,
            Check::GmCoherenceAicore,
            Check::CacheLines,
            Check::CacheInvalidateAll,
            Check::Events,
        ] {
            assert!(passed & (1 << c as u8) != 0, "AICore worker {w}: {c} did not pass");
        }
        for c in [Check::GmCoherenceAicpu, Check::CacheRanges] {
            assert!(skipped & (1 << c as u8) != 0, "AICore worker {w}: the AICPU check {c} is skipped");
        }
        if w == 0 {
            assert!(passed & (1 << Check::HandoffRegister as u8) != 0, "core 0's register hand-off");
        }
    }
    let (passed, _) = result(&dev, args, 0, "AICPU dispatcher", &cpu);
    assert!(passed & (1 << Check::HandoffRegister as u8) != 0);
    cores.expect("the AICore launch reports success");
    cpu.expect("the AICPU launch reports success");
}

fn host_clock<C: Contract>(config: SimConfig) {
    let dev = SimDevice::<C>::open(TOPO, config).unwrap();
    pto_conformance::clock(&dev).unwrap_or_else(|f| panic!("{f}"));
    pto_conformance::clock_rate(&dev, &StdHostClock::new(), 20_000, Some(dev.config().freq_hz))
        .unwrap_or_else(|f| panic!("{f}"));
}

/// One line per (cache model, contract): a module with the AICPU, AICore and host-clock runs.
macro_rules! conformance_on {
    ($($model:ident: $contract:ty => $config:expr;)*) => {$(
        mod $model {
            use super::*;
            #[test]
            fn aicpu() {
                aicpu_suite::<$contract>($config)
            }
            #[test]
            fn aicore() {
                aicore_suite::<$contract>($config)
            }
            #[test]
            fn host_clock() {
                super::host_clock::<$contract>($config)
            }
        }
    )*};
}

conformance_on! {
    coherent_a2a3: HostNonCoherent => SimConfig { freq_hz: FREQ, ..SimConfig::default() };
    coherent_a5: HostCoherent => SimConfig { freq_hz: FREQ, ..SimConfig::default() };
    // The AICPU → AICore hand-off of `pto_conformance::handoff` publishes its payload by the
    // contract (a clean on a2a3), so it holds under both AICPU write policies.
    faithful_a2a3: HostNonCoherent => SimConfig { freq_hz: FREQ, cache: FAITHFUL, ..SimConfig::default() };
    faithful_a2a3_write_through: HostNonCoherent => SimConfig {
        freq_hz: FREQ,
        cache: FAITHFUL,
        aicpu_writes: Some(pto_sim::AicpuWritePolicy::WriteThrough),
        ..SimConfig::default()
    };
    faithful_a5: HostCoherent => SimConfig { freq_hz: FREQ, cache: FAITHFUL, ..SimConfig::default() };
    // The `sim-mini` board of `boards/` (same topology as `TOPO`): 100 MHz, faithful model.
    mini_board: HostNonCoherent => SimConfig {
        freq_hz: 100_000_000,
        gm_bytes: 256 << 20,
        cache: pto_sim::CacheModel::Faithful { seed: 0x6d69_6e69, evict_per_mille: 20 },
        ..SimConfig::default()
    };
}

/// The faithful cache model with random eviction on.
const FAITHFUL: pto_sim::CacheModel = pto_sim::CacheModel::Faithful { seed: 0xc0f, evict_per_mille: 20 };
