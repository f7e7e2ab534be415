//! A wake ends one wait: the notification that wakes an agent blocked on a GM word is
//! consumed by the wait it ends, as a chip's wait for an event clears the event it woke on.
//!
//! Invariant checked: after an agent is woken once, its next wait on a word nobody writes
//! lasts until that wait's deadline. A notification left pending after the wake would end
//! the next wait at once — a wake for nothing, which a waiter that backs off on "nothing new"
//! pays with a delay (the args dump's resident route woke its cores twice per answer that
//! way). Both engines, both schedules of the coroutine engine.

use pto_hal::{
    AicpuAgent, AicpuLaunch, AicpuStream, DeviceMemory, GmAddr, HostNonCoherent, HostPlatform, Loader, Platform,
    ProgramKind, Stream, Topology,
};
use pto_sim::{Schedule, Sim, SimAicpu, SimConfig, SimDevice, SimEngine};

const TOPO: Topology = Topology { clusters: 1, aicpu_threads: 2 };
const PROGRAM: &str = "wakes_one_wait";
/// Words of the run, as offsets from the allocation (the launch argument).
const WAKE: u64 = 0;
const NEVER: u64 = 64;
/// Device ticks the second wait of thread 1 lasted (written by thread 1, read by the host).
const ELAPSED: u64 = 128;
/// Whether thread 1 saw the wake (1) before its second wait.
const WOKEN: u64 = 136;
/// The second wait's deadline, from its start.
const SECOND_WAIT_US: u64 = 5_000;

/// Thread 1 sleeps on `WAKE` until thread 0 writes it, then waits once on `NEVER`, which
/// nobody writes, and records how long that one wait lasted.
fn entry<A: AicpuAgent>(a: &A, l: AicpuLaunch<'_>) -> i32 {
    let (wake, never) = (l.args.offset(WAKE), l.args.offset(NEVER));
    let budget = a.now_ticks().saturating_add(a.ticks_from_micros(10_000_000));
    if l.thread_idx == 0 {
        // Let thread 1 reach its wait first (it may not have: then its first look sees the
        // word written and the test learns nothing, which the host's check below reports).
        let until = a.now_ticks().saturating_add(a.ticks_from_micros(2_000));
        while a.now_ticks() < until {
            a.wait_for_event(until);
        }
        a.store_direct(wake, 1);
        return 0;
    }
    let mut slept = false;
    while a.query(wake) == 0 {
        if a.now_ticks() >= budget {
            return 1;
        }
        slept = true;
        a.wait_for_word(wake, 0, budget);
    }
    a.store_direct(l.args.offset(WOKEN), slept as u64);
    let t0 = a.now_ticks();
    a.wait_for_word(never, 0, t0.saturating_add(a.ticks_from_micros(SECOND_WAIT_US)));
    a.store_direct(l.args.offset(ELAPSED), a.now_ticks().saturating_sub(t0));
    0
}

/// One launch: the second wait's length in µs, or `None` when thread 1 was not yet asleep when
/// thread 0 wrote the word (a host thread of the thread engine not scheduled for 2 ms).
fn launch(engine: SimEngine, schedule: Schedule) -> Option<u64> {
    let config = SimConfig { engine, schedule, ..SimConfig::default() };
    let dev = SimDevice::<HostNonCoherent>::open(TOPO, config).expect("open the simulated device");
    let args = dev.alloc(256, 64).expect("run memory");
    dev.memset(args, 0, 256).unwrap();
    <Sim<HostNonCoherent> as Platform>::install_aicpu_program(&dev, PROGRAM, entry::<SimAicpu<HostNonCoherent>>)
        .unwrap();
    let program = dev.load_program(ProgramKind::Aicpu, PROGRAM).expect("the installed program");
    let (mut aicpu, _aicore) = <Sim<HostNonCoherent> as HostPlatform>::create_streams(&dev).unwrap();
    aicpu.launch_aicpu(program, args, TOPO.aicpu_threads).unwrap();
    aicpu.synchronize(60_000_000).expect("the launch reports success");
    let word = |off: u64| {
        let mut b = [0u8; 8];
        dev.copy_d2h(&mut b, GmAddr(args.0 + off)).unwrap();
        u64::from_le_bytes(b)
    };
    (word(WOKEN) == 1).then(|| word(ELAPSED) * 1_000_000 / config.freq_hz)
}

fn run(engine: SimEngine, schedule: Schedule) {
    let Some(elapsed_us) = (0..5).find_map(|_| launch(engine, schedule)) else {
        panic!("in 5 launches, thread 1 was never asleep on the word when thread 0 wrote it");
    };
    assert!(
        elapsed_us >= SECOND_WAIT_US / 2,
        "the wait after a wake lasted {elapsed_us} µs of its {SECOND_WAIT_US} µs: the wake's notification was left \
         pending and ended it"
    );
}

#[test]
fn a_wake_ends_one_wait_on_the_coroutine_engine() {
    run(SimEngine::Coroutines { threads: 1 }, Schedule::Os);
}

#[test]
fn a_wake_ends_one_wait_on_a_seeded_schedule() {
    run(SimEngine::Coroutines { threads: 1 }, Schedule::Seeded { seed: 7, strategy: pto_sim::Strategy::Random });
}

#[test]
fn a_wake_ends_one_wait_on_the_thread_engine() {
    run(SimEngine::Threads, Schedule::Os);
}
