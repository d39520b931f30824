#!/usr/bin/python3
"""Writes an int8 QDQ model from a float ONNX model the way ONNX Runtime's quantize_static does
(QuantFormat.QDQ, MinMax calibration, per_channel=True, uint8 activations, int8 weights):

- every float activation read by a Conv, MatMul, Gemm or Add, and the output of each of those
  ops, goes through QuantizeLinear -> DequantizeLinear (uint8, per tensor, asymmetric, from the
  minimum and maximum seen on the calibration inputs, widened to include 0); when the op's output
  is read by a Relu or Clip only, that one's output is quantized instead (ORT drops that Q/DQ
  pair);
- Conv, Gemm and MatMul weights become int8 initializers, symmetric per output channel (zero
  point 0, scale max|w| * 2 / 255, or / 127 with --reduce-range's 7-bit weights as ORT's
  reduce_range), read through a DequantizeLinear (axis 0 for Conv and Gemm with transB, 1 for
  MatMul and Gemm without);
- Conv and Gemm biases become int32 initializers with scale x_scale * w_scale[c], zero point 0,
  read through a DequantizeLinear.

    /usr/bin/python3 tests/models/quantize_qdq.py FLOAT.onnx OUT.onnx [--lumen build/lumen]
        [--calib N] [--input NAME=FILE.npy] [--reduce-range] [--check N]

--check N then runs both models with `lumen run` on N random inputs (other than the calibration
ones) and prints the top-1 agreement of the QDQ model (optimized: fused integer kernels; and
--no-optimize: every DequantizeLinear and float op as written) with the float model.

Calibration runs the float model with `lumen run` (every tensor to calibrate as an output) on N
random inputs (normal for float inputs, token ids below 1000 for int64 ones) or the given .npy.
Needs Debian's python3 with onnx and numpy.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QUANTIZED_OPS = ("Conv", "MatMul", "Gemm", "Add")


def float_tensors(model):
    """Names of float32 tensors: graph inputs, value_info and node outputs (by inference)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    kinds = {}
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(
            inferred.graph.output):
        kinds[vi.name] = vi.type.tensor_type.elem_type
    return {name for name, t in kinds.items() if t == TensorProto.FLOAT}


def plan(model):
    """The activations to quantize (by name) and the weights (name -> (node, input index))."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    floats = float_tensors(model)
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    acts = set()
    weights = {}
    for n in g.node:
        if n.op_type not in QUANTIZED_OPS:
            continue
        for k, name in enumerate(n.input):
            if not name:
                continue
            if name in inits:
                if n.op_type in ("Conv", "Gemm", "MatMul") and k == 1:
                    weights[name] = (n, k)
                continue
            if name in floats:
                acts.add(name)
        out = n.output[0]
        readers = consumers.get(out, [])
        if out in floats:
            if len(readers) == 1 and readers[0].op_type in ("Relu", "Clip"):
                acts.add(readers[0].output[0])
            else:
                acts.add(out)
    return sorted(acts), weights


def make_input(vi, rng):
    t = vi.type.tensor_type
    shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
    if t.elem_type == TensorProto.INT64:
        return rng.integers(0, 1000, size=shape).astype(np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def calibrate(model, acts, lumen, inputs_given, count, seed):
    """(min, max) of each activation over `count` runs of the float model."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    del g.output[:]
    for i, name in enumerate(acts):
        out = "calib_%d" % i
        g.node.append(helper.make_node("Identity", [name], [out]))
        g.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
    lo = {a: 0.0 for a in acts}
    hi = {a: 0.0 for a in acts}
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "calib.onnx")
        onnx.save(m, path, save_as_external_data=m.ByteSize() > (1 << 30))
        for run in range(count):
            args = [lumen, "run", path, "--output-dir", tmp]
            inits = {i.name for i in g.initializer}
            for vi in g.input:
                if vi.name in inits:
                    continue
                file = inputs_given.get(vi.name)
                if file is None or run > 0:
                    file = os.path.join(tmp, "in_%s.npy" % len(args))
                    np.save(file, make_input(vi, rng))
                args += ["--input", "%s=%s" % (vi.name, file)]
            subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
            for i, name in enumerate(acts):
                v = np.load(os.path.join(tmp, "calib_%d.npy" % i))
                lo[name] = min(lo[name], float(v.min()))
                hi[name] = max(hi[name], float(v.max()))
    return lo, hi


