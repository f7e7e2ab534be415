//! Builds the examples' native kernels (`kernels/*.cpp`, in the native kernel ABI of
//! `include/pto_kernel.h`) into host shared objects, one per kernel, each exporting
//! `kernel_entry`: `$OUT_DIR/native/lib<kernel>.so`. The directory is the crate's
//! `PTO_TESTKIT_NATIVE_DIR` (see `src/native.rs`). The C++ compiler is the one the `cc` crate
//! finds for the host (`CXX` overrides it).

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let include = manifest.join("../../include");
    let kernels = manifest.join("kernels");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("native");
    std::fs::create_dir_all(&out).expect("create the native kernel directory");
    println!("cargo:rerun-if-changed={}", kernels.display());
    println!("cargo:rerun-if-changed={}", include.join("pto_kernel.h").display());
    println!("cargo:rerun-if-changed={}", include.join("pto_abi.h").display());
    let compiler = cc::Build::new().cpp(true).cargo_metadata(false).opt_level(2).get_compiler();
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&kernels)
        .expect("read kernels/")
        .map(|e| e.expect("a kernels/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
        .collect();
    sources.sort();
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        build(&compiler, src, &include, &kernels, &out);
    }
    println!("cargo:rustc-env=PTO_TESTKIT_NATIVE_DIR={}", out.display());
}

/// Compile `src` into `out/lib<stem>.so`, failing the build with the compiler's output.
fn build(compiler: &cc::Tool, src: &Path, include: &Path, kernels: &Path, out: &Path) {
    let stem = src.file_stem().and_then(|s| s.to_str()).expect("a kernel file name");
    let so = out.join(format!("lib{stem}.so"));
    let mut cmd = compiler.to_command();
    cmd.args(["-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(include)
        .arg("-I")
        .arg(kernels)
        .arg("-o")
        .arg(&so)
        .arg(src);
    let res = cmd.output().unwrap_or_else(|e| panic!("cannot run the C++ compiler ({cmd:?}): {e}"));
    if !res.status.success() {
        panic!(
            "compiling the native kernel {} failed:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        );
    }
}
