#!/usr/bin/python3
"""int8 QDQ models on Lumen and ONNX Runtime CPU: latency side by side, and top-1 agreement with the
float model.

    bench/int8.py [--zoo /tmp/zoo] [--models resnet50,mobilenet_v2,bert_base] [--threads 1,2]
                  [--rounds 3] [--repeat 30] [--check 16] [--calib 4] [--out /tmp/int8]
                  [--lumen build/lumen] [--ort node|python] [--label LABEL]
                  [--weights auto|8bit|7bit]

Each zoo model (tests/models/export_zoo.py) is quantized by tests/models/quantize_qdq.py the way
ONNX Runtime's quantize_static writes QDQ models (uint8 activations, per-channel int8 weights,
MinMax calibration on --calib random inputs, 7-bit weights with --reduce-range when the CPU lacks
VNNI, as ORT does there; --weights 8bit keeps quantize_static's default full-range weights
everywhere, --weights 7bit reduces them everywhere). Both runtimes then run the same file:

- latency: in each of --rounds rounds, `lumen run --repeat R` and ORT's runner (bench/ort/session.js
  or bench/ort_runner.py) alternate, each a fresh process that warms up once and prints the median
  of R runs, on the zoo's saved input; the table gives the median over rounds;
- accuracy: on --check random inputs (other than the calibration ones), the argmax of the last axis
  of the int8 model's output on Lumen and on ORT against the float model's (run by Lumen), and
  Lumen's against ORT's.

Writes the section "int8[-LABEL]" of docs/benchmarks.md.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from bench_doc import ROOT, write_section

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import quantize_qdq  # noqa: E402

ORT_JS = os.path.join(ROOT, "bench", "ort", "session.js")
ORT_PY = os.path.join(ROOT, "bench", "ort_runner.py")


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def has_vnni():
    flags = open("/proc/cpuinfo").read()
    return "avx512_vnni" in flags or "avx_vnni" in flags


def int8_isa():
    """The CPU's int8 dot-product instructions, as the table names them."""
    if "amx_int8" in open("/proc/cpuinfo").read():
        return "AMX and VNNI"
    return "VNNI" if has_vnni() else "no VNNI"


def ort_command(kind, model, threads, repeat, feeds, output=None):
    cmd = (["node", ORT_JS] if kind == "node" else [sys.executable, ORT_PY]) + [
        model, "--threads", str(threads), "--repeat", str(repeat)]
    for name, file in feeds.items():
        cmd += ["--input", "%s=%s" % (name, file)]
    if output:
        cmd += ["--output", output]
    return cmd


def lumen_ms(lumen, model, threads, repeat, feeds):
    cmd = [lumen, "run", model, "--repeat", str(repeat), "--threads", str(threads)]
    for name, file in feeds.items():
        cmd += ["--input", "%s=%s" % (name, file)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))


