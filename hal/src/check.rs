//! Schedule-independent checks of a run (the simulator's sanitizers): which ones to run, and
//! the notes the runtime gives a platform so that it can judge a run by its dependency graph
//! rather than by the interleaving that happened.
//!
//! A platform that checks nothing ignores every note (the provided methods of
//! [`AicpuAgent`](crate::AicpuAgent) and [`HostPlatform`](crate::HostPlatform) do nothing);
//! the simulator records them when a check is on. The runtime gives:
//! - per task, in submission order, the tasks it depends on (the host-built graph's edges
//!   from the host, the device-side runtime's discovered and explicit edges from the AICPU);
//! - the memory the runtime hands out as fresh tensors (a graph's heap at each run, a scope
//!   tensor when the orchestration allocates it);
//! - the orchestration's own element reads and writes.

/// Which checks run (all off by default).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Checks {
    /// racecheck: two tasks no dependency path orders whose accesses overlap with a writer
    /// (data), or that write different bytes of one cache line (line, on platforms whose
    /// contract makes that a hazard).
    pub race: bool,
    /// initcheck: a kernel, the orchestration or the host's read-back reads bytes nothing wrote
    /// since they were handed out.
    pub init: bool,
}

impl Checks {
    /// Every check off.
    pub const OFF: Checks = Checks { race: false, init: false };
    /// Every check on.
    pub const ALL: Checks = Checks { race: true, init: true };
    /// What [`Checks::parse`] accepts.
    pub const SYNTAX: &'static str = "a comma-separated list of race and init, or off";

    /// Whether any check is on.
    pub const fn any(self) -> bool {
        self.race || self.init
    }

    /// Parse `race`, `init`, `race,init` (any order, no repeats) or `off`/`none`; `None` for
    /// anything else (`racecheck`, `race,,init`, an empty string).
    pub fn parse(s: &str) -> Option<Checks> {
        let s = s.trim();
        if s == "off" || s == "none" {
            return Some(Checks::OFF);
        }
        let mut c = Checks::OFF;
        for part in s.split(',') {
            match part.trim() {
                "race" if !c.race => c.race = true,
                "init" if !c.init => c.init = true,
                _ => return None,
            }
        }
        Some(c)
    }

    /// The checks' names as [`Checks::parse`] reads them (`race,init`, `race`, `init`, `off`).
    pub const fn name(self) -> &'static str {
        match (self.race, self.init) {
            (true, true) => "race,init",
            (true, false) => "race",
            (false, true) => "init",
            (false, false) => "off",
        }
    }
}

/// What the host tells a checking platform about a host-built graph before launching a run of
/// it (see [`HostPlatform::note_graph`](crate::HostPlatform::note_graph)).
#[derive(Copy, Clone, Debug)]
pub struct GraphNotes<'a> {
    /// Tasks of the graph (ids `0..tasks`, in submission order).
    pub tasks: u32,
    /// Producer → consumer edges; every producer id is below its consumer's.
    pub edges: &'a [(u32, u32)],
    /// Memory the runtime hands out fresh at every run (the graph's heap): uninitialised until
    /// a task writes it.
    pub fresh: &'a [(crate::GmAddr, u64)],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_lists_parse_strictly() {
        assert_eq!(Checks::parse("race,init"), Some(Checks::ALL));
        assert_eq!(Checks::parse("init, race"), Some(Checks::ALL));
        assert_eq!(Checks::parse("race"), Some(Checks { race: true, init: false }));
        assert_eq!(Checks::parse("off"), Some(Checks::OFF));
        for bad in ["", "racecheck", "race,,init", "race,race", "Race", "init,"] {
            assert_eq!(Checks::parse(bad), None, "{bad:?}");
        }
        for c in [Checks::OFF, Checks::ALL, Checks { race: true, init: false }, Checks { race: false, init: true }] {
            assert_eq!(Checks::parse(c.name()), Some(c));
        }
    }
}
