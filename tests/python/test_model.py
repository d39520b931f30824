"""lumen.load_onnx / Model: the shipped digits model against PyTorch's logits, run with out=,
threads, a model exported by torch here (the README's snippet), and bad input."""
import os
import threading

import numpy as np
import pytest
import torch

import lumen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "models", "digits")


@pytest.fixture(scope="module")
def digits():
    x = np.load(os.path.join(DIGITS, "test_x.npy"))
    ref = np.load(os.path.join(DIGITS, "reference_logits.npy"))
    return lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile(), x, ref


def close(got, want, rtol=1e-4):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.abs(got - want).max() <= rtol * max(1.0, np.abs(want).max())


def test_digits_matches_torch(digits):
    model, x, ref = digits
    out = model(x)
    assert isinstance(out, lumen.Tensor)
    close(out.numpy(), ref)
    close(model(lumen.from_numpy(x[:7])).numpy(), ref[:7])  # another batch size, another plan
    close(model(image=x[:1]).numpy(), ref[:1])
    labels = np.load(os.path.join(DIGITS, "test_y.npy"))
    assert (out.numpy().argmax(1) == labels).mean() > 0.95


def test_run_dict_and_out(digits):
    model, x, ref = digits
    result = model.run({"image": x})
    assert list(result) == ["logits"]
    close(result["logits"], ref)
    out = {"logits": np.empty((360, 10), np.float32)}
    address = out["logits"].ctypes.data
    for _ in range(3):
        got = model.run({"image": x}, out=out)
        assert got is out and out["logits"].ctypes.data == address
        close(out["logits"], ref)
    with pytest.raises(lumen.ShapeError, match="logits"):
        model.run({"image": x}, out={"logits": np.empty((3, 10), np.float32)})
    with pytest.raises(lumen.InvalidArgument, match="nope"):
        model.run({"image": x}, out={"nope": np.empty(3)})


def test_inputs_outputs_summary(digits):
    model, x, _ = digits
    (inp,) = model.inputs
    assert inp.name == "image" and inp.shape[1:] == (1, 8, 8) and inp.dtype == lumen.float32
    assert isinstance(inp.shape[0], str)  # the symbolic batch dimension
    model(x[:5])
    (out,) = model.outputs
    assert out.name == "logits" and out.shape == (5, 10) and out.dtype == lumen.float32
    text = model.summary()
    assert "image" in text and "logits" in text and "Conv" in text and "@cpu" in text


