//! How the deterministic scheduler picks the next agent: uniformly at random, or by
//! probabilistic concurrency testing (PCT).
//!
//! Both are driven by one seeded generator, so the same seed and the same sequence of
//! runnable sets give the same choices.
//!
//! PCT (Burckhardt et al., "A randomized scheduler with probabilistic guarantees of finding
//! bugs", ASPLOS 2010): every agent gets a distinct random priority, the highest-priority
//! runnable agent always runs, and at `depth - 1` steps chosen at random among the first
//! `steps` the running agent drops below every initial priority. A bug that needs `d` ordering
//! constraints between `n` agents is found by one run with probability at least
//! `1 / (n * steps^(d-1))`.

/// The strategy of a deterministic schedule.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// At every switch point, any runnable agent (the current one included), uniformly.
    Random,
    /// Probabilistic concurrency testing with this bug depth (at least 1).
    Pct {
        /// The depth `d`: `d - 1` priority changes per run.
        depth: u32,
    },
}

impl Strategy {
    /// The strategy `pto explore` uses unless told otherwise. Uniformly random: on every
    /// variant of the exploration suite it catches at least 20 of 24 seeds, where PCT (any
    /// depth from 1 to 4) catches 0 of 24 on two of them — the split fan-in release and two
    /// independent tasks writing one line on the resident executor (`docs/engine.md`, "What
    /// exploration finds").
    pub const EXPLORE_DEFAULT: Strategy = Strategy::Random;

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Random => "random",
            Strategy::Pct { .. } => "pct",
        }
    }

    /// Parse `random`, `pct` (depth 3) or `pct:D`.
    pub fn parse(v: &str) -> Option<Strategy> {
        match v.split_once(':') {
            None if v == "random" => Some(Strategy::Random),
            None if v == "pct" => Some(Strategy::Pct { depth: 3 }),
            Some(("pct", d)) => d.parse().ok().filter(|&d| d >= 1).map(|depth| Strategy::Pct { depth }),
            _ => None,
        }
    }
}

/// How many seeds `pto explore` tries unless told otherwise: the bound within which its default
/// strategy must find every variant of the exploration suite
/// (`testkits/breakage-suites/tests/explore.rs`).
pub const EXPLORE_SEEDS: u64 = 100;

/// The steps over which PCT spreads its priority changes (its `k`): about the number of switch
/// points of a small example run.
pub const PCT_STEPS: u64 = 50_000;

/// An agent that has run this many switch points in a row while others were runnable drops
/// its priority (PCT only): a spinning agent must not starve the one it waits for.
pub const PCT_STARVATION: u32 = 20_000;

/// The seeded generator (SplitMix64: small, fast, and good enough to pick schedules).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

/// The choices of one deterministic schedule.
#[derive(Debug)]
pub struct Chooser {
    rng: Rng,
    strategy: Strategy,
    /// PCT: the priority of each agent (higher runs first).
    priority: Vec<u64>,
    /// PCT: the steps at which the running agent drops, ascending, and how many were taken.
    change_points: Vec<u64>,
    changes_taken: usize,
    /// Switch points taken so far.
    step: u64,
    /// The agent chosen last and how many steps in a row it was chosen.
    last: Option<usize>,
    run_length: u32,
}

impl Chooser {
    /// The choices for `agents` agents under `strategy`, from `seed`.
    pub fn new(seed: u64, strategy: Strategy, agents: usize) -> Chooser {
        let mut rng = Rng::new(seed);
        let (mut priority, mut change_points) = (Vec::new(), Vec::new());
        if let Strategy::Pct { depth } = strategy {
            // Distinct initial priorities above every change-point priority: a shuffle of
            // depth..depth + agents.
            priority = (0..agents as u64).map(|i| i + u64::from(depth)).collect();
            for i in (1..priority.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                priority.swap(i, j);
            }
            change_points = (1..depth).map(|_| 1 + rng.below(PCT_STEPS)).collect();
            change_points.sort_unstable();
        }
        Chooser { rng, strategy, priority, change_points, changes_taken: 0, step: 0, last: None, run_length: 0 }
    }

