#!/usr/bin/python3
"""Element-wise fusion (the fuse-elementwise pass and the FusedElementwise kernel) on small
graphs of the shapes the zoo has: each graph is written as an ONNX file (python3-onnx) and run by
`lumen run --repeat N` with the optimizer on (one FusedElementwise) and off (`--no-optimize`: one
kernel per op), interleaved round by round; median over the rounds of each run's median latency.
The machine is shared, so single runs move 10-15%: compare only the medians, and only within one
run.

    bench/fused_elementwise.py [--lumen build/lumen] [--rounds 5] [--repeat 1000] [--threads 1]

Writes the "fused_elementwise" section of docs/benchmarks.md.
"""
import argparse
import os
import statistics
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench_doc import ROOT, write_section
from optimizer import latency


def scalar(name, v):
    return numpy_helper.from_array(np.array(v, dtype=np.float32), name)


def model(path, inputs, inits, nodes):
    """Writes a float32 graph: inputs (name, shape), initializers, nodes; the last node's output
    is the graph output (its shape left to inference)."""
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
    out = helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", ins, [out], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def cases(tmp):
    rng = np.random.default_rng(0)
    out = []

    # ConvNeXt-tiny's layer scale and residual, Add(Mul(x, gamma[C]), r), at its four stages.
    for hw, c in ((56, 96), (28, 192), (14, 384), (7, 768)):
        p = os.path.join(tmp, f"layer_scale_residual_{c}.onnx")
        gamma = numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "gamma")
        model(p, [("x", [1, hw, hw, c]), ("r", [1, hw, hw, c])], [gamma], [
            helper.make_node("Mul", ["x", "gamma"], ["m"]),
            helper.make_node("Add", ["m", "r"], ["y"])])
        out.append((f"layer scale + residual [1,{hw},{hw},{c}]", p))

    # MobileNetV3's hard swish as torch 1.13 exports it: Mul(x, HardSigmoid(x)).
    p = os.path.join(tmp, "hard_swish.onnx")
    model(p, [("x", [1, 112, 112, 16])], [], [
        helper.make_node("HardSigmoid", ["x"], ["h"], alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["x", "h"], ["y"])])
    out.append(("x * hardsigmoid(x) [1,112,112,16]", p))

    # A per-channel affine and clip in NCHW: Clip(x * s[1,C,1,1] + b[1,C,1,1], 0, 6).
    p = os.path.join(tmp, "affine_clip.onnx")
    s = numpy_helper.from_array(rng.standard_normal((1, 32, 1, 1)).astype(np.float32), "s")
    b = numpy_helper.from_array(rng.standard_normal((1, 32, 1, 1)).astype(np.float32), "b")
    model(p, [("x", [1, 32, 112, 112])], [s, b, scalar("lo", 0.0), scalar("hi", 6.0)], [
        helper.make_node("Mul", ["x", "s"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Clip", ["a", "lo", "hi"], ["y"])])
    out.append(("clip(x * s + b, 0, 6) NCHW [1,32,112,112]", p))

    # A longer chain with transcendental ops: tanh(sigmoid(x * 0.5 + 1)) * x - erf(x).
    p = os.path.join(tmp, "long_chain.onnx")
    model(p, [("x", [1, 64, 112, 112])], [scalar("half", 0.5), scalar("one", 1.0)], [
        helper.make_node("Mul", ["x", "half"], ["m"]),
        helper.make_node("Add", ["m", "one"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["s"]),
        helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("Mul", ["t", "x"], ["u"]),
        helper.make_node("Erf", ["x"], ["e"]),
        helper.make_node("Sub", ["u", "e"], ["y"])])
    out.append(("6-op chain [1,64,112,112]", p))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1,
                    help="OMP_NUM_THREADS for lumen run (0: its default, every core)")
    args = ap.parse_args()
    if args.threads > 0:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in cases(tmp):
            off, on = [], []
            for _ in range(args.rounds):  # interleaved
                off.append(latency(args.lumen, path, None, args.repeat, False))
                on.append(latency(args.lumen, path, None, args.repeat, True))
            rows.append((name, statistics.median(off), statistics.median(on)))
            print(rows[-1], f"(rounds off {off}, on {on})", flush=True)
    lines = [
        "### Element-wise fusion",
        "",
        f"Measured by `bench/fused_elementwise.py --rounds {args.rounds} --repeat {args.repeat}"
        f"{' --threads ' + str(args.threads) if args.threads else ''}` on {os.cpu_count()} cores"
        f"{' with ' + str(args.threads) + ' OpenMP thread(s)' if args.threads else ''}: small "
        "graphs of the element-wise patterns the zoo has, run by `lumen run` with the optimizer "
        "on (one FusedElementwise node) and off (`--no-optimize`, one kernel per op), "
        "interleaved, median over the rounds of each run's median latency.",
        "",
        "| graph | unfused ms | fused ms | fused / unfused |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, off, on in rows:
        lines.append(f"| {name} | {off:.3f} | {on:.3f} | {on / off:.2f} |")
    write_section("fused_elementwise", "\n".join(lines))
    print("\n".join(lines[-len(rows) - 2:]))


if __name__ == "__main__":
    main()
