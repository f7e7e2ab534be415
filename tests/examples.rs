//! Every example's golden, on the selected board (run once more with
//! `--features board-sim-a5` for the a5 board).

#[path = "../examples/common/mod.rs"]
mod common;

use common::ShapeKind;

fn device() -> (pto::Device, common::Kernels) {
    common::setup().expect("open the selected board")
}

#[test]
fn vector_matches_golden() {
    let (dev, k) = device();
    let o = common::vector(&dev, &k).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.report.tasks, 5);
    assert_eq!(o.checked, common::VECTOR_N as usize);
}

#[test]
fn chain513_matches_golden() {
    let (dev, k) = device();
    let o = common::chain513(&dev, &k).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.report.tasks, 513);
    assert_eq!(o.report.dispatched, 513, "one subtask per AIV task");
}

#[test]
fn mix_matches_golden() {
    let (dev, k) = device();
    let o = common::mix(&dev, &k).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(o.report.tasks, 2 * common::MIX_TILES as u64);
    // Each MIX task dispatches one subtask per lane (3), each add one.
    assert_eq!(o.report.dispatched, 4 * common::MIX_TILES as u64);
}

#[test]
fn dispatch_shapes_match_golden() {
    let (dev, k) = device();
    for kind in ShapeKind::ALL {
        for n in [1, 2, 300] {
            let p = common::build_shape(&dev, &k, kind, n).unwrap_or_else(|e| panic!("{} N={n}: {e}", kind.name()));
            let r = p.run_checked(&dev).unwrap_or_else(|e| panic!("{} N={n}: {e}", kind.name()));
            let dummy = matches!(kind, ShapeKind::DummyChain | ShapeKind::DummyFanout);
            if dummy {
                assert_eq!(r.dispatched, 0, "dummy tasks never reach a core");
            }
        }
    }
}

#[test]
fn every_core_handshakes_and_is_released() {
    let (dev, k) = device();
    let o = common::vector(&dev, &k).unwrap_or_else(|e| panic!("{e}"));
    let workers = dev.topology().workers() as u64;
    assert_eq!((o.report.cores, o.report.released), (workers, workers));
}
