//! The attention workloads (`bgemm`, `paged_attention_small`): each matches its golden on
//! both runtimes with the same, exactly known task count, and runs clean under the faithful
//! cache model.

use pto_testkit::attention;

use pto_sim::CacheModel;

/// Run `w` on both runtimes of one device; both must pass their golden and complete
/// `expect_tasks` tasks, each dispatched to exactly one core.
fn on_both(w: pto_testkit::Workload<pto::SelectedPlatform>, expect_tasks: u64) -> Vec<pto_testkit::Outcome> {
    let (dev, k) = pto_testkit::setup(pto::open).expect("open the selected board");
    let outs: Vec<pto_testkit::Outcome> = pto_testkit::RUNTIMES
        .iter()
        .map(|&rt| w(&dev, &k, rt).unwrap_or_else(|e| panic!("runtime {}: {e}", rt.name())))
        .collect();
    for o in &outs {
        assert_eq!(o.report.tasks, expect_tasks, "{} on {}", o.name, o.runtime.name());
        assert_eq!(o.report.dispatched, expect_tasks, "{}: single-core tasks only", o.name);
    }
    assert_eq!(outs[0].report.tasks, outs[1].report.tasks, "both runtimes run the same graph");
    outs
}

#[test]
fn bgemm_matches_golden_on_both_runtimes() {
    assert_eq!(attention::BGEMM_TASKS, 1024);
    let elems = (attention::BGEMM_BATCH * (attention::BGEMM_MN_TILES * attention::BGEMM_TILE).pow(2)) as usize;
    for o in on_both(attention::bgemm, attention::BGEMM_TASKS) {
        assert_eq!(o.checked, elems);
    }
}

#[test]
fn paged_attention_matches_golden_on_both_runtimes() {
    // Three sequences of 2 + 3 + 4 blocks: 4 tasks per block, init and finalise per sequence.
    assert_eq!(attention::PA_TASKS, 4 * 9 + 2 * 3);
    let rows = attention::PA_BLOCK_TABLE.len() as u32 * attention::PA_Q_ROWS;
    for o in on_both(attention::paged_attention_small, attention::PA_TASKS) {
        assert_eq!(o.checked, (rows * attention::PA_HEAD_DIM) as usize);
    }
}

#[test]
fn registering_twice_reuses_the_func_ids() {
    let dev = pto::open().expect("open the selected board");
    let first = attention::AttnKernels::register(&dev).unwrap();
    let again = attention::AttnKernels::register(&dev).unwrap();
    let ids = |a: &attention::AttnKernels| [a.matmul, a.accumulate, a.qk, a.softmax, a.rescale, a.init, a.finalize];
    assert_eq!(ids(&first), ids(&again));
}

#[test]
fn attention_workloads_are_clean_under_the_faithful_cache_model() {
    let (dev, k) = pto_testkit::setup(pto::open).expect("open the selected board");
    dev.platform().set_cache_model(CacheModel::Faithful { seed: 3, evict_per_mille: 20 }).unwrap();
    for rt in pto_testkit::RUNTIMES {
        let b = attention::bgemm(&dev, &k, rt).unwrap_or_else(|e| panic!("bgemm on {}: {e}", rt.name()));
        assert_eq!(b.report.tasks, attention::BGEMM_TASKS);
        let p = attention::paged_attention_small(&dev, &k, rt)
            .unwrap_or_else(|e| panic!("paged_attention_small on {}: {e}", rt.name()));
        assert_eq!(p.report.tasks, attention::PA_TASKS);
    }
    assert_eq!(dev.platform().take_violations(), vec![]);
}
