#!/usr/bin/python3
"""The Vulkan backend side by side with the CUDA backend (cuBLAS) on the same GPU: float32 and
float16 matrix products of several sizes through `lumen bench matmul N --device cuda,vulkan` (both in one run,
rounds interleaved), the kernel time with operands already on the device. Then zoo models
(--models) through `lumen run --device vulkan` next to PyTorch eager on CUDA, host input to host
output for both, each output checked against PyTorch's on the CPU (bench/gpu_bench.py's export
and timing).

Run on a machine with a GPU that has both a CUDA and a Vulkan driver (the GPU machine: see
bench/gpu_vulkan.sh, which sets the loader up there). Writes the table into docs/benchmarks.md
(the section between its vulkan markers).
Usage: bench/vulkan.py [--lumen build/lumen] [--sizes 1024,2048,4096] [--rounds 3]
                       [--models resnet50,mobilenet_v2,bert_base] [--work DIR]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

from bench_doc import write_section


def run(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lumen", default="build/lumen")
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base,mlp20")
    ap.add_argument("--work", default="/tmp/lumen_vulkan_bench")
    args = ap.parse_args()
    version = run(args.lumen, "--version")
    devices = dict(re.findall(r"^device (\w+): (.*?)(?: \(not among.*)?$", version, re.M))
    if "vulkan" not in devices or "cuda" not in devices:
        sys.exit("bench/vulkan.py: this machine needs both a CUDA and a Vulkan device:\n" + version)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = matmul_rows(args, sizes, "float32")
    half_rows = matmul_rows(args, sizes, "float16")
    text = f"""## vulkan: float32 MatMul through Vulkan vs CUDA (cuBLAS) on one GPU (`bench/vulkan.py`)

CUDA device: {devices['cuda']}; Vulkan device: {devices['vulkan']}. `lumen bench matmul N
--device cuda,vulkan`, the kernel time with both operands already on the device (a profiled run's
step, timed on the GPU: Vulkan timestamp queries, CUDA events), median of {args.rounds} interleaved
rounds.
Vulkan runs Lumen's own compute shader (`gemm_tiled.comp`, vec4 loads: 128x128 tiles, 8x8 per
thread, where those give 128 workgroups, else 64x64 tiles, 4x4 per thread, split along k where
still fewer); CUDA runs cuBLASLt in float32 (no TF32).

| N | CUDA ms | CUDA TFLOP/s | Vulkan ms | Vulkan TFLOP/s | Vulkan rate / cuBLAS |
| ---: | ---: | ---: | ---: | ---: | ---: |
""" + "\n".join(rows) + f"""

The same with `--precision float16` (float16 storage, float32 accumulation): Vulkan runs
`gemm_coop.comp` on the tensor cores through VK_NV_cooperative_matrix (64x64 tiles, 16x16x16
products) where a product has 128 tiles or more (every size here), else `gemm_tiled.comp`'s
float16 form; CUDA runs cuBLASLt in float16. The time is the sum of the run's steps: the casts of the
input to float16 and of the result back to float32 are included, on both.

