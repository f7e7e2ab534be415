//! Property: any random program of tasks over views of a few buffers — random task shapes
//! (AIV, AIC, dummy), random row/column views, random directions, random nested scopes —
//! computes, on BOTH runtimes, exactly what running its tasks one by one in submission order
//! computes on the host. Dependencies come from discovery (read-after-write,
//! write-after-write); write-after-read is declared explicitly, as a user must. The
//! device-side runtime runs with small rings so its reclaim paths are exercised.

use std::sync::OnceLock;

use proptest::prelude::*;
use pto::prelude::*;

const BUFFERS: usize = 3;
const ROWS: u32 = 4;
/// Columns per row: 32 floats, two cache lines, so each column half is whole lines (a half
/// line written by two cores at once is a real bug, which the faithful cache model reports).
const COLS: u32 = 32;

#[derive(Clone, Debug)]
struct ArgSpec {
    buffer: usize,
    row: u32,
    rows: u32,
    /// Column half: 0 = all columns, 1 = the left half, 2 = the right half.
    cols: u32,
    dir: Direction,
}

impl ArgSpec {
    fn col_range(&self) -> std::ops::Range<usize> {
        let h = COLS as usize / 2;
        match self.cols {
            1 => 0..h,
            2 => h..2 * h,
            _ => 0..2 * h,
        }
    }
    fn cells(&self) -> Vec<(usize, u32, usize)> {
        let mut v = Vec::new();
        for r in self.row..self.row + self.rows {
            for c in self.col_range() {
                v.push((self.buffer, r, c));
            }
        }
        v
    }
}

/// Task shapes: 0 = AIV, 1 = AIC, 2 = dummy (dependencies only).
#[derive(Clone, Debug)]
struct TaskSpec {
    args: Vec<ArgSpec>,
    salt: u32,
    kind: u32,
}

/// A program: tasks and nested scopes.
#[derive(Clone, Debug)]
enum Item {
    Task(TaskSpec),
    Scope(Vec<Item>),
}

fn dir() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::In), Just(Direction::Out), Just(Direction::InOut)]
}

fn arg() -> impl Strategy<Value = ArgSpec> {
    (0..BUFFERS, 0..ROWS, 1..=ROWS, 0..3u32, dir()).prop_map(|(buffer, row, rows, cols, dir)| ArgSpec {
        buffer,
        row,
        rows: rows.min(ROWS - row),
        cols,
        dir,
    })
}

fn task() -> impl Strategy<Value = TaskSpec> {
    (proptest::collection::vec(arg(), 1..4), 0..1000u32, prop_oneof![4 => Just(0u32), 2 => Just(1), 1 => Just(2)])
        .prop_map(|(mut args, salt, kind)| {
            // One task never writes a cell through two arguments (a race inside the task).
            let mut written: Vec<(usize, u32, usize)> = Vec::new();
            for a in args.iter_mut() {
                let cells = a.cells();
                let writes = matches!(a.dir, Direction::Out | Direction::InOut);
                let overlaps = cells.iter().any(|c| written.contains(c));
                if overlaps {
                    a.dir = Direction::In;
                }
                if writes && !overlaps {
                    written.extend(cells);
                }
            }
            // ...nor reads a cell it also writes through another argument (order inside a kernel).
            for a in args.iter_mut() {
                if a.dir == Direction::In && a.cells().iter().any(|c| written.contains(c)) {
                    a.dir = Direction::NoDep;
                }
            }
            TaskSpec { args, salt, kind }
        })
}

/// Up to 8 items per scope, scopes nested at most 3 deep (one open scope per ring).
fn items(depth: u32) -> BoxedStrategy<Vec<Item>> {
    items_of(depth, 8)
}

/// Up to `per_scope - 1` items per scope, nested at most 3 deep.
fn items_of(depth: u32, per_scope: usize) -> BoxedStrategy<Vec<Item>> {
    let leaf = task().prop_map(Item::Task);
    if depth >= 3 {
        proptest::collection::vec(leaf, 1..per_scope).boxed()
    } else {
        let nested = items_of(depth + 1, per_scope).prop_map(Item::Scope);
        proptest::collection::vec(prop_oneof![4 => leaf, 1 => nested], 1..per_scope).boxed()
    }
}

/// The kernel: s = sum of every element read; each Out element i := s/2 + salt + i; each InOut
/// element x := x + s/4 + salt. Scalar 0 = salt, scalar 1 = bitmask of read (bit k) and written
/// (bit 16 + k) arguments.
fn k_mix_args(k: &mut dyn KernelContext) {
    let salt = k.scalar_arg(0) as f32;
    let mask = k.scalar_arg(1);
    let mut s = 0.0f32;
    for i in 0..k.tensor_count() {
        if mask & (1 << i) != 0 {
            s += k.load::<f32>(i).iter().sum::<f32>();
        }
    }
    for i in 0..k.tensor_count() {
        if mask & (1 << (16 + i)) != 0 {
            let read = mask & (1 << i) != 0;
            let v: Vec<f32> = if read {
                k.load::<f32>(i).iter().map(|x| x + s / 4.0 + salt).collect()
            } else {
                (0..k.arg(i).elem_count()).map(|j| s / 2.0 + salt + j as f32).collect()
            };
            k.store(i, &v);
        }
    }
}

