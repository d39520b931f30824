#!/usr/bin/python3
"""MatMulNBits (4-bit weights, block 32) as one decoder layer: Lumen vs ONNX Runtime (node) on the
same single-node model file.

  bench/nbits.py [--lumen build/lumen] [--threads 1,2] [--runs 3] [--repeat 200] [--no-doc]
                 [--decoder GPT2.onnx]

Shapes: K=768 N=3072 (GPT-2 small's MLP up-projection) and K=4096 N=4096 (a 7B model's attention
projection), M=1 and 8 (decode at batch 1 and 8) and M=128 (prefill), at each thread count. Each configuration runs
Lumen (`lumen run --repeat`) and ORT (bench/ort/session.js --repeat) alternately --runs times;
the tables give the medians. For M=1 the weight traffic (packed B + scales) over the median is
given in GB/s: the matrix-vector product reads every weight once. Prints the table and writes it
to docs/benchmarks.md under "## nbits" (bench_doc.write_section).

--decoder takes a GPT-2-style export with past key/values (tests/models/export_decoders.py:
input_ids, attention_mask, position_ids, past_key_values.N.key/value, logits first) and also
times one decode step (batch 1, one new token after 127 past ones, 1 thread) of it and of its
int4 MatMulNBits form (tests/models/quantize_nbits.py), Lumen vs ORT on the same files, with the
largest difference of their logits.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import quantize_nbits  # noqa: E402
from bench_doc import write_section  # noqa: E402

SHAPES = [(768, 3072), (4096, 4096)]
ROWS = [1, 8, 128]
BLOCK = 32


def layer_model(path, m, k, n, seed=0):
    """One MatMulNBits node (4-bit, symmetric, block 32) of random weights; input x [m, k].
    Returns the bytes of its packed weights and scales."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    inits = quantize_nbits.nbits_tensors("w", w, 4, BLOCK, False)
    node = helper.make_node("MatMulNBits", ["x"] + [t.name for t in inits], ["y"], name="nbits",
                            domain=quantize_nbits.MS_DOMAIN, K=k, N=n, bits=4, block_size=BLOCK)
    graph = helper.make_graph(
        [node], "nbits", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(quantize_nbits.MS_DOMAIN, 1)])
    model.ir_version = 8
    onnx.save(model, path)
    return sum(len(t.raw_data) for t in inits)


def lumen_ms(lumen, model, x_path, threads, repeat):
    out = subprocess.run([lumen, "run", model, "--input", f"x={x_path}", "--repeat", str(repeat),
                          "--threads", str(threads)], check=True, capture_output=True,
                         text=True).stdout
    return float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))


def ort_ms(session_js, model, x_path, threads, repeat):
    out = subprocess.run(["node", session_js, model, "--input", f"x={x_path}", "--threads",
                          str(threads), "--repeat", str(repeat)], check=True, capture_output=True,
                         text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1])["median_ms"])