def ort_ms(kind, model, threads, repeat, feeds):
    out = subprocess.run(ort_command(kind, model, threads, repeat, feeds), check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def zoo_feeds(zoo, name, model):
    """The zoo's saved input for the model's one graph input."""
    m = onnx.load(model, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inputs = [vi.name for vi in m.graph.input if vi.name not in inits]
    return {inputs[0]: os.path.join(zoo, name + ".input.npy")}


def accuracy(args, float_model, int8_model, count):
    """Top-1 agreement: Lumen int8 vs float, ORT int8 vs float, Lumen int8 vs ORT int8."""
    m = onnx.load(float_model, load_external_data=False)
    rng = np.random.default_rng(1234)
    agree = {"lumen": 0, "ort": 0, "both": 0}
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(count):
            feeds = quantize_qdq.random_feeds(m, rng, tmp)
            ref = quantize_qdq.run_lumen(args.lumen, float_model, feeds, tmp).argmax(-1)
            lumen = quantize_qdq.run_lumen(args.lumen, int8_model, feeds, tmp).argmax(-1)
            ort_out = os.path.join(tmp, "ort.npy")
            subprocess.run(ort_command(args.ort, int8_model, 1, 1, feeds, ort_out), check=True,
                           stdout=subprocess.DEVNULL)
            ort = np.load(ort_out).argmax(-1)
            agree["lumen"] += int((lumen == ref).sum())
            agree["ort"] += int((ort == ref).sum())
            agree["both"] += int((lumen == ort).sum())
            total += ref.size
    return {k: v / total for k, v in agree.items()}, total


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--zoo", default="/tmp/zoo")
    p.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--check", type=int, default=16)
    p.add_argument("--calib", type=int, default=4)
    p.add_argument("--out", default="/tmp/int8")
    p.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    p.add_argument("--ort", choices=("node", "python"), default="node")
    p.add_argument("--label", default="")
    p.add_argument("--weights", choices=("auto", "8bit", "7bit"), default="auto")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    threads = [int(t) for t in args.threads.split(",")]
    reduce_range = args.weights == "7bit" or (args.weights == "auto" and not has_vnni())
    rows = []
    for name in args.models.split(","):
        float_model = os.path.join(args.zoo, name + ".onnx")
        int8_model = os.path.join(args.out, name + (".int8-7bit.onnx" if reduce_range else
                                                    ".int8.onnx"))
        if not os.path.exists(int8_model):
            cmd = [sys.executable, os.path.join(ROOT, "tests", "models", "quantize_qdq.py"),
                   float_model, int8_model, "--lumen", args.lumen, "--calib", str(args.calib)]
            subprocess.run(cmd + (["--reduce-range"] if reduce_range else []), check=True)
        agree, total = accuracy(args, float_model, int8_model, args.check)
        feeds = zoo_feeds(args.zoo, name, int8_model)
        for t in threads:
            lumen, ort = [], []
            for _ in range(args.rounds):
                lumen.append(lumen_ms(args.lumen, int8_model, t, args.repeat, feeds))
                ort.append(ort_ms(args.ort, int8_model, t, args.repeat, feeds))
            row = (name, t, statistics.median(lumen), statistics.median(ort), agree, total)
            rows.append(row)
            print("%s t%d: Lumen %.3f ms, ORT %.3f ms, ratio %.2f; top-1 vs float: Lumen %.3f, "
                  "ORT %.3f; Lumen vs ORT %.3f" % (name, t, row[2], row[3], row[2] / row[3],
                                                   agree["lumen"], agree["ort"], agree["both"]),
                  flush=True)
    ratios = [r[2] / r[3] for r in rows]
    geomean = float(np.exp(np.mean(np.log(ratios))))
    cmd = ("bench/int8.py --models %s --threads %s --rounds %d --repeat %d --check %d --ort %s "
           "--weights %s" % (args.models, args.threads, args.rounds, args.repeat, args.check,
                             args.ort, args.weights))
    lines = [
        "### int8 QDQ models: Lumen vs ONNX Runtime (%s)" % (args.label or "CPU"),
        "",
        "`%s`%s on %s (%s); ONNX Runtime %s. Models: the zoo's float models quantized by "
        "tests/models/quantize_qdq.py (ORT-style QDQ: uint8 activations, per-channel int8 "
        "weights%s). Latency: median over %d rounds of each runtime's median of %d runs on the "
        "zoo input, the two alternating. Top-1: argmax agreement over %s random inputs with the "
        "float model (run by Lumen)." % (
            cmd, "" if not args.label else " (label %s)" % args.label, cpu_name(),
            int8_isa(),
            "1.30 (%s)" % ("onnxruntime-node" if args.ort == "node" else "Python"),
            ", 7-bit (reduce_range)" if reduce_range else ", full 8-bit range", args.rounds, args.repeat, args.check),
        "",
        "| model | threads | Lumen ms | ORT ms | Lumen / ORT | top-1 vs float: Lumen | ORT | "
        "Lumen vs ORT |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, t, lm, om, agree, total in rows:
        lines.append("| %s | %d | %.3f | %.3f | %.2f | %.3f | %.3f | %.3f |" % (
            name, t, lm, om, lm / om, agree["lumen"], agree["ort"], agree["both"]))
    lines += ["", "Geomean Lumen / ORT: %.2f." % geomean]
    write_section("int8" + ("-" + args.label if args.label else ""), "\n".join(lines))
    print("geomean Lumen / ORT %.2f" % geomean)


if __name__ == "__main__":
    sys.exit(main())
