//! SPMD blocks and MIX lanes: every block of every lane runs exactly once and knows where it is.

use pto::prelude::*;

/// Block `b` of `B` writes `b + 1` into its own 16-float line of the output.
fn k_block_fill(k: &mut dyn KernelContext) {
    let b = k.block_idx();
    assert!(b < k.block_num(), "block index {b} out of {}", k.block_num());
    for j in 0..16 {
        k.set(0, &[b * 16 + j], (b + 1) as f32);
    }
}

/// MIX lanes mark their own line: AIC at slot 3b, AIV lane l at slot 3b + 1 + l.
fn k_mark_aic(k: &mut dyn KernelContext) {
    assert_eq!(k.core_type(), CoreType::Aic);
    let b = k.block_idx();
    k.set(0, &[b * 3 * 16], 1000.0 + b as f32);
}

fn k_mark_aiv(k: &mut dyn KernelContext) {
    assert_eq!(k.core_type(), CoreType::Aiv);
    let (b, lane) = (k.block_idx(), k.sub_block_id());
    assert!(lane < 2, "AIV lane {lane}");
    k.set(0, &[(b * 3 + 1 + lane) * 16], 2000.0 + (b * 10 + lane) as f32);
}

#[test]
fn spmd_aiv_blocks_each_run_once() {
    let dev = pto::open().unwrap();
    let f = dev.register_kernel("block_fill", CoreType::Aiv, k_block_fill).unwrap();
    // More blocks than AIV cores: blocks are re-queued until all are claimed.
    let blocks = dev.topology().clusters * 2 * 3 + 5;
    let out = dev.alloc::<f32>(&[blocks * 16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(f).output(&out.tensor()).blocks(blocks)).map(|_| ())).unwrap();
    let r = dev.run(&graph).unwrap();
    assert_eq!(r.tasks, 1);
    assert_eq!(r.dispatched, blocks as u64);
    let v = out.read::<f32>().unwrap();
    for b in 0..blocks as usize {
        assert!(v[b * 16..(b + 1) * 16].iter().all(|&x| x == (b + 1) as f32), "block {b}");
    }
}

#[test]
fn mix_spmd_blocks_place_three_lanes_per_cluster() {
    let dev = pto::open().unwrap();
    let aic = dev.register_kernel("mark", CoreType::Aic, k_mark_aic).unwrap();
    let aiv = dev.register_kernel("mark", CoreType::Aiv, k_mark_aiv).unwrap();
    assert_eq!(aic, aiv, "one name, one func id, two binaries");
    let blocks = dev.topology().clusters + 3;
    let out = dev.alloc::<f32>(&[blocks * 3 * 16]).unwrap();
    let graph = dev
        .build(|g| {
            let t = Task::new(Kind::Mix { aic, aiv0: aiv, aiv1: aiv }).output(&out.tensor()).blocks(blocks);
            // A consumer of the whole output runs only after every block of every lane.
            g.submit(t)?;
            Ok(())
        })
        .unwrap();
    let r = dev.run(&graph).unwrap();
    assert_eq!(r.dispatched, blocks as u64 * 3);
    let v = out.read::<f32>().unwrap();
    for b in 0..blocks as usize {
        assert_eq!(v[b * 3 * 16], 1000.0 + b as f32, "AIC of block {b}");
        assert_eq!(v[(b * 3 + 1) * 16], 2000.0 + (b * 10) as f32, "AIV lane 0 of block {b}");
        assert_eq!(v[(b * 3 + 2) * 16], 2000.0 + (b * 10 + 1) as f32, "AIV lane 1 of block {b}");
    }
}

#[test]
fn spmd_consumer_waits_for_every_block() {
    let dev = pto::open().unwrap();
    let fill = dev.register_kernel("block_fill", CoreType::Aiv, k_block_fill).unwrap();
    let sum = dev
        .register_kernel("sum", CoreType::Aiv, |k: &mut dyn KernelContext| {
            let s: f32 = k.load::<f32>(0).iter().sum();
            k.set(1, &[0], s);
        })
        .unwrap();
    let blocks = 100u32;
    let a = dev.alloc::<f32>(&[blocks * 16]).unwrap();
    let total = dev.alloc::<f32>(&[1]).unwrap();
    let graph = dev
        .build(|g| {
            g.submit(Task::aiv(fill).output(&a.tensor()).blocks(blocks))?;
            g.submit(Task::aiv(sum).input(&a.tensor()).output(&total.tensor()))?;
            Ok(())
        })
        .unwrap();
    dev.run(&graph).unwrap();
    let want: f32 = (1..=blocks).map(|b| 16.0 * b as f32).sum();
    assert_eq!(total.read::<f32>().unwrap(), vec![want]);
}
