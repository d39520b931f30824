#!/usr/bin/env python3
"""Models for the router's benchmark that the zoo (tests/models/export_zoo.py) lacks, built with
onnx.helper from their description (random weights, seeded), opset 17, dynamic batch axis:

  wide_deep_small  issue 31's wide-and-deep model: a linear part over 65,536 features plus an MLP
                   256 -> 512 -> 1 over the first 256 of them; output sigmoid(wide + deep).
                   Input "input" [N, 65536].
  pooled_mlp       a long sequence of feature vectors averaged (ReduceMean over 4096 x 256, a pass
                   the host makes over its own memory) and then an MLP 256 -> 4096 -> 4096 -> 1000
                   (arithmetic a GPU does in microseconds). Input "input" [N, 4096, 256].
  two_tower        wide & deep with the two parts fed apart: "sparse" [N, 262144] read once by a
                   linear model, "dense" [N, 512] through an MLP 512 -> 2048 -> 2048 -> 1.

The last two have a large input a cheap first step reduces and a small compute-heavy rest: the
shape where the host's part beside the GPU's can beat both single devices (no copy of the large
input, no host MLP).

    python3 bench/router_models.py OUTDIR [--models a,b]   # writes OUTDIR/NAME.onnx
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17

# name -> (input name, input shape at batch 1 without the batch axis) of the first input; the
# benchmark feeds that shape at its batches (the other inputs take the same batch).
MODELS = {
    "wide_deep_small": ("input", (65536,)),
    "pooled_mlp": ("input", (4096, 256)),
    "two_tower": ("sparse", (262144,)),
}


class Builder:
    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)
        self.nodes, self.inits = [], []

    def weight(self, name, shape, scale):
        w = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, name))
        return name

    def const_i64(self, name, values):
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def node(self, op, inputs, name, **attrs):
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x, fan_in, fan_out, name, relu):
        """Gemm(x, W^T) + b as PyTorch exports nn.Linear, then Relu if asked."""
        w = self.weight(name + ".weight", (fan_out, fan_in), (2.0 / fan_in) ** 0.5)
        b = self.weight(name + ".bias", (fan_out,), 0.1)
        y = self.node("Gemm", [x, w, b], name, transB=1)
        return self.node("Relu", [y], name + "_relu") if relu else y

    def mlp(self, x, widths, name):
        for k in range(len(widths) - 1):
            x = self.linear(x, widths[k], widths[k + 1], f"{name}.{k}", k + 2 < len(widths))
        return x

    def model(self, inputs, output, out_shape):
        graph = helper.make_graph(
            self.nodes, "g",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="lumen bench/router_models.py")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def wide_deep_small():
    b = Builder(31)
    wide = b.linear("input", 65536, 1, "wide", False)
    deep_in = b.node("Slice", ["input", b.const_i64("starts", [0]), b.const_i64("ends", [256]),
                               b.const_i64("axes", [1])], "deep_in")
    deep = b.mlp(deep_in, [256, 512, 1], "deep")
    out = b.node("Sigmoid", [b.node("Add", [wide, deep], "logit")], "output")
    return b.model([("input", ["N", 65536])], out, ["N", 1])


def pooled_mlp():
    b = Builder(32)
    pooled = b.node("ReduceMean", ["input"], "pooled", axes=[1], keepdims=0)
    out = b.mlp(pooled, [256, 4096, 4096, 1000], "mlp")
    return b.model([("input", ["N", 4096, 256])], out, ["N", 1000])


def two_tower():
    b = Builder(33)
    wide = b.linear("sparse", 262144, 1, "wide", False)
    deep = b.mlp("dense", [512, 2048, 2048, 1], "deep")
    out = b.node("Sigmoid", [b.node("Add", [wide, deep], "logit")], "output")
    return b.model([("sparse", ["N", 262144]), ("dense", ["N", 512])], out, ["N", 1])


BUILDERS = {"wide_deep_small": wide_deep_small, "pooled_mlp": pooled_mlp, "two_tower": two_tower}


def shapes(name, batch):
    """The --shape arguments of `lumen run` for `name` at `batch`."""
    first, rest = MODELS[name]
    out = [f"{first}=" + "x".join(map(str, (batch,) + rest))]
    if name == "two_tower":
        out.append(f"dense={batch}x512")
    return out


def export(names, outdir):
    os.makedirs(outdir, exist_ok=True)
    for name in names:
        path = os.path.join(outdir, name + ".onnx")
        if not os.path.exists(path):
            onnx.save(BUILDERS[name](), path)
            print(f"{name}: wrote {path}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    export(args.models.split(","), args.outdir)
