"""Eager ops with the names and argument conventions of torch.nn.functional (and torch for the
rest). Each runs one Lumen op through a compiled single-node graph that is cached by op, input
shapes and dtypes, and attributes, so the second call with the same shapes costs a lookup and the
kernel. Inputs may be lumen Tensors, NumPy arrays or numbers."""
import numpy as np

from . import _lumen
from ._lumen import Tensor

__all__ = [
    "add", "sub", "mul", "div", "pow", "matmul", "maximum", "minimum", "where", "eq", "lt", "gt",
    "le", "ge", "relu", "gelu", "sigmoid", "tanh", "silu", "leaky_relu", "elu", "hardswish",
    "hardsigmoid", "softplus", "exp", "log", "sqrt", "rsqrt", "abs", "neg", "erf", "sin", "cos",
    "floor", "ceil", "round", "sign", "reciprocal", "clamp", "softmax", "log_softmax",
    "layer_norm", "batch_norm", "linear", "conv1d", "conv2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "reshape", "flatten", "squeeze", "unsqueeze", "transpose", "permute",
    "cat", "concat", "stack", "sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "max",
    "min", "cast",
]

_op = _lumen._op


def _t(x):
    """x as a Tensor (NumPy arrays are shared, numbers become float32/int64 0-d tensors)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return _lumen.from_numpy(x)
    from .tensor import tensor
    return tensor(x)


def _tuple(v, n, what):
    if isinstance(v, (int, np.integer)):
        return [int(v)] * n
    v = [int(e) for e in v]
    if len(v) != n:
        raise _lumen.InvalidArgument(f"{what}: expected {n} values, got {len(v)}")
    return v


# ---- element-wise, with NumPy broadcasting ----

def add(input, other, alpha=1):
    """input + alpha * other."""
    return _t(input) + (other if alpha == 1 else other * alpha)


def sub(input, other, alpha=1):
    """input - alpha * other."""
    return _t(input) - (other if alpha == 1 else other * alpha)


def mul(input, other):
    """input * other."""
    return _t(input) * other


def div(input, other):
    """input / other (true division: integers give float32)."""
    return _t(input) / other


def pow(input, exponent):
    """input ** exponent."""
    return _t(input) ** exponent


def matmul(input, other):
    """Matrix product with NumPy/PyTorch batching rules (input @ other)."""
    return _t(input) @ other


def maximum(input, other):
    """Element-wise maximum."""
    return _lumen._binary("Max", _t(input), other)


def minimum(input, other):
    """Element-wise minimum."""
    return _lumen._binary("Min", _t(input), other)


def where(condition, input, other):
    """input where condition is true, other elsewhere."""
    return _op("Where", [_t(condition), _t(input), other])


def eq(input, other):
    """input == other, element-wise (a bool tensor)."""
    return _lumen._binary("Equal", _t(input), other)


def lt(input, other):
    """input < other (bool)."""
    return _t(input) < other


def gt(input, other):
    """input > other (bool)."""
    return _t(input) > other


def le(input, other):
    """input <= other (bool)."""
    return _t(input) <= other


def ge(input, other):
    """input >= other (bool)."""
    return _t(input) >= other


def _unary(op, doc):
    def f(input):
        return _op(op, [_t(input)])
    f.__doc__ = doc
    return f


relu = _unary("Relu", "max(input, 0).")
sigmoid = _unary("Sigmoid", "1 / (1 + exp(-input)).")
tanh = _unary("Tanh", "Hyperbolic tangent.")
hardswish = _unary("HardSwish", "input * relu6(input + 3) / 6.")
exp = _unary("Exp", "e ** input.")
log = _unary("Log", "Natural logarithm.")
sqrt = _unary("Sqrt", "Square root.")
abs = _unary("Abs", "Absolute value.")
neg = _unary("Neg", "-input.")
erf = _unary("Erf", "The error function.")
sin = _unary("Sin", "Sine.")
cos = _unary("Cos", "Cosine.")
floor = _unary("Floor", "Round down.")
ceil = _unary("Ceil", "Round up.")
round = _unary("Round", "Round half to even.")
sign = _unary("Sign", "-1, 0 or 1.")
reciprocal = _unary("Reciprocal", "1 / input.")


def rsqrt(input):
    """1 / sqrt(input)."""
    return reciprocal(sqrt(input))


def gelu(input, approximate="none"):
    """GELU; approximate="tanh" for the tanh approximation, as in torch."""
    return _op("Gelu", [_t(input)], {"approximate": approximate})


def silu(input):
    """input * sigmoid(input)."""
    input = _t(input)
    return input * sigmoid(input)


def leaky_relu(input, negative_slope=0.01):
    """input where positive, negative_slope * input elsewhere."""
    return _op("LeakyRelu", [_t(input)], {"alpha": float(negative_slope)})


def elu(input, alpha=1.0):
    """input where positive, alpha * (exp(input) - 1) elsewhere."""
    return _op("Elu", [_t(input)], {"alpha": float(alpha)})


def hardsigmoid(input):
    """relu6(input + 3) / 6."""
    return _op("HardSigmoid", [_t(input)], {"alpha": 1.0 / 6.0, "beta": 0.5})


def softplus(input, beta=1, threshold=20):
    """log(1 + exp(input)); beta must be 1 (ONNX Softplus has none)."""
    if beta != 1:
        raise _lumen.UnsupportedOp("softplus: only beta=1 is supported")
    return _op("Softplus", [_t(input)])


def clamp(input, min=None, max=None):
    """input limited to [min, max]; either bound may be None."""
    input = _t(input)
    lo = None if min is None else _lumen._cast(_t(min), input.dtype)
    hi = None if max is None else _lumen._cast(_t(max), input.dtype)
    return _op("Clip", [input, lo, hi])


def cast(input, dtype):
    """input converted to `dtype` (input.to(dtype))."""
    return _lumen._cast(_t(input), dtype)


# ---- normalisation and softmax ----

def softmax(input, dim=-1):
    """exp(input) / sum(exp(input)) along `dim`."""
    return _op("Softmax", [_t(input)], {"axis": int(dim)})


def log_softmax(input, dim=-1):
    """log(softmax(input, dim))."""
    return _op("LogSoftmax", [_t(input)], {"axis": int(dim)})


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalises the last len(normalized_shape) dimensions, then scales by weight and shifts by
    bias (ones and zeros when None)."""
    input = _t(input)
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    if weight is None:
        from .tensor import ones
        weight = ones(tuple(normalized_shape), dtype=input.dtype)
    return _op("LayerNormalization", [input, _t(weight), None if bias is None else _t(bias)],
               {"axis": -len(normalized_shape), "epsilon": float(eps)})


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Inference-mode batch normalisation over dimension 1 (training=True is refused)."""
    if training:
        raise _lumen.UnsupportedOp("batch_norm: training mode is not supported (inference only)")
    input = _t(input)
    c = input.shape[1]
    from .tensor import ones, zeros
    weight = ones(c, dtype=input.dtype) if weight is None else _t(weight)
    bias = zeros(c, dtype=input.dtype) if bias is None else _t(bias)
    return _op("BatchNormalization", [input, weight, bias, _t(running_mean), _t(running_var)],
               {"epsilon": float(eps)})


# ---- linear layers, convolution and pooling ----

def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    input, weight = _t(input), _t(weight)
    if input.ndim == 2 and weight.ndim == 2:
        return _op("Gemm", [input, weight, None if bias is None else _t(bias)], {"transB": 1})
    out = input @ transpose(weight, 0, 1)
    return out if bias is None else out + bias


def _conv(input, weight, bias, stride, padding, dilation, groups, n, name):
    input, weight = _t(input), _t(weight)
    if weight.ndim != n + 2:
        raise _lumen.ShapeError(f"{name}: weight must have {n + 2} dimensions, got shape "
                                f"{list(weight.shape)}")
    kernel = list(weight.shape[2:])
    strides = _tuple(stride, n, f"{name} stride")
    dilations = _tuple(dilation, n, f"{name} dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0] * (2 * n)
        elif padding == "same":
            total = [d * (k - 1) for d, k in zip(dilations, kernel)]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:
            raise _lumen.InvalidArgument(f"{name}: padding must be 'valid', 'same' or ints, "
                                         f"got {padding!r}")
    else:
        pads = _tuple(padding, n, f"{name} padding") * 2
    inputs = [input, weight] + ([] if bias is None else [_t(bias)])
    return _op("Conv", inputs, {"kernel_shape": kernel, "strides": strides, "pads": pads,
                                "dilations": dilations, "group": int(groups)})


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of input [N, C, L] with weight [O, C/groups, K], as in torch."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of input [N, C, H, W] with weight [O, C/groups, KH, KW]. stride, padding
    and dilation are ints or pairs; padding may be 'valid' or 'same', as in torch."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Max over kernel_size windows (stride defaults to kernel_size); padding never wins."""
    k = _tuple(kernel_size, 2, "max_pool2d kernel_size")
    s = k if stride is None or stride == [] else _tuple(stride, 2, "max_pool2d stride")
    return _op("MaxPool", [_t(input)], {
        "kernel_shape": k, "strides": s, "pads": _tuple(padding, 2, "max_pool2d padding") * 2,
        "dilations": _tuple(dilation, 2, "max_pool2d dilation"), "ceil_mode": int(ceil_mode)})


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Mean over kernel_size windows; count_include_pad as in torch."""
    k = _tuple(kernel_size, 2, "avg_pool2d kernel_size")
    s = k if stride is None or stride == [] else _tuple(stride, 2, "avg_pool2d stride")
    return _op("AveragePool", [_t(input)], {
        "kernel_shape": k, "strides": s, "pads": _tuple(padding, 2, "avg_pool2d padding") * 2,
        "ceil_mode": int(ceil_mode), "count_include_pad": int(count_include_pad)})


def adaptive_avg_pool2d(input, output_size):
    """Only output_size 1 (global average pooling)."""
    if _tuple(output_size, 2, "adaptive_avg_pool2d output_size") != [1, 1]:
        raise _lumen.UnsupportedOp("adaptive_avg_pool2d: only output_size=1 is supported")
    return _op("GlobalAveragePool", [_t(input)])


# ---- shapes ----

def reshape(input, shape):
    """A view with another shape (one dimension may be -1)."""
    return _t(input).reshape(tuple(shape))


def flatten(input, start_dim=0, end_dim=-1):
    """A view with dimensions start_dim..end_dim merged into one."""
    input = _t(input)
    shape = list(input.shape)
    if not shape:
        return input.reshape((1,))
    s, e = start_dim % len(shape), end_dim % len(shape)
    merged = int(np.prod(shape[s:e + 1]))
    return input.reshape(tuple(shape[:s] + [merged] + shape[e + 1:]))


def squeeze(input, dim=None):
    """A view without size-1 dimensions (or only `dim`, when it has size 1)."""
    input = _t(input)
    shape = list(input.shape)
    if dim is None:
        return input.reshape(tuple(d for d in shape if d != 1))
    dim %= len(shape) or 1
    return input.reshape(tuple(shape[:dim] + shape[dim + 1:])) if shape[dim] == 1 else input


def unsqueeze(input, dim):
    """A view with a size-1 dimension inserted at `dim`."""
    input = _t(input)
    shape = list(input.shape)
    dim = dim % (len(shape) + 1)
    return input.reshape(tuple(shape[:dim] + [1] + shape[dim:]))


def permute(input, *dims):
    """The dimensions reordered: permute(x, (0, 2, 1)) or x.permute(0, 2, 1) (a copy: Lumen
    tensors are dense)."""
    if len(dims) == 1 and not isinstance(dims[0], (int, np.integer)):
        dims = dims[0]
    return _op("Transpose", [_t(input)], {"perm": [int(d) for d in dims]})


def transpose(input, dim0, dim1):
    """Dimensions dim0 and dim1 swapped (a copy)."""
    input = _t(input)
    perm = list(range(input.ndim))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return permute(input, perm)


def cat(tensors, dim=0):
    """Tensors joined along an existing dimension."""
    tensors = [_t(t) for t in tensors]
    if not tensors:
        raise _lumen.InvalidArgument("cat: expected at least one tensor")
    return _op("Concat", tensors, {"axis": int(dim)})


concat = cat


def stack(tensors, dim=0):
    """Tensors of one shape joined along a new dimension."""
    return cat([unsqueeze(t, dim) for t in tensors], dim)


# ---- reductions ----

def _reduce(op, input, dim, keepdim):
    attrs = {"keepdims": int(keepdim)}
    if dim is not None:
        attrs["axes"] = [int(dim)] if isinstance(dim, (int, np.integer)) else [int(d) for d in dim]
    return _op(op, [_t(input)], attrs)


def sum(input, dim=None, keepdim=False):
    """Sum over `dim` (an int or a tuple; every dimension when None)."""
    return _reduce("ReduceSum", input, dim, keepdim)


def mean(input, dim=None, keepdim=False):
    """Mean over `dim`."""
    return _reduce("ReduceMean", input, dim, keepdim)


def amax(input, dim=None, keepdim=False):
    """Maximum over `dim`."""
    return _reduce("ReduceMax", input, dim, keepdim)


def amin(input, dim=None, keepdim=False):
    """Minimum over `dim`."""
    return _reduce("ReduceMin", input, dim, keepdim)


def prod(input, dim=None, keepdim=False):
    """Product over `dim`."""
    return _reduce("ReduceProd", input, dim, keepdim)


def _arg(op, input, dim, keepdim):
    input = _t(input)
    if dim is None:
        return _op(op, [input.reshape((-1,))], {"axis": 0, "keepdims": 0})
    return _op(op, [input], {"axis": int(dim), "keepdims": int(keepdim)})


def argmax(input, dim=None, keepdim=False):
    """Index of the maximum along `dim` (of the flattened tensor when None), as int64."""
    return _arg("ArgMax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """Index of the minimum along `dim`."""
    return _arg("ArgMin", input, dim, keepdim)


def max(input, dim=None, keepdim=False):
    """The maximum (dim None), or (values, indices) along `dim`, as torch.max."""
    if dim is None:
        return amax(input)
    return amax(input, dim, keepdim), argmax(input, dim, keepdim)


def min(input, dim=None, keepdim=False):
    """The minimum (dim None), or (values, indices) along `dim`, as torch.min."""
    if dim is None:
        return amin(input)
    return amin(input, dim, keepdim), argmin(input, dim, keepdim)


# The method forms: t.relu(), t.sum(1), t.transpose(0, 1), t.T, ...
for _name in ["relu", "sigmoid", "tanh", "gelu", "exp", "log", "sqrt", "rsqrt", "abs", "neg",
              "erf", "sin", "cos", "floor", "ceil", "round", "sign", "reciprocal", "clamp",
              "softmax", "log_softmax", "matmul", "flatten", "squeeze", "unsqueeze",
              "transpose", "permute", "sum", "mean", "amax", "amin", "prod", "argmax", "argmin",
              "max", "min", "pow", "maximum", "minimum", "add", "sub", "mul", "div"]:
    setattr(Tensor, _name, globals()[_name])
Tensor.T = property(lambda self: permute(self, list(range(self.ndim))[::-1]),
                    doc="The dimensions reversed (a copy).")
