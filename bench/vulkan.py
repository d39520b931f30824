#!/usr/bin/python3
"""The Vulkan backend side by side with the CUDA backend (cuBLAS) on the same GPU: float32 matrix
products of several sizes through `lumen bench matmul N --device cuda,vulkan` (both in one run,
rounds interleaved), the kernel time with operands already on the device.

Run on a machine with a GPU that has both a CUDA and a Vulkan driver (the GPU machine: see
bench/gpu_vulkan.sh, which sets the loader up there). Writes the table into docs/benchmarks.md
(the section between its vulkan markers).
Usage: bench/vulkan.py [--lumen build/lumen] [--sizes 1024,2048,4096] [--rounds 3]
"""
import argparse
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
    args = ap.parse_args()
    version = run(args.lumen, "--version")
    devices = dict(re.findall(r"^device (\w+): (.*?)(?: \(not among.*)?$", version, re.M))
    if "vulkan" not in devices or "cuda" not in devices:
        sys.exit("bench/vulkan.py: this machine needs both a CUDA and a Vulkan device:\n" + version)
    sizes = [int(s) for s in args.sizes.split(",")]
    ms = {(n, b): [] for n in sizes for b in ("cuda", "vulkan")}
    for _ in range(args.rounds):
        for n in sizes:
            out = run(args.lumen, "bench", "matmul", str(n), "--device", "cuda,vulkan")
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
                    f"{flop / (v * 1e-3) / 1e12:.1f} | "
                    f"{c / v:.2f} |")
    text = f"""## vulkan: float32 MatMul through Vulkan vs CUDA (cuBLAS) on one GPU (`bench/vulkan.py`)

CUDA device: {devices['cuda']}; Vulkan device: {devices['vulkan']}. `lumen bench matmul N
--device cuda,vulkan`, the kernel time with both operands already on the device (a profiled run's
step, so each includes one submission and wait), median of {args.rounds} interleaved rounds.
Vulkan runs Lumen's own compute shader (`gemm_tiled.comp`: 128x128 tiles, 8x8 per thread, vec4
loads); CUDA runs cuBLASLt in float32 (no TF32).

| N | CUDA ms | CUDA TFLOP/s | Vulkan ms | Vulkan TFLOP/s | Vulkan rate / cuBLAS |
| ---: | ---: | ---: | ---: | ---: | ---: |
""" + "\n".join(rows)
    write_section("vulkan", text)
    print(text)


if __name__ == "__main__":
    main()
