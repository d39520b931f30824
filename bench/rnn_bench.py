#!/usr/bin/python3
"""LSTM and GRU on the GPU machine: Lumen's CUDA kernels (cuBLASLt products + cell kernels) and its
CPU kernels, side by side with PyTorch's cuDNN RNNs, on models PyTorch exports (random weights).

    bench/rnn_bench.py LUMEN [--work DIR] [--repeat 100] [--threads 16]

Each model: `lumen run MODEL --device cuda|cpu --repeat N` (host input to host output; median
latency), PyTorch eager on CUDA (the input copied in, the outputs copied out, median of N, after a
warm-up) and on the CPU, and Lumen's outputs against PyTorch's (max |diff|). Writes the "rnn"
section of docs/benchmarks.md.
"""
import argparse
import os
import re
import statistics
import subprocess
import time

import numpy as np
import torch

from bench_doc import write_section

MODELS = {  # name: (class, seq, batch, input, hidden, bidirectional)
    "lstm": (torch.nn.LSTM, 64, 8, 256, 512, False),
    "lstm_bi": (torch.nn.LSTM, 64, 8, 256, 256, True),
    "gru": (torch.nn.GRU, 64, 8, 256, 512, False),
}


class Wrap(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


def export(model, x, path):
    """The TorchScript exporter (dynamo=False where this PyTorch has the choice)."""
    kwargs = dict(input_names=["x"], output_names=["y"], opset_version=17)
    try:
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, (x,), path, **kwargs)


def lumen_ms(lumen, model, x_path, device, repeat, threads, out_dir):
    cmd = [lumen, "run", model, "--device", device, "--repeat", str(repeat), "--input",
           f"x={x_path}", "--output-dir", out_dir, "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stdout + out.stderr)
    text = out.stdout + out.stderr
    placement = re.search(r"placement: (.*)", text)
    return float(re.search(r"latency: median ([0-9.]+) ms", text).group(1)), (
        placement.group(1) if placement else "")


def torch_ms(model, x, device, repeat):
    m = model.to(device)
    times = []
    with torch.no_grad():
        for k in range(repeat + 5):
            t = time.perf_counter()
            y = m(x.to(device)).cpu()
            if device == "cuda":
                torch.cuda.synchronize()
            if k >= 5:
                times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), y.numpy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lumen")
    ap.add_argument("--work", default="/tmp/lumen_rnn")
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--threads", type=int, default=16)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    gpu = torch.cuda.get_device_name(0)
    rows = []
    for name, (cls, seq, batch, inp, hid, bi) in MODELS.items():
        model = Wrap(cls(inp, hid, bidirectional=bi)).eval()
        x = torch.randn(seq, batch, inp)
        path = os.path.join(a.work, name + ".onnx")
        export(model, x, path)
        x_path = os.path.join(a.work, name + ".x.npy")
        np.save(x_path, x.numpy())
        t_cuda, want = torch_ms(model, x, "cuda", a.repeat)
        t_cpu, _ = torch_ms(model, x, "cpu", max(10, a.repeat // 10))
        row = {"name": name, "shape": f"seq {seq}, batch {batch}, {inp} -> {hid}"
               + (", bidirectional" if bi else ""), "torch_cuda": t_cuda, "torch_cpu": t_cpu}
        for dev in ("cuda", "cpu"):
            out_dir = os.path.join(a.work, f"{name}_{dev}")
            ms, placement = lumen_ms(a.lumen, path, x_path, dev, a.repeat if dev == "cuda"
                                     else max(10, a.repeat // 10), a.threads, out_dir)
            got = np.load(os.path.join(out_dir, "y.npy"))
            row[dev] = ms
            row[dev + "_diff"] = float(np.abs(got - want).max())
            row[dev + "_placement"] = placement
        rows.append(row)
        print(row, flush=True)
    lines = [f"## RNN: LSTM and GRU (`bench/rnn_bench.py`)\n",
             f"{gpu}; {a.threads} CPU threads; float32, host input to host output, median of "
             f"{a.repeat} runs (CPU: {max(10, a.repeat // 10)}); PyTorch {torch.__version__} "
             "(cuDNN's RNNs on CUDA, with PyTorch's default TF32 there: `torch.backends.cudnn.allow_tf32`, which is why both of Lumen's float32 results differ from it by about 3e-4). Models exported by PyTorch (opset 17, random weights); "
             "max |diff| is Lumen's output against PyTorch's.\n",
             "| model | shape | Lumen CUDA ms | PyTorch CUDA ms | Lumen/PyTorch | Lumen CPU ms | "
             "PyTorch CPU ms | max abs diff CUDA / CPU |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['shape']} | {r['cuda']:.3f} | {r['torch_cuda']:.3f} | "
                     f"{r['cuda'] / r['torch_cuda']:.2f} | {r['cpu']:.3f} | {r['torch_cpu']:.3f} | "
                     f"{r['cuda_diff']:.1e} / {r['cpu_diff']:.1e} |")
    lines.append("\nPlacement on CUDA: " + "; ".join(f"{r['name']}: {r['cuda_placement']}"
                                                   for r in rows))
    write_section("rnn", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
