//! Two-party publication checks: barriers and register hand-offs keep the documented order.
//!
//! A producer publishes a [`DATA_BYTES`] payload `rounds` times; a consumer checks every word
//! of every round. The protocol is the one runtime code uses (house rule 2 of
//! `docs/architecture.md`, section 9):
//!
//! * producer: wait until the consumer acknowledged the previous round, `full` (the
//!   acknowledgement is read before the payload is overwritten), write the payload with plain
//!   stores, **`wmb`**, then signal — write the round number to the consumer core's DMB
//!   ([`publish_via_register`]) or store it to a GM flag word ([`publish_via_gm_flag`]);
//! * consumer: wait for the signal, **`rmb`**, (an AICore also drops its stale copies of the
//!   payload lines: `observe_lines`), read the payload and compare every word, `full`, then
//!   acknowledge by storing `round + 1` to the ack word.
//!
//! The consumer stores `1` to the ack word when it is ready, so a producer never signals
//! before the consumer started (on the simulator an AICore launch resets DMB as it starts), and
//! [`ABORT`] when it fails, so the producer stops at once.
//! A missing `wmb` or `rmb` shows up, where the machine reorders, as a consumer that sees the
//! new signal and an old payload word: the failure names the word, the value expected and the
//! value read. Every wait is bounded by `timeout_us` of the agent's clock.
//!
//! The payload and ack word must not share a line (the suite uses separate lines), the ack word
//! and flag word start at 0, and the payload is [`DATA_BYTES`] at a 64-aligned address.

use pto_hal::{
    AicoreCache, AicpuCache, Barriers, Clock, Contract, CoreRegisters, GmAddr, GmAtomic, GmMemory, Reg, Registers,
};

use crate::{Check, Failure, Outcome};

/// Bytes of the payload published each round (four lines).
pub const DATA_BYTES: u64 = 256;

/// Where a hand-off lives and how long it runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Handoff {
    /// The payload: [`DATA_BYTES`], 64-aligned.
    pub data: GmAddr,
    /// The consumer's acknowledgement word (starts at 0), on its own line.
    pub ack: GmAddr,
    /// Rounds to publish.
    pub rounds: u32,
    /// Budget of every single wait, in microseconds of the agent's clock.
    pub timeout_us: u64,
}

/// The signal a register hand-off uses: the consumer core's DMB through the AICPU register
/// window.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RegisterSignal {
    /// Physical id of the core whose DMB carries the round number.
    pub core: u32,
}

/// What a consumer stores to the ack word when it fails, so the producer stops at once instead
/// of waiting out its budget.
pub const ABORT: u64 = u64::MAX;

fn word(round: u32, i: u64) -> u64 {
    (round as u64) << 32 | 0xDA7A_0000 | i
}

fn wait<C: Clock + ?Sized>(
    c: &C,
    check: Check,
    what: &'static str,
    timeout_us: u64,
    want: u64,
    relax: &dyn Fn(),
    read: impl Fn() -> u64,
) -> Outcome {
    let deadline = c.deadline_after_micros(timeout_us);
    loop {
        let v = read();
        if v == want {
            return Ok(());
        }
        if v == ABORT && want != ABORT {
            return Err(Failure::new(check, "the consumer failed and stopped (see its failure)", want, v));
        }
        if c.now_ticks() >= deadline {
            return Err(Failure::new(check, what, want, v));
        }
        relax();
    }
}

fn produce<A: GmMemory + GmAtomic + Barriers + Clock + AicpuCache + ?Sized>(
    a: &A,
    h: &Handoff,
    check: Check,
    relax: &dyn Fn(),
    signal: impl Fn(u32),
) -> Outcome {
    let mut payload = [0u8; DATA_BYTES as usize];
    for round in 1..=h.rounds {
        wait(a, check, "consumer acknowledged the previous round in time", h.timeout_us, round as u64, relax, || {
            a.query(h.ack)
        })?;
        a.full();
        for (i, ch) in payload.chunks_exact_mut(8).enumerate() {
            ch.copy_from_slice(&word(round, i as u64).to_le_bytes());
        }
        a.write(h.data, &payload);
        // Under a write-back AICPU cache the payload reaches memory only when cleaned: the
        // contract publishes it (a range clean on a2a3, nothing on a5).
        <A::Contract as Contract>::publish_to_host(a, h.data, DATA_BYTES);
        a.wmb();
        signal(round);
    }
    wait(a, check, "consumer acknowledged the last round in time", h.timeout_us, h.rounds as u64 + 1, relax, || {
        a.query(h.ack)
    })
}

fn consume<A: GmMemory + GmAtomic + Barriers + Clock + ?Sized>(
    a: &A,
    h: &Handoff,
    check: Check,
    relax: &dyn Fn(),
    signal: impl Fn() -> u64,
    observe: impl Fn(),
) -> Outcome {
    let out = consume_rounds(a, h, check, relax, signal, observe);
    if out.is_err() {
        a.store_direct(h.ack, ABORT);
    }
    out
}

