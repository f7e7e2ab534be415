//! Every example's golden on both runtimes, on the selected board (run once more with
//! `--features board-sim-a5` for the a5 board). The same orchestration code runs on the
//! host-built graph and on the device-side runtime, and both must match the same golden.

use pto::prelude::*;
use pto_testkit::{RUNTIMES, ShapeKind};

fn device() -> (pto::Device, pto_testkit::Kernels) {
    pto_testkit::setup(pto::open).expect("open the selected board")
}

fn on_both(w: pto_testkit::Workload<pto::SelectedPlatform>) -> Vec<pto_testkit::Outcome> {
    let (dev, k) = device();
    RUNTIMES.iter().map(|&rt| w(&dev, &k, rt).unwrap_or_else(|e| panic!("runtime {}: {e}", rt.name()))).collect()
}

#[test]
fn vector_matches_golden() {
    for o in on_both(pto_testkit::vector) {
        assert_eq!(o.report.tasks, 5, "{:?}", o.runtime);
        assert_eq!(o.checked, pto_testkit::VECTOR_N as usize);
    }
}

#[test]
fn chain513_matches_golden() {
    for o in on_both(pto_testkit::chain513) {
        assert_eq!(o.report.tasks, 513, "{:?}", o.runtime);
        assert_eq!(o.report.dispatched, 513, "one subtask per AIV task");
    }
}

#[test]
fn mix_matches_golden() {
    for o in on_both(pto_testkit::mix) {
        assert_eq!(o.report.tasks, 2 * pto_testkit::MIX_TILES as u64);
        // Each MIX task dispatches one subtask per lane (3), each add one.
        assert_eq!(o.report.dispatched, 4 * pto_testkit::MIX_TILES as u64);
    }
}

#[test]
fn tiny_rings_reclaims_and_matches_golden() {
    let cfg = pto_testkit::tiny_ring_config();
    for o in on_both(pto_testkit::tiny_rings) {
        assert_eq!(o.report.tasks, 2 * pto_testkit::TINY_ITERS as u64);
        // 64 scopes of 3 slots each (one allocation record, two tasks) through windows of 8:
        // the run can only finish if the rings were reclaimed many times over.
        assert!(3 * pto_testkit::TINY_ITERS > 8 * cfg.rings.window[1]);
    }
}

#[test]
fn manual_scope_matches_golden() {
    for o in on_both(pto_testkit::manual_scope) {
        assert_eq!(o.report.tasks, 4);
    }
}

#[test]
fn dispatch_shapes_match_golden() {
    let (dev, k) = device();
    for kind in ShapeKind::ALL {
        for n in [1, 2, 300] {
            for rt in RUNTIMES {
                let p = pto_testkit::build_shape(&dev, &k, kind, n)
                    .unwrap_or_else(|e| panic!("{} N={n}: {e}", kind.name()));
                let r = p
                    .run_checked(&dev, rt)
                    .unwrap_or_else(|e| panic!("{} N={n} runtime {}: {e}", kind.name(), rt.name()));
                let dummy = matches!(kind, ShapeKind::DummyChain | ShapeKind::DummyFanout);
                if dummy {
                    assert_eq!(r.dispatched, 0, "dummy tasks never reach a core");
                }
            }
        }
    }
}

#[test]
fn every_core_handshakes_and_is_released() {
    for o in on_both(pto_testkit::vector) {
        let workers = pto::open().unwrap().topology().workers() as u64;
        assert_eq!((o.report.cores, o.report.released), (workers, workers), "{:?}", o.runtime);
    }
}

#[test]
fn runtime_kind_names() {
    assert_eq!(RuntimeKind::TensormapRing.name(), "trb");
}
