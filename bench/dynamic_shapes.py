#!/usr/bin/python3
"""One session, many sequence lengths: Lumen's shape family (one compile, then a plan per new
length made without one) against a plan compiled for each exact length, with ONNX Runtime CPU
(onnxruntime-node, bench/ort/lengths.js) alongside on the same file.

    bench/dynamic_shapes.py [--zoo /tmp/zoo] [--model bert_base_dynamic] [--count 20]
                            [--max-length 512] [--threads 2] [--repeat 5] [--label NAME]
                            [--no-ort]

The model (exported by tests/models/export_zoo.py if missing) takes int64 input_ids [1, seq].
`count` random lengths in 1..max-length (seed 0), in that order, as a service would see them:
- family: one lumen.Model; per length the first call (what a new length costs: the plan made
  from the family and its first run) and the median of `repeat` later calls;
- exact: a second lumen.Model with plan_per_shape=True, which compiles each length on its own;
  the same two numbers (its first call includes the compile). The two models' later calls
  alternate, so both see the same machine;
- ORT: one session over the same lengths (first call, median of `repeat`).
Outputs of the two Lumen models are compared at every length (max relative difference).
Results go to the "dynamic_shapes-LABEL" section of docs/benchmarks.md.

ONNX Runtime: `cd bench/ort && npm install --ignore-scripts` (onnxruntime-node, CPU).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from bench_doc import ROOT, write_section

sys.path.insert(0, os.path.join(ROOT, "build", "python"))
import lumen  # noqa: E402


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1e3, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default="/tmp/zoo")
    ap.add_argument("--model", default="bert_base_dynamic")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--label", default="local")
    ap.add_argument("--no-ort", action="store_true")
    args = ap.parse_args()
    path = os.path.join(args.zoo, args.model + ".onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "export_zoo.py"),
                        args.zoo, "--models", args.model], check=True)
    rng = np.random.RandomState(0)
    lengths = [int(v) for v in rng.randint(1, args.max_length + 1, size=args.count)]
    lumen.set_num_threads(args.threads)
    family = lumen.load_onnx(path).compile("cpu")
    exact = lumen.load_onnx(path).compile("cpu", plan_per_shape=True)
    rows = []
    for length in lengths:
        ids = rng.randint(0, 1000, size=(1, length)).astype(np.int64)
        f_first, f_out = timed(lambda: family(ids))
        e_first, e_out = timed(lambda: exact(ids))
        f_times, e_times = [], []
        for _ in range(args.repeat):
            f_times.append(timed(lambda: family(ids))[0])
            e_times.append(timed(lambda: exact(ids))[0])
        a, b = np.asarray(f_out), np.asarray(e_out)
        rel = float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))
        rows.append({"length": length, "family_first": f_first,
                     "family": statistics.median(f_times), "exact_first": e_first,
                     "exact": statistics.median(e_times), "rel": rel})
        print(f"L={length:4d} family first {f_first:8.2f} median {rows[-1]['family']:8.2f} | "
              f"exact first {e_first:8.2f} median {rows[-1]['exact']:8.2f} | rel {rel:.1e}",
              flush=True)
    stats_family = family.stats()
    stats_exact = exact.stats()
    ort = None
    if not args.no_ort:
        out = subprocess.run(["node", os.path.join(ROOT, "bench", "ort", "lengths.js"), path,
                              "--lengths", ",".join(map(str, lengths)), "--threads",
                              str(args.threads), "--repeat", str(args.repeat)],
                             check=True, capture_output=True, text=True).stdout
        ort = json.loads(out.strip().splitlines()[-1])
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    isa = "avx512" if "avx512f" in open("/proc/cpuinfo").read() else "avx2"
    lines = [
        f"`bench/dynamic_shapes.py --model {args.model} --count {args.count} --max-length "
        f"{args.max_length} --threads {args.threads} --repeat {args.repeat} --label {args.label}`"
        f" on {cpu} ({isa}), {args.threads} threads, {time.strftime('%Y-%m-%d')}.",
        "",
        f"One session over {args.count} random lengths in 1..{args.max_length}, in this order. "
        f"Family: Lumen's default, {stats_family['compiles']} compile(s), "
        f"{stats_family['sized']} plans made from a family, "
        f"{stats_family['kernels_shared']} kernels shared and {stats_family['kernels_built']} "
        f"built for them. Exact: plan_per_shape, {stats_exact['compiles']} compiles. "
        "First: the first call at that length (a new plan and its first run); median: of "
        f"{args.repeat} later calls, the two Lumen models alternating.",
        "",
        "| length | family first ms | exact first ms | family ms | exact ms | family / exact |"
        + (" ORT first ms | ORT ms | family / ORT |" if ort else "") + " max rel diff |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |" if ort else "")
        + " ---: |",
    ]
    ratios, ort_ratios, first_ratios = [], [], []
    for k, r in enumerate(rows):
        ratio = r["family"] / r["exact"]
        ratios.append(ratio)
        first_ratios.append(r["family_first"] / r["exact"])
        line = (f"| {r['length']} | {r['family_first']:.2f} | {r['exact_first']:.2f} | "
                f"{r['family']:.2f} | {r['exact']:.2f} | {ratio:.3f} |")
        if ort:
            o = ort["runs"][k]
            ort_ratios.append(r["family"] / o["median_ms"])
            line += f" {o['first_ms']:.2f} | {o['median_ms']:.2f} | {ort_ratios[-1]:.3f} |"
        lines.append(line + f" {r['rel']:.1e} |")

    def geomean(v):
        return math.exp(sum(math.log(x) for x in v) / len(v))

    lines += [
        "",
        f"Family / exact (steady state): geomean {geomean(ratios):.3f}, max {max(ratios):.3f}. "
        f"First call at a new length / exact steady state: geomean {geomean(first_ratios):.3f}, "
        f"max {max(first_ratios):.3f}."
        + (f" Family / ORT: geomean {geomean(ort_ratios):.3f}." if ort else ""),
    ]
    write_section(f"dynamic_shapes-{args.label}", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
