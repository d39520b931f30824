#!/usr/bin/env python3
"""GPU benchmark, run by bench/gpu.sh on a machine with an NVIDIA GPU, PyTorch (CUDA) and onnx:
exports the zoo models (tests/models/export_zoo.py's definitions and weights), runs each through
`lumen run --device cuda,cpu` (CUDA-graph replay after the first run), checks its output against
PyTorch's, and times Lumen next to PyTorch eager and PyTorch CUDA-graph replay at float32 with
TF32 off. Every timed run goes host -> device -> host: the input is copied in and the output
copied out, for all three.

    python3 bench/gpu_bench.py LUMEN_BIN WORK_DIR [--models mlp20,resnet50,mobilenet_v2]

Prints a table and writes it as the `gpu` section of docs/benchmarks.md (bench/bench_doc.py) and
to WORK_DIR/gpu_section.md.
"""
import argparse
import functools
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, HERE)

REPEAT = 200


def export_models(names, outdir):
    import export_zoo
    # torch >= 2.9 exports through dynamo by default; the zoo is defined for the TorchScript
    # exporter (opset 13, as on the CPU build machines).
    export_zoo.torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)
    for name in names:
        export_zoo.export(name, outdir, False)
    return export_zoo


def torch_model(export_zoo, name):
    ctor, input_name, shape, dtype = export_zoo.MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    if dtype == "float32":
        export_zoo.calibrate_batchnorm(model, shape)
    return model


def time_torch(model, x_host):
    """Median ms of eager and of CUDA-graph replay, each including the copies in and out."""
    model = model.cuda().eval()
    with torch.no_grad():
        for _ in range(10):
            model(x_host.cuda()).cpu()
        torch.cuda.synchronize()
        eager = []
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            model(x_host.cuda(non_blocking=False)).cpu()
            eager.append((time.perf_counter() - t0) * 1e3)
        static_x = x_host.cuda()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = model(static_x)
        graph = []
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            static_x.copy_(x_host)
            g.replay()
            out = static_y.cpu()
            graph.append((time.perf_counter() - t0) * 1e3)
        ref = model(x_host.cuda()).cpu().numpy()
    return statistics.median(eager), statistics.median(graph), ref, out.numpy()


def run_lumen(lumen, onnx_path, input_name, input_path, out_dir):
    cmd = [lumen, "run", onnx_path, "--device", "cuda,cpu", "--repeat", str(REPEAT), "--input",
           f"{input_name}={input_path}", "--output-dir", out_dir]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = p.stdout + p.stderr
    if p.returncode != 0:
        return None, None, text
    ms = float(re.search(r"latency: median ([0-9.]+) ms", text).group(1))
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
    return ms, np.load(os.path.join(out_dir, files[0])), text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lumen")
    ap.add_argument("work")
    ap.add_argument("--models", default="mlp20,resnet50,mobilenet_v2")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = args.models.split(",")
    zoo = os.path.join(args.work, "zoo")
    os.makedirs(zoo, exist_ok=True)
    export_zoo = export_models(names, zoo)
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for name in names:
        _, input_name, shape, _ = export_zoo.MODELS[name]
        onnx_path = os.path.join(zoo, name + ".onnx")
        input_path = os.path.join(zoo, name + ".input.npy")
        x = np.load(input_path)
        expected = np.load(os.path.join(zoo, name + ".expected.npy"))
        out_dir = os.path.join(args.work, "out_" + name)
        os.makedirs(out_dir, exist_ok=True)
        lumen_ms, lumen_out, log = run_lumen(args.lumen, onnx_path, input_name, input_path, out_dir)
        print(log, flush=True)
        eager_ms, graph_ms, torch_cuda_out, _ = time_torch(torch_model(export_zoo, name),
                                                           torch.from_numpy(x))
        scale = float(np.abs(expected).max())
        rel_cuda_torch = float(np.abs(torch_cuda_out - expected).max()) / scale
        if lumen_out is None:
            rel, status = float("nan"), "FAILED"
        else:
            rel = float(np.abs(lumen_out - expected).max()) / scale
            status = "ok" if rel <= 1e-4 else "MISMATCH"
        rows.append((name, "x".join(map(str, shape)), status, rel, rel_cuda_torch, lumen_ms,
                     eager_ms, graph_ms))
    head = ("| model | input | check | Lumen vs PyTorch CPU (max rel) | PyTorch CUDA vs CPU | "
            "Lumen CUDA graph ms | PyTorch eager ms | PyTorch CUDA graph ms |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
    body = "".join(
        f"| {n} | {s} | {st} | {r:.1e} | {rt:.1e} | "
        f"{'-' if lm is None else f'{lm:.3f}'} | {e:.3f} | {g:.3f} |\n"
        for n, s, st, r, rt, lm, e, g in rows)
    text = (f"## GPU: Lumen CUDA backend vs PyTorch {torch.__version__} ({gpu})\n\n"
            f"float32, TF32 off in both, batch as in the zoo (MLP batch 64, others 1); median of "
            f"{REPEAT} runs, each host input -> device -> host output. Lumen: `lumen run --device "
            f"cuda,cpu` (the Executable recorded once as a CUDA graph and replayed). Made by "
            f"`bash bench/gpu.sh` on the GPU machine.\n\n" + head + body)
    print(text)
    with open(os.path.join(args.work, "gpu_section.md"), "w") as f:
        f.write(text)
    import bench_doc
    bench_doc.write_section("gpu", text)


if __name__ == "__main__":
    main()
