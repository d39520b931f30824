#!/usr/bin/python3
"""One session, many sequence lengths: Lumen's shape family (one compile, then a plan per new
length made without one) against a plan compiled for each exact length, with ONNX Runtime CPU
alongside on the same file and lengths.

    bench/dynamic_shapes.py [--lumen build/lumen] [--zoo /tmp/zoo] [--model bert_base_dynamic]
                            [--count 20] [--max-length 512] [--threads 2] [--repeat 5]
                            [--device cpu|cuda] [--ort node|python|none] [--label NAME]

The model (exported by tests/models/export_zoo.py if missing) takes int64 input_ids [1, seq].
`lumen bench lengths` draws `count` lengths in 1..max-length and runs them in that order, as a
service would see them, through two sessions: the default one (family) and one with
plan_per_shape (exact, which compiles each length). Per length: the first call (a new plan and its
first run; exact's includes its compile) and the median of `repeat` later calls, the two sessions
alternating so both see the same machine, and the largest relative difference of their outputs.
ONNX Runtime runs one session over the same lengths (node: bench/ort/lengths.js, onnxruntime-node;
python: bench/ort_runner.py --lengths, where Python has onnxruntime). Results go to the
"dynamic_shapes-LABEL" section of docs/benchmarks.md.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

from bench_doc import ROOT, write_section


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--zoo", default="/tmp/zoo")
    ap.add_argument("--model", default="bert_base_dynamic")
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ort", default="node", choices=["node", "python", "none"])
    ap.add_argument("--label", default="local")
    args = ap.parse_args()
    path = os.path.join(args.zoo, args.model + ".onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "models", "export_zoo.py"),
                        args.zoo, "--models", args.model], check=True)
    cmd = [args.lumen, "bench", "lengths", path, "--count", str(args.count), "--max-length",
           str(args.max_length), "--repeat", str(args.repeat), "--threads", str(args.threads),
           "--device", args.device]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    out = proc.stdout
    print(out, flush=True)
    rows, summary = [], []
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].isdigit():
            rows.append({"length": int(parts[0]), "family_first": float(parts[1]),
                         "exact_first": float(parts[2]), "family": float(parts[3]),
                         "exact": float(parts[4]), "rel": float(parts[5]),
                         "plan": float(parts[6]),
                         "second": float(parts[7]) if len(parts) > 7 else float("nan")})
        elif line.startswith(("family:", "exact:", "device memory:")):
            summary.append(line)
    lengths = ",".join(str(r["length"]) for r in rows)
    ort = None
    if args.ort == "node":
        ort_cmd = ["node", os.path.join(ROOT, "bench", "ort", "lengths.js"), path]
    elif args.ort == "python":
        ort_cmd = [sys.executable, os.path.join(ROOT, "bench", "ort_runner.py"), path]
    if args.ort != "none":
        ort_out = subprocess.run(ort_cmd + ["--lengths", lengths, "--threads", str(args.threads),
                                            "--repeat", str(args.repeat)],
                                 check=True, capture_output=True, text=True).stdout
        ort = json.loads(ort_out.strip().splitlines()[-1])
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        text = f.read()
    for line in text.splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    isa = "avx512" if "avx512f" in text else "avx2"
    where = f"{cpu} ({isa}), {args.threads} CPU threads" + (
        f", --device {args.device}" if args.device != "cpu" else "")
    lines = [
        f"`bench/dynamic_shapes.py --model {args.model} --count {args.count} --max-length "
        f"{args.max_length} --threads {args.threads} --repeat {args.repeat} --device {args.device}"
        f" --ort {args.ort} --label {args.label}` on {where}, {time.strftime('%Y-%m-%d')}.",
        "",
        f"One session over {len(rows)} random lengths in 1..{args.max_length}, in this order. "
        "Family: Lumen's default session; exact: plan_per_shape (a compile per length). First: "
        "the first call at that length (a new plan, in brackets the time making it, and its first "
        f"run; exact's includes its compile); second: the family's second call at that length "
        "(where a device plan records its graph); ms: the median of "
        f"{args.repeat} later calls, the two sessions alternating. "
        + " ".join(s.strip() + "." for s in summary),
        "",
        "| length | family first ms (plan) | family second ms | exact first ms | family ms | "
        "exact ms | family / exact |"
        + (" ORT first ms | ORT ms | family / ORT |" if ort else "") + " max rel diff |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        + (" ---: | ---: | ---: |" if ort else "")
        + " ---: |",
    ]
    ratios, first_ratios, ort_ratios = [], [], []
    for k, r in enumerate(rows):
        ratio = r["family"] / r["exact"]
        ratios.append(ratio)
        if k > 0:  # the very first call fits the family and compiles: counted apart
            first_ratios.append(r["family_first"] / r["exact"])
        line = (f"| {r['length']} | {r['family_first']:.2f} ({r['plan']:.2f}) | "
                f"{r['second']:.2f} | {r['exact_first']:.2f} | "
                f"{r['family']:.2f} | {r['exact']:.2f} | {ratio:.3f} |")
        if ort:
            o = ort["runs"][k]
            ort_ratios.append(r["family"] / o["median_ms"])
            line += f" {o['first_ms']:.2f} | {o['median_ms']:.2f} | {ort_ratios[-1]:.3f} |"
        lines.append(line + f" {r['rel']:.1e} |")
    lines += [
        "",
        f"Family / exact, later calls: geomean {geomean(ratios):.3f}, max {max(ratios):.3f}. "
        f"First call at a new length (all but the first) / exact's later calls: geomean "
        f"{geomean(first_ratios):.3f}, max {max(first_ratios):.3f}."
        + (f" Family / ORT, later calls: geomean {geomean(ort_ratios):.3f}, max "
           f"{max(ort_ratios):.3f}." if ort else ""),
    ]
    write_section(f"dynamic_shapes-{args.label}", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
