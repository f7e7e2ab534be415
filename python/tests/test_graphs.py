"""Scenes of graphs built from Python: each builds a task graph over device tensors and
graph-local tensors with the kernels the package ships, runs it on every board, runtime,
executor and cache model, and checks the result against a golden computed with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import pto
from conftest import RUNS, f32, run_scene

In, Out, InOut = pto.In, pto.Out, pto.InOut


def scene_vector(dev):
    """The `vector` diamond, written in Python: f = (s + 1)(s + 2) + s with s = a + b."""
    n = 4096
    i = np.arange(n)
    a_h, b_h = f32((i % 97) * 0.25), f32((i % 13) - 3.0)
    a, b, out = dev.tensor(a_h), dev.tensor(b_h), dev.alloc([n], "f32")
    add, mul, adds = dev.kernel("add"), dev.kernel("mul"), dev.kernel("add_scalar")
    g = pto.Graph()
    c, d, e, h = (g.local([n]) for _ in range(4))
    g.task(add, [In(a), In(b), Out(c)])
    g.task(adds, [In(c), Out(d)], [1.0])
    g.task(adds, [In(c), Out(e)], [2.0])
    g.task(mul, [In(d), In(e), Out(h)])
    g.task(add, [In(h), In(c), Out(out)])
    s = a_h + b_h
    golden = (s + 1) * (s + 2) + s

    def check():
        np.testing.assert_allclose(out.read(), golden, rtol=1e-6)

    return g, (a, b, out), check


def scene_chain(dev):
    """48 in-place `+1` tasks on one row, each after its predecessor by discovery, every
    fourth also by an explicit dependency on the task two before it."""
    y = dev.tensor(f32(np.linspace(-1, 1, 16)).reshape(1, 16))
    start = y.read()
    add1 = dev.kernel("add1")
    g = pto.Graph()
    for t in range(48):
        g.task(add1, [InOut(y)], after=[t - 2] if t >= 2 and t % 4 == 0 else [])

    def check():
        np.testing.assert_allclose(y.read(), start + 48, rtol=1e-6)
        y.write(start)  # the next run starts from the same data

    return g, (y,), check


def scene_mix_tiles(dev):
    """Per tile, a MIX task (AIC: C = A·B; both AIV lanes: half of E = 2·D + 1) on views of the
    inputs into graph-local tiles, then F = C + E into a view of the output."""
    t, tiles = 16, 4
    rng = np.random.default_rng(5)
    a_h, b_h, d_h = (f32(rng.integers(-4, 5, size=(tiles * t, t)) * 0.125) for _ in range(3))
    a, b, d = dev.tensor(a_h), dev.tensor(b_h), dev.tensor(d_h)
    f = dev.alloc([tiles * t, t])
    mm, vh, add = dev.kernel("mix_matmul"), dev.kernel("mix_vec_half"), dev.kernel("add")
    g = pto.Graph()
    for i in range(tiles):
        tile = lambda x: x.view([i * t, 0], [t, t])  # noqa: E731
        c, e = g.local([t, t]), g.local([t, t])
        g.mix(mm, vh, [In(tile(a)), In(tile(b)), Out(c), In(tile(d)), Out(e)])
        g.task(add, [In(c), In(e), Out(tile(f))])
    golden = np.concatenate(
        [a_h[i * t:(i + 1) * t] @ b_h[i * t:(i + 1) * t] + 2 * d_h[i * t:(i + 1) * t] + 1 for i in range(tiles)]
    )

    def check():
        np.testing.assert_allclose(f.read(), golden, rtol=1e-5, atol=1e-5)

    return g, (a, b, d, f), check


def scene_accumulate(dev):
    """y = 1 everywhere (OUT), then y += x three times (IN x, INOUT y), then y[0] += 1, then a
    dummy task after everything."""
    n = 512
    x_h = f32(np.arange(n) % 7 - 3)
    x, y = dev.tensor(x_h), dev.alloc([n])
    g = pto.Graph()
    first = g.task(dev.kernel("fill1"), [Out(y)])
    acc = [g.task(dev.kernel("accumulate"), [In(x), InOut(y)]) for _ in range(3)]
    last = g.task(dev.kernel("inc0"), [InOut(y)], after=[first])
    g.dummy(after=[last, *acc])
    golden = 1 + 3 * x_h
    golden[0] += 1

    def check():
        np.testing.assert_allclose(y.read(), golden, rtol=1e-6)

    return g, (x, y), check


def scene_rows_and_predicates(dev):
    """Per row i of X, Y[i] = X[i] + i (views of both, a float scalar each); then two `+1` tasks on Z under a predicate: one whose
    flag is 0 (skipped), one whose flag is 1 (runs)."""
    rows, n = 8, 64
    x_h = f32(np.arange(rows * n).reshape(rows, n) * 0.5)
    x, y = dev.tensor(x_h), dev.alloc([rows, n])
    z = dev.tensor(f32(np.zeros(32)))
    off, on = dev.tensor(np.array([0], np.int32)), dev.tensor(np.array([1], np.int32))
    adds, add1 = dev.kernel("add_scalar"), dev.kernel("add1")
    g = pto.Graph()
    for i in range(rows):
        g.task(adds, [In(x.view([i, 0], [1, n])), Out(y.view([i, 0], [1, n]))], [float(i)])
    g.task(add1, [InOut(z)], when=off)
    g.task(add1, [InOut(z)], when=on)
    golden = x_h + np.arange(rows, dtype=np.float32)[:, None]

    def check():
        np.testing.assert_allclose(y.read(), golden, rtol=1e-6)
        np.testing.assert_array_equal(z.read(), np.ones(32, np.float32))
        z.write(np.zeros(32, np.float32))

    return g, (x, y, z, off, on), check


SCENES = [scene_vector, scene_chain, scene_mix_tiles, scene_accumulate, scene_rows_and_predicates]


@pytest.mark.parametrize("runtime,executor", RUNS, ids=[f"{r}-{e}" for r, e in RUNS])
@pytest.mark.parametrize("scene", SCENES, ids=[s.__name__[len("scene_"):] for s in SCENES])
def test_graph_scene(dev, scene, runtime, executor):
    graph, _tensors, check = scene(dev)
    if run_scene(dev, graph, runtime, executor) is not None:
        check()


def test_a_graph_runs_again_on_both_runtimes(devices):
    """One graph, several runs, alternating runtimes: the same result each time."""
    dev = devices("sim-a2a3", "coherent")
    graph, _tensors, check = scene_vector(dev)
    for runtime in ["hbg", "trb", "hbg", "trb"]:
        dev.run(graph, runtime=runtime)
        check()


def test_run_options_reach_the_run(devices):
    """Clusters, AICPU threads, AIV-only and ring sizes are the run's."""
    dev = devices("sim-a5", "coherent")
    graph, _tensors, check = scene_accumulate(dev)
    r = dev.run(graph, runtime="hbg", executor="legacy", clusters=2, aicpu_threads=2, aiv_only=True, trace=True)
    check()
    assert r.trace.clusters == 2 and r.trace.threads == 2
    assert {s["core"] for s in r.trace.subtasks} <= set(range(2 * 3))
    r = dev.run(graph, runtime="trb", aicpu_threads=3, rings={"window": 16, "heap": 1 << 16, "dep_pool": 64})
    check()
    assert r.tasks == len(graph)
