//! The schedule-independent checks (`PTO_SIM_CHECK=race,init`, `RunConfig::check`): each
//! check catches a graph with its bug on both runtimes and both executors, every run, with
//! the same finding whatever the schedule; the same graph fixed is clean; every example is
//! clean with both checks on.
//!
//! Each racy graph also runs once without the checks: the run passes (the schedule hid the
//! bug), which is what the checks exist for. The devices run the coherent cache model (see
//! [`coherent`]); CI also runs the examples with the checks under the faithful one.

use pto::hal::check::Checks;
use pto::hal::{DevicePlatform, HostPlatform};
use pto::prelude::*;
use pto::runtime::host::DeviceTensor;
use pto_sim::SimError;
use pto_sim::check::{CheckReport, Finding, Reader};
use pto_testkit::{RUNTIMES, f};

/// Runs per case: every one must catch the bug, with the same report.
const REPS: usize = 5;

/// The selected board under the coherent cache model: the checks judge the graph whatever
/// the model, and under the faithful one (the small board's default) the model itself may
/// catch a racy graph in the interleaving that ran, which would hide what these tests show.
fn coherent<T>(opened: Result<(Device, T), pto::Error>) -> (Device, T) {
    let (dev, k) = opened.expect("open the selected board");
    dev.platform().set_cache_model(pto_sim::CacheModel::Coherent).expect("no launch is active");
    (dev, k)
}

fn device() -> (Device, pto_testkit::Kernels) {
    coherent(pto_testkit::setup(pto::open))
}

/// The runtime × executor combinations (the device-side runtime runs on the legacy executor).
fn routes() -> [(RuntimeKind, pto::Executor); 3] {
    [
        (RuntimeKind::HostBuiltGraph, pto::Executor::Legacy),
        (RuntimeKind::HostBuiltGraph, pto::Executor::Resident),
        (RuntimeKind::TensormapRing, pto::Executor::Auto),
    ]
}

fn cfg(rt: RuntimeKind, ex: pto::Executor, checks: Checks) -> RunConfig {
    RunConfig::default().with_runtime(rt).with_executor(ex).with_check(checks)
}

/// The check report a failed run carries as data.
fn report(r: Result<RunReport, pto::Error>) -> CheckReport {
    match r {
        Ok(rep) => panic!("the run passed with checks {}: {rep:?}", rep.checks.name()),
        Err(e) => match e.platform_error::<SimError>() {
            Some(SimError::Check(c)) => (**c).clone(),
            other => panic!("expected a check report, got {other:?} in {e}"),
        },
    }
}

/// Whether the selected board's contract makes two writers of one line a hazard.
fn line_hazard() -> bool {
    !<<pto::SelectedPlatform as DevicePlatform>::Contract as pto::hal::Contract>::HOST_COHERENT
}

/// Run `program` over `args` on every route `REPS` times with `checks`: each run fails with
/// the same report, which `expect` accepts. Returns one report per route.
fn caught_every_time(
    dev: &Device,
    program: &Program,
    args: &dyn Fn() -> OrchArgs,
    checks: Checks,
    expect: impl Fn(&Finding) -> bool,
) -> Vec<CheckReport> {
    let mut out = Vec::new();
    for (rt, ex) in routes() {
        let first = report(dev.run_program(program, &args(), &cfg(rt, ex, checks)));
        assert!(expect(&first.first), "{rt:?}/{ex:?}: unexpected finding: {first}");
        for rep in 1..REPS {
            let again = report(dev.run_program(program, &args(), &cfg(rt, ex, checks)));
            assert_eq!(again, first, "{rt:?}/{ex:?} run {rep}: the report depends on the schedule");
        }
        out.push(first);
    }
    out
}

