"""The model zoo (tests/models/export_zoo.py, exported into BUILD/model_zoo by the `zoo` CTest)
from Python: each model through lumen.load_onnx against PyTorch's saved outputs. Skipped when the
zoo has not been exported."""
import os

import numpy as np
import pytest

import lumen

BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(lumen.__file__))))
ZOO = os.path.join(BUILD, "model_zoo")
MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "mlp20", "bert_tiny",
          "gpt_tiny"]


@pytest.mark.parametrize("name", MODELS)
def test_zoo_model(name):
    path = os.path.join(ZOO, name + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} not exported (run the model_zoo CTest first)")
    x = np.load(os.path.join(ZOO, name + ".input.npy"))
    want = np.load(os.path.join(ZOO, name + ".expected.npy"))
    model = lumen.load_onnx(path).compile()
    out = model(x)
    got = (out[0] if isinstance(out, tuple) else out).numpy()
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
