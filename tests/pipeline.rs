//! Runs back to back on one device, and a prepared successor overlapping its predecessor.

use pto::prelude::*;
use pto_testkit::ShapeKind;

#[test]
fn two_runs_back_to_back_on_one_device() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    let p = pto_testkit::build_shape(&dev, &k, ShapeKind::Chain, 200).unwrap_or_else(|e| panic!("{e}"));
    let a = p.run_checked(&dev, RuntimeKind::HostBuiltGraph).unwrap_or_else(|e| panic!("{e}"));
    let b = p.run_checked(&dev, RuntimeKind::HostBuiltGraph).unwrap_or_else(|e| panic!("{e}"));
    assert!(b.epoch > a.epoch, "every run has its own epoch");
    // Same graph, different workload, same device.
    pto_testkit::vector(&dev, &k, RuntimeKind::TensormapRing).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn prepared_successor_overlaps_its_predecessor() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    let long = pto_testkit::build_shape(&dev, &k, ShapeKind::Chain, 3000).unwrap_or_else(|e| panic!("{e}"));
    let short = pto_testkit::build_shape(&dev, &k, ShapeKind::Independent, 64).unwrap_or_else(|e| panic!("{e}"));
    long.reset().unwrap();
    short.reset().unwrap();

    let first = dev.prepare(&long.graph, &RunConfig::default()).unwrap();
    let slot_a = first.slot();
    // While the first run is only prepared, a successor cannot take a slot: it must overlap
    // execution (`prepare` would wait its turn; `try_prepare` says so).
    assert!(matches!(dev.try_prepare(&short.graph, &RunConfig::default()), Err(Error::Busy(_))));
    let a = first.launch().unwrap();
    // Prepared while the predecessor executes: it takes the other slot.
    let second = dev.prepare(&short.graph, &RunConfig::default()).unwrap();
    assert_ne!(second.slot(), slot_a, "same-slot exclusion");
    let overlapped = !a.is_done().unwrap();
    // Both slots live: a third run cannot take one now.
    assert!(matches!(dev.try_prepare(&short.graph, &RunConfig::default()), Err(Error::Busy(_))));
    let b = second.launch().unwrap();
    let ra = a.wait().unwrap_or_else(|e| panic!("{e}"));
    let rb = b.wait().unwrap_or_else(|e| panic!("{e}"));
    long.check(&ra).unwrap();
    short.check(&rb).unwrap();
    assert!(rb.epoch > ra.epoch);
    assert!(overlapped, "the successor was prepared while its predecessor ran (3000-task chain)");
}

#[test]
fn dropping_a_handle_fences_the_run() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    let p = pto_testkit::build_shape(&dev, &k, ShapeKind::Chain, 500).unwrap_or_else(|e| panic!("{e}"));
    p.reset().unwrap();
    let h = dev.prepare(&p.graph, &RunConfig::default()).unwrap().launch().unwrap();
    drop(h);
    dev.drain().unwrap();
    // The slot is free again and the device usable.
    let r = p.run_checked(&dev, RuntimeKind::HostBuiltGraph).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.tasks, 500);
}

#[test]
fn a5_board_runs_the_same_workload() {
    // Both simulated boards are always compiled; this opens the a5 one explicitly.
    let dev = pto::open_board::<pto::board::SimA5>().unwrap();
    assert_eq!(dev.topology(), Topology { clusters: 36, aicpu_threads: 5 });
    let f = dev.register_kernel("add1", CoreType::Aiv, pto_testkit::k_add1).unwrap();
    let y = dev.alloc::<f32>(&[108, 16]).unwrap();
    let graph = dev
        .build(|g| {
            for i in 0..108 {
                g.submit(Task::aiv(f).inout(&y.tensor().view(&[i, 0], &[1, 16])?))?;
            }
            Ok(())
        })
        .unwrap();
    let r = dev.run(&graph).unwrap();
    assert_eq!((r.tasks, r.cores, r.released), (108, 108, 108));
    assert_eq!(y.read::<f32>().unwrap(), vec![1.0; 108 * 16]);
}

#[test]
fn many_short_runs_back_to_back() {
    // Registers left by one run (DMB = IDLE, COND = EXITED) must never be taken for the next
    // run's: every launch starts from reset registers and every run must complete promptly.
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    for kind in [ShapeKind::DummyChain, ShapeKind::Chain] {
        let p = pto_testkit::build_shape(&dev, &k, kind, 1).unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..25 {
            p.run_checked(&dev, RuntimeKind::HostBuiltGraph).unwrap_or_else(|e| panic!("{} : {e}", kind.name()));
        }
    }
}

#[test]
fn runs_on_fewer_clusters_than_the_board() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    let p = pto_testkit::build_shape(&dev, &k, ShapeKind::Fanout, 40).unwrap_or_else(|e| panic!("{e}"));
    let topo = dev.topology();
    let most = (topo.clusters - 1).max(1);
    for (clusters, threads) in [(1, 1), (2.min(topo.clusters), 2.min(topo.aicpu_threads)), (most, topo.aicpu_threads)] {
        p.reset().unwrap();
        let cfg = RunConfig::default().with_clusters(clusters).with_aicpu_threads(threads);
        let r = dev.run_with(&p.graph, &cfg).unwrap_or_else(|e| panic!("{clusters} clusters: {e}"));
        p.check(&r).unwrap();
        assert_eq!((r.cores, r.released), (3 * clusters as u64, 3 * clusters as u64));
    }
    // Bad configurations are named.
    let cfg = RunConfig::default().with_clusters(99);
    let e = dev.run_with(&p.graph, &cfg);
    assert!(
        matches!(&e, Err(Error::Config(ConfigError::OutOfRange { field: "clusters", value: 99, min: 1, max }))
            if *max == u64::from(topo.clusters)),
        "{e:?}"
    );
    let cfg = RunConfig::default().with_aicpu_threads(0);
    let e = dev.run_with(&p.graph, &cfg);
    assert!(
        matches!(&e, Err(Error::Config(ConfigError::OutOfRange { field: "aicpu_threads", value: 0, min: 1, max }))
            if *max == u64::from(topo.aicpu_threads)),
        "{e:?}"
    );
}
