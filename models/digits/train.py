#!/usr/bin/python3
"""Trains the digit classifier Lumen ships, on scikit-learn's bundled 8x8 digits, and exports it.

Writes, next to this script: digits.onnx (opset 13, dynamic batch), test_x.npy (float32
[N, 1, 8, 8], pixels scaled to [0, 1]), test_y.npy (int64 [N]) and reference.txt (PyTorch's
accuracy on the held-out digits). Seconds on a CPU; fixed seeds, so it is reproducible.
"""
import os

import numpy as np
import torch
from sklearn.datasets import load_digits

HERE = os.path.dirname(os.path.abspath(__file__))


class DigitNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2))
        self.classifier = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(32 * 2 * 2, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    torch.manual_seed(0)
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(y))
    test, train = order[:360], order[360:]
    model = DigitNet()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x[train]), torch.from_numpy(y[train])
    for epoch in range(30):
        model.train()
        perm = torch.randperm(len(yt))
        for i in range(0, len(yt), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(x[test]))
    accuracy = float((logits.argmax(1).numpy() == y[test]).mean())
    print(f"PyTorch accuracy on {len(test)} held-out digits: {accuracy:.4f}")
    torch.onnx.export(model, torch.from_numpy(x[test[:1]]), os.path.join(HERE, "digits.onnx"),
                      opset_version=13, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    np.save(os.path.join(HERE, "test_x.npy"), x[test])
    np.save(os.path.join(HERE, "test_y.npy"), y[test])
    np.save(os.path.join(HERE, "reference_logits.npy"), logits.numpy())
    with open(os.path.join(HERE, "reference.txt"), "w") as f:
        f.write(f"{accuracy:.6f}\n")


if __name__ == "__main__":
    main()