def test_threads_run_at_once(digits):
    model, x, ref = digits
    errors = []

    def work(lo):
        try:
            for _ in range(10):
                close(model(x[lo:lo + 40]).numpy(), ref[lo:lo + 40])
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(40 * i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_bad_input(digits, tmp_path):
    model, x, ref = digits
    with pytest.raises(lumen.IoError, match="missing.onnx"):
        lumen.load_onnx(str(tmp_path / "missing.onnx"))
    with pytest.raises(OSError):
        lumen.load_onnx(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a model")
    with pytest.raises(lumen.InvalidModel):
        lumen.load_onnx(str(bad))
    with pytest.raises(lumen.ShapeError, match="float32"):
        model(x.astype(np.float64))
    with pytest.raises(lumen.ShapeError):
        model(x[:, :, :7, :])
    with pytest.raises(lumen.InvalidArgument, match="takes 1"):
        model(x, x)
    with pytest.raises(lumen.InvalidArgument):
        model.run({"pixels": x})
    with pytest.raises(lumen.InvalidArgument):
        model.run({"image": [1, 2, 3]})
    # a non-contiguous array is copied, not refused
    xt = np.asfortranarray(x)
    close(model(xt).numpy(), ref)
    if "cuda" not in lumen.backends():
        with pytest.raises(lumen.DeviceError, match="cuda"):
            lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile(device="cuda")
    with pytest.raises(lumen.InvalidArgument, match="tf32"):
        lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile(precision="bf8")
    # TF32 and float16 change CUDA kernels only: on the CPU the output is float32's, bit for bit
    fp32 = lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile("cpu")
    for precision in ("fp32-strict", "tf32", "fp16", "bf16"):
        other = lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile("cpu", precision)
        assert other.precision == precision
        np.testing.assert_array_equal(other(x).numpy(), fp32(x).numpy())
    if "cuda" in lumen.backends():
        # float16 on the GPU: float32 in and out, close to float32's result
        half = lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile("cuda", "fp16")
        out = half(x).numpy()
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2 * np.abs(ref).max())
    close(model(x).numpy(), ref)  # still works


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


def test_readme_snippet(tmp_path):
    torch.manual_seed(0)
    net = Small().eval()
    path = str(tmp_path / "model.onnx")
    torch.onnx.export(net, torch.randn(1, 3, 224, 224), path, input_names=["x"],
                      output_names=["y"], opset_version=13)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        x = lumen.randn(1, 3, 224, 224)
        w = lumen.randn(64, 3, 3, 3)
        y = lumen.conv2d(x, w, stride=(1, 1), padding=(1, 1))
        z = lumen.relu(y)
        model = lumen.load_onnx('model.onnx')
        model.compile()
        output = model(x)
    finally:
        os.chdir(cwd)
    tx, tw = torch.from_numpy(x.numpy()), torch.from_numpy(w.numpy())
    close(z.numpy(), torch.relu(torch.nn.functional.conv2d(tx, tw, padding=1)).numpy())
    with torch.no_grad():
        close(output.numpy(), net(tx).numpy())


def test_auto_places_by_the_router(tmp_path):
    """device="auto" is the router: on a CPU-only machine every step runs on the CPU with no copy;
    anywhere, its logits are PyTorch's."""
    x = np.load(os.path.join(DIGITS, "test_x.npy"))
    ref = np.load(os.path.join(DIGITS, "reference_logits.npy"))
    model = lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile(device="auto")
    assert model.device == "auto"
    close(model(x), ref)
    if lumen.backends() == ["cpu"]:
        text = model.summary()
        assert "@cpu" in text and "copy '" not in text and "@cuda" not in text, text


def test_shape_inputs_given_at_run_time(tmp_path):
    """Reshape's shape and ReduceSum's axes fed as inputs: each new value compiles a plan, the
    same values reuse it, and a value that makes no shape is a ShapeError naming the input."""
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
         helper.make_node("ReduceSum", ["r", "axes"], ["y"], name="reduce", keepdims=0)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "values.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    model = lumen.load_onnx(path).compile("cpu")
    assert model.value_inputs == ["shape", "axes"]
    x = np.random.default_rng(3).standard_normal(12).astype(np.float32)
    for shape, axis in (((3, 4), 0), ((3, 4), 1), ((2, 6), 1), ((3, 4), 0)):
        got = model(x, np.array(shape, np.int64), np.array([axis], np.int64)).numpy()
        close(got, x.reshape(shape).sum(axis=axis))
        assert model.outputs[0].shape == (shape[1 - axis],)
    assert model._session.num_plans() == 3
    assert "reshape" in model.summary() or "Reshape" in model.summary()
    with pytest.raises(lumen.ShapeError, match=r"'shape'.*\[5, 5\]"):
        model(x, np.array([5, 5], np.int64), np.array([0], np.int64))


def test_new_sequence_lengths_do_not_compile(tmp_path):
    """A torch encoder exported with dynamic batch and sequence axes: one compile, then every new
    length is planned from its shape family; each output matches torch's."""
    torch.manual_seed(0)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(100, 32)
            self.pos = torch.nn.Parameter(torch.randn(1, 40, 32) * 0.1)
            self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                                          batch_first=True)

        def forward(self, ids):
            return self.layer(self.tok(ids) + self.pos[:, :ids.shape[1]])

    net = Encoder().eval()
    path = str(tmp_path / "encoder.onnx")
    torch.onnx.export(net, (torch.randint(0, 100, (1, 8)),), path, input_names=["ids"],
                      output_names=["y"], opset_version=13,
                      dynamic_axes={"ids": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})
    model = lumen.load_onnx(path).compile("cpu")
    rng = np.random.default_rng(5)
    for length in (8, 3, 17, 40, 2, 25):
        ids = rng.integers(0, 100, (1, length)).astype(np.int64)
        with torch.no_grad():
            want = net(torch.from_numpy(ids)).numpy()
        close(model(ids).numpy(), want, rtol=1e-4)
    stats = model.stats()
    assert stats["compiles"] == 1 and stats["sized"] == 5, stats
    assert stats["kernels_shared"] > 0
    # plan_per_shape compiles each length.
    exact = lumen.load_onnx(path).compile("cpu", plan_per_shape=True)
    for length in (8, 3):
        exact(rng.integers(0, 100, (1, length)).astype(np.int64))
    assert exact.stats()["compiles"] == 2 and exact.stats()["sized"] == 0
    with pytest.raises(lumen.ShapeError):
        model(rng.integers(0, 100, (1, 41)).astype(np.int64))  # past the position table


def test_digits_on_vulkan_matches_torch(digits):
    """compile("vulkan"): the GPU (lavapipe in CI) for what has a Vulkan kernel, the host for the
    rest; PyTorch's logits. Tensors move to vulkan:0 and back unchanged."""
    if "vulkan" not in lumen.backends():
        pytest.skip("no Vulkan device on this machine")
    _, x, ref = digits
    model = lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile("vulkan")
    close(model(x).numpy(), ref)
    t = lumen.randn(3, 5)
    on_device = t.to("vulkan")
    assert on_device.device.startswith("vulkan")
    np.testing.assert_array_equal(on_device.to("cpu").numpy(), t.numpy())
    with pytest.raises(lumen.InvalidArgument, match="unknown device"):
        t.to("vulkan:x")
