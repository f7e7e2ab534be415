//! Orchestration programs on a real device.
//!
//! On hardware an orchestration program cannot travel from the host as a function pointer:
//! it is linked into the AICPU image the board builds, and that image installs its table once
//! at start with [`install_programs`]. A handle is `1 + index` into the table; the HAL's
//! `resolve_program` checks the entry's type before handing it out.

use core::any::Any;
use core::sync::atomic::{AtomicPtr, Ordering};

/// The programs an AICPU image carries.
pub struct ProgramTable {
    /// Program `h` has handle `h + 1`.
    pub programs: &'static [&'static (dyn Any + Send + Sync)],
}

impl core::fmt::Debug for ProgramTable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "ProgramTable({} programs)", self.programs.len())
    }
}

static TABLE: AtomicPtr<ProgramTable> = AtomicPtr::new(core::ptr::null_mut());

/// Install the image's program table (once, before the first launch; a later call replaces it).
pub fn install_programs(table: &'static ProgramTable) {
    TABLE.store(core::ptr::from_ref(table).cast_mut(), Ordering::Release);
}

/// The program of `handle`, if installed and of type `F`.
pub fn resolve_program<F: Copy + 'static>(handle: u64) -> Option<F> {
    let p = TABLE.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: the only non-null value ever stored is a `&'static ProgramTable`.
    let table = unsafe { &*p };
    let idx = usize::try_from(handle.checked_sub(1)?).ok()?;
    let entry: &(dyn Any + Send + Sync) = *table.programs.get(idx)?;
    entry.downcast_ref::<F>().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(x: u32) -> u32 {
        x + 1
    }

    #[test]
    fn handles_resolve_by_index_and_type() {
        static P: fn(u32) -> u32 = prog;
        static T: ProgramTable = ProgramTable { programs: &[&P] };
        install_programs(&T);
        let f = resolve_program::<fn(u32) -> u32>(1).expect("installed program");
        assert_eq!(f(1), 2);
        assert!(resolve_program::<fn(u32) -> u32>(0).is_none(), "handle 0 is never a program");
        assert!(resolve_program::<fn(u32) -> u32>(2).is_none(), "past the table");
        assert!(resolve_program::<fn(u64) -> u64>(1).is_none(), "wrong type");
    }
}
