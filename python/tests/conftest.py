"""Fixtures of the pto scenes: one device per simulated board and cache model for the whole
session, and the board × runtime × executor × cache-model matrix.

A device is opened with its cache model rather than switched between models: a device switched
from the coherent model to the faithful one after coherent runs reports occasional coherence
violations on the runtime's own lines (about one run in thirty) that a device opened faithful
never does."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pto

BOARDS = pto.boards()
#: The cache models every scene runs under: coherent, and faithful with a fixed seed.
CACHES = ["coherent", "faithful:7"]
#: Every runtime × executor pair, the device-side runtime's `resident` included: that cell
#: checks that the run is refused by name.
RUNS = list(itertools.product(pto.RUNTIMES, pto.EXECUTORS))


@pytest.fixture(scope="session")
def devices():
    """One opened device per board and cache model (`None`: the board's own), opened on first
    use."""
    opened: dict[tuple[str, str | None], pto.Device] = {}

    def get(board: str, cache: str | None = None) -> pto.Device:
        if (board, cache) not in opened:
            opened[(board, cache)] = pto.open(board, cache=cache)
        return opened[(board, cache)]

    yield get
    for d in opened.values():
        d.close()


@pytest.fixture(params=BOARDS)
def board(request) -> str:
    return request.param


@pytest.fixture(params=CACHES)
def cache(request) -> str:
    return request.param


@pytest.fixture
def dev(devices, board, cache) -> pto.Device:
    """The board's device, opened with the test's cache model."""
    d = devices(board, cache)
    assert d.cache_model == cache and d.protect
    return d


def run_scene(dev: pto.Device, graph: pto.Graph, runtime: str, executor: str, **options):
    """Run `graph` as a scene does and check what its report says about the run; `None` when
    the pair cannot run (the device-side runtime on the resident executor), after checking the
    refusal names it."""
    if runtime == "trb" and executor == "resident":
        with pytest.raises(pto.ConfigError, match="resident"):
            dev.run(graph, runtime=runtime, executor=executor, **options)
        return None
    r = dev.run(graph, runtime=runtime, executor=executor, **options)
    check_report(r, dev, runtime, executor, len(graph))
    return r


def check_report(r: pto.RunReport, dev: pto.Device, runtime: str, executor: str, tasks: int) -> None:
    assert r.board == dev.board
    assert r.runtime == runtime
    assert r.cache_model == dev.cache_model
    assert r.tasks == tasks
    assert r.executor_requested == executor
    if runtime == "trb" or executor == "legacy":
        assert r.executor == "legacy"
        assert r.legacy_reason
    elif executor == "resident":
        assert r.executor == "resident"
        assert r.legacy_reason is None
    else:
        assert r.executor in ("legacy", "resident")
    assert r.wall_us > 0
    if runtime == "hbg":
        assert r.build_us is not None and r.orchestration_us is None
    else:
        assert r.build_us is None and r.orchestration_us is not None
        assert 0 <= r.orchestration_flow_wait_us <= r.orchestration_us
    assert r.to_dict()["tasks"] == tasks


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)
