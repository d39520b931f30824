"""Every eager op against PyTorch (Debian's python3-torch) on random data, every element checked;
bad input raises a lumen error."""
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lumen


def rand(rng, *shape, dtype=np.float32):
    return np.asarray(rng.standard_normal(shape), dtype=dtype)


def check(got, want, tol=1e-5):
    got = got.numpy() if isinstance(got, lumen.Tensor) else np.asarray(got)
    want = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


T = torch.from_numpy
L = lumen.from_numpy


@pytest.mark.parametrize("op,ref", [
    (lambda a, b: a + b, lambda a, b: a + b), (lambda a, b: a - b, lambda a, b: a - b),
    (lambda a, b: a * b, lambda a, b: a * b), (lambda a, b: a / b, lambda a, b: a / b),
    (lumen.maximum, torch.maximum), (lumen.minimum, torch.minimum),
])
@pytest.mark.parametrize("sa,sb", [((1000,), (1000,)), ((4, 1, 5), (3, 1)), ((2, 3), ())])
def test_binary_broadcast(rng, op, ref, sa, sb):
    a, b = rand(rng, *sa), (rand(rng, *sb) + 3.0).astype(np.float32)
    check(op(L(a), L(b)), ref(T(a), T(np.asarray(b))))


def test_scalars_and_reflected(rng):
    a = rand(rng, 3, 4)
    x = L(a)
    check(x + 1.5, T(a) + 1.5)
    check(2 - x, 2 - T(a))
    check(3 * x, 3 * T(a))
    check(1 / (x + 10), 1 / (T(a) + 10))
    check(abs(x) ** 2, T(a).abs() ** 2)
    check(-x, -T(a))
    check(x + a, T(a) + T(a))  # a NumPy operand
    i = lumen.tensor([1, 2, 3])
    check(i + 1, torch.tensor([2, 3, 4]))
    check(i / 2, torch.tensor([1, 2, 3]) / 2)  # true division gives float32
    check(i * 0.5, torch.tensor([1, 2, 3]) * 0.5)
    check(i + lumen.tensor([0.5, 0.5, 0.5]), torch.tensor([1.5, 2.5, 3.5]))
    check(x > 0, T(a) > 0)
    check(x <= 0.1, T(a) <= 0.1)
    check(lumen.eq(i, 2), torch.tensor([1, 2, 3]) == 2)


@pytest.mark.parametrize("sa,sb", [((8, 16), (16, 4)), ((2, 5, 7), (7, 3)), ((3, 2, 4, 6),
                                                                           (3, 2, 6, 5))])
def test_matmul(rng, sa, sb):
    a, b = rand(rng, *sa), rand(rng, *sb)
    check(L(a) @ L(b), T(a) @ T(b), 1e-4)
    check(lumen.matmul(a, b), torch.matmul(T(a), T(b)), 1e-4)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "gelu", "exp", "abs", "neg", "erf",
                                  "sin", "cos", "floor", "ceil", "sign", "silu", "hardswish",
                                  "hardsigmoid", "elu", "leaky_relu", "softplus"])
def test_unary(rng, name):
    a = rand(rng, 4, 33)
    fn = getattr(torch, name, None) or getattr(F, name)
    check(getattr(lumen, name)(L(a)), fn(T(a)), 1e-5)


def test_unary_positive_and_params(rng):
    a = np.abs(rand(rng, 50)) + 0.1
    check(lumen.log(a), torch.log(T(a)))
    check(lumen.sqrt(a), torch.sqrt(T(a)))
    check(lumen.rsqrt(a), torch.rsqrt(T(a)))
    check(lumen.reciprocal(a), torch.reciprocal(T(a)))
    b = rand(rng, 50)
    check(lumen.gelu(b, approximate="tanh"), F.gelu(T(b), approximate="tanh"))
    check(lumen.leaky_relu(b, 0.2), F.leaky_relu(T(b), 0.2))
    check(lumen.clamp(b, -0.5, 0.5), torch.clamp(T(b), -0.5, 0.5))
    check(lumen.clamp(b, min=0.1), torch.clamp(T(b), min=0.1))
    check(lumen.where(L(b) > 0, b, L(b) * 2), torch.where(T(b) > 0, T(b), T(b) * 2))
    check(L(b).relu(), T(b).relu())


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(rng, dim):
    a = rand(rng, 3, 7, 5)
    check(lumen.softmax(L(a), dim), F.softmax(T(a), dim))
    check(lumen.log_softmax(L(a), dim), F.log_softmax(T(a), dim))


