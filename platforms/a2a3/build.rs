//! On aarch64 Linux, the integration tests run the runtime with its device half logging through
//! defmt (the `pto-target-harness/defmt` dev-dependency) and decode the frames from their own
//! executable, so they link with defmt's table:
//!
//! * `defmt.x` as an *implicit* linker script — an input file that says `INCLUDE defmt.x`
//!   (found on the link search path defmt's build script adds) — which adds the `.defmt` info
//!   section to the default Linux script; `-Tdefmt.x` would replace that script;
//! * `-no-pie`: in a position-independent executable the dynamic loader relocates words of the
//!   `.defmt` section, which is not loaded, and the process faults at its first log.
//!
//! `docs/dependencies.md` (defmt) has the evidence. Nothing changes for other targets or for
//! the library itself.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if arch != "aarch64" || os != "linux" {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let script = out.join("defmt-implicit.x");
    std::fs::write(&script, "/* defmt's table, added to the default script */\nINCLUDE defmt.x\n")
        .expect("write the implicit linker script");
    println!("cargo:rustc-link-arg-tests={}", script.display());
    println!("cargo:rustc-link-arg-tests=-no-pie");
}
