//! `pto-device`: the device library — the runtime's AICPU programs built for the AICPU
//! (`aarch64-unknown-linux-gnu`) over the chip's real AICPU agent, exported as `extern "C"`
//! entry points a vendor AICPU launch can call.
//!
//! ```sh
//! cargo build -p pto-device --release --target aarch64-unknown-linux-gnu            # a2a3 (default)
//! cargo build -p pto-device --release --target aarch64-unknown-linux-gnu \
//!     --no-default-features --features a5                                            # a5
//! nm -D --defined-only target/aarch64-unknown-linux-gnu/release/libpto_device.so | grep ' T pto_'
//! ```
//!
//! # One chip per build, symbols named as the runtime names its programs
//!
//! A library is built for **one** chip, chosen by cargo feature (`a2a3`, the default, or `a5`;
//! both or neither is a compile error naming them). Its entry symbols are exactly the names
//! the host loads by ([`pto_runtime::programs`]) — checked at compile time:
//!
//! | symbol | program | runs |
//! |---|---|---|
//! | `pto_hbg_aicpu` ([`HBG_AICPU`](pto_runtime::programs::HBG_AICPU)) | host-built graph scheduler | [`pto_runtime::hbg::aicpu::aicpu_entry`] |
//! | `pto_trb_aicpu` ([`TRB_AICPU`](pto_runtime::programs::TRB_AICPU)) | device-side runtime (orchestrator + schedulers) | [`pto_runtime::trb::aicpu_entry`] |
//!
//! so a host finds a program under the same name on every chip, and one library never carries
//! code for a chip it does not run on. The AICore program
//! ([`LEGACY_AICORE`](pto_runtime::programs::LEGACY_AICORE)) is not here: on hardware the AICore
//! side is compiled by the vendor toolchain, and the Rust layouts are its ABI.
//!
//! # The entry points
//!
//! ```c
//! int32_t pto_hbg_aicpu(const PtoDeviceLaunch *launch, uint32_t thread_idx, uint32_t thread_count);
//! int32_t pto_trb_aicpu(const PtoDeviceLaunch *launch, uint32_t thread_idx, uint32_t thread_count);
//! ```
//!
//! A vendor AICPU launch gives a kernel its argument pointer and the thread's index and count.
//! The agent needs more than that — where GM is mapped in the AICPU process and where each
//! core's register window is — so the argument is a [`DeviceLaunch`] block (`#[repr(C)]`, 48
//! bytes) that the host fills once per device and per run: the runtime's launch descriptor,
//! the GM mapping, and the register-window table. Each call builds the chip's agent over
//! them and runs the program; 0 is success, any other value the program's status (or
//! [`STATUS_BAD_LAUNCH`] for a block that cannot be used).
//!
//! Each program's static storage — the [`AicpuLaunch::scratch`] cell the runtime's threads
//! share within a launch — is one `static AtomicPtr` per entry point: launches of one program
//! run one after another on the AICPU stream, and the runtime resets the cell to null when the
//! last thread of a launch leaves.
//!
//! # `std`, allocation and panics
//!
//! The AICPU path is `core` + `alloc`: the agent (`pto-a2a3` / `pto-a5`, `#![no_std]`) and the
//! runtime's device side (`no_std` + `alloc`). The library still links `std` (this crate is
//! `#![no_std]` with `extern crate std`) for two things only:
//!
//! * **the global allocator** — `std`'s default, `System`, i.e. the `malloc` of the AICPU's
//!   Linux user space (glibc). The device runs a full Linux process, so its allocator is the
//!   one every other AICPU kernel uses; writing another would only add risk;
//! * **the panic handler** — a panic inside an `extern "C"` entry aborts the AICPU process
//!   (Rust does not unwind out of `extern "C"`), which the host's stream reports as a failed
//!   launch, as `A2a3Aicpu::run_program` documents.
//!
//! On targets other than aarch64 only [`DeviceLaunch`] exists (hosts fill it); the entry
//! points need the aarch64 agent.
#![no_std]

// Linked for the global allocator (`System`, the AICPU's glibc malloc) and the panic handler;
// the entry points themselves use `core` and `alloc` only.
extern crate std;

#[cfg(all(feature = "a2a3", feature = "a5"))]
compile_error!(
    "pto-device: features `a2a3` and `a5` are both on; a device library is built for one chip (use `--no-default-features --features a5` for a5)"
);
#[cfg(not(any(feature = "a2a3", feature = "a5")))]
compile_error!("pto-device: no chip feature; enable exactly one of `a2a3` (default) or `a5`");

#[cfg(doc)]
use pto_hal::AicpuLaunch;

/// `"PTOL"`, little-endian: the first word of a [`DeviceLaunch`].
pub const LAUNCH_MAGIC: u32 = u32::from_le_bytes(*b"PTOL");
/// The layout version of [`DeviceLaunch`].
pub const LAUNCH_VERSION: u32 = 1;
/// Status of an entry point given a launch block it cannot use (null, misaligned, wrong magic
/// or version, empty or wrapping GM, no register windows, `thread_idx >= thread_count`).
pub const STATUS_BAD_LAUNCH: i32 = -210;

