"""lumen.Tensor: zero-copy NumPy views, factories, indexing, DLPack with torch, devices, errors."""
import numpy as np
import pytest
import torch

import lumen


def test_from_numpy_shares_memory(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = lumen.from_numpy(a)
    assert t.data_ptr() == a.ctypes.data
    v = t.numpy()
    assert v.ctypes.data == a.ctypes.data
    a[1, 2] = 42.0
    assert t.numpy()[1, 2] == 42.0
    v[0, 0] = -7.0
    assert a[0, 0] == -7.0
    np.testing.assert_array_equal(np.asarray(t), a)


def test_numpy_view_keeps_tensor_alive(rng):
    values = rng.standard_normal(1000).astype(np.float32)
    view = lumen.tensor(values).numpy()
    del values
    assert view.shape == (1000,)
    view += 1  # still writable, still owned
    assert np.isfinite(view).all()


def test_from_numpy_copies_non_contiguous(rng):
    a = rng.standard_normal((4, 6)).astype(np.float32)
    t = lumen.from_numpy(a[:, ::2])
    assert t.shape == (4, 3)
    np.testing.assert_array_equal(t.numpy(), a[:, ::2])
    assert t.data_ptr() != a.ctypes.data
    t2 = lumen.from_numpy(a.T)
    np.testing.assert_array_equal(t2.numpy(), a.T)


def test_from_numpy_copies_read_only(rng):
    data = rng.standard_normal(8).astype(np.float32).tobytes()
    a = np.frombuffer(data, np.float32)
    t = lumen.from_numpy(a)
    assert t.data_ptr() != a.ctypes.data
    t.numpy()[0] = 1.0  # writes the copy, never the bytes object
    np.testing.assert_array_equal(a, np.frombuffer(data, np.float32))


def test_from_numpy_big_endian_is_converted(rng):
    a = rng.standard_normal(5).astype(">f4")
    np.testing.assert_array_equal(lumen.from_numpy(a).numpy(), a.astype(np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "uint8", "int16",
                                   "int32", "int64", "bool"])
def test_dtypes_round_trip(rng, dtype):
    a = (rng.standard_normal(7) * 10).astype(dtype)
    t = lumen.from_numpy(a)
    assert str(t.dtype) == dtype
    np.testing.assert_array_equal(t.numpy(), a)


def test_unsupported_numpy_dtype_raises():
    with pytest.raises(lumen.InvalidArgument, match="complex128"):
        lumen.from_numpy(np.zeros(3, dtype=np.complex128))
    with pytest.raises(lumen.Error):
        lumen.from_numpy(np.array(["a", "b"]))


def test_factories():
    lumen.manual_seed(0)
    assert lumen.zeros(2, 3).numpy().tolist() == [[0.0] * 3] * 2
    assert lumen.ones((2,), dtype=lumen.int64).numpy().tolist() == [1, 1]
    assert lumen.full((2, 2), 7).dtype == lumen.int64
    np.testing.assert_array_equal(lumen.full((2, 2), 1.5).numpy(), np.full((2, 2), 1.5))
    np.testing.assert_array_equal(lumen.arange(5).numpy(), np.arange(5))
    np.testing.assert_allclose(lumen.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    r = lumen.rand(1000).numpy()
    assert r.min() >= 0 and r.max() < 1 and 0.4 < r.mean() < 0.6
    n = lumen.randn(10000).numpy()
    assert abs(n.mean()) < 0.05 and 0.95 < n.std() < 1.05
    assert lumen.randn(2, 3).dtype == lumen.float32
    t = lumen.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.dtype == lumen.float32 and t.shape == (2, 2)
    assert lumen.tensor([1, 2]).dtype == lumen.int64
    assert lumen.tensor(np.arange(3.0)).dtype == lumen.float64
    assert lumen.tensor([1, 2], dtype=lumen.float16).dtype == lumen.float16
    assert lumen.empty(3, 4).shape == (3, 4)


def test_reshape_index_item_repr(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = lumen.from_numpy(a)
    r = t.reshape(6, -1)
    assert r.shape == (6, 4) and r.data_ptr() == t.data_ptr()
    assert t.view((4, 6)).shape == (4, 6)
    np.testing.assert_array_equal(t[1].numpy(), a[1])
    assert t[1].data_ptr() == a[1].ctypes.data
    np.testing.assert_array_equal(t[-1, 2].numpy(), a[-1, 2])
    np.testing.assert_array_equal(t[:, 1:3, ::2].numpy(), a[:, 1:3, ::2])
    np.testing.assert_array_equal(t[..., 0].numpy(), a[..., 0])
    assert t[0, 1, 2].item() == pytest.approx(float(a[0, 1, 2]))
    t[0, 0, 0] = 5.0
    assert a[0, 0, 0] == 5.0
    assert len(t) == 2 and [x.shape for x in t] == [(3, 4), (3, 4)]
    assert t.tolist() == a.tolist()
    assert "tensor(" in repr(t) and repr(lumen.float16) == "lumen.float16"
    assert t.size() == (2, 3, 4) and t.size(1) == 3 and t.ndim == 3 and t.numel() == 24
    with pytest.raises(IndexError):
        t[5]
    with pytest.raises(lumen.ShapeError):
        t.reshape(5, 5)
    with pytest.raises(lumen.InvalidArgument):
        t.item()


def test_dtype_conversion(rng):
    a = (rng.standard_normal(10) * 5).astype(np.float32)
    t = lumen.from_numpy(a)
    np.testing.assert_array_equal(t.to(lumen.int32).numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(t.half().numpy(), a.astype(np.float16))
    assert t.to("cpu") is not None and t.cpu().device == "cpu"


def test_dlpack_lumen_to_torch(rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    t = lumen.tensor(a)
    pt = torch.from_dlpack(t)
    assert pt.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(pt.numpy(), a)
    pt[0, 0] = 99.0
    assert t.numpy()[0, 0] == 99.0
    del t
    assert pt[0, 0].item() == 99.0  # the capsule keeps lumen's memory alive


def test_dlpack_torch_to_lumen(rng):
    pt = torch.from_numpy(rng.standard_normal((4, 2)).astype(np.float32))
    t = lumen.from_dlpack(pt)
    assert t.data_ptr() == pt.data_ptr() and t.shape == (4, 2)
    t.numpy()[1, 1] = -3.0
    assert pt[1, 1].item() == -3.0
    for dtype in [torch.float64, torch.int64, torch.int32, torch.uint8, torch.float16]:
        src = (torch.randn(6) * 10).to(dtype)
        np.testing.assert_array_equal(lumen.from_dlpack(src).numpy(), src.numpy())
    back = torch.from_dlpack(lumen.from_dlpack(torch.utils.dlpack.to_dlpack(pt)))
    assert back.data_ptr() == pt.data_ptr()


def test_dlpack_bad_input():
    with pytest.raises(lumen.InvalidArgument, match="not contiguous"):
        lumen.from_dlpack(torch.randn(4, 4).t())
    with pytest.raises(lumen.InvalidArgument):
        lumen.from_dlpack(object())
    capsule = torch.utils.dlpack.to_dlpack(torch.randn(2))
    lumen.from_dlpack(capsule)
    with pytest.raises(lumen.InvalidArgument):
        lumen.from_dlpack(capsule)  # a capsule is consumed once


def test_cuda_unavailable_is_a_clear_error():
    if "cuda" in lumen.backends():
        t = lumen.randn(4).to("cuda")
        assert t.device.startswith("cuda")
        np.testing.assert_array_equal(t.cpu().numpy().shape, (4,))
        return
    with pytest.raises(lumen.DeviceError, match="cuda"):
        lumen.randn(4).to("cuda")
    with pytest.raises(lumen.DeviceError):
        lumen.zeros(2, device="cuda")
    with pytest.raises(lumen.InvalidArgument):
        lumen.randn(4).to("tpu")


def test_error_classes():
    for name in ["InvalidModel", "UnsupportedOp", "ShapeError", "InvalidArgument", "OutOfMemory",
                 "DeviceError", "IoError"]:
        cls = getattr(lumen, name)
        assert issubclass(cls, lumen.Error) and cls.kind == name
    assert issubclass(lumen.IoError, OSError) and issubclass(lumen.ShapeError, ValueError)
