"""What a run leaves behind: its trace (Chrome JSON and SVG, as files and objects) and its
args dump (files read back as records whose payloads are numpy arrays)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pto
from conftest import f32

In, Out = pto.In, pto.Out


def add_scalar_graph(dev, n=64):
    a_h = f32(np.arange(n) * 0.25)
    a, out = dev.tensor(a_h), dev.alloc([n])
    g = pto.Graph()
    g.task(dev.kernel("add_scalar"), [In(a), Out(out)], [1.5])
    g.task(dev.kernel("add_scalar"), [In(out), Out(a)], [-0.5], after=[0])
    return g, a_h, a, out


@pytest.mark.parametrize("runtime", pto.RUNTIMES)
def test_trace_as_files_and_objects(devices, board, runtime, tmp_path):
    dev = devices(board)
    g, _, _a, _out = add_scalar_graph(dev)
    r = dev.run(g, runtime=runtime, trace=True)
    t = r.trace
    assert t is not None and t.runtime == runtime and t.complete and t.dropped == 0
    assert len(t.subtasks) == 2
    assert [s["kernel"] for s in t.subtasks] == ["add_scalar", "add_scalar"]
    for s in t.subtasks:
        assert s["start"] <= s["end"]
    assert t.phases and all(p["start"] <= p["end"] for p in t.phases)
    assert (0, 1) in (t.edges or [])
    doc = json.loads(t.write_chrome(tmp_path / "t.json").read_text())
    assert doc == t.chrome()
    assert any(e.get("ph") == "X" for e in doc["traceEvents"])
    svg = t.write_svg(tmp_path / "t.svg").read_text()
    assert svg == t.svg() and "<svg" in svg
    # Off by default.
    assert dev.run(g, runtime=runtime).trace is None


@pytest.mark.parametrize("runtime,executor", [("hbg", "legacy"), ("hbg", "resident"), ("trb", "legacy")])
def test_full_dump_records_every_argument(devices, runtime, executor, tmp_path):
    dev = devices("sim-a2a3", "coherent")
    g, a_h, a, out = add_scalar_graph(dev)
    r = dev.run(g, runtime=runtime, executor=executor, dump="full", dump_dir=tmp_path)
    rep = r.dump
    assert rep.level == "full" and rep.dir == tmp_path and rep.dropped == 0
    assert (tmp_path / "args_dump.json").exists() and (tmp_path / "args.bin").exists()
    d = rep.open()
    assert len(d) == rep.collected == 6  # 2 tasks: input, output, scalar each
    assert d.run["runtime"] == runtime and d.run["complete"]
    tasks = sorted({rec["task"] for rec in d.records})
    assert len(tasks) == 2
    first, second = tasks
    np.testing.assert_array_equal(d.data(d.find(first, 0, "before_dispatch")), a_h)
    np.testing.assert_array_equal(d.data(d.find(first, 1, "after_completion")), a_h + 1.5)
    np.testing.assert_array_equal(d.data(d.find(second, 1, "after_completion")), a_h + 1.0)
    scalar = d.find(first, 2, "before_dispatch")
    assert scalar["kind"] == "scalar" and scalar["value"] == np.float32(1.5).view(np.uint32)
    # The same directory read by path.
    assert len(pto.open_dump(tmp_path).records) == 6
    np.testing.assert_array_equal(a.read(), a_h + 1.0)


def test_workload_trace_and_dump(devices, tmp_path):
    dev = devices("sim-mini")
    res = dev.run_workload("vector", runtime="trb", trace=True, dump="full", dump_dir=tmp_path)
    assert len(res.report.trace.subtasks) == 5
    d = res.report.dump.open()
    assert d.dir == tmp_path / "trb"
    assert d.accounting["dropped"] == 0 and len(d) > 0