/// The chip this library is built for.
#[cfg(feature = "a2a3")]
pub const CHIP: &str = "a2a3";
/// The chip this library is built for.
#[cfg(all(feature = "a5", not(feature = "a2a3")))]
pub const CHIP: &str = "a5";

/// The argument of an AICPU entry point: what the agent needs beyond the vendor launch's
/// thread index and count. Filled by the host in device memory the AICPU can read; every
/// address is a virtual address of the AICPU process.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceLaunch {
    /// [`LAUNCH_MAGIC`].
    pub magic: u32,
    /// [`LAUNCH_VERSION`].
    pub version: u32,
    /// The runtime's launch descriptor (`AicpuLaunch::args`), inside GM.
    pub desc: u64,
    /// First byte of GM as mapped in the AICPU process.
    pub gm_base: u64,
    /// Bytes of GM mapped from `gm_base`.
    pub gm_len: u64,
    /// Address of the register-window table: `reg_window_count` 8-byte bases, indexed by
    /// physical core id (0 for a core without a window), each mapping at least the chip's
    /// `REG_WINDOW_BYTES` of that core's registers.
    pub reg_windows: u64,
    /// Entries of the register-window table (the device's physical cores).
    pub reg_window_count: u32,
    /// Zero.
    pub reserved: u32,
}

const _: () = assert!(core::mem::size_of::<DeviceLaunch>() == 48);
const _: () = assert!(core::mem::align_of::<DeviceLaunch>() == 8);
const _: () = assert!(core::mem::offset_of!(DeviceLaunch, desc) == 8);
const _: () = assert!(core::mem::offset_of!(DeviceLaunch, reg_windows) == 32);
const _: () = assert!(core::mem::offset_of!(DeviceLaunch, reg_window_count) == 40);

impl DeviceLaunch {
    /// A block for the runtime descriptor `desc`, GM `[gm_base, gm_base + gm_len)` and the
    /// window table at `reg_windows` (`reg_window_count` entries).
    pub const fn new(desc: u64, gm_base: u64, gm_len: u64, reg_windows: u64, reg_window_count: u32) -> DeviceLaunch {
        DeviceLaunch {
            magic: LAUNCH_MAGIC,
            version: LAUNCH_VERSION,
            desc,
            gm_base,
            gm_len,
            reg_windows,
            reg_window_count,
            reserved: 0,
        }
    }

    /// Whether the numbers of the block are usable: magic, version, a non-empty GM range that
    /// does not wrap and holds the descriptor, and a non-null, 8-aligned, non-empty window
    /// table. (Whether the memory is mapped is the caller's promise, not checkable here.)
    pub fn is_well_formed(&self) -> bool {
        let gm = match pto_aarch64::GmRegion::new(pto_hal::GmAddr(self.gm_base), self.gm_len) {
            Some(gm) => gm,
            None => return false,
        };
        self.magic == LAUNCH_MAGIC
            && self.version == LAUNCH_VERSION
            && gm.contains(pto_hal::GmAddr(self.desc), 8)
            && self.reg_windows != 0
            && self.reg_windows.is_multiple_of(8)
            && self.reg_window_count != 0
    }
}

/// `const` string equality, so the exported symbol names are checked against the runtime's.
#[cfg(any(target_arch = "aarch64", test))]
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(target_arch = "aarch64")]
mod entries {
    use core::sync::atomic::AtomicPtr;

    use pto_aarch64::GmRegion;
    use pto_hal::{AicpuLaunch, GmAddr};

    use super::{DeviceLaunch, STATUS_BAD_LAUNCH, same};

    /// The chip's AICPU agent.
    #[cfg(feature = "a2a3")]
    pub type Agent<'r> = pto_a2a3::A2a3Aicpu<'r>;
    /// The chip's AICPU agent.
    #[cfg(all(feature = "a5", not(feature = "a2a3")))]
    pub type Agent<'r> = pto_a5::A5Aicpu<'r>;

