"""Lumen: a deep-learning inference runtime, from Python.

Tensors (``lumen.Tensor``) share memory with NumPy (``from_numpy``, ``.numpy()``) and with PyTorch
through DLPack (``from_dlpack``, ``torch.from_dlpack``). Eager ops (``lumen.conv2d``,
``lumen.relu``, ``a + b``, ``a @ b``) take the names and arguments of ``torch.nn.functional``
and run Lumen's kernels through small compiled graphs cached by op, shapes and attributes.
``lumen.load_onnx(path)`` returns a ``Model``: ``model.compile()``, then ``model(x)``.
Errors are ``lumen.Error`` subclasses, one per kind (``lumen.ShapeError``, ``lumen.IoError``, ...).
"""
from ._lumen import (DeviceError, Error, InvalidArgument, InvalidModel, IoError, OutOfMemory,
                     ShapeError, Tensor, UnsupportedOp, backends, dtype, from_numpy,
                     num_threads, set_num_threads)
from ._lumen import version as _version
from .functional import *  # noqa: F401,F403 (the eager ops are the package's API)
from .functional import __all__ as _functional_all
from .model import Model, TensorInfo, load_onnx
from .tensor import (arange, bfloat16, bool_, empty, float16, float32, float64, from_dlpack, full,
                     int8, int16, int32, int64, manual_seed, ones, rand, randn, tensor, uint8,
                     uint16, uint32, uint64, zeros)

__version__ = _version()

__all__ = [
    "Tensor", "dtype", "Error", "InvalidModel", "UnsupportedOp", "ShapeError", "InvalidArgument",
    "OutOfMemory", "DeviceError", "IoError", "backends", "num_threads", "set_num_threads", "from_numpy", "from_dlpack", "tensor",
    "empty", "zeros", "ones", "full", "arange", "rand", "randn", "manual_seed", "Model",
    "TensorInfo", "load_onnx", "float32", "float16", "bfloat16", "float64", "int8", "int16",
    "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool_",
] + list(_functional_all)
