//! The committed C header of the device ABI (`include/pto_abi.h`) and its check file
//! (`include/pto_abi_check.c`) are what `pto_runtime::layout::c_abi` generates from the Rust
//! definitions now. `PTO_BLESS=1` rewrites them.

use std::path::PathBuf;

use pto_runtime::layout::c_abi;

fn current(file: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../include").join(file);
    if std::env::var_os("PTO_BLESS").is_some() {
        std::fs::write(&path, text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} is stale: regenerate it with `PTO_BLESS=1 cargo test -p pto-runtime --features std --test c_abi`",
        path.display()
    );
}

#[test]
fn the_committed_header_and_check_file_are_current() {
    current("pto_abi.h", &c_abi::header().unwrap());
    current("pto_abi_check.c", &c_abi::check().unwrap());
}

#[test]
fn a_description_that_disagrees_with_the_rust_type_is_refused() {
    let mut all = c_abi::structs();
    c_abi::validate(&all).unwrap();
    // A field dropped from a description leaves a gap.
    let d = all.iter_mut().find(|s| s.name == "pto_dispatch_payload").unwrap();
    d.fields.remove(2);
    let e = c_abi::validate(&all).unwrap_err();
    assert!(e.contains("pto_dispatch_payload.block_idx") && e.contains("missing"), "{e}");
    // A C type of another size.
    let mut all = c_abi::structs();
    let t = all.iter_mut().find(|s| s.name == "pto_tensor").unwrap();
    t.fields[3].cty = "int64_t";
    let e = c_abi::validate(&all).unwrap_err();
    assert!(e.contains("pto_tensor.version"), "{e}");
}