/// Every route passes `program` with `checks` on.
fn clean(dev: &Device, program: &Program, args: &dyn Fn() -> OrchArgs, checks: Checks) {
    for (rt, ex) in routes() {
        let r = dev.run_program(program, &args(), &cfg(rt, ex, checks));
        let rep = r.unwrap_or_else(|e| panic!("{rt:?}/{ex:?}: the fixed graph fails: {e}"));
        assert_eq!(rep.checks, checks);
    }
}

/// Every route passes `program` with the checks off (the schedule hides the bug).
fn hidden(dev: &Device, program: &Program, args: &dyn Fn() -> OrchArgs) {
    for (rt, ex) in routes() {
        let r = dev.run_program(program, &args(), &cfg(rt, ex, Checks::OFF));
        r.unwrap_or_else(|e| panic!("{rt:?}/{ex:?}: without the checks the run should pass: {e}"));
    }
}

fn tensor(dev: &Device, n: u32) -> DeviceTensor<pto::SelectedPlatform> {
    dev.tensor_from(&[1, n], &vec![1.0f32; n as usize]).unwrap()
}

// --- racecheck, data -------------------------------------------------------------------------

/// Two `+1` tasks on one tensor, passed untracked: no dependency orders them.
fn two_untracked_writers(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let x = a.t(0)?;
    o.submit(Task::aiv(f::ADD1).no_dep(&x))?;
    o.submit(Task::aiv(f::ADD1).no_dep(&x))?;
    Ok(())
}

/// The same, the second ordered after the first.
fn two_untracked_writers_ordered(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let x = a.t(0)?;
    let first = o.submit(Task::aiv(f::ADD1).no_dep(&x))?;
    o.submit(Task::aiv(f::ADD1).no_dep(&x).after(first))?;
    Ok(())
}

#[test]
fn racecheck_data_catches_unordered_writers_every_time() {
    let (dev, _k) = device();
    let x = tensor(&dev, 16);
    let args = || OrchArgs::new().tensor(x.tensor());
    let racy = dev.register_orchestration("two_untracked_writers", two_untracked_writers).unwrap();
    hidden(&dev, &racy, &args);
    let lo = x.addr().0;
    for r in caught_every_time(&dev, &racy, &args, Checks { race: true, init: false }, |f| {
        matches!(f, Finding::DataRace { .. })
    }) {
        let Finding::DataRace { first, second, range } = &r.first else { unreachable!() };
        assert_eq!((first.kernel.as_str(), second.kernel.as_str()), ("add1", "add1"), "{r}");
        assert_ne!(first.task, second.task, "{r}");
        assert_eq!((first.arg, second.arg), (0, 0), "{r}");
        assert!(range.0 >= lo && range.1 <= lo + 64 && range.0 < range.1, "{r}");
        assert!(r.to_string().contains("no dependency orders"), "{r}");
    }
    let fixed = dev.register_orchestration("two_untracked_writers_ordered", two_untracked_writers_ordered).unwrap();
    clean(&dev, &fixed, &args, Checks::ALL);
}

/// Explicit dependencies only (the `manual_scope` example) with the write-after-read
/// dependency of `bump` on `acc` removed: `bump` overwrites `x` while `acc` may still read it.
fn manual_scope_missing_dependency(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y, z) = (a.t(0)?, a.t(1)?, a.t(2)?);
    o.manual_scope(|s| {
        let fill = s.submit(Task::aiv(f::FILL1).output(&x))?;
        let acc = s.submit(Task::aiv(f::ACCUMULATE).input(&x).inout(&y).after(fill))?;
        let bump = s.submit(Task::aiv(f::ADD1).inout(&x).after(fill))?;
        s.submit(Task::aiv(f::MUL).input(&x).input(&y).output(&z).after(bump).after(acc))?;
        Ok(())
    })
}

