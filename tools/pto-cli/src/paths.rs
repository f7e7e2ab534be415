//! The output paths of the commands (`--trace`, `--svg`, `--dump-dir`, `--json-file`), made
//! ready before anything runs: the rule is that a missing parent directory is created, and a
//! path that still cannot be written (its parent is a file, a directory is where the file
//! goes, no permission) is refused before the run, naming the flag and the path (exit status
//! 2). A run is never done to fail afterwards at writing what it made.

use std::path::Path;

use crate::Fail;

/// Make `file`, the value of `flag`, writable: create its missing parent directories, and
/// refuse a path that is a directory or whose directory cannot be made.
pub(crate) fn output_file(flag: &str, file: &Path) -> Result<(), Fail> {
    let refuse = |why: String| Fail(format!("{flag} {}: {why} (nothing was run)", file.display()), 2);
    if file.is_dir() {
        return Err(refuse("is a directory".into()));
    }
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| refuse(format!("cannot create {}: {e}", parent.display())))?;
    }
    Ok(())
}

/// Make `dir`, the value of `flag`, a directory (created with its parents when missing).
pub(crate) fn output_dir(flag: &str, dir: &Path) -> Result<(), Fail> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Fail(format!("{flag} {}: cannot create it: {e} (nothing was run)", dir.display()), 2))
}
