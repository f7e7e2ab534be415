//! Compiles the C executor twice: over the simulator backend with the host's C compiler (C11,
//! linked into this crate), and over the chip backend with the host's C++ compiler against a
//! stand-in of the vendor's names (C++17, never linked: it checks the chip backend's types on
//! every build). Warnings are errors in both.

use std::path::PathBuf;

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let include = here.join("../../include");
    for f in ["pto_abi.h", "pto_aicore_intrinsics.h", "pto_aicore_sim.h", "pto_aicore_chip.h", "pto_aicore_exec.h"] {
        println!("cargo:rerun-if-changed={}", include.join(f).display());
    }
    println!("cargo:rerun-if-changed=csrc");
    println!("cargo:rerun-if-changed=build.rs");

    cc::Build::new()
        .file(here.join("csrc/pto_aicore_exec.c"))
        .include(&include)
        .std("c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("pto_aicore_exec");

    cc::Build::new()
        .cpp(true)
        .file(here.join("csrc/chip_check.cpp"))
        .include(&include)
        .include(here.join("csrc"))
        .include(here.join("csrc/chip_stub"))
        .std("c++17")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .cargo_metadata(false)
        .compile("pto_aicore_chip_check");
}
