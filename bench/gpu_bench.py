#!/usr/bin/env python3
"""GPU benchmark, run by bench/gpu.sh on a machine with an NVIDIA GPU, PyTorch (CUDA) and onnx:
exports the zoo models (tests/models/export_zoo.py's definitions and weights), runs each through
`lumen run --device cuda,cpu` (CUDA-graph replay after the first run), checks its output against
PyTorch's, and times Lumen next to PyTorch eager, PyTorch CUDA-graph replay and torch.compile
(inductor, default mode) at float32 with TF32 off, interleaved model by model in one run. Every
timed run goes host -> device -> host: the input is copied in and the output copied out, for all.
Each model runs at the zoo's batch; the --large models run again at batch 32 (a random input,
checked against PyTorch on the CPU).

    python3 bench/gpu_bench.py LUMEN_BIN WORK_DIR [--models mlp20,resnet50,...] [--large resnet50]
        [--no-compile]

Then every other zoo model (--check, default all of them) is only checked on CUDA: its output
against PyTorch's on the CPU, with the same tolerance as on the CPU (tests/models/check_zoo.py),
its latency and how many of its steps ran on CUDA.

Prints the tables and writes them as the `gpu` section of docs/benchmarks.md (bench/bench_doc.py)
and to WORK_DIR/gpu_section.md.
"""
import argparse
import functools
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, HERE)

REPEAT = 200


def export_models(names, outdir):
    import export_zoo
    # torch >= 2.9 exports through dynamo by default; the zoo is defined for the TorchScript
    # exporter. Opset 14, not the CPU machines' 13: newer PyTorch writes attention as
    # scaled_dot_product_attention, which that exporter lowers from opset 14 on.
    export_zoo.torch.onnx.export = functools.partial(torch.onnx.export, dynamo=False)
    export_zoo.OPSET = max(export_zoo.OPSET, 14)
    for name in names:
        export_zoo.export(name, outdir, False)
    return export_zoo


def torch_model(export_zoo, name):
    ctor, input_name, shape, dtype = export_zoo.MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    if dtype == "float32":
        export_zoo.calibrate_batchnorm(model, shape)
    return model


