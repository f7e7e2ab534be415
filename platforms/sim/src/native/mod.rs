//! Native kernels: C and C++ kernels compiled for the host as shared objects, called by the
//! simulated AICores through the native kernel ABI ([`pto_hal::native`]).
//!
//! `Natives` keeps every loaded object for the life of the device (an entry point stays
//! valid as long as its object is loaded), `call` stages a kernel's views and calls it, and
//! [`native_accesses`] says what a native kernel is given.

mod call;
mod views;

pub use call::FILL;
pub(crate) use call::call;
pub use views::{NativeAccess, native_accesses};
pub(crate) use views::{runs, span};

use parking_lot::RwLock;

use pto_hal::native::NativeEntry;

use crate::SimError;

/// The symbol a native kernel library exports when it holds a single kernel (the reference
/// runtime's convention): looked up when the kernel's own name is not exported.
pub const DEFAULT_ENTRY: &str = "kernel_entry";

/// Refuse an object that was not built with `include/pto_kernel.h` for this ABI: it must
/// define the marker [`ABI_MARKER`](pto_hal::native::ABI_MARKER) holding
/// [`NATIVE_ABI_VERSION`](pto_hal::native::NATIVE_ABI_VERSION). Nothing in the object is
/// called; the marker is only read.
fn check_marker(lib: &libloading::Library) -> Result<(), String> {
    use pto_hal::native::{ABI_MARKER, NATIVE_ABI_VERSION};
    let mut z = ABI_MARKER.as_bytes().to_vec();
    z.push(0);
    // SAFETY: the symbol is looked up as an address only (`*const u32`: nothing is called);
    // `lib` stays loaded while it is read below.
    let marker = unsafe { lib.get::<*const u32>(&z) }.map(|s| *s).map_err(|_| {
        format!("does not define the ABI marker `{ABI_MARKER}` (it was not built with include/pto_kernel.h): refused before any call")
    })?;
    if marker.is_null() || !marker.is_aligned() {
        return Err(format!("its ABI marker `{ABI_MARKER}` is not a 4-byte constant: refused before any call"));
    }
    // SAFETY: `marker` is the non-null, aligned address of the exported symbol of that name,
    // which pto_kernel.h defines as a `const uint32_t`; the object is loaded, so the address is
    // mapped. (An object that exports the name as something smaller is outside the ABI it
    // claims by exporting it.)
    let version = unsafe { marker.read_volatile() };
    if version != NATIVE_ABI_VERSION {
        return Err(format!(
            "its ABI marker `{ABI_MARKER}` is version {version}, this runtime's is {NATIVE_ABI_VERSION}: refused before any call"
        ));
    }
    Ok(())
}

/// One loaded native kernel.
struct Loaded {
    /// The object's path, as the loader was given it.
    path: String,
    /// The symbol the entry was found under.
    symbol: String,
    /// The kernel's name, for faults.
    name: String,
    entry: NativeEntry,
    /// Kept open for the device's life: `entry` points into it.
    _lib: std::sync::Arc<libloading::Library>,
}

/// The native kernels a device has loaded, by index.
#[derive(Default)]
pub(crate) struct Natives {
    loaded: RwLock<Vec<Loaded>>,
}

impl Natives {
    /// Load kernel `name` from the shared object at `path`: its entry is the symbol `name`,
    /// else [`DEFAULT_ENTRY`]. Loading the same entry of the same object twice returns the
    /// same index. An object that does not load or exports neither symbol is an error naming
    /// both.
    pub fn load(&self, name: &str, path: &str) -> Result<(u32, NativeEntry), SimError> {
        let err = |why: String| SimError::NotInstalled(format!("native kernel {name} ({path}): {why}"));
        // SAFETY: loading a shared object runs its initialisers. The user named this object as
        // a kernel library built for this host (see docs/kernels-in-c.md); what its
        // initialisers do is beyond the simulator's reach, like the kernel's own code.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| err(e.to_string()))?;
        check_marker(&lib).map_err(err)?;
        let mut found = None;
        for symbol in [name, DEFAULT_ENTRY] {
            let mut z = symbol.as_bytes().to_vec();
            z.push(0);
            // SAFETY: the symbol is taken as an entry of the native kernel ABI, the type the
            // user declares by loading the object as a kernel; the pointer is copied out and
            // used only while `lib` is kept loaded (in `Loaded`, for the device's life).
            if let Ok(s) = unsafe { lib.get::<NativeEntry>(&z) } {
                found = Some((*s, symbol));
                break;
            }
        }
        let (entry, symbol) = found.ok_or_else(|| err(format!("exports neither `{name}` nor `{DEFAULT_ENTRY}`")))?;
        let mut t = self.loaded.write();
        if let Some(i) = t.iter().position(|l| l.path == path && l.symbol == symbol) {
            return Ok((i as u32, t[i].entry));
        }
        t.push(Loaded {
            path: path.to_string(),
            symbol: symbol.to_string(),
            name: name.to_string(),
            entry,
            _lib: std::sync::Arc::new(lib),
        });
        Ok((t.len() as u32 - 1, entry))
    }

    /// How faults name native kernel `id`: its name and the object's file name.
    pub fn describe(&self, id: u32) -> String {
        match self.loaded.read().get(id as usize) {
            Some(l) => {
                let file =
                    std::path::Path::new(&l.path).file_name().map_or(l.path.as_str(), |f| f.to_str().unwrap_or(""));
                format!("`{}` ({file})", l.name)
            }
            None => format!("#{id}"),
        }
    }
}
