//! The device's log ring in GM and, with the `defmt` feature, the `#[defmt::global_logger]`
//! that writes the runtime's defmt frames into it.
//!
//! [`LogRing`] is a byte ring in GM: a 64-byte header line (a writer lock, the total of bytes
//! committed, the total of bytes the host consumed, frames dropped, the capacity), then the
//! data. Writers (any AICPU thread or AICore of the process) commit whole frames under the lock,
//! or drop a frame that does not fit and count it — the ring never overwrites what the host has
//! not consumed, and a reader never sees half a frame. The host is the only consumer
//! ([`LogRing::drain`]).
//!
//! With `defmt`, `install` names the ring the process's device logger writes to; frames logged
//! before that are counted (`unsunk_frames`) and dropped. The binary that decodes the frames
//! needs defmt's table: link with defmt's `defmt.x` as an *implicit* linker script (an input
//! file saying `INCLUDE defmt.x`, not `-Tdefmt.x`, which would replace the default Linux
//! script) and without PIE (`-no-pie`). `docs/dependencies.md` (defmt) has the evidence;
//! `pto-a2a3` / `pto-a5`'s build scripts do this for their tests.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use pto_hal::GmAddr;

/// Bytes of the header line in front of the data.
pub const HEADER_BYTES: u64 = 64;

/// Header word offsets.
const LOCK: usize = 0;
const HEAD: usize = 8;
const TAIL: usize = 16;
const DROPPED: usize = 24;
const CAPACITY: usize = 32;

/// Lock attempts before a writer gives up on a frame (and counts it dropped): a writer that
/// died holding the lock costs frames, never a hang.
const LOCK_SPINS: u32 = 1 << 22;

/// A log ring over GM (see the module documentation).
#[derive(Debug)]
pub struct LogRing {
    base: *mut u8,
    cap: u64,
}

// SAFETY: a ring is an address range in GM; every shared word is reached atomically, and the
// data bytes are written only under the lock, in a range no reader reads until the writer
// publishes it (`HEAD`, release), and read by the single consumer only below `HEAD`.
unsafe impl Send for LogRing {}
// SAFETY: as above.
unsafe impl Sync for LogRing {}

impl LogRing {
    /// The ring over `[addr, addr + len)`, initialised empty (header cleared, capacity
    /// `len - HEADER_BYTES`).
    ///
    /// # Safety
    ///
    /// The range is mapped, readable and writable, 8-byte aligned, for as long as the ring (or
    /// a copy of its address) is used, and is accessed by no one else except through rings over
    /// the same range; no writer or reader uses it while it is being initialised.
    pub unsafe fn init(addr: GmAddr, len: u64) -> Option<LogRing> {
        if len <= HEADER_BYTES || !addr.0.is_multiple_of(8) || usize::try_from(len).is_err() {
            return None;
        }
        let ring = LogRing { base: addr.0 as *mut u8, cap: len - HEADER_BYTES };
        for off in [LOCK, HEAD, TAIL, DROPPED] {
            ring.word(off).store(0, Ordering::Relaxed);
        }
        ring.word(CAPACITY).store(ring.cap, Ordering::Release);
        Some(ring)
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is a header word (8-aligned, below `HEADER_BYTES`), inside the mapped
        // range (`init`'s contract); header words are only ever accessed atomically.
        unsafe { AtomicU64::from_ptr(self.base.add(off).cast()) }
    }

    fn lock(&self) -> &AtomicU32 {
        // SAFETY: as for `word` (the lock is the low half of word 0, only accessed as this).
        unsafe { AtomicU32::from_ptr(self.base.add(LOCK).cast()) }
    }

    /// Data bytes the ring holds at most.
    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// Frames dropped so far: they did not fit, or the lock could not be taken.
    pub fn dropped(&self) -> u64 {
        self.word(DROPPED).load(Ordering::Relaxed)
    }

    /// Bytes committed and not yet consumed.
    pub fn pending(&self) -> u64 {
        self.word(HEAD).load(Ordering::Acquire) - self.word(TAIL).load(Ordering::Acquire)
    }

