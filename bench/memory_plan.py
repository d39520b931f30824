#!/usr/bin/python3
"""The memory planner on every zoo model: `lumen inspect MODEL --optimized --memory` (the graph `lumen run` runs) gives the sum of all
intermediates (no reuse), the lower bound (the most bytes alive at one step) and the planned arena.

    bench/memory_plan.py [--zoo build/model_zoo] [--lumen build/lumen]

Writes the "memory_plan" section of docs/benchmarks.md. The figures are planned at compile time
and do not depend on machine load. Each model is planned at the batch size of its zoo input.
"""
import argparse
import os
import re
import subprocess

import numpy as np

from bench_doc import ROOT, write_section


def plan(lumen, model, shape_arg):
    cmd = [lumen, "inspect", model, "--optimized", "--memory"] + (["--shape", shape_arg] if shape_arg else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    num = lambda label: float(re.search(label + r"[^\n]*?([0-9.]+) MB", out).group(1))  # noqa
    steps = re.search(r"intermediates (\d+), (\d+) steps in place", out)
    return {"no_reuse": num(r"no reuse"), "bound": num(r"lower bound"),
            "arena": num(r"planned arena"), "tensors": int(steps.group(1)),
            "in_place": int(steps.group(2))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "model_zoo"))
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    args = ap.parse_args()
    import onnx
    rows = []
    for f in sorted(os.listdir(args.zoo)):
        if not f.endswith(".onnx"):
            continue
        name = f[:-5]
        model = os.path.join(args.zoo, f)
        inp = os.path.join(args.zoo, name + ".input.npy")
        m = onnx.load(model, load_external_data=False)
        inits = {t.name for t in m.graph.initializer}
        in_name = next(i.name for i in m.graph.input if i.name not in inits)
        shape = np.load(inp, mmap_mode="r").shape
        r = plan(args.lumen, model, f"{in_name}={'x'.join(map(str, shape))}")
        rows.append((name, shape, r))
        print(name, r, flush=True)
    lines = [
        "### Memory plan of every zoo model",
        "",
        "Made by `bench/memory_plan.py` from `lumen inspect MODEL --optimized --memory` (planned at compile "
        "time, independent of machine load). No reuse: every intermediate in its own memory. "
        "Lower bound: the most intermediate bytes alive at one step (in-place steps counted as "
        "one tensor). Arena: what the planner lays out (greedy by size, best fit). Graph inputs, "
        "outputs and weights are not intermediates.",
        "",
        "| model | input | intermediates | in place | no reuse MB | lower bound MB | arena MB | "
        "arena / no reuse | arena / lower bound |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios = []
    for name, shape, r in rows:
        ratio = r["arena"] / r["bound"] if r["bound"] else 1.0
        ratios.append(ratio)
        lines.append(f"| {name} | {list(shape)} | {r['tensors']} | {r['in_place']} | "
                     f"{r['no_reuse']:.2f} | {r['bound']:.2f} | {r['arena']:.2f} | "
                     f"{100 * r['arena'] / r['no_reuse']:.1f}% | {ratio:.3f} |")
    lines += ["", f"Arena over lower bound: mean {sum(ratios) / len(ratios):.3f}, worst "
              f"{max(ratios):.3f} over {len(rows)} models."]
    write_section("memory_plan", "\n".join(lines))
    print("\n".join(lines[-len(rows) - 4:]))


if __name__ == "__main__":
    main()