fn mask_of(t: &TaskSpec) -> u64 {
    let mut m = 0u64;
    for (i, a) in t.args.iter().enumerate() {
        if matches!(a.dir, Direction::In | Direction::InOut) {
            m |= 1 << i;
        }
        if matches!(a.dir, Direction::Out | Direction::InOut) {
            m |= 1 << (16 + i);
        }
    }
    m
}

fn flatten(items: &[Item], out: &mut Vec<TaskSpec>) {
    for i in items {
        match i {
            Item::Task(t) => out.push(t.clone()),
            Item::Scope(v) => flatten(v, out),
        }
    }
}

/// Run the tasks one by one on host copies (dummy tasks change nothing).
fn reference(tasks: &[TaskSpec], init: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut bufs = init.to_vec();
    for t in tasks.iter().filter(|t| t.kind != 2) {
        // Elements of a view in row-major order: (flat index in the buffer).
        let elems = |a: &ArgSpec| -> Vec<usize> {
            a.cells().into_iter().map(|(_, r, c)| r as usize * COLS as usize + c).collect()
        };
        let mut s = 0.0f32;
        for a in &t.args {
            if matches!(a.dir, Direction::In | Direction::InOut) {
                s += elems(a).iter().map(|&i| bufs[a.buffer][i]).sum::<f32>();
            }
        }
        for a in &t.args {
            match a.dir {
                Direction::Out => {
                    for (j, i) in elems(a).into_iter().enumerate() {
                        bufs[a.buffer][i] = s / 2.0 + t.salt as f32 + j as f32;
                    }
                }
                Direction::InOut => {
                    for i in elems(a) {
                        // Same association as the kernel: (x + s/4) + salt.
                        let x = bufs[a.buffer][i];
                        bufs[a.buffer][i] = x + s / 4.0 + t.salt as f32;
                    }
                }
                _ => {}
            }
        }
    }
    bufs
}

/// Readers of each element (buffer, row, column) since its last write.
type Readers = Vec<Vec<Vec<Vec<u64>>>>;

const OPEN: u64 = u64::MAX;
const CLOSE: u64 = u64::MAX - 1;

/// The program as orchestration scalars: OPEN / CLOSE markers around scopes; per task its
/// kind, salt, mask, argument count, each argument (buffer, row, rows, cols, direction), and
/// the submission indexes of the earlier readers it must wait for (write-after-read).
fn encode(items: &[Item], readers: &mut Readers, next: &mut u64, out: &mut Vec<u64>) {
    for i in items {
        match i {
            Item::Scope(v) => {
                out.push(OPEN);
                encode(v, readers, next, out);
                out.push(CLOSE);
            }
            Item::Task(t) => {
                out.extend([t.kind as u64, t.salt as u64, mask_of(t), t.args.len() as u64]);
                let mut war = Vec::new();
                for a in &t.args {
                    let d = match a.dir {
                        Direction::In => 0,
                        Direction::Out => 1,
                        Direction::InOut => 2,
                        _ => 3,
                    };
                    out.push(
                        a.buffer as u64 | (a.row as u64) << 8 | (a.rows as u64) << 16 | (a.cols as u64) << 24 | d << 32,
                    );
                    if matches!(a.dir, Direction::Out | Direction::InOut) {
                        for (b, r, c) in a.cells() {
                            war.append(&mut readers[b][r as usize][c]);
                        }
                    }
                }
                war.sort_unstable();
                war.dedup();
                out.push(war.len() as u64);
                out.extend(war);
                for a in &t.args {
                    if matches!(a.dir, Direction::In | Direction::InOut | Direction::NoDep) {
                        for (b, r, c) in a.cells() {
                            readers[b][r as usize][c].push(*next);
                        }
                    }
                }
                *next += 1;
            }
        }
    }
}

/// The orchestration: decode the scalars (after the func id in scalar 0) and submit.
fn orch_random(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let f = FuncId(args.s(0)? as u16);
    let mut at = 1usize;
    let mut ids = Vec::new();
    run_items(o, args, f, &mut at, &mut ids)
}

