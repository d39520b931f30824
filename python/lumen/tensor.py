"""Creating tensors (lumen.tensor, zeros, randn, from_dlpack, ...) and the Python-side methods of
lumen.Tensor: repr, indexing, item/tolist, dtype conversion and the torch-style method forms of
the eager ops."""
import numpy as np

from . import _lumen
from ._lumen import Tensor, dtype

float32, float16, bfloat16, float64 = dtype.float32, dtype.float16, dtype.bfloat16, dtype.float64
int8, int16, int32, int64 = dtype.int8, dtype.int16, dtype.int32, dtype.int64
uint8, uint16, uint32, uint64 = dtype.uint8, dtype.uint16, dtype.uint32, dtype.uint64
bool_ = getattr(dtype, "bool")

_rng = np.random.default_rng()


def manual_seed(seed):
    """Seeds the generator behind lumen.rand and lumen.randn."""
    global _rng
    _rng = np.random.default_rng(seed)


def _shape(shape):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    return tuple(int(d) for d in shape)


def _filled(shape, dtype, device, fill):
    """A host tensor of `shape` whose NumPy view `fill` writes, then moved to `device`."""
    if device != "cpu":
        _lumen._device(device)  # raises DeviceError before any work when it is not available
    t = _lumen._empty(shape, dtype, "cpu")
    if t.numel():
        fill(t.numpy())
    return t if device == "cpu" else t.to(device)


def empty(*shape, dtype=float32, device="cpu"):
    """An uninitialised tensor: empty(2, 3) or empty((2, 3))."""
    return _lumen._empty(_shape(shape), dtype, device)


def zeros(*shape, dtype=float32, device="cpu"):
    """A tensor of zeros: zeros(2, 3) or zeros((2, 3), dtype=lumen.int64)."""
    return _filled(_shape(shape), dtype, device, lambda a: a.fill(0))


def ones(*shape, dtype=float32, device="cpu"):
    """A tensor of ones."""
    return _filled(_shape(shape), dtype, device, lambda a: a.fill(1))


def full(shape, fill_value, dtype=None, device="cpu"):
    """A tensor of `fill_value` (dtype: float32 for a float, int64 for an int, bool for a bool)."""
    if dtype is None:
        dtype = bool_ if isinstance(fill_value, bool) else (
            int64 if isinstance(fill_value, int) else float32)
    return _filled(_shape((shape,)), dtype, device, lambda a: a.fill(fill_value))


def arange(start, end=None, step=1, dtype=None, device="cpu"):
    """Values from start (default 0) up to end, excluding it, by step, like torch.arange."""
    if end is None:
        start, end = 0, start
    values = np.arange(start, end, step)
    if dtype is None:
        dtype = int64 if values.dtype.kind in "iu" else float32
    return tensor(values, dtype=dtype, device=device)


def rand(*shape, dtype=float32, device="cpu"):
    """Uniform random values in [0, 1) (seed with lumen.manual_seed)."""
    return _filled(_shape(shape), dtype, device, lambda a: a.__setitem__(..., _rng.random(a.shape)))


def randn(*shape, dtype=float32, device="cpu"):
    """Standard normal random values (seed with lumen.manual_seed)."""
    return _filled(_shape(shape), dtype, device,
                   lambda a: a.__setitem__(..., _rng.standard_normal(a.shape)))


def tensor(data, dtype=None, device="cpu"):
    """A new tensor holding a copy of `data` (a list, a number, a NumPy array or a Tensor).
    Python floats become float32 and ints int64 unless `dtype` says otherwise; an array keeps
    its dtype."""
    if isinstance(data, Tensor):
        data = data.cpu().numpy()
    keep = isinstance(data, np.ndarray)
    values = np.array(data, dtype=None if dtype is None else _lumen._numpy_dtype(dtype))
    if dtype is None and not keep and values.dtype == np.float64:
        values = values.astype(np.float32)
    t = _lumen.from_numpy(np.ascontiguousarray(values))
    if t.dtype != (t.dtype if dtype is None else _lumen._to_dtype(dtype)):
        raise InvalidArgument("tensor: cannot make dtype " + str(dtype))
    return t if device == "cpu" else t.to(device)


