#!/usr/bin/python3
"""What Lumen's Python layer costs per call, side by side with PyTorch eager (Debian's
python3-torch) in one process, interleaved:

  * one small eager op: the add of two 1000-element float32 tensors (`a + b`), with NumPy's
    `a + b` as the floor of any Python call;
  * one `model(x)` call of the shipped digits model (models/digits/digits.onnx) at batch 1 and at
    the 360-image held-out batch, against the same network run by PyTorch eager (its weights
    read from the ONNX file; outputs checked equal first).

    bench/python_overhead.py [--build build] [--rounds 7] [--calls 20000] [--threads 1]

Each round times `calls` back-to-back calls of each contender (model calls: calls / 20 at
batch 1, calls / 1000 at batch 360) and
reports the mean per call; the table gives the median over rounds. Results go to the
"python_overhead" section of docs/benchmarks.md.
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

from bench_doc import ROOT, write_section

DIGITS = os.path.join(ROOT, "models", "digits")


def per_call_us(fn, calls):
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def torch_digits(torch):
    """The digits network as PyTorch eager modules with the ONNX file's weights (the export
    folded BatchNorm into the convolutions, so the network is conv-relu-pool twice, then MLP)."""
    import onnx
    from onnx import numpy_helper
    weights = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
               for t in onnx.load(os.path.join(DIGITS, "digits.onnx")).graph.initializer}
    nn = torch.nn
    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)).eval()
    convs = sorted(k for k in weights if k.startswith("onnx::Conv"))
    with torch.no_grad():
        net[0].weight.copy_(weights[convs[0]])
        net[0].bias.copy_(weights[convs[1]])
        net[3].weight.copy_(weights[convs[2]])
        net[3].bias.copy_(weights[convs[3]])
        net[7].weight.copy_(weights["classifier.1.weight"])
        net[7].bias.copy_(weights["classifier.1.bias"])
        net[9].weight.copy_(weights["classifier.3.weight"])
        net[9].bias.copy_(weights["classifier.3.bias"])
    return net


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    # Both runtimes get the same number of threads: OpenMP reads it for Lumen's kernels when
    # liblumen loads, torch takes it here. One thread (the default) measures per-call cost
    # without OpenMP barriers, which on a shared 2-core machine cost more than the work.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, os.path.join(args.build, "python"))
    import lumen
    import torch
    torch.set_num_threads(args.threads)

    rng = np.random.default_rng(0)
    an, bn = rng.standard_normal(1000, np.float32), rng.standard_normal(1000, np.float32)
    la, lb = lumen.from_numpy(an), lumen.from_numpy(bn)
    ta, tb = torch.from_numpy(an), torch.from_numpy(bn)
    np.testing.assert_array_equal((la + lb).numpy(), (ta + tb).numpy())

    x_all = np.load(os.path.join(DIGITS, "test_x.npy"))
    model = lumen.load_onnx(os.path.join(DIGITS, "digits.onnx")).compile(device="cpu")
    net = torch_digits(torch)
    inputs = {1: x_all[:1].copy(), 360: x_all}
    with torch.inference_mode():
        for x in inputs.values():
            want = net(torch.from_numpy(x)).numpy()
            got = model(x).numpy()
            assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), "outputs differ"

    cases = {
        "add 1000 (eager)": {"lumen": lambda: la + lb, "torch": lambda: ta + tb,
                             "numpy": lambda: an + bn},
    }
    for n, x in inputs.items():
        lx, tx = lumen.from_numpy(x), torch.from_numpy(x)
        cases[f"digits model(x), batch {n}"] = {
            "lumen": lambda lx=lx: model(lx), "torch": lambda tx=tx: net(tx)}
    times = {case: {who: [] for who in fns} for case, fns in cases.items()}
    with torch.inference_mode():
        for r in range(args.rounds):
            for case, fns in cases.items():
                calls = args.calls if case.startswith("add") else (
                    args.calls // 20 if case.endswith("batch 1") else max(args.calls // 1000, 10))
                for who, fn in fns.items():
                    times[case][who].append(per_call_us(fn, calls))
            print(f"round {r + 1}/{args.rounds}", flush=True)

    med = {c: {w: statistics.median(v) for w, v in t.items()} for c, t in times.items()}
    lines = [
        "### Python overhead: Lumen vs PyTorch eager",
        "",
        f"Made by `bench/python_overhead.py` ({args.rounds} interleaved rounds, median of the "
        f"per-round mean; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__} and Lumen {lumen.__version__}, both with "
        f"{args.threads} thread(s)). Lumen's eager add runs a cached one-node compiled graph "
        "(lookup by op, shapes, dtypes; GIL released around execute). `model(x)` runs the "
        "shipped digits model (`lumen.load_onnx(...).compile(device=\"cpu\")`) against the same "
        "network in PyTorch eager under `torch.inference_mode()`.",
        "",
        "| call | Lumen µs | PyTorch µs | Lumen / PyTorch | NumPy µs |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for case, m in med.items():
        numpy_us = f"{m['numpy']:.2f}" if "numpy" in m else "-"
        lines.append(f"| {case} | {m['lumen']:.2f} | {m['torch']:.2f} | "
                     f"{m['lumen'] / m['torch']:.2f}x | {numpy_us} |")
    add = med["add 1000 (eager)"]
    one = med["digits model(x), batch 1"]
    lines += ["", f"Closing note: one eager add of two 1000-element tensors costs "
              f"{add['lumen']:.2f} µs in Lumen against {add['torch']:.2f} µs in PyTorch; one "
              f"`model(x)` call of the digits model at batch 1 costs {one['lumen']:.1f} µs "
              f"against {one['torch']:.1f} µs for PyTorch eager."]
    write_section("python_overhead", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
