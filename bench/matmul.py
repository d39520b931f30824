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

from bench_doc import ROOT, write_section


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
    m = re.search(r"^cpu\s+device-resident\s+([\d.]+)", out, re.M)
    if not m:
        sys.exit("bench/matmul.py: could not read lumen's output:\n" + out)
    return float(m.group(1))


def cpu_peak_gflops(binary):
    """The measured float32 FMA peak of all cores (bench/fma_peak.cc), and its description."""
    out = subprocess.run([binary], check=True, capture_output=True, text=True).stdout.split()
    return float(out[3]), f"{out[0]} FMA, {out[1]} threads"


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
    p.add_argument("--peak", default=os.path.join(ROOT, "build", "lumen_fma_peak"))
    args = p.parse_args()
    flop = 2.0 * args.n ** 3
    lumen, numpy, peaks = [], [], []
    for r in range(args.rounds):  # interleaved, so all three see the same machine load
        peak, peak_how = cpu_peak_gflops(args.peak)
        peaks.append(peak)
        lumen.append(lumen_ms(args.lumen, args.n, args.runs))
        numpy.append(numpy_ms(args.n, args.runs))
        print(f"round {r + 1}: lumen {lumen[-1]:.1f} ms, numpy {numpy[-1]:.1f} ms, "
              f"FMA peak {peak:.0f} GFLOP/s", flush=True)
    peak = statistics.median(peaks)
    lm, nm = statistics.median(lumen), statistics.median(numpy)
    gf = lambda ms: flop / ms / 1e6  # noqa: E731 (GFLOP/s from milliseconds)
    rows = [
        "| round | FMA peak GFLOP/s | Lumen ms | Lumen GFLOP/s (% of peak) | NumPy ms | "
        "NumPy GFLOP/s (% of peak) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r, (p_, l_, n_) in enumerate(zip(peaks, lumen, numpy)):
        rows.append(f"| {r + 1} | {p_:.0f} | {l_:.1f} | {gf(l_):.0f} ({100 * gf(l_) / p_:.0f}%) | "
                    f"{n_:.1f} | {gf(n_):.0f} ({100 * gf(n_) / p_:.0f}%) |")
    rows.append(f"| median | {peak:.0f} | {lm:.1f} | {gf(lm):.0f} | {nm:.1f} | {gf(nm):.0f} |")
    rows.append("")
    rows.append(f"Lumen: oneDNN matmul with the constant operand pre-packed at compile time. "
                f"NumPy {np.__version__}: {blas_name()}.")
    write_section("matmul", "\n".join([
        f"### float32 matmul {args.n} x {args.n}",
        "",
        f"Measured by `bench/matmul.py --n {args.n} --rounds {args.rounds} --runs {args.runs}` on "
        f"{os.cpu_count()} cores; medians over {args.rounds} interleaved rounds of {args.runs} "
        f"runs each. Peak: {peak:.0f} GFLOP/s (median of the rounds), measured by "
        f"`build/lumen_fma_peak` (independent {peak_how} from registers). The machine is shared "
        f"and its two vCPUs may share one physical core's FMA units, so compare rows of one run "
        f"only.",
        "",
        *rows,
    ]))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
