//! `pto-cann-stub`: a **test double** of the vendor runtime for the chip boards, and the
//! reader of what it recorded.
//!
//! `stub/acl_stub.c` implements the AscendCL functions the chip boards' binding calls
//! (`pto_aarch64::cann::ffi::Acl::NAMES`) with the headers' prototypes, built by this crate's
//! build script as `libascendcl.so` ([`LIBRARY`]). The binding opens it in place of the vendor
//! library (`PTO_ASCENDCL_LIBRARY`). It plays the device as far as the host can tell — device
//! memory is host memory, range-checked on every copy; a binary must name the functions looked
//! up in it; work on a stream completes on submission; any call can be told to fail
//! ([`Stub::fail`]) — and records every call with its arguments ([`Stub::log`]). It runs no
//! device program: a launch is recorded and nothing executes, so a run's completion record (the
//! counters the device programs write into the launch descriptor) stays empty and the host
//! stops the run there (`tests/chip_boards.rs`).

use std::ffi::{CStr, CString, c_char, c_int, c_void};

/// The stand-in library built for this crate.
pub const LIBRARY: &str = env!("ACL_STUB_LIBRARY");

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

/// The stand-in's control interface (the same library instance the binding opened: `dlopen`
/// of one file gives one instance).
#[derive(Copy, Clone, Debug)]
pub struct Stub {
    reset: unsafe extern "C" fn(),
    fail: unsafe extern "C" fn(*const c_char, c_int, c_int),
    log: unsafe extern "C" fn() -> *mut c_char,
    free: unsafe extern "C" fn(*mut c_char),
    live: unsafe extern "C" fn() -> c_int,
}

impl Stub {
    /// Open the stand-in ([`LIBRARY`]) and look its control functions up.
    pub fn open() -> Stub {
        let path = CString::new(LIBRARY).expect("no NUL in the library path");
        // SAFETY: `path` is NUL-terminated; RTLD_NOW (2); the handle is never closed.
        let lib = unsafe { dlopen(path.as_ptr(), 2) };
        assert!(!lib.is_null(), "cannot open {LIBRARY}");
        let sym = |name: &CStr| {
            // SAFETY: `lib` is live; `name` is NUL-terminated.
            let p = unsafe { dlsym(lib, name.as_ptr()) };
            assert!(!p.is_null(), "{LIBRARY} has no {name:?}");
            p
        };
        // SAFETY: each symbol is the stub's function of that prototype (stub/acl_stub.c).
        unsafe {
            Stub {
                reset: std::mem::transmute::<*mut c_void, unsafe extern "C" fn()>(sym(c"acl_stub_reset")),
                fail: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*const c_char, c_int, c_int)>(sym(
                    c"acl_stub_fail",
                )),
                log: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *mut c_char>(sym(c"acl_stub_log")),
                free: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_char)>(sym(c"acl_stub_free")),
                live: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(sym(c"acl_stub_live")),
            }
        }
    }

    /// Forget the log and the injected failures.
    pub fn reset(&self) {
        // SAFETY: no arguments; the stub locks its own state.
        unsafe { (self.reset)() }
    }

    /// Make the `nth` call of `function` from now (1: the next) fail with `code`, doing
    /// nothing else.
    pub fn fail(&self, function: &str, nth: i32, code: i32) {
        let f = CString::new(function).expect("no NUL in a function name");
        // SAFETY: `f` is NUL-terminated and outlives the call (the stub copies it).
        unsafe { (self.fail)(f.as_ptr(), nth, code) }
    }

    /// The log since the last reset: one call per line, `name arguments -> code`.
    pub fn log(&self) -> String {
        // SAFETY: the stub returns a malloc'd NUL-terminated copy (or null).
        let p = unsafe { (self.log)() };
        assert!(!p.is_null(), "the stub could not copy its log");
        // SAFETY: non-null and NUL-terminated; freed below with the stub's free.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        // SAFETY: `p` came from the stub's malloc and is freed once.
        unsafe { (self.free)(p) };
        s
    }

    /// Objects the stub still holds for its caller: allocations, streams, events, binaries.
    pub fn live(&self) -> i32 {
        // SAFETY: no arguments.
        unsafe { (self.live)() }
    }
}

/// One recorded call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The function.
    pub name: String,
    /// Its arguments (and outputs) as `key=value` pairs, in order.
    pub args: Vec<(String, String)>,
    /// The `aclError` it returned.
    pub code: i32,
    /// Whether the code was injected.
    pub injected: bool,
}

impl Call {
    /// The value of argument `key`.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.args.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// The calls of a log ([`Stub::log`]).
pub fn parse(log: &str) -> Vec<Call> {
    log.lines()
        .filter_map(|line| {
            let (head, code) = line.rsplit_once(" -> ")?;
            let mut words = head.split(' ');
            let name = words.next()?.to_string();
            let mut args = Vec::new();
            let mut injected = false;
            for w in words {
                match w.split_once('=') {
                    Some((k, v)) => args.push((k.to_string(), v.to_string())),
                    None if w == "injected" => injected = true,
                    None => {}
                }
            }
            Some(Call { name, args, code: code.trim().parse().ok()?, injected })
        })
        .collect()
}