    /// Switch points taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Pick the agent to run next among `runnable` (not empty, ascending agent ids); `current`
    /// is the agent that reached the switch point when it is still runnable.
    pub fn pick(&mut self, runnable: &[usize], current: Option<usize>) -> usize {
        debug_assert!(!runnable.is_empty());
        self.step += 1;
        let chosen = match self.strategy {
            Strategy::Random => runnable[self.rng.below(runnable.len() as u64) as usize],
            Strategy::Pct { .. } => {
                if let Some(c) = current {
                    let due = self.change_points.get(self.changes_taken).is_some_and(|&p| p <= self.step);
                    let starving = self.last == Some(c) && self.run_length >= PCT_STARVATION && runnable.len() > 1;
                    if due || starving {
                        if due {
                            self.changes_taken += 1;
                        }
                        // Below every initial priority and below earlier drops.
                        let low = self.change_points.len().saturating_sub(self.changes_taken) as u64;
                        self.priority[c] = low.min(self.priority[c]);
                        if starving {
                            self.priority[c] = 0;
                        }
                    }
                }
                *runnable.iter().max_by_key(|&&a| (self.priority[a], usize::MAX - a)).expect("runnable is not empty")
            }
        };
        if self.last == Some(chosen) {
            self.run_length = self.run_length.saturating_add(1);
        } else {
            self.last = Some(chosen);
            self.run_length = 1;
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_syntax() {
        assert_eq!(Strategy::parse("random"), Some(Strategy::Random));
        assert_eq!(Strategy::parse("pct"), Some(Strategy::Pct { depth: 3 }));
        assert_eq!(Strategy::parse("pct:5"), Some(Strategy::Pct { depth: 5 }));
        for bad in ["pct:0", "pct:x", "Random", "", "pct:"] {
            assert_eq!(Strategy::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_same_seed_makes_the_same_choices() {
        for s in [Strategy::Random, Strategy::Pct { depth: 3 }] {
            let run = |seed| {
                let mut c = Chooser::new(seed, s, 5);
                (0..1000).map(|i| c.pick(&[0, 1, 2, 3, 4][..(i % 5) + 1], Some(0))).collect::<Vec<_>>()
            };
            assert_eq!(run(7), run(7), "{s:?}");
            assert_ne!(run(7), run(8), "{s:?}");
        }
    }

    #[test]
    fn random_reaches_every_runnable_agent() {
        let mut c = Chooser::new(1, Strategy::Random, 3);
        let mut seen = [0u32; 3];
        for _ in 0..3000 {
            seen[c.pick(&[0, 1, 2], None)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
    }

    #[test]
    fn pct_runs_the_highest_priority_until_a_change_point() {
        let mut c = Chooser::new(3, Strategy::Pct { depth: 2 }, 4);
        let first = c.pick(&[0, 1, 2, 3], None);
        // Until the change point (or the starvation bound, when that comes first) the same
        // agent keeps the processor.
        let change = c.change_points[0].min(u64::from(PCT_STARVATION) + 1);
        while c.steps() + 1 < change {
            assert_eq!(c.pick(&[0, 1, 2, 3], Some(first)), first);
        }
        // At it, the running agent drops below all the others.
        assert_ne!(c.pick(&[0, 1, 2, 3], Some(first)), first);
    }

    #[test]
    fn pct_drops_a_starving_spinner() {
        // Depth 1: no change points; the spinner is dropped only for running too long.
        let mut c = Chooser::new(9, Strategy::Pct { depth: 1 }, 2);
        let spinner = c.pick(&[0, 1], None);
        let mut switched = false;
        for _ in 0..=PCT_STARVATION {
            if c.pick(&[0, 1], Some(spinner)) != spinner {
                switched = true;
                break;
            }
        }
        assert!(switched);
    }
}