def test_layer_and_batch_norm(rng):
    a, w, b = rand(rng, 2, 6, 16), rand(rng, 16), rand(rng, 16)
    check(lumen.layer_norm(L(a), (16,), L(w), L(b)), F.layer_norm(T(a), (16,), T(w), T(b)), 1e-4)
    check(lumen.layer_norm(L(a), [6, 16]), F.layer_norm(T(a), [6, 16]), 1e-4)
    x = rand(rng, 2, 4, 5, 5)
    mean, var = rand(rng, 4), np.abs(rand(rng, 4)) + 0.5
    w, b = rand(rng, 4), rand(rng, 4)
    check(lumen.batch_norm(x, mean, var, w, b, eps=1e-3),
          F.batch_norm(T(x), T(mean), T(var), T(w), T(b), eps=1e-3), 1e-4)


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=(1, 2)),
                                dict(dilation=2, padding=2), dict(groups=2, padding="same"),
                                dict(padding="valid", stride=(2, 1))])
@pytest.mark.parametrize("bias", [False, True])
def test_conv2d(rng, kw, bias):
    x, w = rand(rng, 2, 4, 11, 9), rand(rng, 6, 4 // kw.get("groups", 1), 3, 3)
    b = rand(rng, 6) if bias else None
    got = lumen.conv2d(L(x), L(w), None if b is None else L(b), **kw)
    check(got, F.conv2d(T(x), T(w), None if b is None else T(b), **kw), 1e-4)


def test_conv1d_and_linear(rng):
    x, w, b = rand(rng, 2, 3, 20), rand(rng, 5, 3, 4), rand(rng, 5)
    check(lumen.conv1d(x, w, b, stride=2, padding=1), F.conv1d(T(x), T(w), T(b), stride=2,
                                                               padding=1), 1e-4)
    x, w, b = rand(rng, 7, 12), rand(rng, 5, 12), rand(rng, 5)
    check(lumen.linear(x, w, b), F.linear(T(x), T(w), T(b)), 1e-4)
    x3 = rand(rng, 2, 7, 12)
    check(lumen.linear(x3, w, b), F.linear(T(x3), T(w), T(b)), 1e-4)
    check(lumen.linear(x3, w), F.linear(T(x3), T(w)), 1e-4)


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=(3, 2), stride=(1, 2)),
                                dict(kernel_size=3, stride=2, ceil_mode=True)])
def test_pooling(rng, kw):
    x = rand(rng, 2, 3, 11, 10)
    check(lumen.max_pool2d(L(x), **kw), F.max_pool2d(T(x), **kw))
    check(lumen.avg_pool2d(L(x), **kw), F.avg_pool2d(T(x), **kw), 1e-5)
    if "padding" in kw:
        check(lumen.avg_pool2d(L(x), count_include_pad=False, **kw),
              F.avg_pool2d(T(x), count_include_pad=False, **kw), 1e-5)
    check(lumen.adaptive_avg_pool2d(L(x), 1), F.adaptive_avg_pool2d(T(x), 1), 1e-5)


def test_shape_ops(rng):
    a = rand(rng, 2, 3, 4)
    check(lumen.reshape(L(a), (4, 6)), T(a).reshape(4, 6))
    check(lumen.transpose(L(a), 0, 2), T(a).transpose(0, 2).contiguous())
    check(L(a).permute(1, 2, 0), T(a).permute(1, 2, 0).contiguous())
    check(L(a).T, T(a).permute(2, 1, 0).contiguous())
    check(lumen.flatten(L(a), 1), torch.flatten(T(a), 1))
    check(lumen.unsqueeze(L(a), 1), T(a).unsqueeze(1))
    check(lumen.squeeze(lumen.unsqueeze(L(a), 0)), T(a))
    b, c = rand(rng, 2, 5, 4), rand(rng, 2, 1, 4)
    check(lumen.cat([L(a), L(b), L(c)], dim=1), torch.cat([T(a), T(b), T(c)], 1))
    check(lumen.stack([L(a), L(a)], dim=1), torch.stack([T(a), T(a)], 1))


