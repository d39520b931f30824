#!/usr/bin/python3
"""Runs the exported model zoo through `lumen run` and compares each output with PyTorch's.

    /usr/bin/python3 tests/models/check_zoo.py BUILD_DIR ZOO_DIR [--models a,b,...] [--export]
                                               [--repeat N] [--device LIST]

ZOO_DIR holds what export_zoo.py wrote (NAME.onnx, NAME.input.npy, NAME.expected.npy); --export
first runs export_zoo.py for the models (it skips those already exported), and exits 77 (CTest's
skip) when torch or torchvision is missing. A model
passes iff max|lumen - torch| <= 1e-4 * max|torch|. Prints one row per model (status, max relative
difference, load+compile time and latency as `lumen run` prints them) and exits non-zero if any
model fails or is unsupported. --device goes to `lumen run` (e.g. vulkan: the GPU backend first,
the host for the rest); without --export, a model missing from ZOO_DIR skips the run (77).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

RTOL = 1e-4


def input_name(onnx_path):
    """The graph's first input that is not an initializer (python3-onnx; else "input")."""
    try:
        import onnx
    except ImportError:
        return "input"
    model = onnx.load(onnx_path, load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    return next(i.name for i in model.graph.input if i.name not in inits)


SKIP = 77  # CTest SKIP_RETURN_CODE


def check(lumen, zoo, name, timeout, repeat, device=None):
    onnx_path = os.path.join(zoo, name + ".onnx")
    in_path = os.path.join(zoo, name + ".input.npy")
    expected = np.load(os.path.join(zoo, name + ".expected.npy"))
    row = {"model": name, "status": "", "rel": "", "compile": "", "latency": ""}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [lumen, "run", onnx_path, "--input", f"{input_name(onnx_path)}={in_path}",
               "--output-dir", tmp, "--repeat", str(repeat)]
        if device:
            cmd += ["--device", device]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            row["status"] = f"fail: timed out after {timeout} s"
            return row, False
        text = proc.stdout + proc.stderr
        m = re.search(r"loaded and compiled in ([0-9.]+) ms", text)
        if m:
            row["compile"] = m.group(1) + " ms"
        m = re.search(r"latency: median ([0-9.]+) ms", text)
        if m:
            row["latency"] = m.group(1) + " ms"
        if proc.returncode != 0:
            msg = " ".join(l.strip() for l in text.strip().splitlines()[-2:])
            kind = "unsupported" if "nsupported" in msg else "error"
            row["status"] = f"{kind}: {msg[:300]}"
            return row, False
        out_file = os.path.join(tmp, "output.npy")
        if not os.path.exists(out_file):
            files = sorted(os.listdir(tmp))
            if len(files) != 1:
                row["status"] = f"fail: expected one output, got {files}"
                return row, False
            out_file = os.path.join(tmp, files[0])
        got = np.load(out_file)
    if got.shape != expected.shape:
        row["status"] = f"fail: shape {got.shape}, expected {expected.shape}"
        return row, False
    scale = float(np.max(np.abs(expected.astype(np.float64))))
    diff = float(np.max(np.abs(got.astype(np.float64) - expected.astype(np.float64))))
    rel = diff / scale if scale > 0 else diff
    row["rel"] = f"{rel:.2e}"
    ok = bool(np.isfinite(diff)) and diff <= RTOL * scale
    row["status"] = "pass" if ok else f"fail: max diff {diff:.3g} (max |torch| {scale:.3g})"
    return row, ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("zoo_dir")
    ap.add_argument("--models", help="comma-separated; default: every NAME.onnx in ZOO_DIR")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per model")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs (lumen run --repeat)")
    ap.add_argument("--export", action="store_true", help="run export_zoo.py first")
    ap.add_argument("--device", help="lumen run's --device (default: its own)")
    args = ap.parse_args()
    lumen = os.path.join(args.build_dir, "lumen")
    if args.export:
        try:
            import torch  # noqa: F401
            import torchvision  # noqa: F401
        except ImportError as e:
            print(f"check_zoo: skipped, cannot export: {e} (apt-get install python3-torch "
                  "python3-torchvision)")
            return SKIP
        cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "export_zoo.py"), args.zoo_dir]
        if args.models:
            cmd += ["--models", args.models]
        subprocess.run(cmd, check=True)
    if args.models:
        names = [m for m in args.models.split(",") if m]
    else:
        names = sorted(f[:-5] for f in os.listdir(args.zoo_dir) if f.endswith(".onnx"))
    missing = [n for n in names if not os.path.exists(os.path.join(args.zoo_dir, n + ".onnx"))]
    if missing and not args.export:
        print(f"check_zoo: skipped, not exported: {', '.join(missing)}")
        return SKIP
    rows, failed = [], []
    for name in names:
        row, ok = check(lumen, args.zoo_dir, name, args.timeout, args.repeat, args.device)
        rows.append(row)
        if not ok:
            failed.append(name)
        print(f"{row['model']:<20} {row['status'][:60]}", file=sys.stderr, flush=True)
    cols = [("model", 20), ("rel", 9), ("compile", 11), ("latency", 12), ("status", 0)]
    print("  ".join(f"{c:<{w}}" if w else c for c, w in cols))
    for row in rows:
        print("  ".join(f"{row[c]:<{w}}" if w else row[c] for c, w in cols))
    print(f"{len(names) - len(failed)} of {len(names)} models pass"
          + (f"; failing: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