#[test]
fn manual_scope_with_a_removed_dependency_is_caught() {
    let (dev, _k) = device();
    let (x, y, z) = (tensor(&dev, 256), tensor(&dev, 256), tensor(&dev, 256));
    let args = || OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).tensor(z.tensor());
    let racy = dev.register_orchestration("manual_scope_missing_dependency", manual_scope_missing_dependency).unwrap();
    hidden(&dev, &racy, &args);
    for r in caught_every_time(&dev, &racy, &args, Checks::ALL, |f| matches!(f, Finding::DataRace { .. })) {
        let Finding::DataRace { first, second, .. } = &r.first else { unreachable!() };
        // acc read x through arg 0; bump wrote it through arg 0.
        assert_eq!((first.kernel.as_str(), first.write), ("accumulate", false), "{r}");
        assert_eq!((second.kernel.as_str(), second.write), ("add1", true), "{r}");
    }
    // The example itself, with the dependency, is clean.
    let k = dev.register_orchestration("manual_scope", pto_testkit::orch_manual_scope).unwrap();
    clean(&dev, &k, &args, Checks::ALL);
}

// --- racecheck, line -------------------------------------------------------------------------

/// Two `+1` tasks on the two halves (8 floats each) of one 64-byte line: the tensor map finds
/// no overlap, so nothing orders them.
fn two_halves_of_one_line(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    o.submit(Task::aiv(f::ADD1).inout(&y.view(&[0, 0], &[1, 8])?))?;
    o.submit(Task::aiv(f::ADD1).inout(&y.view(&[0, 8], &[1, 8])?))?;
    Ok(())
}

fn two_halves_of_one_line_ordered(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    let first = o.submit(Task::aiv(f::ADD1).inout(&y.view(&[0, 0], &[1, 8])?))?;
    o.submit(Task::aiv(f::ADD1).inout(&y.view(&[0, 8], &[1, 8])?).after(first))?;
    Ok(())
}

#[test]
fn racecheck_line_catches_two_writers_of_one_line_every_time() {
    let (dev, _k) = device();
    let y = tensor(&dev, 16);
    let args = || OrchArgs::new().tensor(y.tensor());
    let racy = dev.register_orchestration("two_halves_of_one_line", two_halves_of_one_line).unwrap();
    let race = Checks { race: true, init: false };
    if !line_hazard() {
        // A coherent board has no whole-line hazard: the graph is correct there.
        clean(&dev, &racy, &args, race);
        return;
    }
    hidden(&dev, &racy, &args);
    let line = y.addr().0;
    for r in caught_every_time(&dev, &racy, &args, race, |f| matches!(f, Finding::LineRace { .. })) {
        let Finding::LineRace { first, second, line: l } = &r.first else { unreachable!() };
        assert_eq!(*l, line, "{r}");
        assert_eq!(first.range, (line, line + 32), "{r}");
        assert_eq!(second.range, (line + 32, line + 64), "{r}");
        assert!(first.write && second.write, "{r}");
    }
    let fixed = dev.register_orchestration("two_halves_of_one_line_ordered", two_halves_of_one_line_ordered).unwrap();
    clean(&dev, &fixed, &args, Checks::ALL);
}

// --- initcheck -------------------------------------------------------------------------------

/// A scope tensor read (`+1` in place) before anything wrote it, then copied out.
fn reads_a_fresh_scope_tensor(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let out = a.t(0)?;
    o.scope(|s| {
        let tmp = s.alloc::<f32>(&[1, 16])?;
        s.submit(Task::aiv(f::ADD1).inout(&tmp))?;
        s.submit(Task::aiv(f::ADD).input(&tmp).input(&tmp).output(&out))?;
        Ok(())
    })
}

/// The same, with the scope tensor filled first.
fn fills_the_scope_tensor_first(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let out = a.t(0)?;
    o.scope(|s| {
        let tmp = s.alloc::<f32>(&[1, 16])?;
        s.submit(Task::aiv(f::FILL1).output(&tmp))?;
        s.submit(Task::aiv(f::ADD1).inout(&tmp))?;
        s.submit(Task::aiv(f::ADD).input(&tmp).input(&tmp).output(&out))?;
        Ok(())
    })
}

