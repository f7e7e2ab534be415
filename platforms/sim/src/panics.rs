//! Panics of simulated agents are device faults: caught, reported with their message, and
//! kept off the terminal.

use std::cell::RefCell;
use std::sync::Once;

/// Status an agent reports when its program panicked.
pub const AGENT_PANIC_STATUS: i32 = -99;

thread_local! {
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn is_agent_thread() -> bool {
    std::thread::current().name().is_some_and(|n| {
        n.starts_with("pto-aicpu-") || n.starts_with("pto-aicore-") || n.starts_with("pto-sim-engine-")
    })
}

/// Install (once per process) a panic hook that records agent-thread panics for the
/// simulator to report and lets every other panic through to the previous hook.
pub fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if is_agent_thread() {
                let msg = match info.location() {
                    Some(l) => format!("{} at {}:{}", payload_text(info.payload()), l.file(), l.line()),
                    None => payload_text(info.payload()),
                };
                LAST.with(|s| *s.borrow_mut() = Some(msg));
            } else {
                prev(info);
            }
        }));
    });
}

fn payload_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_string()
    }
}

/// The message of the panic this thread just caught.
pub fn take_message(p: &(dyn std::any::Any + Send)) -> String {
    LAST.with(|s| s.borrow_mut().take()).unwrap_or_else(|| payload_text(p))
}

/// Runs `f`, turning a panic into a status and its message.
pub(crate) fn run_guarded(f: impl FnOnce() -> i32) -> (i32, Option<String>) {
    install_quiet_hook();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(s) => (s, None),
        Err(p) => (AGENT_PANIC_STATUS, Some(take_message(&*p))),
    }
}
