//! Builds the recording stand-in for the vendor runtime (`stub/acl_stub.c`) as a shared
//! library, `libascendcl.so` in `OUT_DIR`, and gives its path to the crate as
//! `ACL_STUB_LIBRARY` (the tests point the chip boards' binding at it).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=stub/acl_stub.c");
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let lib = out.join("libascendcl.so");
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    let status = Command::new(compiler.path())
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-D_ISOC11_SOURCE", "-O1", "-g"])
        .args(["-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-pthread"])
        .arg("-o")
        .arg(&lib)
        .arg("stub/acl_stub.c")
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "building stub/acl_stub.c failed");
    println!("cargo::rustc-env=ACL_STUB_LIBRARY={}", lib.display());
}
