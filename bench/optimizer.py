#!/usr/bin/python3
"""The optimizer on every zoo model: node counts before and after (`lumen inspect --passes`) and
`lumen run` latency with the optimizer on and off (`--no-optimize`), interleaved in one run.

    bench/optimizer.py [--zoo build/model_zoo] [--rounds 3] [--repeat 10] [--models a,b]

Writes the "optimizer" section of docs/benchmarks.md.
"""
import argparse
import os
import re
import statistics
import subprocess

from bench_doc import ROOT, write_section


def nodes(lumen, model):
    out = subprocess.run([lumen, "inspect", model, "--passes"], check=True, capture_output=True,
                         text=True).stdout
    before = int(re.search(r"^nodes\s+(\d+)$", out, re.M).group(1))
    after = int(re.search(r"^nodes\s+(\d+) after optimization", out, re.M).group(1))
    return before, after


def latency(lumen, model, inp, repeat, optimize):
    cmd = [lumen, "run", model, "--repeat", str(repeat)]
    if inp:
        cmd += ["--input", inp]
    if not optimize:
        cmd.append("--no-optimize")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))


def input_arg(lumen, zoo, name):
    path = os.path.join(zoo, name + ".input.npy")
    if not os.path.exists(path):
        return None
    out = subprocess.run([lumen, "inspect", os.path.join(zoo, name + ".onnx")], check=True,
                         capture_output=True, text=True).stdout
    return re.search(r"^input\s+(\S+):", out, re.M).group(1) + "=" + path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "model_zoo"))
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--models", default="")
    ap.add_argument("--threads", type=int, default=0,
                    help="OMP_NUM_THREADS for lumen run (0: its default, every core)")
    ap.add_argument("--note", default="", help="a sentence on the conditions, for the doc")
    args = ap.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    names = [m for m in args.models.split(",") if m] or sorted(
        f[:-5] for f in os.listdir(args.zoo) if f.endswith(".onnx"))
    rows = []
    for name in names:
        model = os.path.join(args.zoo, name + ".onnx")
        inp = input_arg(args.lumen, args.zoo, name)
        before, after = nodes(args.lumen, model)
        on, off = [], []
        for _ in range(args.rounds):  # interleaved
            off.append(latency(args.lumen, model, inp, args.repeat, False))
            on.append(latency(args.lumen, model, inp, args.repeat, True))
        rows.append((name, before, after, statistics.median(off), statistics.median(on)))
        print(rows[-1], flush=True)
    lines = [
        "### Optimizer on and off",
        "",
        f"Measured by `bench/optimizer.py --rounds {args.rounds} --repeat {args.repeat}"
        f"{' --threads ' + str(args.threads) if args.threads else ''}` on {os.cpu_count()} cores"
        f"{' with ' + str(args.threads) + ' OpenMP thread(s)' if args.threads else ''}: "
        "`lumen run` with and without `--no-optimize`, interleaved, median over the rounds of each "
        "run's median latency. Nodes: live nodes before and after the passes (constant folding, "
        "no-op removal, CSE, LayerNorm/GELU/attention recognition, Conv+BatchNorm folding, "
        "Conv/MatMul epilogues (bias, activation, SiLU, residual Add), channels-last regions, "
        f"transpose folding, dead code, then element-wise trees as one loop). {args.note}",
        "",
        "| model | nodes before | nodes after | latency off ms | latency on ms | on / off |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, before, after, off, on in rows:
        lines.append(f"| {name} | {before} | {after} | {off:.2f} | {on:.2f} | {on / off:.2f} |")
    write_section("optimizer", "\n".join(lines))
    print("\n".join(lines[-len(rows) - 2:]))


if __name__ == "__main__":
    main()