#[test]
fn initcheck_catches_a_scope_tensor_read_before_it_is_written() {
    let (dev, _k) = device();
    let out = tensor(&dev, 16);
    let args = || OrchArgs::new().tensor(out.tensor());
    let bad = dev.register_orchestration("reads_a_fresh_scope_tensor", reads_a_fresh_scope_tensor).unwrap();
    hidden(&dev, &bad, &args);
    let init = Checks { race: false, init: true };
    for r in caught_every_time(&dev, &bad, &args, init, |f| matches!(f, Finding::Uninitialised { .. })) {
        let Finding::Uninitialised { reader: Reader::Kernel { access, element }, addr } = &r.first else {
            panic!("a kernel's read: {r}")
        };
        assert_eq!((access.kernel.as_str(), access.arg, access.write), ("add1", 0, false), "{r}");
        assert_eq!(*element, Some(0), "{r}");
        assert_eq!(*addr, access.range.0, "{r}");
    }
    let good = dev.register_orchestration("fills_the_scope_tensor_first", fills_the_scope_tensor_first).unwrap();
    clean(&dev, &good, &args, Checks::ALL);
}

/// `+1` on the first 8 of 16 floats of `y`.
fn writes_half(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    o.submit(Task::aiv(f::FILL1).output(&a.t(0)?.view(&[0, 0], &[1, 8])?))?;
    Ok(())
}

#[test]
fn initcheck_catches_the_hosts_read_back_of_unwritten_elements() {
    let (dev, _k) = device();
    // Memory allocated while initcheck is off counts as written: switch it on first.
    assert!(<pto::SelectedPlatform as HostPlatform>::set_checks(dev.platform(), Checks::ALL));
    let p = dev.register_orchestration("writes_half", writes_half).unwrap();
    for (rt, ex) in routes() {
        let y = dev.alloc_uninit::<f32>(&[1, 16]).unwrap();
        let r = dev.run_program(&p, &OrchArgs::new().tensor(y.tensor()), &cfg(rt, ex, Checks::ALL));
        r.unwrap_or_else(|e| panic!("{rt:?}/{ex:?}: {e}"));
        match y.read::<f32>() {
            Err(pto::Error::Uninitialised { addr, element }) => {
                assert_eq!((addr, element), (y.addr().0 + 32, 8), "{rt:?}/{ex:?}");
            }
            other => panic!("{rt:?}/{ex:?}: expected an uninitialised read-back, got {other:?}"),
        }
        // Written by the host: the read-back is clean.
        y.write(&[2.0f32; 16]).unwrap();
        assert_eq!(y.read::<f32>().unwrap(), vec![2.0; 16]);
    }
    // A zeroed allocation counts as written.
    let y = dev.alloc::<f32>(&[1, 16]).unwrap();
    dev.run_program(&p, &OrchArgs::new().tensor(y.tensor()), &RunConfig::default()).unwrap();
    assert_eq!(y.read::<f32>().unwrap(), [[1.0; 8], [0.0; 8]].concat());
    // With initcheck off, nothing is tracked.
    assert!(<pto::SelectedPlatform as HostPlatform>::set_checks(dev.platform(), Checks::OFF));
    let y = dev.alloc_uninit::<f32>(&[1, 16]).unwrap();
    dev.run_program(&p, &OrchArgs::new().tensor(y.tensor()), &RunConfig::default()).unwrap();
    assert_eq!(y.read::<f32>().unwrap()[..8], [1.0; 8]);
}

// --- every example ----------------------------------------------------------------------------

#[test]
fn every_example_is_clean_with_both_checks_on() {
    let (dev, k) = device();
    assert!(<pto::SelectedPlatform as HostPlatform>::set_checks(dev.platform(), Checks::ALL));
    for (name, w) in pto_testkit::examples::<pto::SelectedPlatform>() {
        for rt in RUNTIMES {
            let o = w(&dev, &k, rt).unwrap_or_else(|e| panic!("{name} on {}: {e}", rt.name()));
            assert_eq!(o.report.checks, Checks::ALL, "{name}");
        }
    }
}

