"""pto-rt from Python.

Open a simulated board, move tensors in and out as numpy arrays, run the built-in workloads
and graphs built from Python on both runtimes and executors::

    import numpy as np, pto

    dev = pto.open("sim-a2a3", cache="faithful:7")
    a = dev.tensor(np.arange(16, dtype=np.float32))
    b = dev.tensor(np.ones(16, dtype=np.float32))
    c = dev.alloc([16], "f32")
    g = pto.Graph()
    g.task(dev.kernel("add"), [pto.In(a), pto.In(b), pto.Out(c)])
    report = dev.run(g, runtime="trb")
    assert (c.read() == np.arange(16) + 1).all()

See docs/python.md in the repository for the whole API.
"""

from __future__ import annotations

from ._errors import (
    ConfigError,
    DeviceError,
    GoldenMismatch,
    GraphError,
    KernelError,
    PtoError,
)
try:
    from . import _native  # noqa: F401
except ImportError as e:  # the source tree's pto/ shadows the installed package
    raise ImportError(
        f"the pto extension (pto._native) is not in {__path__[0]}: that is the source folder of the "
        "package, which shadows the installed one when Python runs from python/. Install it with "
        "`pip install ./python` and run from elsewhere (the repository root: "
        "`python -m pytest python/tests`)"
    ) from e

from ._native import (
    Arg,
    Device,
    Dump,
    DumpReport,
    Graph,
    In,
    InOut,
    Kernel,
    Local,
    NoDep,
    Out,
    OutputExisting,
    RunReport,
    Tensor,
    Trace,
    View,
    WorkloadResult,
    bf16_from_float,
    bf16_to_float,
    boards,
    dtypes,
    kernels,
    open,
    workloads,
)

#: The runtimes: host-built graph, device-side tensormap-and-ring.
RUNTIMES = ("hbg", "trb")
#: The executors of the host-built graph's runs.
EXECUTORS = ("auto", "legacy", "resident")


def open_dump(dir) -> Dump:
    """Read an args dump back from its directory (``args_dump.json`` and ``args.bin``)."""
    return Dump(dir)


__all__ = [
    "Arg",
    "ConfigError",
    "Device",
    "DeviceError",
    "Dump",
    "DumpReport",
    "EXECUTORS",
    "GoldenMismatch",
    "Graph",
    "GraphError",
    "In",
    "InOut",
    "Kernel",
    "KernelError",
    "Local",
    "NoDep",
    "Out",
    "OutputExisting",
    "PtoError",
    "RUNTIMES",
    "RunReport",
    "Tensor",
    "Trace",
    "View",
    "WorkloadResult",
    "bf16_from_float",
    "bf16_to_float",
    "boards",
    "dtypes",
    "kernels",
    "open",
    "open_dump",
    "workloads",
]
