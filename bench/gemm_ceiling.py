#!/usr/bin/python3
"""The CPU's GEMM ceiling next to Lumen's packed GEMM, oneDNN and OpenBLAS, on all threads.

Runs lumen_fma_peak (registers only, one thread and all threads) and lumen_gemm_ceiling (an
in-cache product on one thread and on all threads at once; the zoo transformers' and MLP's
products, Lumen and OpenBLAS interleaved) and writes the table into docs/benchmarks.md (section
gemm_ceiling, or gemm_ceiling-LABEL). Usage: bench/gemm_ceiling.py [--build build-cpu] [--threads 2]
[--label L]
"""
import argparse
import os
import re
import subprocess

from bench_doc import ROOT, write_section


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            name = re.search(r"model name\s*:\s*(.*)", f.read()).group(1).strip()
    except (OSError, AttributeError):
        return "?"
    return name


def run(cmd, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build-cpu"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--label", default="", help="section gemm_ceiling-LABEL (default gemm_ceiling)")
    args = ap.parse_args()
    peak = os.path.join(args.build, "lumen_fma_peak")
    fma1 = float(re.search(r"([\d.]+) GFLOP/s", run([peak], 1)).group(1))
    fma_all = float(re.search(r"([\d.]+) GFLOP/s", run([peak], args.threads)).group(1))
    out = run([os.path.join(args.build, "lumen_gemm_ceiling")], args.threads)
    print(out)
    one = float(re.search(r"in_cache_one_thread ([\d.]+)", out).group(1))
    allt = float(re.search(r"in_cache_all_threads ([\d.]+)", out).group(1))
    level = re.search(r"level (\w+)", out).group(1)
    rows = re.findall(r"gemm (\d+) (\d+) (\d+) lumen ([\d.]+) lumen_avx2 ([\d.]+) onednn ([\d.]+) "
                      r"openblas ([\d.]+) max_diff (\S+)", out)

    lines = [
        "### GEMM against the machine's ceiling",
        "",
        f"Measured by `bench/gemm_ceiling.py --threads {args.threads}` (lumen_fma_peak and "
        "lumen_gemm_ceiling). FMA-only peak (registers, no loads): "
        f"{fma1:.1f} GFLOP/s on one thread, {fma_all:.1f} on {args.threads}. Lumen's packed GEMM "
        f"on an in-cache 96 x 256 x 384 product: {one:.1f} GFLOP/s on one thread alone, "
        f"{allt:.1f} with all {args.threads} threads running it at once, each on its own operands: "
        "the most a multi-threaded GEMM can reach on this machine, whose virtual cores slow "
        "each other down. Below, the zoo's transformer and MLP products on all threads, Lumen "
        "and OpenBLAS 0.3 (NumPy's) interleaved, the median of many runs each, as GFLOP/s and "
        "as a share of the in-cache all-threads rate. Beside them oneDNN 2.6's matmul with its "
        "weights packed once (as Lumen's MatMul kernels call it) and, on an AVX-512 machine, the "
        f"packed GEMM's AVX2 form. CPU: {cpu_name()}; Lumen's kernels at level {level}.",
        "",
        "| m x k x n | Lumen GFLOP/s | Lumen AVX2 form | oneDNN GFLOP/s | OpenBLAS GFLOP/s | "
        "Lumen / oneDNN | Lumen / OpenBLAS | Lumen % of in-cache | max abs diff |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for m, k, n, ours, avx2, dnnl, theirs, diff in rows:
        ours, avx2, dnnl, theirs = float(ours), float(avx2), float(dnnl), float(theirs)
        ratio = f"{ours / theirs:.2f}" if theirs > 0 else "-"
        lines.append(f"| {m} x {k} x {n} | {ours:.1f} | {f'{avx2:.1f}' if avx2 > 0 else '-'} | "
                     f"{dnnl:.1f} | {theirs:.1f} | {ours / dnnl:.2f} | {ratio} | "
                     f"{100 * ours / allt:.0f}% | {diff} |")
    write_section("gemm_ceiling" + (f"-{args.label}" if args.label else ""), "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
