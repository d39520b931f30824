#!/usr/bin/python3
"""Runs a torchvision model exported to ONNX by the user, and compares it with PyTorch.

    PYTHONPATH=build/python examples/python_torchvision.py [resnet18|mobilenet_v2|...] [--onnx F]

Without --onnx, the model is built by torchvision (random weights: nothing is downloaded) and
exported with torch.onnx.export to a temporary file first, the way a user would export theirs:

    torch.onnx.export(model.eval(), torch.randn(1, 3, 224, 224), "model.onnx",
                      input_names=["image"], output_names=["logits"], opset_version=13,
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
"""
import argparse
import os
import tempfile
import time

import numpy as np
import torch
import torchvision

import lumen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", nargs="?", default="resnet18")
    ap.add_argument("--onnx", help="an exported model; otherwise export `arch` now")
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()

    torch.manual_seed(0)
    net = getattr(torchvision.models, args.arch)(weights=None).eval()
    path = args.onnx
    if path is None:
        path = os.path.join(tempfile.mkdtemp(), args.arch + ".onnx")
        torch.onnx.export(net, torch.randn(1, 3, 224, 224), path, input_names=["image"],
                          output_names=["logits"], opset_version=13,
                          dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
        print(f"exported {args.arch} to {path}")

    model = lumen.load_onnx(path)
    model.compile()  # device="auto": every available backend
    x = lumen.randn(args.batch, 3, 224, 224)
    logits = model(x)
    times = []
    for _ in range(10):
        t = time.perf_counter()
        logits = model(x)
        times.append((time.perf_counter() - t) * 1e3)
    print(f"lumen: {model.inputs[0]} -> {list(logits.shape)}, median {np.median(times):.2f} ms")

    top5 = lumen.softmax(logits, dim=1).numpy()[0].argsort()[::-1][:5]
    print("top-5 classes of image 0:", top5.tolist())
    if args.onnx is None:
        with torch.inference_mode():
            want = net(torch.from_dlpack(x)).numpy()  # the same input memory, through DLPack
        diff = np.abs(logits.numpy() - want).max() / np.abs(want).max()
        print(f"max |lumen - torch| / max |torch| = {diff:.2e}")


if __name__ == "__main__":
    main()