def decode_step_inputs(model_path, tmp, past=127):
    """.npy files for one decode step of a GPT-2-style export; returns the --input arguments."""
    m = onnx.load(model_path, load_external_data=False)
    rng = np.random.default_rng(0)
    feeds = {}
    for i in m.graph.input:
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 1000, (1, 1)).astype(np.int64)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, past + 1), np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.array([[past]], np.int64)
        else:  # past_key_values.N.key/value: [batch, heads, past, head_size]
            feeds[i.name] = (rng.standard_normal((1, dims[1], past, dims[3])) * 0.5).astype(
                np.float32)
    args = []
    for name, value in feeds.items():
        path = os.path.join(tmp, f"step_{name}.npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    return args


def decoder_rows(args, tmp):
    """Decode-step medians of the fp32 decoder and its int4 MatMulNBits form (1 thread)."""
    q_path = os.path.join(tmp, "decoder_int4.onnx")
    model = onnx.load(args.decoder)
    count = quantize_nbits.quantize_model(model, "nbits", 4, BLOCK, False)
    onnx.save(model, q_path)
    inputs = decode_step_inputs(args.decoder, tmp)
    rows = []
    for tag, path in (("fp32", args.decoder), (f"int4 ({count} MatMulNBits)", q_path)):
        out_dir = os.path.join(tmp, "lumen_" + tag.split()[0])
        lum, ort = [], []
        for _ in range(args.runs):
            out = subprocess.run([args.lumen, "run", path, "--threads", "1", "--repeat", "20",
                                  "--output-dir", out_dir] + inputs, check=True,
                                 capture_output=True, text=True).stdout
            lum.append(float(re.search(r"latency: median ([0-9.]+) ms", out).group(1)))
            ort_out = os.path.join(tmp, "ort_" + tag.split()[0] + ".npy")
            out = subprocess.run(["node", args.ort, path, "--threads", "1", "--repeat", "20",
                                  "--output", ort_out] + inputs, check=True, capture_output=True,
                                 text=True).stdout
            ort.append(float(json.loads(out.strip().splitlines()[-1])["median_ms"]))
        a, b = np.load(os.path.join(out_dir, "logits.npy")), np.load(ort_out)
        row = {"model": tag, "lumen_ms": statistics.median(lum), "ort_ms": statistics.median(ort),
               "logits_rel_diff": float(np.abs(a - b).max() / np.abs(b).max())}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def cpu_name():
    """The CPU's model name and the kernel variant Lumen runs on it (AVX-512 or AVX2)."""
    name, isa = "unknown CPU", "AVX2"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags") and " avx512f" in line:
                isa = "AVX-512"
    except OSError:
        pass
    return f"{name} (Lumen's {isa} kernels)"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    p.add_argument("--ort", default=os.path.join(ROOT, "bench", "ort", "session.js"))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--repeat", type=int, default=200)
    p.add_argument("--no-doc", action="store_true")
    p.add_argument("--decoder", default="")
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    load_before = open("/proc/loadavg").read().split()[0]
    tmp = tempfile.mkdtemp(prefix="nbits_bench_")
    rows = []
    for k, n in SHAPES:
        for m in ROWS:
            model = os.path.join(tmp, f"nbits_{m}x{k}x{n}.onnx")
            weight_bytes = layer_model(model, m, k, n)
            x_path = os.path.join(tmp, f"x_{m}x{k}.npy")
            np.save(x_path, np.random.default_rng(1).standard_normal((m, k)).astype(np.float32))
            repeat = args.repeat if m <= 8 else max(10, args.repeat // 10)
            for t in threads:
                lum, ort = [], []
                for _ in range(args.runs):
                    lum.append(lumen_ms(args.lumen, model, x_path, t, repeat))
                    ort.append(ort_ms(args.ort, model, x_path, t, repeat))
                row = {"K": k, "N": n, "M": m, "threads": t, "lumen_ms": statistics.median(lum),
                       "ort_ms": statistics.median(ort), "weight_mb": weight_bytes / 1e6}
                if m == 1:
                    row["lumen_gbs"] = weight_bytes / row["lumen_ms"] / 1e6
                    row["ort_gbs"] = weight_bytes / row["ort_ms"] / 1e6
                else:
                    flops = 2.0 * m * k * n
                    row["lumen_gflops"] = flops / row["lumen_ms"] / 1e6
                    row["ort_gflops"] = flops / row["ort_ms"] / 1e6
                rows.append(row)
                print(json.dumps(row), flush=True)
    dec_rows = decoder_rows(args, tmp) if args.decoder else []
    shutil.rmtree(tmp, ignore_errors=True)
    load_after = open("/proc/loadavg").read().split()[0]
    lines = [
        "## nbits: MatMulNBits (4-bit, block 32) vs ONNX Runtime 1.30 (CPU)",
        "",
        f"`/usr/bin/python3 bench/nbits.py` on {cpu_name()}; one MatMulNBits node per model file, "
        f"the same file for both; medians of {args.runs} alternating runs of each runtime's own "
        "repeat loop (`lumen run --repeat`, bench/ort/session.js). M=1: GB/s of weight traffic "
        "(packed 4-bit B + float32 scales, read once per product). M=8 and 128: GFLOP/s (2MKN). "
        f"Load average {load_before} before, {load_after} after ({os.cpu_count()} CPUs): on a "
        "shared machine whose cores are busy, OpenMP's 2-thread runs wait for a descheduled "
        "thread (a plain float32 MatMul shows the same), so compare 2-thread rows only on an idle "
        "machine.",
        "",
        "| K x N | M | threads | Lumen ms | ORT ms | ORT / Lumen | Lumen | ORT |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        unit = "GB/s" if r["M"] == 1 else "GFLOP/s"
        key = "gbs" if r["M"] == 1 else "gflops"
        lines.append(
            f"| {r['K']} x {r['N']} ({r['weight_mb']:.2f} MB) | {r['M']} | {r['threads']} | "
            f"{r['lumen_ms']:.4f} | {r['ort_ms']:.4f} | {r['ort_ms'] / r['lumen_ms']:.2f}x | "
            f"{r['lumen_' + key]:.1f} {unit} | {r['ort_' + key]:.1f} {unit} |")
    if dec_rows:
        lines += [
            "",
            f"Decode step of `{os.path.basename(args.decoder)}` (a GPT-2-style export of "
            "tests/models/export_decoders.py; batch 1, one token after 127 past "
            "ones, 1 thread) and of its int4 form (`tests/models/quantize_nbits.py`, symmetric, "
            "block 32): medians of each runtime's 20-run loop.",
            "",
            "| model | Lumen ms | ORT ms | ORT / Lumen | logits, max rel. difference |",
            "|---|---|---|---|---|",
        ]
        for r in dec_rows:
            lines.append(f"| {r['model']} | {r['lumen_ms']:.2f} | {r['ort_ms']:.2f} | "
                         f"{r['ort_ms'] / r['lumen_ms']:.2f}x | {r['logits_rel_diff']:.1e} |")
    text = "\n".join(lines)
    print(text)
    if not args.no_doc:
        write_section("nbits", text)


if __name__ == "__main__":
    main()