    /// Commit `frame` whole, or drop it (and count it) when it does not fit or the lock cannot
    /// be had. Returns whether it was committed.
    pub fn push(&self, frame: &[u8]) -> bool {
        let len = frame.len() as u64;
        let mut spins = 0;
        while self.lock().compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spins += 1;
            if spins >= LOCK_SPINS {
                self.word(DROPPED).fetch_add(1, Ordering::Relaxed);
                return false;
            }
            core::hint::spin_loop();
        }
        let head = self.word(HEAD).load(Ordering::Relaxed);
        let tail = self.word(TAIL).load(Ordering::Acquire);
        let fits = head - tail + len <= self.cap;
        if fits {
            let at = (head % self.cap) as usize;
            let first = frame.len().min(self.cap as usize - at);
            // SAFETY: `[at, at + first)` and `[0, len - first)` lie in the data area (`at <
            // cap`, `first <= cap - at`, `len <= cap`); they hold bytes the consumer has
            // consumed (`head - tail + len <= cap`), and no other writer runs (the lock), so
            // nobody reads or writes them until `HEAD` is published below.
            unsafe {
                let data = self.base.add(HEADER_BYTES as usize);
                core::ptr::copy_nonoverlapping(frame.as_ptr(), data.add(at), first);
                core::ptr::copy_nonoverlapping(frame.as_ptr().add(first), data, frame.len() - first);
            }
            self.word(HEAD).store(head + len, Ordering::Release);
        } else {
            self.word(DROPPED).fetch_add(1, Ordering::Relaxed);
        }
        self.lock().store(0, Ordering::Release);
        fits
    }

    /// The host (the only consumer): hand every committed, unconsumed byte to `f` (in at most
    /// two pieces, in order), then mark it consumed.
    pub fn drain(&self, mut f: impl FnMut(&[u8])) {
        let tail = self.word(TAIL).load(Ordering::Relaxed);
        let head = self.word(HEAD).load(Ordering::Acquire);
        let len = (head - tail) as usize;
        let at = (tail % self.cap) as usize;
        let first = len.min(self.cap as usize - at);
        // SAFETY: both pieces lie in the data area (as in `push`) and hold bytes committed
        // before `HEAD` was published (acquire above); writers do not touch them until `TAIL`
        // moves past them, below.
        unsafe {
            let data = self.base.add(HEADER_BYTES as usize);
            f(core::slice::from_raw_parts(data.add(at), first));
            f(core::slice::from_raw_parts(data, len - first));
        }
        self.word(TAIL).store(head, Ordering::Release);
    }
}

#[cfg(feature = "defmt")]
pub use logger::{install, unsunk_frames};

#[cfg(feature = "defmt")]
mod logger {
    use core::cell::UnsafeCell;
    use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

    use super::LogRing;

    /// Bytes a frame may take (encoded); a longer one is dropped and counted.
    const FRAME_BYTES: usize = 512;

    static SINK: AtomicPtr<LogRing> = AtomicPtr::new(core::ptr::null_mut());
    static UNSUNK: AtomicU64 = AtomicU64::new(0);
    static TAKEN: AtomicBool = AtomicBool::new(false);

    /// Route the process's defmt frames into `ring` from now on.
    pub fn install(ring: &'static LogRing) {
        SINK.store(core::ptr::from_ref(ring).cast_mut(), Ordering::Release);
    }

    /// Frames logged while no ring was installed (dropped).
    pub fn unsunk_frames() -> u64 {
        UNSUNK.load(Ordering::Relaxed)
    }

    /// The frame being encoded, owned by whoever holds `TAKEN`.
    struct Frame {
        encoder: defmt::Encoder,
        buf: [u8; FRAME_BYTES],
        len: usize,
        overflow: bool,
    }

    struct Staging(UnsafeCell<Frame>);

    // SAFETY: the frame is only reached between `acquire` and `release`, by the one thread that
    // holds `TAKEN`.
    unsafe impl Sync for Staging {}

    static FRAME: Staging = Staging(UnsafeCell::new(Frame {
        encoder: defmt::Encoder::new(),
        buf: [0; FRAME_BYTES],
        len: 0,
        overflow: false,
    }));

