//! Host-only microbenchmarks on criterion: the tensor map, the host graph build and the ready
//! queue, each in isolation (no launch, nothing running on the simulated device).
//!
//! `cargo bench --bench host` runs them all (under a minute on a 2-core machine);
//! `cargo bench --bench host -- tensor_map` runs the groups whose name matches. Every group
//! warms up for 0.5 s and measures 20 samples over about 2 s; criterion keeps the last run under
//! `target/criterion/` and reports the change against it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use pto::hal::MAX_TENSOR_DIMS;
use pto::prelude::*;
use pto::runtime::exec::aicpu::queue::ReadyQueue;
use pto::runtime::tensormap::{Region, TensorMap};
use pto_testkit::ShapeKind;

/// Live entries the tensor map holds while it is measured.
const MAP_SIZES: [u64; 3] = [64, 1024, 16384];
/// Tasks in the built graphs.
const GRAPH_SIZES: [u32; 2] = [100, 1000];
/// Elements per row of the tensor-map regions (f32).
const ROW: u32 = 16;

/// Row `i` of a `[rows, 16]` f32 buffer, as `view(&[i, 0], &[1, 16])` names it: the regions the
/// independent and fanout shapes write.
fn row(i: u64) -> Region {
    let mut shape = [1; MAX_TENSOR_DIMS];
    let mut strides = [1; MAX_TENSOR_DIMS];
    shape[1] = ROW;
    strides[0] = ROW;
    Region { buffer: 7, offset: i * ROW as u64, elem_bytes: 4, ndims: 2, shape, strides }
}

/// A map holding `n` live entries: rows `0..n` of one buffer, row `i` written by producer `i`.
fn filled(n: u64) -> TensorMap<u32> {
    let mut m = TensorMap::new(usize::MAX);
    for i in 0..n {
        m.insert(&row(i), i as u32).expect("unbounded map");
    }
    assert_eq!(m.len() as u64, n, "disjoint rows stay separate entries");
    m
}