#[test]
fn a_bad_check_list_is_refused_by_name() {
    for bad in ["racecheck", "race,,init", ""] {
        assert_eq!(Checks::parse(bad), None, "{bad:?}");
    }
}

/// x = 1 in a scope of its own; then enough other scopes to retire it (the tensor map forgets
/// it); then x += 1, which the device-side runtime orders after the fill by its retirement.
fn reads_after_a_retired_writer(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y) = (a.t(0)?, a.t(1)?);
    o.scope(|s| s.submit(Task::aiv(f::FILL1).output(&x)).map(|_| ()))?;
    for i in 0..32 {
        o.scope(|s| s.submit(Task::aiv(f::ADD1).inout(&y.view(&[i, 0], &[1, 16])?)).map(|_| ()))?;
    }
    o.submit(Task::aiv(f::ADD1).inout(&x))?;
    Ok(())
}

#[test]
fn a_retired_producer_still_orders_later_tasks() {
    let (dev, _k) = device();
    let (x, y) = (tensor(&dev, 16), dev.tensor_from(&[32, 16], &[0.0f32; 512]).unwrap());
    let p = dev.register_orchestration("reads_after_a_retired_writer", reads_after_a_retired_writer).unwrap();
    let rings = RingConfig::uniform(4, 64 << 10, 64);
    for _ in 0..REPS {
        let c = RunConfig::default()
            .with_runtime(RuntimeKind::TensormapRing)
            .with_rings(rings.clone())
            .with_check(Checks::ALL);
        let r = dev.run_program(&p, &OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()), &c);
        r.unwrap_or_else(|e| panic!("the fill retired before x += 1 was submitted: ordered, not a race: {e}"));
        assert_eq!(x.read::<f32>().unwrap(), vec![2.0; 16]);
    }
}

// --- native kernels ----------------------------------------------------------------------------

/// Native kernels are seen at their boundary (their views as declared, inputs read and outputs
/// written whole): the racy graphs are caught with them too, and the examples that have native
/// kernels are clean.
#[test]
fn native_kernels_are_checked_at_their_boundary() {
    let (dev, k) = coherent(pto_testkit::setup_with(pto::open, pto_testkit::KernelChoice::Native));
    let x = tensor(&dev, 16);
    let args = || OrchArgs::new().tensor(x.tensor());
    let racy = dev.register_orchestration("two_untracked_writers", two_untracked_writers).unwrap();
    let race = Checks { race: true, init: false };
    for r in caught_every_time(&dev, &racy, &args, race, |f| matches!(f, Finding::DataRace { .. })) {
        let Finding::DataRace { first, second, .. } = &r.first else { unreachable!() };
        assert_eq!((first.kernel.as_str(), second.kernel.as_str()), ("add1", "add1"), "{r}");
    }
    let (a, b, c) = (tensor(&dev, 256), tensor(&dev, 256), tensor(&dev, 256));
    let args3 = || OrchArgs::new().tensor(a.tensor()).tensor(b.tensor()).tensor(c.tensor());
    let missing =
        dev.register_orchestration("manual_scope_missing_dependency", manual_scope_missing_dependency).unwrap();
    caught_every_time(&dev, &missing, &args3, Checks::ALL, |f| matches!(f, Finding::DataRace { .. }));
    assert!(<pto::SelectedPlatform as HostPlatform>::set_checks(dev.platform(), Checks::ALL));
    for (name, w) in pto_testkit::examples::<pto::SelectedPlatform>() {
        if !pto_testkit::native::NATIVE_EXAMPLES.contains(&name) {
            continue;
        }
        for rt in RUNTIMES {
            w(&dev, &k, rt).unwrap_or_else(|e| panic!("{name} with native kernels on {}: {e}", rt.name()));
        }
    }
}
