#!/usr/bin/python3
"""Load + compile time, latency and peak resident memory: `lumen run` side by side with ONNX
Runtime CPU (onnxruntime-node, bench/ort/session.js), interleaved, on the same ONNX files.

    bench/load_compile.py [--zoo build/model_zoo] [--models resnet50,bert_base] [--rounds 5]
                          [--repeat 10] [--lumen build/lumen]

Each round starts one fresh process per runtime and model: Lumen's `lumen run MODEL --repeat N`
(it prints "loaded and compiled in X ms" and the median latency) and `node session.js MODEL`
(InferenceSession.create time, median latency; 2 intra-op threads, all graph optimizations).
Peak resident memory is the child's ru_maxrss (os.wait4), which for node includes the V8 runtime
(measured by an empty node process and reported alongside). This script keeps itself small: on
Linux a child's ru_maxrss starts from its parent's resident size at fork. Both
runtimes get the same input file (ZOO/NAME.input.npy for Lumen; the same values for ORT are not
needed for timing, so ORT gets random values of the same shape and range). Results go to the
"load_compile" section of docs/benchmarks.md.

ONNX Runtime: `cd bench/ort && npm install --ignore-scripts` (onnxruntime-node 1.30, CPU).
"""
import argparse
import functools
import json
import os
import re
import statistics
import subprocess

import numpy as np

from bench_doc import ROOT, write_section

ORT_DIR = os.path.join(ROOT, "bench", "ort")


def run_child(cmd):
    """Runs cmd, returns (stdout+stderr, peak RSS in MB); raises on failure."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-2000:]}")
    return out, usage.ru_maxrss / 1024.0


def lumen_round(lumen, zoo, name, repeat):
    model = os.path.join(zoo, name + ".onnx")
    cmd = [lumen, "run", model, "--repeat", str(repeat)]
    inp = os.path.join(zoo, name + ".input.npy")
    if os.path.exists(inp):
        cmd += ["--input", f"{input_name(model)}={inp}"]
    out, rss = run_child(cmd)
    compile_ms = float(re.search(r"loaded and compiled in ([0-9.]+) ms", out).group(1))
    latency = float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))
    return {"compile": compile_ms, "latency": latency, "rss": rss}


def ort_round(zoo, name, repeat):
    model = os.path.join(zoo, name + ".onnx")
    cmd = ["node", os.path.join(ORT_DIR, "session.js"), model, "--repeat", str(repeat)]
    inp = os.path.join(zoo, name + ".input.npy")
    if os.path.exists(inp):
        shape = np.load(inp, mmap_mode="r").shape
        cmd += ["--shape", f"{input_name(model)}={'x'.join(map(str, shape))}"]
    out, rss = run_child(cmd)
    r = json.loads(out.strip().splitlines()[-1])
    return {"compile": r["create_ms"], "latency": r["median_ms"], "rss": rss}


@functools.lru_cache(maxsize=None)  # one `lumen inspect` per model, not per round
def input_name(model, lumen=os.path.join(ROOT, "build", "lumen")):
    """The model's first input, from `lumen inspect` (loading the model with python3-onnx here
    would swell this process, and a child's peak RSS starts from its parent's at fork)."""
    out = subprocess.run([lumen, "inspect", model], check=True, capture_output=True,
                         text=True).stdout
    return re.search(r"^input\s+(\S+):", out, re.M).group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "model_zoo"))
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    _, node_rss = run_child(["node", "-e", "0"])
    results = {(n, rt): [] for n in names for rt in ("lumen", "ort")}
    for r in range(args.rounds):
        for name in names:  # interleaved: both runtimes see the same machine load
            results[(name, "lumen")].append(lumen_round(args.lumen, args.zoo, name, args.repeat))
            results[(name, "ort")].append(ort_round(args.zoo, name, args.repeat))
            lm, om = results[(name, "lumen")][-1], results[(name, "ort")][-1]
            print(f"round {r + 1} {name}: lumen compile {lm['compile']:.0f} ms, latency "
                  f"{lm['latency']:.1f} ms, rss {lm['rss']:.0f} MB | ort create "
                  f"{om['compile']:.0f} ms, latency {om['latency']:.1f} ms, rss {om['rss']:.0f} MB",
                  flush=True)
    med = lambda rows, k: statistics.median(x[k] for x in rows)  # noqa: E731
    lines = [
        "### Load + compile, latency and peak memory: Lumen next to ONNX Runtime",
        "",
        f"Measured by `bench/load_compile.py --models {args.models} --rounds {args.rounds} "
        f"--repeat {args.repeat}` on {os.cpu_count()} cores: each round starts a fresh process per "
        f"runtime and model, interleaved; medians over the rounds. Lumen: `lumen run` (load the "
        f"ONNX file, build the graph, compile: kernels and oneDNN primitives created, weights "
        f"packed). ONNX Runtime 1.30 CPU (onnxruntime-node): `InferenceSession.create` with all "
        f"graph optimizations, 2 intra-op threads. Peak RSS is the process's maximum resident set; "
        f"node's includes its own runtime, {node_rss:.0f} MB for an empty script.",
        "",
        "| model | Lumen load+compile ms | ORT create ms | Lumen latency ms | ORT latency ms | "
        "Lumen peak RSS MB | ORT peak RSS MB |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in names:
        lr, orr = results[(name, "lumen")], results[(name, "ort")]
        lines.append(f"| {name} | {med(lr, 'compile'):.0f} | {med(orr, 'compile'):.0f} | "
                     f"{med(lr, 'latency'):.2f} | {med(orr, 'latency'):.2f} | "
                     f"{med(lr, 'rss'):.0f} | {med(orr, 'rss'):.0f} |")
    write_section("load_compile", "\n".join(lines))
    print("\n".join(lines[-len(names) - 2:]))


if __name__ == "__main__":
    main()