| N | CUDA ms | CUDA TFLOP/s | Vulkan ms | Vulkan TFLOP/s | Vulkan rate / cuBLAS |
| ---: | ---: | ---: | ---: | ---: | ---: |
""" + "\n".join(half_rows) + "\n"
    if args.models:
        text += "\n" + model_table(args)
    write_section("vulkan", text)
    print(text)


def matmul_rows(args, sizes, precision):
    """Markdown rows of `lumen bench matmul N --device cuda,vulkan` at `precision`."""
    ms = {(n, b): [] for n in sizes for b in ("cuda", "vulkan")}
    for _ in range(args.rounds):
        for n in sizes:
            out = run(args.lumen, "bench", "matmul", str(n), "--device", "cuda,vulkan",
                      "--precision", precision)
            for b in ("cuda", "vulkan"):
                m = re.search(rf"^{b}\s+device-resident\s+([\d.]+)", out, re.M)
                if not m:
                    sys.exit("bench/vulkan.py: could not read lumen's output:\n" + out)
                ms[(n, b)].append(float(m.group(1)))
    rows = []
    for n in sizes:
        c, v = statistics.median(ms[(n, "cuda")]), statistics.median(ms[(n, "vulkan")])
        flop = 2.0 * n ** 3
        rows.append(f"| {n} | {c:.3f} | {flop / (c * 1e-3) / 1e12:.1f} | {v:.3f} | "
                    f"{flop / (v * 1e-3) / 1e12:.1f} | {c / v:.2f} |")
    return rows


def model_table(args):
    """Zoo models on Vulkan next to PyTorch eager on CUDA (float32, TF32 off)."""
    import numpy as np
    import torch

    import gpu_bench
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = [n for n in args.models.split(",") if n]
    zoo = os.path.join(args.work, "zoo")
    os.makedirs(zoo, exist_ok=True)
    export_zoo = gpu_bench.export_models(names, zoo)
    rows = []
    for name in names:
        _, input_name, _, _ = export_zoo.MODELS[name]
        onnx_path = os.path.join(zoo, name + ".onnx")
        input_path = os.path.join(zoo, name + ".input.npy")
        x = np.load(input_path)
        expected = np.load(os.path.join(zoo, name + ".expected.npy"))
        out_dir = os.path.join(args.work, "out_" + name)
        os.makedirs(out_dir, exist_ok=True)
        ms, out, log = gpu_bench.run_lumen(args.lumen, onnx_path, input_name, input_path, out_dir,
                                           device="vulkan")
        print(log, flush=True)
        placement = re.search(r"placement: (\d+) steps on (\w+), (\d+) on cpu", log)
        steps = (f"{placement.group(1)} of {int(placement.group(1)) + int(placement.group(3))}"
                 if placement and placement.group(2) == "vulkan" else "0")
        eager, _, _, _ = gpu_bench.time_torch(gpu_bench.torch_model(export_zoo, name),
                                              torch.from_numpy(x), False)
        if out is None:
            status, rel = "FAILED", "-"
        else:
            r = gpu_bench.max_rel(out, expected)
            status, rel = ("ok" if r <= 1e-4 else "MISMATCH"), f"{r:.1e}"
        lumen = "-" if ms is None else f"{ms:.3f}"
        ratio = "-" if ms is None else f"{ms / eager:.2f}"
        half_ms, half_out, half_log = gpu_bench.run_lumen(
            args.lumen, onnx_path, input_name, input_path, out_dir, device="vulkan",
            precision="float16")
        print(half_log, flush=True)
        half = ("failed" if half_ms is None else
                f"{half_ms:.3f} ({gpu_bench.max_rel(half_out, expected):.1e})")
        rows.append(f"| {name} | {'x'.join(map(str, x.shape))} | {status} | {rel} | {steps} | "
                    f"{lumen} | {eager:.3f} | {ratio} | {half} |")
    return (f"Zoo models through `lumen run --device vulkan` (nodes without a Vulkan kernel run on "
            f"the host; steps counts those on the GPU), against PyTorch {torch.__version__} eager "
            f"on CUDA, float32 with TF32 off; median of {gpu_bench.REPEAT} runs, each host input "
            f"to host output. check: max relative difference from PyTorch on the CPU within "
            f"1e-4. The last column is `--precision float16` on Vulkan, its ms and (in brackets) "
            f"its max relative difference from PyTorch's float32.\n\n| model | input | check | "
            f"max rel | steps on Vulkan | Lumen Vulkan ms | PyTorch eager (CUDA) ms | "
            f"Lumen / eager | Vulkan float16 ms (max rel) |\n"
            f"| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n" + "\n".join(rows) + "\n" + "\n")


if __name__ == "__main__":
    main()
