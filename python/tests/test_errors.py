"""Error paths: a kernel fault raises pto.DeviceError with the fault's fields, and the device
stays usable; bad input raises a clear error naming what was wrong."""

from __future__ import annotations

import numpy as np
import pytest

import pto
from conftest import f32

In, Out, InOut = pto.In, pto.Out, pto.InOut


@pytest.mark.parametrize("runtime,executor", [("hbg", "legacy"), ("hbg", "resident"), ("trb", "legacy")])
def test_kernel_fault_raises_device_error(devices, board, runtime, executor):
    dev = devices(board, "coherent")
    x = dev.tensor(f32(np.zeros(16)))
    g = pto.Graph()
    g.task(dev.kernel("add1"), [InOut(x)])
    g.task(dev.kernel("panic"), [InOut(x)])
    with pytest.raises(pto.DeviceError) as info:
        dev.run(g, runtime=runtime, executor=executor, trace=True)
    e = info.value
    assert isinstance(e, pto.PtoError)
    assert e.code_name == "KERNEL_FAULT" and e.code == 200
    assert e.site == "aicore kernel"
    assert e.task == 1
    assert e.core is not None and 0 <= e.core < dev.topology["cores"]
    assert e.kernel == "panic"
    assert e.detail != 0
    assert "deliberate kernel failure" in e.device_message
    assert "KERNEL_FAULT" in str(e) and "kernel `panic`" in str(e)
    assert e.hint and e.description
    assert e.trace is not None and any(s["task"] == 0 for s in e.trace.subtasks)
    # The device is still usable.
    assert dev.unusable_reason() is None
    ok = pto.Graph()
    ok.task(dev.kernel("add1"), [InOut(x)])
    dev.run(ok, runtime=runtime)


def test_kernel_misuse_is_a_device_error(devices):
    """`add` reads f32 arguments: given i32 tensors its core faults, naming the kernel."""
    dev = devices("sim-a2a3")
    a = dev.tensor(np.arange(8, dtype=np.int32))
    out = dev.alloc([8], "i32")
    g = pto.Graph()
    g.task(dev.kernel("add"), [In(a), In(a), Out(out)])
    with pytest.raises(pto.DeviceError) as info:
        dev.run(g)
    assert info.value.kernel == "add" and info.value.task == 0


def test_bad_boards_and_options():
    with pytest.raises(pto.ConfigError, match="unknown board .sim-x..*sim-a2a3"):
        pto.open("sim-x")
    with pytest.raises(pto.ConfigError, match="cache model .faithfull."):
        pto.open("sim-mini", cache="faithfull")
    with pytest.raises(pto.ConfigError, match="aicpu_writes"):
        pto.open("sim-mini", aicpu_writes="sideways")


def test_cache_model_and_switches(devices):
    dev = pto.open("sim-mini", cache="faithful:42:through", protect=False)
    assert dev.cache_model == "faithful:42" and dev.aicpu_writes == "through" and not dev.protect
    dev.configure(cache="coherent", protect=True)
    assert dev.cache_model == "coherent" and dev.protect
    assert pto.open("sim-mini").cache_model.startswith("faithful:")  # the board's own default
    dev.close()


def test_bad_run_options(devices):
    dev = devices("sim-mini")
    g = pto.Graph()
    g.task(dev.kernel("add1"), [InOut(dev.alloc([4]))])
    with pytest.raises(pto.ConfigError, match="unknown runtime"):
        dev.run(g, runtime="xyz")
    with pytest.raises(pto.ConfigError, match="executor .fast."):
        dev.run(g, executor="fast")
    with pytest.raises(pto.ConfigError, match="dump level"):
        dev.run(g, dump="everything")
    with pytest.raises(pto.ConfigError, match="clusters must be 1..=2"):
        dev.run(g, clusters=3)
    with pytest.raises(pto.ConfigError, match="rings.window"):
        dev.run(g, runtime="trb", rings={"window": 3})
    with pytest.raises(pto.ConfigError, match="unknown key"):
        dev.run(g, runtime="trb", rings={"windows": 4})
    with pytest.raises(pto.ConfigError, match="unknown workload"):
        dev.run_workload("vectors")