fn run_items(
    o: &mut Orch<'_>,
    args: &OrchArgs,
    f: FuncId,
    at: &mut usize,
    ids: &mut Vec<TaskId>,
) -> Result<(), OrchFail> {
    let sc = args.scalars();
    while *at < sc.len() {
        let w = sc[*at];
        *at += 1;
        match w {
            OPEN => o.scope(|s| run_items(s, args, f, at, ids))?,
            CLOSE => return Ok(()),
            kind => {
                let (salt, mask, n) = (sc[*at], sc[*at + 1], sc[*at + 2] as usize);
                *at += 3;
                let mut task = match kind {
                    0 => Task::aiv(f),
                    1 => Task::aic(f),
                    _ => Task::dummy(),
                };
                if kind != 2 {
                    task = task.scalar(salt).scalar(mask);
                }
                for _ in 0..n {
                    let a = sc[*at];
                    *at += 1;
                    let buf = args.t((a & 0xff) as usize)?;
                    let (row, rows, cols) = ((a >> 8) as u32 & 0xff, (a >> 16) as u32 & 0xff, (a >> 24) as u32 & 0xff);
                    let (c0, cn) = match cols {
                        1 => (0, COLS / 2),
                        2 => (COLS / 2, COLS / 2),
                        _ => (0, COLS),
                    };
                    let view = buf.view(&[row, c0], &[rows, cn])?;
                    let dir = match a >> 32 {
                        0 => Direction::In,
                        1 => Direction::Out,
                        2 => Direction::InOut,
                        _ => Direction::NoDep,
                    };
                    task = task.arg(&view, dir);
                }
                let war = sc[*at] as usize;
                *at += 1;
                for k in 0..war {
                    task = task.after(ids[sc[*at + k] as usize]);
                }
                *at += war;
                ids.push(o.submit(task)?);
            }
        }
    }
    Ok(())
}

struct Fixture {
    /// The two properties share the device; runs are taken one at a time.
    serial: parking_lot::Mutex<()>,
    dev: Device,
    f: FuncId,
    program: Program,
    bufs: Vec<DeviceTensor>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dev = pto::open().unwrap();
        let f = dev.register_kernel("mix_args", CoreType::Aiv, k_mix_args).unwrap();
        assert_eq!(dev.register_kernel("mix_args", CoreType::Aic, k_mix_args).unwrap(), f);
        let program = dev.register_orchestration("random", orch_random).unwrap();
        let bufs = (0..BUFFERS).map(|_| dev.alloc::<f32>(&[ROWS, COLS]).unwrap()).collect();
        Fixture { serial: parking_lot::Mutex::new(()), dev, f, program, bufs }
    })
}

/// Small rings: windows of 16, so scopes are reclaimed while the program runs.
fn small_rings() -> RingConfig {
    RingConfig::uniform(16, 64 << 10, 256)
}

/// Run `program` on both runtimes, the host-built graph on both executors (the device-side
/// runtime with `rings`), and compare with the sequential reference.
fn check_program(program: &[Item], rings: RingConfig) -> Result<(), TestCaseError> {
    let fx = fixture();
    let _one_at_a_time = fx.serial.lock();
    let mut tasks = Vec::new();
    flatten(program, &mut tasks);
    let init: Vec<Vec<f32>> =
        (0..BUFFERS).map(|b| (0..ROWS * COLS).map(|i| ((b as u32 * 31 + i) % 7) as f32).collect()).collect();
    let want = reference(&tasks, &init);
    let mut scalars = vec![fx.f.0 as u64];
    let mut readers: Readers = vec![vec![vec![Vec::new(); COLS as usize]; ROWS as usize]; BUFFERS];
    encode(program, &mut readers, &mut 0, &mut scalars);
    let mut args = OrchArgs::new();
    for b in &fx.bufs {
        args = args.tensor(b.tensor());
    }
    for v in scalars {
        args = args.scalar(v);
    }
    // The host-built graph on both executors (every generated graph runs resident: no
    // sync-start task), the device-side runtime on its own.
    let routes = [
        (RuntimeKind::HostBuiltGraph, pto::Executor::Legacy),
        (RuntimeKind::HostBuiltGraph, pto::Executor::Resident),
        (RuntimeKind::TensormapRing, pto::Executor::Auto),
    ];
    for (rt, ex) in routes {
        for (b, d) in fx.bufs.iter().zip(&init) {
            b.write(d).unwrap();
        }
        let cfg = RunConfig::default().with_runtime(rt).with_rings(rings.clone()).with_executor(ex);
        let r = fx.dev.run_program(&fx.program, &args, &cfg).unwrap_or_else(|e| panic!("{rt:?} on {ex}: {e}"));
        prop_assert_eq!(r.tasks, tasks.len() as u64);
        if rt == RuntimeKind::HostBuiltGraph {
            prop_assert_eq!(r.executor, ex, "{:?}", r.legacy_reason);
        }
        for (b, w) in fx.bufs.iter().zip(&want) {
            prop_assert_eq!(&b.read::<f32>().unwrap(), w, "runtime {:?} on {}", rt, ex);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_programs_match_the_sequential_reference_on_both_runtimes(program in items(0)) {
        check_program(&program, small_rings())?;
    }

    /// Windows of 4 with at most 3 items per scope: every ring is full most of the time, so
    /// nearly every submission waits for reclaim and reuses a slot, its edges and its heap
    /// bytes the moment they are free (never a deadlock: one open scope per ring holds at most
    /// 3 tasks).
    #[test]
    fn random_programs_under_constant_ring_pressure(program in items_of(0, 4)) {
        check_program(&program, RingConfig::uniform(4, 4 << 10, 64))?;
    }
}
