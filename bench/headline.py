#!/usr/bin/python3
"""Lumen's three original headline results, measured on this machine beside PyTorch:

1. a 4096 x 4096 float32 matmul on every backend (`lumen bench matmul`), device-resident and host
   to host, next to PyTorch's matmul of the same size on the same device (float32, TF32 off; on a
   GPU also host to host: the input copied in from pageable memory and the result copied back);
2. the memory planner's cut on the 20-layer MLP (`lumen bench memory`);
3. Conv+ReLU fused into one kernel against two (`lumen bench fusion`).

    bench/headline.py [--lumen build/lumen] [--n 4096] [--rounds 3] [--out SECTION.md] [--write]

Rounds interleave Lumen and PyTorch so both see the same machine load; medians of the rounds.
--write replaces the "headline" section of docs/benchmarks.md (the GPU machine writes --out and
the section is copied in here).
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

from bench_doc import ROOT, write_section


def lumen(binary, *args):
    return subprocess.run([binary, *args], check=True, capture_output=True, text=True).stdout


def lumen_matmul(binary, n, runs, precision="float32"):
    """{(backend, timing): (median_ms, rest of the line)} from `lumen bench matmul`."""
    out = lumen(binary, "bench", "matmul", str(n), "--runs", str(runs), "--precision", precision)
    rows = {}
    for m in re.finditer(r"^(\w+)\s+(device-resident|host-to-host)\s+([\d.]+)\s+[\d.]+\s+\d+\s+(.*)$",
                         out, re.M):
        rows[(m.group(1), m.group(2))] = (float(m.group(3)), m.group(4))
    if not rows:
        sys.exit("headline.py: could not read `lumen bench matmul`:\n" + out)
    return rows


def torch_matmul(n, runs, device):
    """PyTorch's float32 matmul: device-resident ms, and on a GPU host-to-host ms (pageable input
    in, the product with the resident weight, the result out) and the copies alone."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator().manual_seed(0)
    a = torch.rand(n, n, generator=g) * 2 - 1
    b = torch.rand(n, n, generator=g) * 2 - 1
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def timed(fn):
        fn()
        sync()
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            sync()
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    ad, bd = a.to(device), b.to(device)
    out = {"device-resident": timed(lambda: ad @ bd)}
    if device == "cuda":
        out["host-to-host"] = timed(lambda: (a.to(device) @ bd).cpu())
        out["copy in"] = timed(lambda: a.to(device))
        out["copy out"] = timed(lambda: ad.cpu())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per round")
    ap.add_argument("--out", help="also write the section's text to this file")
    ap.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    args = ap.parse_args()
    import torch
    version = lumen(args.lumen, "--version").strip().splitlines()[0]
    has_cuda = "cuda" in version.split("backends:")[-1] and torch.cuda.is_available()
    devices = ["cpu"] + (["cuda"] if has_cuda else [])
    lum = {}
    tor = {}
    tf32 = []
    for r in range(args.rounds):
        for k, v in lumen_matmul(args.lumen, args.n, args.runs).items():
            lum.setdefault(k, []).append(v)
        if has_cuda:
            tf32.append(lumen_matmul(args.lumen, args.n, args.runs, "tf32")[("cuda", "device-resident")][0])
        for d in devices:
            for k, v in torch_matmul(args.n, args.runs, d).items():
                tor.setdefault((d, k), []).append(v)
        print(f"round {r + 1}: " + ", ".join(f"lumen {d} {t} {v[-1][0]:.2f} ms" for (d, t), v in lum.items())
              + "; " + ", ".join(f"torch {d} {t} {v[-1]:.2f} ms" for (d, t), v in tor.items()), flush=True)
    med = lambda xs: statistics.median(xs)  # noqa: E731
    flop = 2.0 * args.n ** 3
    gfs = lambda ms: flop / ms / 1e6  # noqa: E731
    lines = [f"| backend | timing | Lumen ms | Lumen GFLOP/s | PyTorch {torch.__version__} ms | "
             "Lumen / PyTorch |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    for d in devices:
        for t in ("device-resident", "host-to-host"):
            if (d, t) not in lum:
                continue
            lm = med([v[0] for v in lum[(d, t)]])
            tk = (d, t) if (d, t) in tor else (d, "device-resident")
            tm = med(tor[tk])
            lines.append(f"| {d} | {t} | {lm:.2f} | {gfs(lm):.0f} | {tm:.2f} | {lm / tm:.2f} |")
    notes = []
    if has_cuda:
        k = med([v[0] for v in lum[("cuda", "device-resident")]])
        h = med([v[0] for v in lum[("cuda", "host-to-host")]])
        detail = lum[("cuda", "host-to-host")][-1][1]
        cin = re.search(r"in ([\d.]+) ms", detail)
        cout = re.search(r"out ([\d.]+) ms", detail)
        parts = k + float(cin.group(1)) + float(cout.group(1))
        notes.append(
            f"CUDA host-to-host: {h:.2f} ms against kernel + copies measured alone {parts:.2f} ms "
            f"({h / parts:.2f}x; last round: {detail}). PyTorch's copies alone: in "
            f"{med(tor[('cuda', 'copy in')]):.2f} ms, out {med(tor[('cuda', 'copy out')]):.2f} ms "
            "(pageable memory). TF32 (`--precision tf32`): Lumen device-resident "
            f"{med(tf32):.2f} ms ({gfs(med(tf32)):.0f} GFLOP/s).")
    memory = lumen(args.lumen, "bench", "memory").strip().splitlines()
    fusion = lumen(args.lumen, "bench", "fusion", "--device", ",".join(devices)).strip().splitlines()
    gpu = ""
    if has_cuda:
        gpu = ", " + torch.cuda.get_device_name(0)
    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo") as f:
        names = [l.split(":", 1)[1].strip() for l in f if l.startswith("model name")]
    if names:
        cpu = names[0]
    text = "\n".join([
        f"### The three headline results ({cpu}, {os.cpu_count()} threads{gpu})",
        "",
        f"Made by `bench/headline.py --n {args.n} --rounds {args.rounds} --runs {args.runs}` with "
        f"{version}: medians over {args.rounds} interleaved rounds of {args.runs} runs. "
        "Device-resident: the input already on the device (Lumen: the kernels' time in a profiled "
        "run; PyTorch: `a @ b` then synchronize). Host-to-host: from a host array to a host "
        "result, copies included. float32, TF32 off.",
        "",
        f"**1. float32 matmul {args.n} x {args.n}** (the original claim: 26 ms on an Apple GPU "
        "against 44 ms on its CPU)",
        "",
        *lines,
        "",
        *notes,
        "",
        "**2. Memory planner on the 20-layer MLP** (the original claim: a 50% cut in peak memory), "
        "`lumen bench memory`:",
        "",
        "```",
        *memory,
        "```",
        "",
        "**3. Conv+ReLU in one kernel** (the original claim: one launch instead of two), "
        "`lumen bench fusion`:",
        "",
        "```",
        *fusion,
        "```",
    ])
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.write:
        write_section("headline", text)


if __name__ == "__main__":
    main()