    impl Frame {
        /// Encode through `op`, staging the encoder's output in `buf`.
        fn encode(&mut self, op: impl FnOnce(&mut defmt::Encoder, &mut dyn FnMut(&[u8]))) {
            let Frame { encoder, buf, len, overflow } = self;
            op(encoder, &mut |bytes: &[u8]| {
                if *len + bytes.len() > buf.len() {
                    *overflow = true;
                } else {
                    buf[*len..*len + bytes.len()].copy_from_slice(bytes);
                    *len += bytes.len();
                }
            });
        }
    }

    /// The frame, for the holder of `TAKEN`.
    ///
    /// # Safety
    ///
    /// The caller holds `TAKEN` (between `acquire` and `release`) and drops the borrow before
    /// releasing it.
    unsafe fn frame() -> &'static mut Frame {
        // SAFETY: exclusive by `TAKEN` (the caller's contract).
        unsafe { &mut *FRAME.0.get() }
    }

    #[defmt::global_logger]
    struct Logger;

    // SAFETY: `acquire` takes `TAKEN` (a process-wide spin lock) before touching the frame and
    // `release` gives it back after the last use; `write` is only called in between, by defmt.
    unsafe impl defmt::Logger for Logger {
        fn acquire() {
            while TAKEN.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
                core::hint::spin_loop();
            }
            // SAFETY: `TAKEN` is held.
            let f = unsafe { frame() };
            f.len = 0;
            f.overflow = false;
            f.encode(|e, w| e.start_frame(w));
        }

        unsafe fn flush() {}

        unsafe fn release() {
            // SAFETY: `TAKEN` is held (defmt calls `release` after `acquire`).
            let f = unsafe { frame() };
            f.encode(|e, w| e.end_frame(w));
            let sink = SINK.load(Ordering::Acquire);
            if sink.is_null() {
                UNSUNK.fetch_add(1, Ordering::Relaxed);
            } else {
                // SAFETY: `install` only stores `&'static LogRing`s.
                let ring = unsafe { &*sink };
                if f.overflow {
                    ring.word(super::DROPPED).fetch_add(1, Ordering::Relaxed);
                } else {
                    ring.push(&f.buf[..f.len]);
                }
            }
            TAKEN.store(false, Ordering::Release);
        }

        unsafe fn write(bytes: &[u8]) {
            // SAFETY: `TAKEN` is held (defmt calls `write` between `acquire` and `release`).
            let f = unsafe { frame() };
            f.encode(|e, w| e.write(bytes, w));
        }
    }

    // The device counter as each frame's timestamp (ticks of `CNTFRQ_EL0`).
    #[cfg(target_arch = "aarch64")]
    defmt::timestamp!("{=u64}", crate::arm::cntvct());
    #[cfg(not(target_arch = "aarch64"))]
    defmt::timestamp!("{=u64}", 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_go_in_whole_and_overflow_is_counted() {
        let mut mem = [0u64; 12]; // 64 header + 32 data bytes
        let addr = GmAddr(mem.as_mut_ptr() as u64);
        // SAFETY: `mem` is 96 bytes, 8-aligned, used only through this ring while it lives.
        let ring = unsafe { LogRing::init(addr, 96) }.unwrap();
        assert_eq!(ring.capacity(), 32);
        assert!(ring.push(&[1; 20]));
        assert!(!ring.push(&[2; 20]), "does not fit");
        assert_eq!(ring.dropped(), 1);
        let mut got = [0u8; 64];
        let mut n = 0;
        ring.drain(|b| {
            got[n..n + b.len()].copy_from_slice(b);
            n += b.len();
        });
        assert_eq!(&got[..n], &[1; 20]);
        // Wraps around the end of the data area, whole.
        assert!(ring.push(&[3; 20]));
        assert_eq!(ring.pending(), 20);
        n = 0;
        ring.drain(|b| {
            got[n..n + b.len()].copy_from_slice(b);
            n += b.len();
        });
        assert_eq!(&got[..n], &[3; 20]);
        assert_eq!(ring.pending(), 0);
    }
}
