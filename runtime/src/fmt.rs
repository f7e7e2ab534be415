//! The device half's logging shim (the embassy `fmt.rs` pattern): `trace!`, `debug!`,
//! `info!`, `warn!`, `error!` forward to `defmt` with the `defmt` feature, to `log` with the
//! `log` feature, and expand to nothing with neither — the arguments are still type-checked
//! (and borrowed, so a variable used only in a log statement is not "unused"), but nothing is
//! formatted, stored or linked. Both features at once is a compile error.
//!
//! Messages must be valid for both backends: `{}` placeholders only (or defmt's `{=u32}`-style
//! hints where `log`'s formatter accepts the same text — it does not, so: `{}` only), with
//! values that are both `core::fmt::Display` and `defmt::Format` — integers, `bool`, `&str`.
//! Pass an error code as its number (`code.value()`), a site as `u32::from(site)`.
//!
//! Who sees the messages: with `log`, whatever `log::Log` the final program installs (the host
//! and the simulator); with `defmt`, the final program's `#[defmt::global_logger]` —
//! on aarch64 `pto_aarch64::devlog`, a ring in GM that the host drains and decodes with
//! `defmt-decoder` (the on-target tests do, `pto_target_harness::devlog`).
#![allow(unused_macros)]

#[cfg(all(feature = "defmt", feature = "log"))]
compile_error!("pto-runtime: the features `defmt` and `log` are exclusive: enable one logging backend, or neither");

macro_rules! trace {
    ($s:literal $(, $x:expr)* $(,)?) => {
        {
            #[cfg(feature = "defmt")]
            ::defmt::trace!($s $(, $x)*);
            #[cfg(feature = "log")]
            ::log::trace!($s $(, $x)*);
            #[cfg(not(any(feature = "defmt", feature = "log")))]
            let _ = ($( &$x, )*);
        }
    };
}

macro_rules! debug {
    ($s:literal $(, $x:expr)* $(,)?) => {
        {
            #[cfg(feature = "defmt")]
            ::defmt::debug!($s $(, $x)*);
            #[cfg(feature = "log")]
            ::log::debug!($s $(, $x)*);
            #[cfg(not(any(feature = "defmt", feature = "log")))]
            let _ = ($( &$x, )*);
        }
    };
}

macro_rules! info {
    ($s:literal $(, $x:expr)* $(,)?) => {
        {
            #[cfg(feature = "defmt")]
            ::defmt::info!($s $(, $x)*);
            #[cfg(feature = "log")]
            ::log::info!($s $(, $x)*);
            #[cfg(not(any(feature = "defmt", feature = "log")))]
            let _ = ($( &$x, )*);
        }
    };
}

macro_rules! warn {
    ($s:literal $(, $x:expr)* $(,)?) => {
        {
            #[cfg(feature = "defmt")]
            ::defmt::warn!($s $(, $x)*);
            #[cfg(feature = "log")]
            ::log::warn!($s $(, $x)*);
            #[cfg(not(any(feature = "defmt", feature = "log")))]
            let _ = ($( &$x, )*);
        }
    };
}

macro_rules! error {
    ($s:literal $(, $x:expr)* $(,)?) => {
        {
            #[cfg(feature = "defmt")]
            ::defmt::error!($s $(, $x)*);
            #[cfg(feature = "log")]
            ::log::error!($s $(, $x)*);
            #[cfg(not(any(feature = "defmt", feature = "log")))]
            let _ = ($( &$x, )*);
        }
    };
}

#[cfg(all(test, feature = "log"))]
mod tests {
    extern crate std;

    use pto_hal::GmAddr;
    use std::string::{String, ToString};
    use std::sync::Mutex;
    use std::vec::Vec;

    /// Records every message at or above `debug`.
    struct Capture(Mutex<Vec<(log::Level, String)>>);

    impl log::Log for Capture {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.level() <= log::Level::Debug
        }
        fn log(&self, r: &log::Record<'_>) {
            if self.enabled(r.metadata()) {
                self.0.lock().unwrap().push((r.level(), r.args().to_string()));
            }
        }
        fn flush(&self) {}
    }

    static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

    use crate::test_words::Words;

    /// The shim forwards to `log` with its level and its formatted text; a fault latched by the
    /// lifecycle is logged once, by the winner, naming code, site, task and core.
    #[test]
    fn the_shim_forwards_to_log() {
        let _ = log::set_logger(&CAPTURE);
        log::set_max_level(log::LevelFilter::Debug);
        let (w, phys) = (3u32, 7u32);
        info!("shim check: worker {} phys {}", w, phys);
        trace!("filtered out: {}", w);

        let gm = Words::default();
        let desc = GmAddr(0);
        let fault = crate::lifecycle::Fault {
            code: crate::codes::ErrorCode::Device(crate::codes::DeviceFault::ReleaseTimeout),
            site: crate::codes::Site::Gate,
            task: None,
            core: Some(5),
            detail: 9,
        };
        assert!(crate::lifecycle::latch(&gm, desc, fault, "late"));
        assert!(!crate::lifecycle::latch(&gm, desc, fault, "again"));

        let got = CAPTURE.0.lock().unwrap().clone();
        assert!(got.contains(&(log::Level::Info, "shim check: worker 3 phys 7".into())), "{got:?}");
        assert!(!got.iter().any(|(_, m)| m.starts_with("filtered out")), "{got:?}");
        let latched: Vec<_> = got.iter().filter(|(_, m)| m.starts_with("fault latched")).collect();
        assert_eq!(latched.len(), 1, "{got:?}");
        assert_eq!(latched[0].0, log::Level::Error);
        let code = fault.code.value();
        let site = u32::from(fault.site);
        assert_eq!(latched[0].1, std::format!("fault latched: code {code} site {site} task -1 core 5 detail 9"));
    }
}
