"""Native kernels (a C++ kernel compiled here into a shared object and registered with
`library=`) and the simulator's schedule-independent checks (`check="race,init"`), from Python."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import pto
from conftest import f32

ROOT = pathlib.Path(__file__).resolve().parents[2]
InOut, NoDep = pto.InOut, pto.NoDep


@pytest.fixture(scope="session")
def add1_library(tmp_path_factory) -> str:
    """The `add1` example kernel (y += 1, in the native kernel ABI) built for this host."""
    cxx = shutil.which("c++") or shutil.which("g++")
    assert cxx, "a C++ compiler is needed to build the native kernel"
    out = tmp_path_factory.mktemp("native") / "libadd1.so"
    kernels = ROOT / "testkits" / "examples" / "kernels"
    cmd = [cxx, "-std=c++17", "-shared", "-fPIC", "-O2", "-I", str(ROOT / "include"), "-I", str(kernels)]
    subprocess.run([*cmd, "-o", str(out), str(kernels / "add1.cpp")], check=True)
    return str(out)


@pytest.mark.parametrize("runtime", pto.RUNTIMES)
def test_a_native_kernel_runs_on_both_runtimes(devices, add1_library, runtime):
    dev = devices("sim-a2a3")
    name = f"add1_native_{runtime}"
    k = dev.register_kernel(name, library=add1_library, trust_native_code=True)
    assert (k.aic, k.aiv) == (False, True)
    start = f32(np.linspace(-1, 1, 64)).reshape(4, 16)
    y = dev.tensor(start)
    g = pto.Graph()
    for _ in range(3):
        g.task(k, [InOut(y)])
    dev.run(g, runtime=runtime)
    np.testing.assert_allclose(y.read(), start + 3, rtol=1e-6)


def test_a_library_that_does_not_load_is_an_error_naming_it(devices):
    dev = devices("sim-a2a3")
    with pytest.raises(pto.PtoError, match="libnowhere.so"):
        dev.register_kernel("nowhere", library="/nonexistent/libnowhere.so", trust_native_code=True)


def test_native_code_needs_an_explicit_opt_in_and_the_abi_marker(devices):
    dev = devices("sim-a2a3")
    # Without the opt-in nothing is loaded.
    with pytest.raises(pto.ConfigError, match="trust_native_code=True"):
        dev.register_kernel("free", library="libc.so.6")
    # With it, an object not built with pto_kernel.h is refused before anything is called.
    with pytest.raises(pto.PtoError, match="does not define the ABI marker `pto_abi_version`"):
        dev.register_kernel("free", library="libc.so.6", trust_native_code=True)


@pytest.mark.parametrize("runtime", pto.RUNTIMES)
def test_racecheck_reports_two_unordered_writers(runtime):
    dev = pto.open("sim-a2a3", check="race,init")
    try:
        add1 = dev.kernel("add1")
        x = dev.tensor(f32(np.ones(16)))
        racy = pto.Graph()
        racy.task(add1, [NoDep(x)])
        racy.task(add1, [NoDep(x)])
        with pytest.raises(pto.PtoError, match="data race"):
            dev.run(racy, runtime=runtime)
        ordered = pto.Graph()
        ordered.task(add1, [NoDep(x)])
        ordered.task(add1, [NoDep(x)], after=[0])
        dev.run(ordered, runtime=runtime)
        # Without the checks the racy graph passes: the schedule hid the race.
        dev.configure(check="off")
        dev.run(racy, runtime=runtime)
    finally:
        dev.close()


def test_a_bad_check_list_is_refused_by_name():
    with pytest.raises(pto.ConfigError, match="racecheck"):
        pto.open("sim-a2a3", check="racecheck")


def test_a_seeded_schedule_replays_its_run():
    """The same seed gives the same run: the device's counter readings in the trace are equal."""
    def run(seed):
        dev = pto.open("sim-a2a3", schedule=seed, cache="faithful:3")
        try:
            t = dev.run_workload("mix", runtime="trb", trace=True).report.trace
            return t.subtasks, t.phases
        finally:
            dev.close()

    a = run("7:pct")
    assert a[0], "the run traced its subtasks"
    assert a == run("7:pct")
    assert a != run("8"), "another seed, another schedule"



def test_a_bad_engine_or_schedule_is_refused_by_name():
    with pytest.raises(pto.ConfigError, match="engine .fibers."):
        pto.open("sim-a2a3", engine="fibers")
    with pytest.raises(pto.ConfigError, match="schedule .seed:x."):
        pto.open("sim-a2a3", schedule="seed:x")


def test_the_coroutine_engine_runs_a_workload():
    dev = pto.open("sim-a5", engine="coroutines")
    try:
        assert dev.run_workload("vector", runtime="hbg").checked > 0
    finally:
        dev.close()