def activation_params(lo, hi):
    """uint8 scale and zero point as ORT's compute_scale_zp (range widened to include 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0)
    if scale == 0:
        return np.float32(1.0), np.uint8(0)
    zero = int(round(0 - lo / float(scale)))
    return scale, np.uint8(min(max(zero, 0), 255))


def quantize_weight(w, axis, reduce_range):
    """Symmetric per-channel int8: (q, scale per channel)."""
    qmin, qmax = (-64, 63) if reduce_range else (-128, 127)
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    absmax = np.abs(moved).max(axis=1)
    scale = (absmax * 2 / (qmax - qmin)).astype(np.float32)
    scale[scale == 0] = 1.0
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), qmin, qmax).astype(np.int8)
    return q, scale


def rewrite(model, acts, lo, hi, weights, reduce_range):
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    new_inits = []
    new_nodes = []
    params = {}
    for a in acts:
        s, z = activation_params(lo[a], hi[a])
        params[a] = (s, z)
        new_inits.append(numpy_helper.from_array(np.array(s, np.float32), a + "_scale"))
        new_inits.append(numpy_helper.from_array(np.array(z, np.uint8), a + "_zero_point"))
    renamed = {a: a + "_dq" for a in acts}
    quant_nodes = {}
    for a in acts:
        quant_nodes[a] = [
            helper.make_node("QuantizeLinear", [a, a + "_scale", a + "_zero_point"], [a + "_q"],
                             name=a + "_QuantizeLinear"),
            helper.make_node("DequantizeLinear", [a + "_q", a + "_scale", a + "_zero_point"],
                             [a + "_dq"], name=a + "_DequantizeLinear")]
    weight_scale = {}
    for name, (node, k) in weights.items():
        w = numpy_helper.to_array(inits[name]).astype(np.float32)
        if node.op_type == "Conv":
            axis = 0
        elif node.op_type == "Gemm":
            trans_b = any(at.name == "transB" and at.i for at in node.attribute)
            axis = 0 if trans_b else 1
        else:
            axis = w.ndim - 1
        q, scale = quantize_weight(w, axis, reduce_range)
        weight_scale[name] = scale
        new_inits += [numpy_helper.from_array(q, name + "_quantized"),
                      numpy_helper.from_array(scale, name + "_scale"),
                      numpy_helper.from_array(np.zeros_like(scale, np.int8), name + "_zero_point")]
        new_nodes.append(helper.make_node(
            "DequantizeLinear", [name + "_quantized", name + "_scale", name + "_zero_point"],
            [name + "_dq"], name=name + "_DequantizeLinear", axis=axis))
    bias_dq = {}
    for node in g.node:
        if node.op_type not in ("Conv", "Gemm") or len(node.input) < 3 or not node.input[2]:
            continue
        b, w, x = node.input[2], node.input[1], node.input[0]
        if b not in inits or w not in weight_scale or x not in params:
            continue
        bias = numpy_helper.to_array(inits[b]).astype(np.float32)
        if bias.ndim != 1 or bias.shape[0] != weight_scale[w].shape[0]:
            continue
        bscale = (params[x][0] * weight_scale[w]).astype(np.float32)
        bq = np.rint(bias / bscale).astype(np.int32)
        new_inits += [numpy_helper.from_array(bq, b + "_quantized"),
                      numpy_helper.from_array(bscale, b + "_scale"),
                      numpy_helper.from_array(np.zeros_like(bq), b + "_zero_point")]
        new_nodes.append(helper.make_node(
            "DequantizeLinear", [b + "_quantized", b + "_scale", b + "_zero_point"],
            [b + "_dq"], name=b + "_DequantizeLinear", axis=0))
        bias_dq[(node.name, b)] = b + "_dq"
    nodes = []
    for vi in g.input:
        if vi.name in quant_nodes:
            nodes += quant_nodes[vi.name]
    for node in g.node:
        for k, name in enumerate(node.input):
            if name in renamed:
                node.input[k] = renamed[name]
            elif name in weights and weights[name][0] is node:
                node.input[k] = name + "_dq"
            elif (node.name, name) in bias_dq:
                node.input[k] = bias_dq[(node.name, name)]
        nodes.append(node)
        for out in node.output:
            if out in quant_nodes:
                nodes += quant_nodes[out]
    # A quantized graph output stays the float tensor; only its readers take the DQ'd value.
    used = set()
    for n in nodes + new_nodes:
        used.update(n.input)
    kept = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    del g.node[:]
    g.node.extend(new_nodes + nodes)
    del g.value_info[:]
    return model


def run_lumen(lumen, model, feeds, tmp, extra=()):
    args = [lumen, "run", model, "--output-dir", tmp] + list(extra)
    for name, file in feeds.items():
        args += ["--input", "%s=%s" % (name, file)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    out = onnx.load(model, load_external_data=False).graph.output[0].name
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in out)
    return np.load(os.path.join(tmp, safe + ".npy"))


def random_feeds(model, rng, folder):
    """One random input (make_input) per graph input of `model`, each saved as a .npy file in
    `folder`: {input name: file}."""
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name not in inits:
            feeds[vi.name] = os.path.join(folder, "input_%d.npy" % len(feeds))
            np.save(feeds[vi.name], make_input(vi, rng))
    return feeds


def check(float_model, qdq_model, lumen, count, seed):
    """Top-1 agreement (last axis argmax) of the QDQ model, fused and unfused, with the float one."""
    model = onnx.load(float_model, load_external_data=False)
    rng = np.random.default_rng(seed + 1000)
    agree = {"fused": 0, "unfused": 0}
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(count):
            feeds = random_feeds(model, rng, tmp)
            ref = run_lumen(lumen, float_model, feeds, tmp).argmax(-1)
            fused = run_lumen(lumen, qdq_model, feeds, tmp).argmax(-1)
            plain = run_lumen(lumen, qdq_model, feeds, tmp, ["--no-optimize"]).argmax(-1)
            agree["fused"] += int((fused == ref).sum())
            agree["unfused"] += int((plain == ref).sum())
            total += ref.size
    print("top-1 agreement with the float model over %d predictions: fused %.3f, unfused %.3f" %
          (total, agree["fused"] / total, agree["unfused"] / total))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("--lumen", default=os.path.join(os.path.dirname(__file__), "../../build/lumen"))
    p.add_argument("--calib", type=int, default=4)
    p.add_argument("--input", action="append", default=[])
    p.add_argument("--reduce-range", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--check", type=int, default=0)
    args = p.parse_args()
    model = onnx.load(args.model)
    given = dict(kv.split("=", 1) for kv in args.input)
    acts, weights = plan(model)
    lo, hi = calibrate(model, acts, args.lumen, given, args.calib, args.seed)
    model = rewrite(model, acts, lo, hi, weights, args.reduce_range)
    onnx.save(model, args.out, save_as_external_data=model.ByteSize() > (1 << 30))
    print("%s: %d activations quantized, %d weights int8 -> %s" %
          (args.model, len(acts), len(weights), args.out))
    if args.check:
        check(args.model, args.out, args.lumen, args.check, args.seed)


if __name__ == "__main__":
    sys.exit(main())