@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_reductions(rng, dim, keepdim):
    a = rand(rng, 3, 4, 5)
    t = T(a)
    kw = {} if dim is None else dict(dim=dim, keepdim=keepdim)
    check(lumen.sum(L(a), dim, keepdim), torch.sum(t, **kw), 1e-5)
    check(lumen.mean(L(a), dim, keepdim), torch.mean(t, **kw), 1e-5)
    check(lumen.amax(L(a), dim, keepdim), torch.amax(t, **({} if dim is None else kw)))
    check(lumen.amin(L(a), dim, keepdim), torch.amin(t, **({} if dim is None else kw)))
    if dim is None or isinstance(dim, int):
        check(lumen.argmax(L(a), dim, keepdim), torch.argmax(t, **kw))
        check(lumen.argmin(L(a), dim, keepdim), torch.argmin(t, **kw))
    check(L(a).prod(1), torch.prod(t, 1), 1e-5)
    values, indices = lumen.max(L(a), 1)
    check(values, torch.max(t, 1).values)
    check(indices, torch.max(t, 1).indices)


def test_float64_and_int_ops(rng):
    a, b = rand(rng, 10, dtype=np.float64), rand(rng, 10, dtype=np.float64)
    check(L(a) * L(b), T(a) * T(b))
    i = rng.integers(-100, 100, 20)
    check(L(i) + L(i), T(i) + T(i))
    check(L(i).sum(), T(i).sum())


def test_compiled_ops_are_cached(rng):
    a, b = L(rand(rng, 123)), L(rand(rng, 123))
    a + b
    n = lumen._lumen._op_cache_size()
    for _ in range(5):
        a + b
    assert lumen._lumen._op_cache_size() == n
    a.reshape(3, 41) + b.reshape(3, 41)
    assert lumen._lumen._op_cache_size() == n + 1


def test_threads(rng):
    a, b = rand(rng, 64, 64), rand(rng, 64, 64)
    want = T(a) @ T(b)
    errors = []

    def work():
        try:
            for _ in range(20):
                check(L(a) @ L(b), want, 1e-4)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_bad_input(rng):
    with pytest.raises(lumen.ShapeError, match="Add"):
        L(rand(rng, 3, 4)) + L(rand(rng, 5))
    with pytest.raises(lumen.ShapeError):
        L(rand(rng, 3, 4)) @ L(rand(rng, 5, 2))
    with pytest.raises(lumen.Error):
        lumen.conv2d(L(rand(rng, 1, 3, 8, 8)), L(rand(rng, 4, 2, 3, 3)))
    with pytest.raises(lumen.ShapeError):
        lumen.conv2d(L(rand(rng, 1, 3, 8, 8)), L(rand(rng, 4, 3, 3)))
    with pytest.raises(lumen.InvalidArgument):
        L(rand(rng, 3)) + "a"
    with pytest.raises(lumen.InvalidArgument):
        lumen.conv2d(L(rand(rng, 1, 3, 8, 8)), L(rand(rng, 4, 3, 3, 3)), padding="middle")
    with pytest.raises(lumen.UnsupportedOp):
        lumen._lumen._op("NoSuchOp", [L(rand(rng, 3))])
    with pytest.raises(lumen.Error):
        lumen.softmax(L(rand(rng, 3)), dim=4)
    # still usable afterwards
    check(L(np.ones(3, np.float32)) + 1, torch.full((3,), 2.0))


def test_set_num_threads(rng):
    a = rng.standard_normal((48, 64)).astype(np.float32)
    b = rng.standard_normal((64, 40)).astype(np.float32)
    lumen.set_num_threads(1)
    try:
        assert lumen.num_threads() == 1
        got = (lumen.from_numpy(a) @ lumen.from_numpy(b)).numpy()
        np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    finally:
        lumen.set_num_threads(0)
    assert lumen.num_threads() >= 1
    with pytest.raises(lumen.InvalidArgument, match="got -1"):
        lumen.set_num_threads(-1)
