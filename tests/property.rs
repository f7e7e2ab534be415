//! Property: any random graph of tasks over views of a few buffers (random directions, random
//! overlaps, SPMD-free) computes on the device exactly what running its tasks one by one in
//! submission order computes on the host. Dependencies come from discovery (read-after-write,
//! write-after-write); write-after-read is declared explicitly, as a user must.

use std::sync::OnceLock;

use proptest::prelude::*;
use pto::prelude::*;

const BUFFERS: usize = 3;
const ROWS: u32 = 4; // each buffer: 4 rows of 16 floats (one cache line per row)

#[derive(Clone, Debug)]
struct ArgSpec {
    buffer: usize,
    row: u32,
    rows: u32,
    dir: Direction,
}

#[derive(Clone, Debug)]
struct TaskSpec {
    args: Vec<ArgSpec>,
    salt: u32,
}

fn dir() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::In), Just(Direction::Out), Just(Direction::InOut)]
}

fn arg() -> impl Strategy<Value = ArgSpec> {
    (0..BUFFERS, 0..ROWS, 1..=ROWS, dir()).prop_map(|(buffer, row, rows, dir)| ArgSpec {
        buffer,
        row,
        rows: rows.min(ROWS - row),
        dir,
    })
}

fn task() -> impl Strategy<Value = TaskSpec> {
    (proptest::collection::vec(arg(), 1..4), 0..1000u32).prop_map(|(mut args, salt)| {
        // One task never writes a row through two arguments (that would be a race inside the task).
        let mut written: Vec<(usize, u32)> = Vec::new();
        for a in args.iter_mut() {
            let rows: Vec<(usize, u32)> = (a.row..a.row + a.rows).map(|r| (a.buffer, r)).collect();
            let writes = matches!(a.dir, Direction::Out | Direction::InOut);
            let overlaps = rows.iter().any(|r| written.contains(r));
            if overlaps {
                a.dir = Direction::In;
            }
            if writes && !overlaps {
                written.extend(rows);
            }
        }
        // ...nor reads a row it also writes through another argument (order inside a kernel).
        for a in args.iter_mut() {
            if a.dir == Direction::In {
                let rows: Vec<(usize, u32)> = (a.row..a.row + a.rows).map(|r| (a.buffer, r)).collect();
                if rows.iter().any(|r| written.contains(r)) {
                    a.dir = Direction::NoDep;
                }
            }
        }
        TaskSpec { args, salt }
    })
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

/// Run the tasks one by one on host copies.
fn reference(tasks: &[TaskSpec], init: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut bufs = init.to_vec();
    for t in tasks {
        let view = |a: &ArgSpec| (a.row as usize * 16)..((a.row + a.rows) as usize * 16);
        let mut s = 0.0f32;
        for a in &t.args {
            if matches!(a.dir, Direction::In | Direction::InOut) {
                s += bufs[a.buffer][view(a)].iter().sum::<f32>();
            }
        }
        for a in &t.args {
            let r = view(a);
            match a.dir {
                Direction::Out => {
                    for (j, x) in bufs[a.buffer][r].iter_mut().enumerate() {
                        *x = s / 2.0 + t.salt as f32 + j as f32;
                    }
                }
                Direction::InOut => {
                    for x in bufs[a.buffer][r].iter_mut() {
                        *x = *x + s / 4.0 + t.salt as f32;
                    }
                }
                _ => {}
            }
        }
    }
    bufs
}

struct Fixture {
    dev: Device,
    f: FuncId,
    bufs: Vec<DeviceTensor>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dev = pto::open().unwrap();
        let f = dev.register_kernel("mix_args", CoreType::Aiv, k_mix_args).unwrap();
        let bufs = (0..BUFFERS).map(|_| dev.alloc::<f32>(&[ROWS * 16]).unwrap()).collect();
        Fixture { dev, f, bufs }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_graphs_match_the_sequential_reference(tasks in proptest::collection::vec(task(), 1..24)) {
        let fx = fixture();
        let init: Vec<Vec<f32>> = (0..BUFFERS).map(|b| (0..ROWS * 16).map(|i| ((b as u32 * 31 + i) % 7) as f32).collect()).collect();
        for (b, d) in fx.bufs.iter().zip(&init) {
            b.write(d).unwrap();
        }
        let graph = fx.dev.build(|g| {
            // Readers of each row since its last write, for write-after-read edges.
            let mut readers: Vec<Vec<Vec<TaskId>>> = vec![vec![Vec::new(); ROWS as usize]; BUFFERS];
            for t in &tasks {
                let mut task = Task::aiv(fx.f).scalar(t.salt as u64).scalar(mask_of(t));
                let mut war = Vec::new();
                for a in &t.args {
                    let view = fx.bufs[a.buffer].tensor().view(&[a.row * 16], &[a.rows * 16])?;
                    task = task.arg(&view, a.dir);
                    if matches!(a.dir, Direction::Out | Direction::InOut) {
                        for r in a.row..a.row + a.rows {
                            war.append(&mut readers[a.buffer][r as usize]);
                        }
                    }
                }
                for d in war {
                    task = task.after(d);
                }
                let id = g.submit(task)?;
                for a in &t.args {
                    if matches!(a.dir, Direction::In | Direction::InOut | Direction::NoDep) {
                        for r in a.row..a.row + a.rows {
                            readers[a.buffer][r as usize].push(id);
                        }
                    }
                }
            }
            Ok(())
        }).unwrap();
        fx.dev.run(&graph).unwrap();
        let want = reference(&tasks, &init);
        for (b, w) in fx.bufs.iter().zip(&want) {
            prop_assert_eq!(&b.read::<f32>().unwrap(), w);
        }
    }
}