def test_bad_tensor_input(devices):
    dev = devices("sim-a2a3")
    t = dev.alloc([2, 3], "f32")
    with pytest.raises(TypeError, match="f32 tensor takes a float32 array, got int64"):
        t.write(np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match=r"shape \[2, 3\].*got shape \[3, 2\]"):
        t.write(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="6 elements"):
        t.write(np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="unknown element type .f8."):
        dev.alloc([4], "f8")
    with pytest.raises(TypeError, match="no device element type for numpy bool"):
        dev.tensor(np.zeros(3, bool))
    with pytest.raises(TypeError, match="same_kind"):
        dev.tensor([1.5], dtype="i32")
    with pytest.raises(TypeError, match="bf16 tensor takes uint16 bits"):
        dev.alloc([2], "bf16").write(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="bf16="):
        dev.alloc([2], "bf16").read(bf16="half")
    with pytest.raises(pto.GraphError):
        dev.alloc([0], "f32")


def test_bad_kernels(devices):
    dev = devices("sim-a2a3")
    with pytest.raises(pto.KernelError, match="no kernel .matmul. ships"):
        dev.kernel("matmul")
    with pytest.raises(pto.KernelError, match="already registered"):
        dev.register_kernel("add")
    assert "add" in pto.kernels() and pto.kernels()["mix_matmul"]["core"] == "aic"
    k = dev.register_kernel("add_on_aic", "add", core="aic")
    assert (k.aic, k.aiv) == (True, False)


def test_bad_graphs(devices):
    dev = devices("sim-a2a3")
    other = devices("sim-mini")
    x = dev.alloc([8])
    add1 = dev.kernel("add1")
    g = pto.Graph()
    with pytest.raises(TypeError, match="expected pto.In"):
        g.task(add1, [x])
    with pytest.raises(TypeError, match="expected a pto.Tensor"):
        g.task(add1, [InOut(np.zeros(8))])
    with pytest.raises(TypeError, match="scalar 0"):
        g.task(add1, [InOut(x)], ["one"])
    with pytest.raises(pto.GraphError, match="not an earlier task"):
        g.task(add1, [InOut(x)], after=[0])
    with pytest.raises(ValueError, match="has no aic body"):
        g.task(add1, [InOut(x)], core="aic")
    with pytest.raises(pto.GraphError, match="another graph"):
        g.task(add1, [InOut(pto.Graph().local([8]))])
    g.task(add1, [InOut(x)])
    with pytest.raises(pto.GraphError, match="one device"):
        g.task(add1, [InOut(other.alloc([8]))])
    with pytest.raises(pto.GraphError, match="device #"):
        other.run(g)
    assert len(g) == 1
    # The runtime's own validation: a view outside its tensor, then a non-power-of-two window.
    bad = pto.Graph()
    bad.task(add1, [InOut(x.view([4], [8]))])
    with pytest.raises(pto.GraphError, match="view outside its tensor"):
        dev.run(bad, runtime="hbg")
    # The device-side runtime's orchestrator meets it on the device: a latched INVALID_ARGS.
    with pytest.raises(pto.DeviceError, match="view outside its tensor") as info:
        dev.run(bad, runtime="trb")
    assert info.value.code_name == "INVALID_ARGS" and info.value.site == "orchestrator"
    dev.run(g)
    np.testing.assert_array_equal(x.read(), np.ones(8, np.float32))


def test_tensor_read_and_write_after_close_are_refused(devices):
    # A closed device's tensors fail like its other calls: PtoError, "the device is closed".
    dev = pto.open("sim-mini")
    t = dev.alloc([4])
    t.write(np.arange(4, dtype=np.float32))
    dev.close()
    with pytest.raises(pto.PtoError, match="the device is closed"):
        dev.alloc([4])
    with pytest.raises(pto.PtoError, match="the device is closed"):
        t.read()
    with pytest.raises(pto.PtoError, match="the device is closed"):
        t.write(np.zeros(4, dtype=np.float32))
