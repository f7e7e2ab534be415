//! Dependency discovery is complete: for random tasks over row and column views of a few
//! buffers, every pair of tasks that touch a common element with at least one write
//! (read-after-write, write-after-write) is ordered in the built graph — directly or through
//! other tasks. (Write-after-read is the user's to declare and is not checked here.)

use pto_hal::{CoreType, GmAddr};
use pto_runtime::graph::{BufferRef, DType, Direction, FuncId, Placement, Task, Tensor};
use pto_runtime::hbg::{FuncTable, GraphBuilder};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Debug)]
struct A {
    buf: usize,
    r0: u32,
    rows: u32,
    c0: u32,
    cols: u32,
    dir: Direction,
}

impl A {
    fn cells(&self) -> Vec<(usize, u32, u32)> {
        let mut v = Vec::new();
        for r in self.r0..self.r0 + self.rows {
            for c in self.c0..self.c0 + self.cols {
                v.push((self.buf, r, c));
            }
        }
        v
    }
}

#[test]
fn discovery_orders_every_conflicting_pair() {
    let mut funcs = FuncTable::default();
    funcs.insert(0, "k", CoreType::Aiv, 0x100).unwrap();
    let bufs: Vec<Tensor> = (0..3u64)
        .map(|i| {
            let b = BufferRef {
                device: 0,
                id: i + 1,
                placement: Placement::External(GmAddr(0x10000 * (i + 1))),
                bytes: 4 * 16 * 4,
                dtype: DType::F32,
            };
            Tensor::whole(b, &[4, 16]).unwrap()
        })
        .collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..3000 {
        let mut g = GraphBuilder::new(&funcs, 1);
        let n = 2 + rng.below(12) as usize;
        let mut specs: Vec<Vec<A>> = Vec::new();
        for _ in 0..n {
            let mut args = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let r0 = rng.below(4) as u32;
                let rows = 1 + rng.below((4 - r0) as u64) as u32;
                let (c0, cols) = [(0, 16), (0, 8), (8, 8), (4, 8)][rng.below(4) as usize];
                let dir = [Direction::In, Direction::Out, Direction::InOut][rng.below(3) as usize];
                args.push(A { buf: rng.below(3) as usize, r0, rows, c0, cols, dir });
            }
            // Arguments of one task may overlap here (this checks ordering between tasks).
            let mut t = Task::aiv(FuncId(0)).allow_alias();
            for a in &args {
                t = t.arg(&bufs[a.buf].view(&[a.r0, a.c0], &[a.rows, a.cols]).unwrap(), a.dir);
            }
            g.submit(t).unwrap();
            specs.push(args);
        }
        // reach[j] = every task j waits for, transitively.
        let mut reach: Vec<Vec<bool>> = vec![vec![false; n]; n];
        for j in 0..n {
            for &p in g.producers(pto_runtime::graph::TaskId(j as u32)) {
                let p = p as usize;
                reach[j][p] = true;
                let via = reach[p].clone();
                for (r, v) in reach[j].iter_mut().zip(via) {
                    *r |= v;
                }
            }
        }
        let writes = |a: &A| matches!(a.dir, Direction::Out | Direction::InOut);
        let reads = |a: &A| matches!(a.dir, Direction::In | Direction::InOut);
        for j in 0..n {
            for i in 0..j {
                let conflict = specs[j].iter().any(|b| {
                    specs[i].iter().any(|a| {
                        writes(a) && (reads(b) || writes(b)) && a.cells().iter().any(|c| b.cells().contains(c))
                    })
                });
                assert!(
                    !conflict || reach[j][i],
                    "case {case}: task {j} conflicts with earlier task {i} but is not ordered after it\n{specs:#?}"
                );
            }
        }
    }
}
