"""Scenes of the built-in workloads (what `pto run NAME` runs): every workload on every board,
runtime, executor and cache model; each checks its result against its golden in the runtime's
own code and reports what ran."""

from __future__ import annotations

import pytest

import pto
from conftest import RUNS, check_report

#: Tasks and golden-checked output values of each workload.
EXPECTED = {
    "mix": (16, 8192),
    "vector": (5, 16384),
    "chain513": (513, 4096),
    "bgemm": (1024, 16384),
    "paged_attention_small": (42, 768),
    "tiny_rings": (128, 16384),
    "manual_scope": (4, 1024),
}


def test_every_workload_is_listed():
    assert sorted(pto.workloads()) == sorted(EXPECTED)


@pytest.mark.parametrize("runtime,executor", RUNS, ids=[f"{r}-{e}" for r, e in RUNS])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_workload(dev, name, runtime, executor):
    if runtime == "trb" and executor == "resident":
        with pytest.raises(pto.ConfigError, match="resident"):
            dev.run_workload(name, runtime=runtime, executor=executor)
        return
    res = dev.run_workload(name, runtime=runtime, executor=executor)
    tasks, checked = EXPECTED[name]
    assert res.name == name
    assert res.result == "PASS"
    assert res.checked == checked
    check_report(res.report, dev, runtime, executor, tasks)
