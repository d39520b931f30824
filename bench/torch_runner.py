#!/usr/bin/python3
"""PyTorch side of Lumen's benchmark harness: rebuilds one zoo model exactly as
tests/models/export_zoo.py built it (same seed, same BatchNorm calibration, so the same weights as
the exported ONNX file), runs it on the zoo's input and prints one JSON line.

    bench/torch_runner.py NAME --zoo DIR --mode eager|frozen [--threads 2] [--repeat N] [--out F]

eager: the nn.Module under torch.inference_mode(). frozen: torch.jit.trace, then
torch.jit.freeze + optimize_for_inference (TorchScript's best CPU mode). "create_ms" is the time to
build the model and (frozen) trace, freeze and run the two profiling passes TorchScript needs;
"first_run_ms" the first timed call; "median_ms"/"p90_ms" over --repeat further calls. --out
writes the output as .npy, so the harness can check that every runtime agrees.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import export_zoo  # noqa: E402

warnings.filterwarnings("ignore")


def build(name):
    """The model with export_zoo's weights: same constructor, seed and calibration."""
    ctor, _, shape, dtype = export_zoo.MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    if dtype == "float32":
        export_zoo.calibrate_batchnorm(model, shape)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--mode", choices=("eager", "frozen"), default="eager")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    x = torch.from_numpy(np.load(os.path.join(args.zoo, args.name + ".input.npy")))
    t0 = time.perf_counter()
    model = build(args.name)
    with torch.inference_mode():
        if args.mode == "frozen":
            model = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(model, x)))
            model(x)  # TorchScript's profiling executor specialises on the first two calls
            model(x)
        create_ms = (time.perf_counter() - t0) * 1e3
        t1 = time.perf_counter()
        y = model(x)
        first_ms = (time.perf_counter() - t1) * 1e3
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            y = model(x)
            times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    if args.out:
        np.save(args.out, y.numpy())
    print(json.dumps({"create_ms": create_ms, "first_run_ms": first_ms,
                      "median_ms": times[len(times) // 2],
                      "p90_ms": times[min(len(times) - 1, int(0.9 * len(times)))]}))


if __name__ == "__main__":
    main()