fn consume_rounds<A: GmMemory + GmAtomic + Barriers + Clock + ?Sized>(
    a: &A,
    h: &Handoff,
    check: Check,
    relax: &dyn Fn(),
    signal: impl Fn() -> u64,
    observe: impl Fn(),
) -> Outcome {
    a.store_direct(h.ack, 1);
    let mut payload = [0u8; DATA_BYTES as usize];
    for round in 1..=h.rounds {
        wait(a, check, "producer signalled the round in time", h.timeout_us, round as u64, relax, &signal)?;
        a.rmb();
        observe();
        a.read(h.data, &mut payload);
        for (i, ch) in payload.chunks_exact(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(ch);
            let got = u64::from_le_bytes(w);
            if got != word(round, i as u64) {
                return Err(Failure::new(
                    check,
                    "payload word read after signal + rmb is this round's",
                    word(round, i as u64),
                    got,
                ));
            }
        }
        a.full();
        a.store_direct(h.ack, round as u64 + 1);
    }
    Ok(())
}

/// Producer of a register hand-off: payload, `wmb`, DMB := round (AICPU).
pub fn publish_via_register<A>(a: &A, h: &Handoff, s: RegisterSignal, relax: &dyn Fn()) -> Outcome
where
    A: GmMemory + GmAtomic + Barriers + Registers + Clock + AicpuCache + ?Sized,
{
    produce(a, h, Check::HandoffRegister, relax, |round| a.write_reg(s.core, Reg::Dmb, round))
}

/// Consumer of a register hand-off on an AICPU thread (a stand-in for the core): reads DMB
/// through the register window, `rmb`, payload.
pub fn observe_via_register_aicpu<A>(a: &A, h: &Handoff, s: RegisterSignal, relax: &dyn Fn()) -> Outcome
where
    A: GmMemory + GmAtomic + Barriers + Registers + Clock + ?Sized,
{
    consume(a, h, Check::HandoffRegister, relax, || a.read_reg(s.core, Reg::Dmb) as u64, || {})
}

/// Consumer of a register hand-off on the AICore whose DMB the producer writes: reads its own
/// DMB, `rmb`, drops its stale payload lines (`observe_lines`), payload.
pub fn observe_via_register_aicore<A>(a: &A, h: &Handoff, relax: &dyn Fn()) -> Outcome
where
    A: GmMemory + GmAtomic + Barriers + AicoreCache + CoreRegisters + Clock + ?Sized,
{
    consume(a, h, Check::HandoffRegister, relax, || a.read_dmb() as u64, || a.observe_lines(h.data, DATA_BYTES))
}

/// Producer of a GM-flag hand-off: payload, `wmb`, device-direct store of the round to `flag`.
pub fn publish_via_gm_flag<A>(a: &A, h: &Handoff, flag: GmAddr, relax: &dyn Fn()) -> Outcome
where
    A: GmMemory + GmAtomic + Barriers + Clock + AicpuCache + ?Sized,
{
    produce(a, h, Check::HandoffGmFlag, relax, |round| a.store_direct(flag, round as u64))
}

/// Consumer of a GM-flag hand-off: device-direct load of `flag`, `rmb`, payload (AICPU tier;
/// an AICore consumer would also `observe_lines` — use the register variant for the AICore).
pub fn observe_via_gm_flag<A>(a: &A, h: &Handoff, flag: GmAddr, relax: &dyn Fn()) -> Outcome
where
    A: GmMemory + GmAtomic + Barriers + Clock + ?Sized,
{
    consume(a, h, Check::HandoffGmFlag, relax, || a.query(flag), || {})
}

/// Run a hand-off on two host threads (scoped): `producer` publishes, `consumer` observes, both
/// AICPU-tier agents. `flag = None` signals through `core`'s DMB, `Some(word)` through a GM flag
/// word. Waiting threads yield to the OS between polls. Returns the first failure (the
/// consumer's, which names the stale word, wins over the producer's timeout).
#[cfg(feature = "std")]
pub fn run_pair<P, C>(producer: &P, consumer: &C, h: &Handoff, core: u32, flag: Option<GmAddr>) -> Outcome
where
    P: GmMemory + GmAtomic + Barriers + Registers + Clock + AicpuCache + Sync + ?Sized,
    C: GmMemory + GmAtomic + Barriers + Registers + Clock + Sync + ?Sized,
{
    let relax = || std::thread::yield_now();
    let s = RegisterSignal { core };
    std::thread::scope(|scope| {
        let c = scope.spawn(move || match flag {
            None => observe_via_register_aicpu(consumer, h, s, &relax),
            Some(f) => observe_via_gm_flag(consumer, h, f, &relax),
        });
        let p = match flag {
            None => publish_via_register(producer, h, s, &relax),
            Some(f) => publish_via_gm_flag(producer, h, f, &relax),
        };
        let c = c.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        c.and(p)
    })
}