/// The tensor map (`pto_runtime::tensormap::TensorMap<u32>`, the host builder's producer type)
/// holding N = 64, 1024 and 16384 live entries, the rows of one `[N, 16]` f32 buffer:
///
/// * `lookup/N`: one lookup of a row (cycling through all rows), which finds its one writer;
///   the time per lookup.
/// * `insert_covering/N`: one insert of a row that exactly covers the row's current entry, as
///   a new writer of the same view does: the covered entry is found and dropped, the new one
///   stored, and the map stays at N entries; the time per insert.
/// * `fill/N`: N inserts of disjoint rows into an empty map (so it grows from 0 to N); the
///   throughput is in inserts (elements) per second. Dropping the filled map is not measured.
fn tensor_map(c: &mut Criterion) {
    let mut g = c.benchmark_group("tensor_map");
    for n in MAP_SIZES {
        g.throughput(Throughput::Elements(1));
        let m = filled(n);
        let mut out = Vec::with_capacity(4);
        m.lookup(&row(n / 2), &mut out);
        assert_eq!(out, [(n / 2) as u32], "a row has one writer");
        let mut i = 0u64;
        g.bench_with_input(BenchmarkId::new("lookup", n), &n, |b, &n| {
            b.iter(|| {
                out.clear();
                m.lookup(black_box(&row(i % n)), &mut out);
                i += 1;
                out.len()
            })
        });

        let mut m = filled(n);
        let mut i = 0u64;
        g.bench_with_input(BenchmarkId::new("insert_covering", n), &n, |b, &n| {
            b.iter(|| {
                let r = m.insert(black_box(&row(i % n)), i as u32);
                i += 1;
                r
            })
        });
        assert_eq!(m.len() as u64, n, "a covering insert keeps the map's size");

        g.throughput(Throughput::Elements(n));
        g.bench_with_input(BenchmarkId::new("fill", n), &n, |b, &n| {
            b.iter_batched(
                || TensorMap::<u32>::new(usize::MAX),
                |mut m| {
                    for i in 0..n {
                        m.insert(&row(i), i as u32).expect("unbounded map");
                    }
                    m
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// Building a host-built graph of N = 100 and 1000 chained tasks (each `+1` task reads and
/// writes the same `[16]` f32 tensor, so task i depends on task i - 1) on the selected
/// simulated board, without running it. The device is opened once, outside the measurement;
/// what is measured is the whole build: dependency discovery through the tensor map, the
/// acyclicity check and the emission of the image, plus dropping the graph.
///
/// * `closure/N`: `Device::build` with a closure that submits the N tasks.
/// * `program/N`: `Device::build_program` of the registered dispatch-shape orchestration (the
///   `chain` shape), as `cargo bench --bench dispatch` times the host-built graph's submission.
fn graph_build(c: &mut Criterion) {
    let (dev, k) = pto_testkit::setup(pto::open).expect("open the simulated device");
    let x = dev.alloc::<f32>(&[16]).expect("alloc");
    let mut g = c.benchmark_group("graph_build");
    for n in GRAPH_SIZES {
        g.throughput(Throughput::Elements(n as u64));
        let xt = x.tensor();
        g.bench_with_input(BenchmarkId::new("closure", n), &n, |b, &n| {
            b.iter(|| {
                dev.build(|gb| {
                    for _ in 0..n {
                        gb.submit(Task::aiv(k.inc0).inout(&xt))?;
                    }
                    Ok(())
                })
                .expect("build")
            })
        });

        let p = pto_testkit::build_shape(&dev, &k, ShapeKind::Chain, n).expect("chain shape");
        assert_eq!(p.graph.task_count(), n);
        g.bench_with_input(BenchmarkId::new("program", n), &n, |b, _| {
            b.iter(|| dev.build_program(&p.program, &p.args).expect("build"))
        });
    }
    g.finish();
}

/// The ready queue (`pto_runtime::exec::aicpu::queue::ReadyQueue`, the lock-free MPMC queue of task ids):
///
/// * `push_pop`: one push then one pop on an empty queue, one thread (no contention); the time
///   per value.
/// * `fill_drain/1024`: 1024 pushes into an empty queue of capacity 1024, then 1024 pops, one
///   thread; the throughput in values (each pushed and popped once) per second.
/// * `two_threads`: a producer thread pushes while the measuring thread pops, both spinning
///   when the queue is full or empty (capacity 1024); the time per value handed over. It
///   includes starting the producer thread once per sample, and on a loaded 2-core machine it
///   mostly measures how the two threads share the cores.
fn ready_queue(c: &mut Criterion) {
    let mut g = c.benchmark_group("ready_queue");
    g.throughput(Throughput::Elements(1));
    let q = ReadyQueue::with_capacity(1024);
    let mut v = 0u32;
    g.bench_function("push_pop", |b| {
        b.iter(|| {
            q.push(black_box(v)).expect("empty queue");
            v = v.wrapping_add(1);
            q.pop()
        })
    });

    g.throughput(Throughput::Elements(1024));
    g.bench_function(BenchmarkId::new("fill_drain", 1024), |b| {
        b.iter(|| {
            for v in 0..1024 {
                q.push(black_box(v)).expect("room for 1024");
            }
            let mut sum = 0u64;
            while let Some(v) = q.pop() {
                sum += v as u64;
            }
            sum
        })
    });

    g.throughput(Throughput::Elements(1));
    g.bench_function("two_threads", |b| {
        b.iter_custom(|iters| {
            let q = ReadyQueue::with_capacity(1024);
            let start = Instant::now();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for i in 0..iters {
                        while q.push(i as u32).is_err() {
                            std::hint::spin_loop();
                        }
                    }
                });
                let mut got = 0;
                while got < iters {
                    match q.pop() {
                        Some(v) => {
                            black_box(v);
                            got += 1;
                        }
                        None => std::hint::spin_loop(),
                    }
                }
            });
            start.elapsed()
        })
    });
    g.finish();
}

fn main() {
    // What `criterion_group!` / `criterion_main!` expand to, written out (their generated
    // function would carry no doc comment): the command line (filters, `--list`, …) wins over
    // the short defaults.
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    tensor_map(&mut c);
    graph_build(&mut c);
    ready_queue(&mut c);
    c.final_summary();
}
