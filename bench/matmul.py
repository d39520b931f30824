#!/usr/bin/python3
"""Large float32 matmul: Lumen's CPU backend (`lumen bench matmul N`) side by side with NumPy
(OpenBLAS, OpenMP build), interleaved over several rounds on the same machine.

Writes the result table into docs/benchmarks.md (the section between its matmul markers).
Usage: bench/matmul.py [--n 4096] [--rounds 3] [--lumen build/lumen]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN, END = "<!-- matmul:begin -->", "<!-- matmul:end -->"


def numpy_ms(n, runs):
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    a @ b  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        a @ b
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def lumen_ms(binary, n, runs):
    out = subprocess.run([binary, "bench", "matmul", str(n), "--runs", str(runs)],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"^cpu\s+([\d.]+)", out, re.M)
    if not m:
        sys.exit("bench/matmul.py: could not read lumen's output:\n" + out)
    return float(m.group(1))


def cpu_peak_gflops():
    """2 cores x nominal clock x 64 FLOP/cycle (two 512-bit FMA pipes: 2 x 16 lanes x 2)."""
    mhz = 0.0
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                mhz = float(line.split(":")[1])
                break
    return os.cpu_count() * mhz * 1e-3 * 64, mhz


def blas_name():
    try:
        info = np.__config__.CONFIG  # numpy >= 1.25
        return str(info)
    except AttributeError:
        pass
    libs = subprocess.run(["ldd", np.core._multiarray_umath.__file__], capture_output=True,
                          text=True).stdout
    real = subprocess.run(["readlink", "-f", "/etc/alternatives/libblas.so.3-x86_64-linux-gnu"],
                          capture_output=True, text=True).stdout.strip()
    return os.path.basename(os.path.dirname(real)) or ("blas" if "blas" in libs else "unknown")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    args = p.parse_args()
    flop = 2.0 * args.n ** 3
    lumen, numpy = [], []
    for r in range(args.rounds):  # interleaved, so both see the same machine load
        lumen.append(lumen_ms(args.lumen, args.n, args.runs))
        numpy.append(numpy_ms(args.n, args.runs))
        print(f"round {r + 1}: lumen {lumen[-1]:.1f} ms, numpy {numpy[-1]:.1f} ms", flush=True)
    peak, mhz = cpu_peak_gflops()
    lm, nm = statistics.median(lumen), statistics.median(numpy)
    rows = [
        "| runtime | median ms | GFLOP/s | % of peak |",
        "| --- | ---: | ---: | ---: |",
        f"| Lumen CPU (oneDNN matmul) | {lm:.1f} | {flop / lm / 1e6:.1f} | {100 * flop / lm / 1e6 / peak:.0f}% |",
        f"| NumPy {np.__version__} ({blas_name()}) | {nm:.1f} | {flop / nm / 1e6:.1f} | {100 * flop / nm / 1e6 / peak:.0f}% |",
    ]
    text = "\n".join([
        BEGIN,
        f"### float32 matmul {args.n} x {args.n}",
        "",
        f"Measured by `bench/matmul.py --n {args.n} --rounds {args.rounds} --runs {args.runs}` on "
        f"{os.cpu_count()} cores ({mhz:.0f} MHz nominal); medians over {args.rounds} interleaved "
        f"rounds of {args.runs} runs each. Peak = cores x nominal clock x 64 FLOP/cycle (two "
        f"512-bit FMA pipes) = {peak:.0f} GFLOP/s; boost clocks can exceed it.",
        "",
        *rows,
        END,
    ])
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    doc = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n"
    if BEGIN in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    with open(path, "w") as f:
        f.write(doc)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
