//! Scratch directories for tests that write files (args dumps, traces, documents).

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A directory for one test's files under the system's temporary directory, named for the
/// test process, `suite` and `name`: it does not exist when this is made (a leftover of the
/// same name is removed), and it is removed with everything in it when this is dropped at the
/// end of a test that passed. A failing test's panic unwinds through the drop and leaves the
/// files where they are, for a look at what the run wrote. A full args dump of `chain513` is
/// 17 MB: without the removal every test run left such files behind.
///
/// It dereferences to its path and stands for it wherever a path is taken (`&dir`), so
/// `dir.clone()` is the `PathBuf` of a run configuration and `dir.join(..)` a file inside it.
///
/// ```
/// let dir = pto_testkit::ScratchDir::new("pto-doc-test", "example");
/// std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("a.txt"), b"x").unwrap();
/// let kept = dir.clone();
/// drop(dir);
/// assert!(!kept.exists());
/// ```
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// `<temp>/<suite>-<process id>-<name>`, not created (a run that dumps creates it).
    pub fn new(suite: &str, name: &str) -> ScratchDir {
        let d = std::env::temp_dir().join(format!("{suite}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        ScratchDir(d)
    }
}

impl Deref for ScratchDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for ScratchDir {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The test failed: its files stay for a look (the next run of it removes them).
            return;
        }
        // Nothing there (the test wrote nothing) is not an error.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::ScratchDir;

    /// A passing test's directory is gone after the drop; a failing one's (dropped while its
    /// thread panics) is kept.
    #[test]
    fn a_scratch_directory_is_removed_unless_its_test_failed() {
        let dir = ScratchDir::new("pto-testkit-test", "passed");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"x").unwrap();
        let path = dir.clone();
        drop(dir);
        assert!(!path.exists(), "removed after a pass");

        let kept = std::thread::spawn(|| {
            let dir = ScratchDir::new("pto-testkit-test", "failed");
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.clone();
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _held = dir;
                panic!("the test fails");
            }));
            path
        })
        .join()
        .unwrap();
        assert!(kept.exists(), "kept after a failure");
        // A new one of the same name starts empty.
        let again = ScratchDir::new("pto-testkit-test", "failed");
        assert!(!again.exists());
    }
}
