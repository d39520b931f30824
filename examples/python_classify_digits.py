#!/usr/bin/python3
"""Classifies the held-out digits Lumen ships (models/digits) from Python.

    PYTHONPATH=build/python examples/python_classify_digits.py [MODEL_DIR]

(or with the package installed: python examples/python_classify_digits.py)."""
import os
import sys
import time

import numpy as np

import lumen

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "digits")
    images = np.load(os.path.join(folder, "test_x.npy"))  # [360, 1, 8, 8] float32
    labels = np.load(os.path.join(folder, "test_y.npy"))
    start = time.perf_counter()
    model = lumen.load_onnx(os.path.join(folder, "digits.onnx"))
    model.compile(device="auto")
    logits = model(images)  # the first call at a new shape compiles a plan for it
    compile_ms = (time.perf_counter() - start) * 1e3

    out = {"logits": np.empty((len(images), 10), np.float32)}  # allocated once, reused
    runs = []
    for _ in range(50):
        t = time.perf_counter()
        model.run({"image": images}, out=out)
        runs.append((time.perf_counter() - t) * 1e3)
    predicted = lumen.argmax(logits, dim=1).numpy()
    probabilities = lumen.softmax(logits, dim=1).numpy()
    print(f"digits: {len(images)} held-out 8x8 images, one batch")
    print(f"accuracy: {(predicted == labels).mean():.4f}; PyTorch on the same digits: "
          f"{open(os.path.join(folder, 'reference.txt')).read().strip()}")
    print(f"load + compile + first run: {compile_ms:.1f} ms; latency per batch: median "
          f"{np.median(runs):.3f} ms")
    for i in range(3):
        print(f"image {i}: label {labels[i]}, predicted {predicted[i]} "
              f"(p = {probabilities[i, predicted[i]]:.3f})")
    print(model.summary())


if __name__ == "__main__":
    main()