    /// Check the block, build the agent over it and run `entry` on this thread.
    ///
    /// # Safety
    ///
    /// As for the entry points.
    unsafe fn run<'r>(
        block: *const DeviceLaunch,
        thread_idx: u32,
        thread_count: u32,
        scratch: &AtomicPtr<()>,
        entry: fn(&Agent<'r>, AicpuLaunch<'_>) -> i32,
    ) -> i32 {
        if block.is_null() || !block.is_aligned() || thread_idx >= thread_count {
            return STATUS_BAD_LAUNCH;
        }
        // SAFETY: non-null and aligned (checked); the caller promised it points to a readable
        // `DeviceLaunch`. Copied out, so no reference into device memory is kept.
        let b = unsafe { block.read() };
        if !b.is_well_formed() {
            return STATUS_BAD_LAUNCH;
        }
        let Some(gm) = GmRegion::new(GmAddr(b.gm_base), b.gm_len) else { return STATUS_BAD_LAUNCH };
        // SAFETY: non-null and 8-aligned (checked by `is_well_formed`); the caller promised
        // the table holds `reg_window_count` readable entries that nobody writes during the
        // launch.
        let windows: &'r [u64] =
            unsafe { core::slice::from_raw_parts(b.reg_windows as *const u64, b.reg_window_count as usize) };
        // SAFETY: the caller promised GM is mapped read-write for the launch and that every
        // non-zero table entry maps the chip's register window; shared GM words are accessed
        // only atomically by every agent (the runtime's whole-line rule).
        let a = unsafe { Agent::new(gm, windows) };
        entry(&a, AicpuLaunch { thread_idx, thread_count, args: GmAddr(b.desc), scratch })
    }

    macro_rules! entry_point {
        ($(#[$doc:meta])* $sym:literal = $name:path, $fn:ident, $scratch:ident, $entry:path) => {
            const _: () = assert!(same($sym, $name), concat!("exported symbol ", $sym, " is not ", stringify!($name)));

            /// The program's static storage: the scratch cell its threads share in a launch.
            static $scratch: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

            $(#[$doc])*
            ///
            /// # Safety
            ///
            /// `launch` is null or points to a readable [`DeviceLaunch`] whose GM range is
            /// mapped readable and writable in this process for the whole launch, whose
            /// register-window table holds `reg_window_count` readable 8-byte entries, each 0 or
            /// the base of the chip's register window of that core, mapped as device memory;
            /// `thread_count` threads of one launch call this with distinct `thread_idx` in
            /// `0..thread_count`, and launches of this program do not overlap.
            #[unsafe(export_name = $sym)]
            pub unsafe extern "C" fn $fn(launch: *const DeviceLaunch, thread_idx: u32, thread_count: u32) -> i32 {
                // SAFETY: the caller upholds this function's contract, which is `run`'s.
                unsafe { run(launch, thread_idx, thread_count, &$scratch, $entry) }
            }
        };
    }

    entry_point!(
        /// The host-built graph's AICPU program ([`pto_runtime::hbg::aicpu::aicpu_entry`]).
        "pto_hbg_aicpu" = pto_runtime::programs::HBG_AICPU,
        pto_hbg_aicpu,
        HBG_SCRATCH,
        pto_runtime::hbg::aicpu::aicpu_entry
    );
    entry_point!(
        /// The device-side runtime's AICPU program ([`pto_runtime::trb::aicpu_entry`]).
        "pto_trb_aicpu" = pto_runtime::programs::TRB_AICPU,
        pto_trb_aicpu,
        TRB_SCRATCH,
        pto_runtime::trb::aicpu_entry
    );
}

#[cfg(target_arch = "aarch64")]
pub use entries::{Agent, pto_hbg_aicpu, pto_trb_aicpu};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_names_are_the_runtimes() {
        assert!(same("pto_hbg_aicpu", pto_runtime::programs::HBG_AICPU));
        assert!(!same("pto_hbg_aicpu", pto_runtime::programs::TRB_AICPU));
    }

    #[test]
    fn well_formed_blocks() {
        let ok = DeviceLaunch::new(0x1000_0040, 0x1000_0000, 0x10000, 0x2000_0000, 6);
        assert!(ok.is_well_formed());
        assert!(!DeviceLaunch { magic: 0, ..ok }.is_well_formed());
        assert!(!DeviceLaunch { version: 2, ..ok }.is_well_formed());
        assert!(!DeviceLaunch { gm_len: 0, ..ok }.is_well_formed());
        assert!(!DeviceLaunch { desc: 0x1001_0000, ..ok }.is_well_formed(), "descriptor outside GM");
        assert!(!DeviceLaunch { reg_windows: 0, ..ok }.is_well_formed());
        assert!(!DeviceLaunch { reg_windows: 0x2000_0004, ..ok }.is_well_formed());
        assert!(!DeviceLaunch { reg_window_count: 0, ..ok }.is_well_formed());
    }

    /// The entry points refuse a block they cannot use, before touching GM.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn entry_points_refuse_unusable_launch_blocks() {
        // SAFETY: a null block is allowed by the contract; it is refused before any access.
        assert_eq!(unsafe { pto_hbg_aicpu(core::ptr::null(), 0, 1) }, STATUS_BAD_LAUNCH);
        let bad = DeviceLaunch { magic: 0, ..DeviceLaunch::new(0x1000_0040, 0x1000_0000, 0x10000, 0x2000_0000, 6) };
        // SAFETY: `bad` is a readable block; it is refused (wrong magic) before GM or the
        // window table is touched.
        assert_eq!(unsafe { pto_trb_aicpu(&bad, 0, 1) }, STATUS_BAD_LAUNCH);
        let ok = DeviceLaunch::new(0x1000_0040, 0x1000_0000, 0x10000, 0x2000_0000, 6);
        // SAFETY: refused for `thread_idx >= thread_count` before anything is touched.
        assert_eq!(unsafe { pto_trb_aicpu(&ok, 1, 1) }, STATUS_BAD_LAUNCH);
    }
}
