//! The examples the command line runs, by name (`pto run EXAMPLE`, `pto explore EXAMPLE`),
//! and the workload each name runs.

use clap::ValueEnum;
use pto::hal::HostPlatform;
use pto_testkit::Workload;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Example {
    Vector,
    Chain513,
    Mix,
    // Spelt as the cargo examples and the benchmark spell them (the hyphenated form is an
    // alias).
    #[value(name = "tiny_rings", alias = "tiny-rings")]
    TinyRings,
    #[value(name = "manual_scope", alias = "manual-scope")]
    ManualScope,
    Bgemm,
    #[value(name = "paged_attention_small", alias = "paged-attention-small")]
    PagedAttentionSmall,
}

/// The example's name as the runs print it, and its workload.
pub(crate) fn workload<P: HostPlatform>(e: Example) -> (&'static str, Workload<P>) {
    match e {
        Example::Vector => ("vector", pto_testkit::vector::<P>),
        Example::Chain513 => ("chain513", pto_testkit::chain513::<P>),
        Example::Mix => ("mix", pto_testkit::mix::<P>),
        Example::TinyRings => ("tiny_rings", pto_testkit::tiny_rings::<P>),
        Example::ManualScope => ("manual_scope", pto_testkit::manual_scope::<P>),
        Example::Bgemm => ("bgemm", pto_testkit::attention::bgemm::<P>),
        Example::PagedAttentionSmall => ("paged_attention_small", pto_testkit::attention::paged_attention_small::<P>),
    }
}
