//! The runtime on the real a2a3 AICPU agent, on the target instruction set: the harness's
//! on-target suite (`pto_target_harness::runtime_on_target!`, one for both chips) over
//! `A2a3Aicpu`.
//!
//! Under `cargo test -p pto-a2a3 --target aarch64-unknown-linux-gnu` (qemu user mode, see
//! `.cargo/config.toml`), the runtime's real AICPU programs —
//! `pto_runtime::hbg::aicpu::aicpu_entry::<A2a3Aicpu>` (host-built graph) and
//! `pto_runtime::trb::aicpu_entry::<A2a3Aicpu>` (device-side runtime) — run on AICPU threads
//! built as `A2a3Aicpu` over GM in process memory and register windows as plain memory, with
//! the real `dc civac` / `dc cvac` maintenance, barriers and counter. AICores are threads
//! running the runtime's legacy executor (`pto_runtime::exec::entry::aicore_entry`) over the
//! harness's AICore agent. The host side is the runtime's own (`Device::new_in_process` over
//! `pto_target_harness::platform::OnTarget`). Workloads: `vector` and `chain513`, both
//! runtimes, against host goldens, on 3 AICPU threads (on the host-built graph, one owns no
//! cluster). The device half logs with defmt into a GM log ring (`pto_aarch64::devlog`) that
//! the test drains and decodes with `defmt-decoder` against this executable's own `.defmt`
//! table (`pto_target_harness::devlog`), and checks what was logged.
//! On other targets this file is empty: there is no a2a3 AICPU that is not aarch64.
#![cfg(target_arch = "aarch64")]

pto_target_harness::runtime_on_target! {
    /// The a2a3 chip as the harness needs it.
    chip A2a3 = "a2a3", crate pto_a2a3, agent A2a3Aicpu, threads 3
}