def time_host_to_host(fn, x_host):
    """Median ms of fn(x on the device) with the copies in and out."""
    for _ in range(10):
        fn(x_host.cuda()).cpu()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        fn(x_host.cuda(non_blocking=False)).cpu()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_torch(model, x_host, compile_too):
    """Median ms of eager, CUDA-graph replay and torch.compile (nan where it fails), each with
    the copies in and out; PyTorch's CUDA output."""
    model = model.cuda().eval()
    with torch.no_grad():
        eager = time_host_to_host(model, x_host)
        graph = [float("nan")]
        try:
            static_x = x_host.cuda()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(static_x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                static_y = model(static_x)
            graph = []
            for _ in range(REPEAT):
                t0 = time.perf_counter()
                static_x.copy_(x_host)
                g.replay()
                static_y.cpu()
                graph.append((time.perf_counter() - t0) * 1e3)
        except Exception as e:  # noqa: BLE001 - some models cannot be captured (host syncs)
            print(f"  CUDA-graph capture failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
            torch.cuda.synchronize()
        ref = model(x_host.cuda()).cpu().numpy()
        compiled = float("nan")
        if compile_too:
            try:
                t0 = time.perf_counter()
                fn = torch.compile(model)
                fn(x_host.cuda()).cpu()
                print(f"  torch.compile: {time.perf_counter() - t0:.1f} s", flush=True)
                compiled = time_host_to_host(fn, x_host)
            except Exception as e:  # noqa: BLE001 - report and go on without the column
                print(f"  torch.compile failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
    return eager, statistics.median(graph), compiled, ref


class Autocast(torch.nn.Module):
    """The model under torch.autocast(float16) (products and convolutions in float16, reductions
    and normalisations in float32), returning float32: PyTorch's float16 mode."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        with torch.autocast("cuda", dtype=torch.float16):
            return self.model(x).float()


# The reduced precisions every model also runs at (`lumen run --precision`), in table order.
REDUCED = ("tf32", "float16", "bfloat16")


def max_rel(out, expected):
    """max |out - expected| / max |expected|, in float64."""
    return float(np.abs(out.astype(np.float64) - expected).max()) / float(np.abs(expected).max())


def run_lumen(lumen, onnx_path, input_name, input_path, out_dir, repeat=REPEAT,
              precision="float32", device="cuda,cpu"):
    cmd = [lumen, "run", onnx_path, "--device", device, "--repeat", str(repeat), "--input",
           f"{input_name}={input_path}", "--output-dir", out_dir, "--precision", precision]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    text = p.stdout + p.stderr
    if p.returncode != 0:
        return None, None, text
    ms = float(re.search(r"latency: median ([0-9.]+) ms", text).group(1))
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy"))
    return ms, np.load(os.path.join(out_dir, files[0])), text


def check_zoo(args, export_zoo, zoo, names):
    """Checks each model on CUDA against PyTorch on the CPU; returns a markdown table."""
    rows = []
    for name in names:
        try:
            export_zoo.export(name, zoo, False)
        except Exception as e:  # noqa: BLE001 - a model this PyTorch cannot export
            rows.append(f"| {name} | export failed: {type(e).__name__} |" + " |" * 9 + "\n")
            continue
        _, input_name, _, _ = export_zoo.MODELS[name]
        expected = np.load(os.path.join(zoo, name + ".expected.npy"))
        out_dir = os.path.join(args.work, "check_" + name)
        os.makedirs(out_dir, exist_ok=True)
        lumen_ms, out, log = run_lumen(args.lumen, os.path.join(zoo, name + ".onnx"), input_name,
                                       os.path.join(zoo, name + ".input.npy"), out_dir, 50)
        print(name, flush=True)
        print(log, flush=True)
        placement = re.search(r"placement: (\d+) steps on cuda, (\d+) on cpu", log)
        steps = f"{placement.group(1)} of {int(placement.group(1)) + int(placement.group(2))}" \
            if placement else "-"
        if out is None:
            status, rel = "FAILED", "-"
        else:
            r = max_rel(out, expected)
            status, rel = ("ok" if r <= 1e-4 else "MISMATCH"), f"{r:.1e}"
        cells = [name, status, rel, steps, "-" if lumen_ms is None else f"{lumen_ms:.3f}"]
        for precision in REDUCED:
            p_ms, p_out, p_log = run_lumen(
                args.lumen, os.path.join(zoo, name + ".onnx"), input_name,
                os.path.join(zoo, name + ".input.npy"), out_dir, 50, precision)
            print(p_log, flush=True)
            cells.append("-" if p_ms is None else f"{p_ms:.3f}")
            cells.append("-" if p_out is None else f"{max_rel(p_out, expected):.1e}")
        rows.append("| " + " | ".join(cells) + " |\n")
        print("  row:", rows[-1].strip(), flush=True)
    if not rows:
        return ""
    return ("\nEvery other zoo model, checked on CUDA (`lumen run --device cuda,cpu`, median of 50 "
            "runs) against PyTorch on the CPU; ok: max relative difference within 1e-4, as on "
            "the CPU; the TF32 and float16 columns as above.\n\n| model | check | max rel | "
            "steps on CUDA | Lumen ms | Lumen TF32 ms | TF32 max rel | Lumen fp16 ms | "
            "fp16 max rel | Lumen bf16 ms | bf16 max rel |\n"
            "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n" +
            "".join(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lumen")
    ap.add_argument("work")
    ap.add_argument("--models", default="mlp20,resnet50,mobilenet_v2,bert_base,gpt2_small")
    ap.add_argument("--large", default="resnet50", help="models also run at batch 32")
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    ap.add_argument("--check", default="all",
                    help="zoo models only checked on CUDA ('all': every one not in --models)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = [n for n in args.models.split(",") if n]
    large = [n for n in args.large.split(",") if n]
    zoo = os.path.join(args.work, "zoo")
    os.makedirs(zoo, exist_ok=True)
    export_zoo = export_models(sorted(set(names + large)), zoo)
    check = [n for n in (sorted(export_zoo.MODELS) if args.check == "all" else
                         args.check.split(",")) if n and n not in names]
    gpu = torch.cuda.get_device_name(0)
    # Each large case right after its model at the zoo's batch.
    cases = []
    for n in names:
        cases.append((n, None))
        if n in large:
            cases.append((n, 32))
    cases += [(n, 32) for n in large if n not in names]
    rows = []
    for name, batch in cases:
        _, input_name, shape, _ = export_zoo.MODELS[name]
        onnx_path = os.path.join(zoo, name + ".onnx")
        input_path = os.path.join(zoo, name + ".input.npy")
        x = np.load(input_path)
        expected = np.load(os.path.join(zoo, name + ".expected.npy"))
        model = torch_model(export_zoo, name)
        if batch is not None:
            rng = np.random.default_rng(7)
            x = rng.standard_normal((batch,) + tuple(x.shape[1:])).astype(x.dtype)
            input_path = os.path.join(zoo, f"{name}.b{batch}.input.npy")
            np.save(input_path, x)
            with torch.no_grad():
                expected = model(torch.from_numpy(x)).numpy()
        label = name if batch is None else f"{name} (batch {batch})"
        out_dir = os.path.join(args.work, "out_" + label.replace(" ", "_").replace("(", "").replace(")", ""))
        os.makedirs(out_dir, exist_ok=True)
        lumen_ms, lumen_out, log = run_lumen(args.lumen, onnx_path, input_name, input_path, out_dir)
        print(label, flush=True)
        print(log, flush=True)
        reduced = {}  # precision -> (ms, max rel)
        for precision in REDUCED:
            p_ms, p_out, log = run_lumen(args.lumen, onnx_path, input_name, input_path, out_dir,
                                         precision=precision)
            print(log, flush=True)
            reduced[precision] = (p_ms, float("nan") if p_out is None else max_rel(p_out, expected))
        (tf32_ms, tf32_rel), (half_ms, half_rel), (bf_ms, bf_rel) = (reduced[p] for p in REDUCED)
        eager_ms, graph_ms, compile_ms, torch_cuda_out = time_torch(
            model, torch.from_numpy(x), not args.no_compile)
        # PyTorch's float16: autocast, eager and as a CUDA graph (the faster kept).
        ac_eager, ac_graph, _, ac_out = time_torch(Autocast(model), torch.from_numpy(x), False)
        ac_best = min(v for v in (ac_eager, ac_graph) if v == v)
        ac_rel = max_rel(ac_out, expected)
        rel_cuda_torch = max_rel(torch_cuda_out, expected)
        if lumen_out is None:
            rel, status = float("nan"), "FAILED"
        else:
            rel = max_rel(lumen_out, expected)
            status = "ok" if rel <= 1e-4 else "MISMATCH"
        best = min(v for v in (eager_ms, graph_ms, compile_ms) if v == v)
        rows.append((label, "x".join(map(str, x.shape)), status, rel, rel_cuda_torch, lumen_ms,
                     eager_ms, graph_ms, compile_ms, best, tf32_ms, tf32_rel, half_ms, half_rel,
                     ac_best, ac_rel, bf_ms, bf_rel))
        print("  row:", rows[-1], flush=True)
    head = ("| model | input | check | Lumen vs PyTorch CPU (max rel) | PyTorch CUDA vs CPU | "
            "Lumen CUDA graph ms | PyTorch eager ms | PyTorch CUDA graph ms | torch.compile ms | "
            "Lumen / PyTorch best | Lumen TF32 ms | TF32 max rel | Lumen fp16 ms | fp16 max rel | "
            "PyTorch autocast fp16 ms | autocast max rel | Lumen fp16 / autocast | Lumen bf16 ms | "
            "bf16 max rel |\n"
            "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: | ---: | ---: | ---: | ---: |\n")

    def ms(v):
        return "-" if v is None or v != v else f"{v:.3f}"

    body = "".join(
        f"| {n} | {s} | {st} | {r:.1e} | {rt:.1e} | {ms(lm)} | {ms(e)} | {ms(g)} | {ms(c)} | "
        f"{'-' if lm is None else f'{lm / b:.2f}'} | {ms(tm)} | {tr:.1e} | {ms(hm)} | {hr:.1e} | "
        f"{ms(am)} | {ar:.1e} | {'-' if hm is None else f'{hm / am:.2f}'} | {ms(bm)} | {br:.1e} |\n"
        for n, s, st, r, rt, lm, e, g, c, b, tm, tr, hm, hr, am, ar, bm, br in rows)
    text = (f"## GPU: Lumen CUDA backend vs PyTorch {torch.__version__} ({gpu})\n\n"
            f"float32, TF32 off in both (Lumen's float32 products of 192 rows or more run as "
            f"3xTF32 where measured faster: three TF32 tensor-core products of split operands, "
            f"src/backends/cuda/lt_matmul.h; the max rel columns show what that does); median of "
            f"{REPEAT} runs, each host input -> device -> "
            f"host output. Lumen: `lumen run --device cuda,cpu` (the Executable recorded once as "
            f"a CUDA graph and replayed). PyTorch: eager, CUDA-graph replay, and torch.compile "
            f"(inductor, default mode); 'PyTorch best' is the fastest of the three. Made by "
            f"`bash bench/gpu.sh` on the GPU machine (models exported there at opset 14). The "
            f"TF32 columns: Lumen compiled with `--precision tf32` (CUDA matmuls and convolutions "
            f"on TF32 tensor cores) and its max relative difference from PyTorch's float32 on "
            f"the CPU. The fp16 columns: Lumen compiled with `--precision float16` (values on "
            f"CUDA stored as float16, weights converted once, float32 math inside kernels; "
            f"float32 in and out) next to PyTorch under torch.autocast(float16), the faster of "
            f"eager and CUDA-graph replay, each with its max relative difference from float32 "
            f"on the CPU. The bf16 columns: Lumen with `--precision bfloat16`, the same way."
            + left_out(args, rows, check) + "\n\n" + head + body)
    text += check_zoo(args, export_zoo, zoo, check)
    print(text)
    with open(os.path.join(args.work, "gpu_section.md"), "w") as f:
        f.write(text)
    import bench_doc
    bench_doc.write_section("gpu", text)


def left_out(args, rows, check):
    """The sentences that say which of the runs above this one did not make."""
    out = ""
    if args.no_compile:
        out += (" torch.compile was not run (--no-compile): 'PyTorch best' is the faster of "
                "eager and CUDA-graph replay.")
    failed = [r[0] for r in rows if r[7] is None or r[7] != r[7]]
    if failed:
        out += (f" '-' under PyTorch CUDA graph: its capture failed ({', '.join(failed)}), so "
                f"'PyTorch best' is eager there.")
    if not check:
        out += " The other zoo models were not checked on CUDA in this run (--check '')."
    return out


if __name__ == "__main__":
    main()