def from_dlpack(x):
    """A tensor sharing the memory of `x`: any object with __dlpack__ (a torch.Tensor) or a
    DLPack capsule. The source must be contiguous."""
    if hasattr(x, "__dlpack__"):
        x = x.__dlpack__()
    return _lumen._from_dlpack_capsule(x)


InvalidArgument = _lumen.InvalidArgument
_to_device = Tensor.to


def _repr(self):
    if self.dtype == bfloat16 or not self.device.startswith("cpu"):
        return f"tensor({self._to_string()}, device={self.device!r})"
    body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
    suffix = "" if self.dtype in (float32, int64, bool_) else f", dtype={self.dtype!r}"
    return f"tensor({body}{suffix})"


def _to(self, *args, dtype=None, device=None):
    """t.to("cuda"), t.to(lumen.float16), t.to("cpu", lumen.float32): a tensor on that device
    with that dtype (itself when nothing changes)."""
    for a in args:
        if isinstance(a, str) and (a == "cpu" or a.startswith(("cuda", "vulkan"))):
            device = a
        else:
            dtype = a
    out = self
    if dtype is not None:
        out = _lumen._cast(out, dtype)
    if device is not None:
        out = _to_device(out, device)
    return out


def _getitem(self, index):
    if isinstance(index, (int, np.integer)) and self.ndim > 0:
        i = int(index) + (self.shape[0] if index < 0 else 0)
        if not 0 <= i < self.shape[0]:
            raise IndexError(f"index {index} is out of range for dimension 0 of size "
                             f"{self.shape[0]}")
        return self._narrow(i, 1).reshape(self.shape[1:])
    if not self.device.startswith("cpu"):
        raise _lumen.UnsupportedOp("indexing a " + self.device + " tensor other than by one "
                                   "integer: move it with .cpu() first")
    # NumPy does the indexing; a contiguous result is a view of this tensor's memory.
    return _lumen.from_numpy(np.ascontiguousarray(self.numpy()[index]))


def _setitem(self, index, value):
    if not self.device.startswith("cpu"):
        raise _lumen.UnsupportedOp("assigning into a " + self.device + " tensor")
    if isinstance(value, Tensor):
        value = value.cpu().numpy()
    self.numpy()[index] = value


def _len(self):
    if self.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return self.shape[0]


def _iter(self):
    return (self[i] for i in range(len(self)))


def _item(self):
    """The value of a one-element tensor as a Python number."""
    if self.numel() != 1:
        raise _lumen.InvalidArgument(f"item(): the tensor has {self.numel()} elements, not 1")
    return self.cpu().numpy().reshape(()).item()


def _size(self, dim=None):
    """The shape, or the size of dimension `dim`."""
    return self.shape if dim is None else self.shape[dim]


for _name, _fn in {
        "__repr__": _repr, "__str__": _repr, "__getitem__": _getitem, "__setitem__": _setitem,
        "__len__": _len, "__iter__": _iter, "item": _item, "size": _size, "to": _to,
        "tolist": lambda self: self.cpu().numpy().tolist(),
        "__float__": lambda self: float(_item(self)), "__int__": lambda self: int(_item(self)),
        "__bool__": lambda self: bool(_item(self)), "view": Tensor.reshape,
        "contiguous": lambda self: self, "float": lambda self: _to(self, float32),
        "half": lambda self: _to(self, float16), "long": lambda self: _to(self, int64),
        "cuda": lambda self: _to_device(self, "cuda"),
}.items():
    setattr(Tensor, _name, _fn)
Tensor.__hash__ = object.__hash__
