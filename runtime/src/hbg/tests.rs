//! The graph builder's tests: dependency discovery, refused input, cycles and the image.

use super::*;
use crate::graph::FuncId;
use crate::layout::{ArgsHeader, IMAGE_MAGIC, ImageHeader, TaskRecord, TensorDesc};
use pto_hal::GmAddr;

fn ext(id: u64, bytes: u64) -> BufferRef {
    BufferRef { device: 0, id, placement: Placement::External(GmAddr(0x10000 * id)), bytes, dtype: DType::F32 }
}

fn table() -> FuncTable {
    let mut f = FuncTable::default();
    f.insert(0, "k", CoreType::Aiv, 0x100).unwrap();
    f.insert(1, "c", CoreType::Aic, 0x200).unwrap();
    f
}

#[test]
fn column_tiles_keep_both_writers() {
    // Two writers of interleaved column tiles: a reader of rows 1.. of the left tile must
    // still depend on the left writer (a bounding-range "latest writer" map loses it).
    let f = table();
    let mut g = GraphBuilder::new(&f, 1);
    let x = Tensor::whole(ext(1, 8 * 8 * 4), &[8, 8]).unwrap();
    let left = g.submit(Task::aiv(FuncId(0)).output(&x.view(&[0, 0], &[8, 4]).unwrap())).unwrap();
    let right = g.submit(Task::aiv(FuncId(0)).output(&x.view(&[0, 4], &[8, 4]).unwrap())).unwrap();
    let r = g.submit(Task::aiv(FuncId(0)).input(&x.view(&[1, 0], &[7, 4]).unwrap())).unwrap();
    assert_eq!(g.producers(r), &[left.0]);
    let both = g.submit(Task::aiv(FuncId(0)).input(&x.view(&[2, 3], &[1, 2]).unwrap())).unwrap();
    assert_eq!(g.producers(both), &[left.0, right.0]);
}

#[test]
fn raw_waw_discovered_war_needs_explicit() {
    let f = table();
    let mut g = GraphBuilder::new(&f, 1);
    let x = Tensor::whole(ext(1, 256), &[64]).unwrap();
    let lo = x.view(&[0], &[32]).unwrap();
    let hi = x.view(&[32], &[32]).unwrap();
    let w_lo = g.submit(Task::aiv(FuncId(0)).output(&lo)).unwrap();
    let w_hi = g.submit(Task::aiv(FuncId(0)).output(&hi)).unwrap();
    let r_all = g.submit(Task::aiv(FuncId(0)).input(&x)).unwrap();
    assert_eq!(g.producers(r_all), &[w_lo.0, w_hi.0]);
    // Write-after-read is not discovered...
    let w2 = g.submit(Task::aiv(FuncId(0)).output(&lo)).unwrap();
    assert_eq!(g.producers(w2), &[w_lo.0], "WAW on lo only");
    // ...unless declared.
    let w3 = g.submit(Task::aiv(FuncId(0)).output(&hi).after(r_all)).unwrap();
    assert_eq!(g.producers(w3), &[w_hi.0, r_all.0]);
    // NoDep and disjoint views add nothing.
    let y = Tensor::whole(ext(2, 256), &[64]).unwrap();
    let nd = g.submit(Task::aiv(FuncId(0)).no_dep(&x).output(&y)).unwrap();
    assert!(g.producers(nd).is_empty());
}

#[test]
fn bad_input_is_named() {
    let f = table();
    let mut g = GraphBuilder::new(&f, 1);
    let x = Tensor::whole(ext(1, 256), &[64]).unwrap();
    assert_eq!(g.submit(Task::aiv(FuncId(9)).input(&x)), Err(GraphError::UnknownFunc { task: 0, lane: 1, func: 9 }));
    assert!(matches!(g.submit(Task::aic(FuncId(0))), Err(GraphError::WrongCoreType { func: 0, .. })));
    let mut t = Task::aiv(FuncId(0));
    for _ in 0..33 {
        t = t.input(&x);
    }
    assert_eq!(g.submit(t), Err(GraphError::TooManyTensorArgs { task: 0, count: 33 }));
    let mut t = Task::aiv(FuncId(0));
    for i in 0..17 {
        t = t.scalar(i);
    }
    assert_eq!(g.submit(t), Err(GraphError::TooManyScalarArgs { task: 0, count: 17 }));
    assert_eq!(g.submit(Task::aiv(FuncId(0)).after(TaskId(5))), Err(GraphError::UnknownDependency { task: 0, dep: 5 }));
    assert_eq!(g.submit(Task::aiv(FuncId(0)).blocks(0)), Err(GraphError::BadBlockNum { task: 0, block_num: 0 }));
    assert_eq!(g.task_count(), 0, "failed submissions leave nothing behind");
}

#[test]
fn cycles_through_explicit_edges_are_rejected() {
    let f = table();
    let mut g = GraphBuilder::new(&f, 1);
    let a = g.submit(Task::dummy()).unwrap();
    let b = g.submit(Task::dummy().after(a)).unwrap();
    let c = g.submit(Task::dummy().after(b)).unwrap();
    assert!(g.check_acyclic().is_ok());
    g.depend(a, c).unwrap();
    assert_eq!(g.check_acyclic(), Err(GraphError::Cycle { tasks: alloc::vec![0, 1, 2] }));
    assert_eq!(g.depend(a, a), Err(GraphError::SelfDependency { task: 0 }));
}

#[test]
fn image_is_self_describing() {
    use zerocopy::FromBytes;
    let f = table();
    let mut g = GraphBuilder::new(&f, 7);
    let tmp = g.alloc_tensor(DType::F32, &[16]).unwrap();
    let x = Tensor::whole(ext(1, 64), &[16]).unwrap();
    g.submit(Task::aiv(FuncId(0)).input(&x).output(&tmp).scalar(5)).unwrap();
    g.submit(Task::aiv(FuncId(0)).input(&tmp).output(&x)).unwrap();
    let img = g.emit(GmAddr(0x9000_0000)).unwrap();
    let h = ImageHeader::read_from_prefix(&img).unwrap().0;
    assert_eq!((h.magic, h.task_count, h.fanout_len), (IMAGE_MAGIC, 2, 1));
    let r0 = TaskRecord::read_from_prefix(&img[h.tasks_off as usize..]).unwrap().0;
    assert_eq!((r0.fanin, r0.fanout_count), (0, 1));
    let args = h.tasks_off as i64 + r0.args_rel as i64;
    let ah = ArgsHeader::read_from_prefix(&img[args as usize..]).unwrap().0;
    assert_eq!((ah.tensors, ah.scalars), (2, 1));
    let d1 = TensorDesc::read_from_prefix(&img[args as usize + crate::layout::ARGS_HEAD as usize + 64..]).unwrap().0;
    assert_eq!(d1.addr, 0x9000_0000, "heap tensor resolved against the heap base");
}
