"""Tensors in and out of device memory as numpy arrays, every element type on every board:
values at the edges of each range come back bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import pto

#: Values at the edges of each element type's range, as numpy holds them.
EDGES = {
    "f32": np.array([0.1, -2.5, np.finfo(np.float32).max, np.inf, -0.0, np.finfo(np.float32).tiny], np.float32),
    "f64": np.array([0.1, -1e300, np.finfo(np.float64).tiny, -np.inf], np.float64),
    "f16": np.array([1.0, -2.5, 65504.0, 2.0**-24, np.inf, -0.0], np.float16),
    "bf16": np.array([0x3F80, 0xC040, 0x3E20, 0x7F7F, 0x7F80, 0x0001], np.uint16),
    "i8": np.array([-128, 127, 0, -1], np.int8),
    "u8": np.array([0, 255, 1], np.uint8),
    "i16": np.array([-(2**15), 2**15 - 1, 0], np.int16),
    "u16": np.array([0, 2**16 - 1], np.uint16),
    "i32": np.array([-(2**31), -1, 0, 2**31 - 1], np.int32),
    "u32": np.array([0, 2**32 - 1], np.uint32),
    "i64": np.array([-(2**63), -(2**53) - 1, 2**53 + 1, 2**63 - 1], np.int64),
    "u64": np.array([2**64 - 1, 2**53 + 1, 0], np.uint64),
}


def test_every_dtype_is_covered():
    assert sorted(pto.dtypes()) == sorted(EDGES)


@pytest.mark.parametrize("dtype", sorted(EDGES))
def test_round_trip(devices, board, dtype):
    dev = devices(board)
    host = EDGES[dtype]
    t = dev.tensor(host, dtype=dtype)
    assert t.dtype == dtype and t.shape == [len(host)] and t.size == len(host)
    back = t.read()
    assert back.dtype == host.dtype
    assert back.tobytes() == host.tobytes()
    # Zeroed on allocation; written again in its own shape; the array protocol reads it.
    z = dev.alloc([2, len(host)], dtype)
    assert not z.read().any()
    twice = np.stack([host, host])
    z.write(twice)
    assert np.asarray(z).tobytes() == twice.tobytes()
    assert z.nbytes == twice.nbytes


def test_dtype_follows_the_array(devices):
    dev = devices("sim-a2a3")
    for arr, want in [
        (np.zeros(3, np.float32), "f32"),
        (np.zeros(3, np.float16), "f16"),
        (np.zeros(3, np.int64), "i64"),
        (np.zeros((2, 3), np.uint8), "u8"),
        ([1.5, 2.5], "f64"),
    ]:
        t = dev.tensor(arr)
        assert t.dtype == want
        assert t.shape == list(np.shape(arr))


def test_bf16_from_floats_rounds_to_nearest_even(devices):
    dev = devices("sim-a2a3")
    x = np.array([1.0, -2.5, 3.14159, 1 + 2**-8, 1 + 3 * 2**-8, 65504.0], np.float32)
    t = dev.tensor(x, dtype="bf16")
    bits = t.read()
    assert bits.dtype == np.uint16
    # Ties go to even: 1 + 2^-8 (half an ulp) to 1.0, 1 + 3·2^-8 (an ulp and a half) to 1 + 2^-6.
    assert list(bits) == [0x3F80, 0xC020, 0x4049, 0x3F80, 0x3F82, 0x4780]
    np.testing.assert_array_equal(t.read(bf16="float32"), [1.0, -2.5, 3.140625, 1.0, 1.015625, 65536.0])
    np.testing.assert_array_equal(pto.bf16_to_float(pto.bf16_from_float(x)), t.read(bf16="float32"))


def test_bf16_with_ml_dtypes(devices):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dev = devices("sim-a2a3")
    x = np.array([[1.0, -3.0], [0.15625, 2.0**100]], dtype=ml_dtypes.bfloat16)
    t = dev.tensor(x)
    assert t.dtype == "bf16" and t.shape == [2, 2]
    back = t.read(bf16="ml_dtypes")
    assert back.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(back.astype(np.float32), x.astype(np.float32))


def test_f16_values(devices):
    dev = devices("sim-mini")
    x = np.array([0.5, -1.25, 1000.0, 6.1e-5], np.float16)
    t = dev.tensor(x)
    assert t.dtype == "f16" and t.read().dtype == np.float16
    np.testing.assert_array_equal(t.read(), x)


def test_non_contiguous_and_listed_input(devices):
    dev = devices("sim-a2a3")
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    t = dev.tensor(base[:, ::2])  # a strided view is copied contiguous
    np.testing.assert_array_equal(t.read(), base[:, ::2])
    t = dev.tensor([[1, 2], [3, 4]], dtype="i16")
    np.testing.assert_array_equal(t.read(), np.array([[1, 2], [3, 4]], np.int16))


def test_torch_through_dlpack():
    torch = pytest.importorskip("torch")
    dev = pto.open("sim-mini")
    x = torch.arange(8, dtype=torch.float32)
    t = dev.tensor(x)
    assert t.dtype == "f32"
    assert torch.equal(torch.from_numpy(t.read()), x)
