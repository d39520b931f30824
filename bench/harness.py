#!/usr/bin/python3
"""Lumen's benchmark harness: every zoo model on Lumen, ONNX Runtime CPU and PyTorch (eager and
TorchScript-frozen), interleaved, same inputs, each in a fresh process per round.

    bench/harness.py [--zoo build/model_zoo] [--models a,b] [--rounds 3] [--repeat 20]
                     [--min-time-ms 500] [--runtimes lumen,ort,eager,frozen]
                     [--lumen build/lumen] [--label run1] [--threads 2] [--ort node|python]

Per model and runtime it records the median and p90 latency (each process warms up with one run,
then times the model's run count; the harness takes the median over rounds of each), the load+compile
time, the peak resident memory of the process (ru_maxrss from os.wait4), and for Lumen the GFLOP/s
of its median run (FLOPs of convolutions and matrix products from `lumen inspect`) against the
cores' measured float32 FMA peak (build/lumen_fma_peak). In the first round every runtime writes
its output on the zoo's fixed input, and the harness checks each against PyTorch's reference output
saved at export (max |out - ref| <= 1e-4 * max |ref|, the zoo tests' tolerance).

Writes bench/results/harness[-LABEL].csv, the "harness" section of docs/benchmarks.md (or
"harness-LABEL") and docs/harness[-LABEL].png, a bar chart of each runtime's latency over ONNX
Runtime's. Threads: --threads intra-op threads for every runtime (default 2, this machine's cores).

Run count: every runtime runs a model the same number of times per process, at least --repeat and
enough for about --min-time-ms of runs at the latency Lumen showed in a short calibration run
before the rounds. A model of a few milliseconds timed 20 times is measured over 0.1 s, and a
burst of load from elsewhere on this shared machine that long moved a whole process's median (single
rounds of squeezenet1_1 ranged 4.4-7.8 ms); over a second of runs it moves a few of them.
ONNX Runtime: `cd bench/ort && npm install --ignore-scripts` (onnxruntime-node 1.30), or with
--ort python the Python package (bench/ort_runner.py; the GPU machine's Python has it). The Python
runners (ORT, PyTorch) run under the interpreter that runs the harness.
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from bench_doc import ROOT, write_section

ORT_JS = os.path.join(ROOT, "bench", "ort", "session.js")
ORT_PY = os.path.join(ROOT, "bench", "ort_runner.py")
TORCH_RUNNER = os.path.join(ROOT, "bench", "torch_runner.py")
RUNTIMES = ("lumen", "ort", "eager", "frozen")
# "lumen-onednn" (not run by default): Lumen with `--cpu-kernels onednn`, every node that oneDNN can
# run on oneDNN, beside Lumen's measured choice (lumen/cpu_isa.h; the same at AVX2 and below).
LABELS = {"lumen": "Lumen", "ort": "ONNX Runtime", "eager": "PyTorch eager",
          "frozen": "TorchScript frozen", "lumen-onednn": "Lumen, oneDNN kernels only"}
RTOL = 1e-4


# Starts the command from a small Python process with posix_spawn and prints its peak RSS. A child
# forked straight from the harness would report the harness's own resident memory as its peak
# (Linux keeps the pre-exec high-water mark in ru_maxrss), and the harness grows to hundreds of MB
# holding models' outputs.
RSS_WRAPPER = """
import os, sys
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
sys.stdout.flush()
print("\\n__peak_rss_kb__ %d" % usage.ru_maxrss, flush=True)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_child(cmd, env=None):
    """Runs cmd in a fresh process; returns (stdout+stderr, peak RSS MB); raises on failure."""
    proc = subprocess.Popen(["/usr/bin/python3", "-c", RSS_WRAPPER] + cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    out = proc.stdout.read()
    code = proc.wait()
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{out[-1500:]}")
    m = re.search(r"__peak_rss_kb__ (\d+)\s*$", out)
    return out[:m.start()].rstrip() + "\n", int(m.group(1)) / 1024.0


def model_info(lumen, zoo, name):
    """(first input's name, input shape, FLOPs) from `lumen inspect` at the zoo input's shape."""
    model = os.path.join(zoo, name + ".onnx")
    shape = np.load(os.path.join(zoo, name + ".input.npy"), mmap_mode="r").shape
    out = subprocess.run([lumen, "inspect", model], check=True, capture_output=True,
                         text=True).stdout
    inp = re.search(r"^input\s+(\S+):", out, re.M).group(1)
    out = subprocess.run([lumen, "inspect", model, "--shape",
                          f"{inp}={'x'.join(map(str, shape))}"], check=True, capture_output=True,
                         text=True).stdout
    flops = int(re.search(r"^flops\s+(\d+)", out, re.M).group(1))
    return inp, shape, flops


def warm_file_cache(*paths):
    """Reads the files through once, so that no runtime's load time includes disk reads: this
    machine's page cache keeps only part of the zoo (fincore showed 318 of bert_base's 415 MB
    resident), and whichever runtime ran first on a model paid to read the rest back."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass


def calibrated_repeat(args, name, info):
    """Runs per process for `name`: at least --repeat, and about --min-time-ms of runs at the
    latency of a short Lumen run (or --repeat alone when Lumen is not measured)."""
    if "lumen" not in args.runtimes.split(",") or args.min_time_ms <= 0:
        return args.repeat
    model = os.path.join(args.zoo, name + ".onnx")
    inp_file = os.path.join(args.zoo, name + ".input.npy")
    warm_file_cache(model, inp_file)
    out = subprocess.run(lumen_cmd(args) + ["run", model, "--repeat", "5", "--input",
                          f"{info[0]}={inp_file}"], check=True, capture_output=True,
                         text=True).stdout
    ms = float(re.search(r"latency: median ([0-9.]+) ms", out).group(1))
    return max(args.repeat, math.ceil(args.min_time_ms / max(ms, 1e-3)))


# The CPU kernel levels Lumen's runs reported ("... CPU threads, avx2 kernels)").
LUMEN_KERNELS = set()


def lumen_cmd(args):
    """The lumen command line, with --cpu-isa where one is given."""
    return [args.lumen] + (["--cpu-isa", args.cpu_isa] if args.cpu_isa else [])


def run_once(runtime, args, name, info, out_file, repeat):
    """One fresh process of `runtime` on model `name`, timing `repeat` runs: a dict of
    create/median/p90/rss."""
    zoo = args.zoo
    model = os.path.join(zoo, name + ".onnx")
    inp_file = os.path.join(zoo, name + ".input.npy")
    warm_file_cache(model, inp_file)
    inp_name = info[0]
    if runtime in ("lumen", "lumen-onednn"):
        variant = ["--cpu-kernels", "onednn"] if runtime == "lumen-onednn" else []
        cmd = lumen_cmd(args) + variant + ["run", model, "--repeat", str(repeat), "--input",
                                 f"{inp_name}={inp_file}"]
        tmp = None
        if out_file:
            tmp = tempfile.mkdtemp()
            cmd += ["--output-dir", tmp]
        out, rss = run_child(cmd + ["--threads", str(args.threads)])
        if tmp:
            got = [f for f in os.listdir(tmp) if f.endswith(".npy")]
            os.replace(os.path.join(tmp, sorted(got)[0]), out_file)
            os.rmdir(tmp)
        m = re.search(r"latency: median ([0-9.]+) ms .*p90 ([0-9.]+) ms", out)
        create = float(re.search(r"loaded and compiled in ([0-9.]+) ms", out).group(1))
        LUMEN_KERNELS.update(re.findall(r", (\w+) kernels\)", out))
        return {"create": create, "median": float(m.group(1)), "p90": float(m.group(2)),
                "rss": rss}
    if runtime == "ort":
        runner = ["node", ORT_JS] if args.ort == "node" else [sys.executable, ORT_PY]
        cmd = runner + [model, "--threads", str(args.threads), "--repeat", str(repeat), "--input",
                        f"{inp_name}={inp_file}"]
        if out_file:
            cmd += ["--output", out_file]
    else:
        cmd = [sys.executable, TORCH_RUNNER, name, "--zoo", zoo, "--mode", runtime,
               "--threads", str(args.threads), "--repeat", str(repeat)]
        if out_file:
            cmd += ["--out", out_file]
    out, rss = run_child(cmd)
    r = json.loads(out.strip().splitlines()[-1])
    return {"create": r["create_ms"], "median": r["median_ms"], "p90": r["p90_ms"], "rss": rss}


def agreement(zoo, name, out_file):
    """max|out - ref| / max|ref| against PyTorch's output saved at export."""
    ref = np.load(os.path.join(zoo, name + ".expected.npy")).astype(np.float64)
    got = np.load(out_file).astype(np.float64)
    if got.shape != ref.shape:
        return float("inf")
    return float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-30))


def fma_peak(path):
    if not os.path.exists(path):
        return float("nan"), "not measured: no " + os.path.basename(path)
    out = subprocess.run([path], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"([0-9.]+) GFLOP/s", out).group(1)), out.strip()


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def write_chart(rows, runtimes, path):
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["model"] for r in rows]
    others = [rt for rt in runtimes if rt != "ort"]
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(names)), 4.5))
    width = 0.8 / max(1, len(others))
    for k, rt in enumerate(others):
        ratios = [r.get(f"{rt}_median", float("nan")) / r.get("ort_median", float("nan"))
                  for r in rows]
        ax.bar([i + k * width for i in range(len(names))], ratios, width, label=LABELS[rt])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(others) - 1) / 2 for i in range(len(names))])
    ax.set_xticklabels(names, rotation=45, ha="right")
    ax.set_ylabel("median latency / ONNX Runtime's (lower is faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zoo", default=os.path.join(ROOT, "build", "model_zoo"))
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--peak", default=os.path.join(ROOT, "build", "lumen_fma_peak"))
    ap.add_argument("--models", default="")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--min-time-ms", type=float, default=500.0)
    ap.add_argument("--label", default="")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cpu-isa", default="",
                    help="run Lumen's CPU kernels at no more than this level (baseline, avx2)")
    have_node = os.path.isdir(os.path.join(ROOT, "bench", "ort", "node_modules"))
    ap.add_argument("--ort", choices=("node", "python"), default="node" if have_node else "python")
    args = ap.parse_args()
    runtimes = [r for r in args.runtimes.split(",") if r]
    names = [m for m in args.models.split(",") if m] or sorted(
        f[:-5] for f in os.listdir(args.zoo) if f.endswith(".onnx"))
    peak, peak_text = fma_peak(args.peak)
    infos = {n: model_info(args.lumen, args.zoo, n) for n in names}
    repeats = {n: calibrated_repeat(args, n, infos[n]) for n in names}
    print("runs per process: " + ", ".join(f"{n} {repeats[n]}" for n in names), flush=True)
    samples = {(n, rt): [] for n in names for rt in runtimes}
    errors = {}
    check = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            for name in names:
                # Interleaved, so every runtime sees the same machine load; the order reverses
                # every other round, so no runtime always runs first (or last) on a model.
                for rt in runtimes if rnd % 2 == 0 else runtimes[::-1]:
                    if (name, rt) in errors:
                        continue
                    out_file = os.path.join(tmp, f"{name}.{rt}.npy") if rnd == 0 else None
                    try:
                        samples[(name, rt)].append(
                            run_once(rt, args, name, infos[name], out_file, repeats[name]))
                    except (RuntimeError, KeyError, ValueError, AttributeError) as e:
                        errors[(name, rt)] = str(e).strip().splitlines()[-1][:160]
                        print(f"{name} {rt}: FAILED {errors[(name, rt)]}", flush=True)
                        continue
                    if out_file:
                        check[(name, rt)] = agreement(args.zoo, name, out_file)
                    s = samples[(name, rt)][-1]
                    print(f"round {rnd + 1} {name:20s} {rt:7s} median {s['median']:8.2f} ms "
                          f"p90 {s['p90']:8.2f} create {s['create']:7.0f} ms rss "
                          f"{s['rss']:6.0f} MB", flush=True)
    rows = []
    for name in names:
        row = {"model": name, "gflop": infos[name][2] / 1e9, "runs": repeats[name]}
        for rt in runtimes:
            got = samples[(name, rt)]
            if not got:
                continue
            for k in ("median", "p90", "create", "rss"):
                row[f"{rt}_{k}"] = statistics.median(s[k] for s in got)
            row[f"{rt}_error"] = check.get((name, rt), float("nan"))
        if "lumen_median" in row:
            row["lumen_gflops"] = row["gflop"] / (row["lumen_median"] / 1e3)
        rows.append(row)
    suffix = f"-{args.label}" if args.label else ""
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    csv_path = os.path.join(ROOT, "bench", "results", f"harness{suffix}.csv")
    fields = sorted({k for r in rows for k in r}, key=lambda k: (k != "model", k))
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    png = os.path.join(ROOT, "docs", f"harness{suffix}.png")
    chart = (f"chart: docs/harness{suffix}.png" if write_chart(rows, runtimes, png)
             else "no chart (matplotlib is missing)")

    def cell(row, rt, k, fmt):
        v = row.get(f"{rt}_{k}")
        return fmt.format(v) if v is not None and math.isfinite(v) else "-"

    onednn_only = "lumen-onednn" in runtimes
    lines = [
        f"### Every zoo model on Lumen, ONNX Runtime and PyTorch{' (' + args.label + ')' if args.label else ''}",
        "",
        f"Measured by `bench/harness.py --rounds {args.rounds} --repeat {args.repeat} "
        f"--min-time-ms {args.min_time_ms:g}"
        f"{' --label ' + args.label if args.label else ''}"
        f"{' --cpu-isa ' + args.cpu_isa if args.cpu_isa else ''}` on {os.cpu_count()} cores, every "
        f"runtime with {args.threads} intra-op threads, interleaved (the order reversed every other round), a "
        f"fresh process per runtime, model and round, the model file read through first (so no "
        f"runtime's load time includes disk reads); latency is the median over rounds of each "
        f"process's median (p90 likewise) of its runs after one warm-up run: per model every "
        f"runtime runs the same number of times ('runs'), at least {args.repeat} and about "
        f"{args.min_time_ms:g} ms of runs at the latency of a short Lumen calibration run. ONNX "
        f"Runtime {ort_version(args.ort)} CPU ({'onnxruntime-node' if args.ort == 'node' else 'Python'}, "
        f"all graph optimizations); PyTorch {torch_version()} eager (inference_mode) and TorchScript "
        f"(trace + freeze + optimize_for_inference). Lumen's GFLOP/s counts convolutions and "
        f"matrix products; the cores' measured FMA peak is {peak:.0f} GFLOP/s ({peak_text}). "
        f"CPU: {cpu_name()}; Lumen's own kernels at level "
        f"{', '.join(sorted(LUMEN_KERNELS)) or '?'} (lumen/cpu_isa.h). "
        f"Every output is checked against PyTorch's reference (max|out-ref| <= 1e-4 max|ref|); "
        f"'agree' lists the runtimes that passed. CSV: bench/results/harness{suffix}.csv; {chart}.",
        "",
        "| model | GFLOP | runs | Lumen ms (p90) | ORT ms (p90) | eager ms | frozen ms | Lumen/ORT | "
        "Lumen GFLOP/s (% peak) | load+compile ms Lumen / ORT | peak RSS MB Lumen / ORT | agree |"
        + (" Lumen oneDNN-only ms | Lumen / oneDNN-only |" if onednn_only else ""),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
        + (" ---: | ---: |" if onednn_only else ""),
    ]
    ratios = []
    for r in rows:
        ratio = r.get("lumen_median", float("nan")) / r.get("ort_median", float("nan"))
        ratios.append(ratio)
        agree = ",".join(rt for rt in runtimes if r.get(f"{rt}_error", float("inf")) <= RTOL)
        gf = r.get("lumen_gflops")
        lines.append(
            f"| {r['model']} | {r['gflop']:.2f} | {r['runs']} | {cell(r, 'lumen', 'median', '{:.2f}')} "
            f"({cell(r, 'lumen', 'p90', '{:.2f}')}) | {cell(r, 'ort', 'median', '{:.2f}')} "
            f"({cell(r, 'ort', 'p90', '{:.2f}')}) | {cell(r, 'eager', 'median', '{:.2f}')} | "
            f"{cell(r, 'frozen', 'median', '{:.2f}')} | {ratio:.2f} | "
            f"{(f'{gf:.0f}' + (f' ({100 * gf / peak:.0f}%)' if math.isfinite(peak) else '')) if gf else '-'} | "
            f"{cell(r, 'lumen', 'create', '{:.0f}')} / {cell(r, 'ort', 'create', '{:.0f}')} | "
            f"{cell(r, 'lumen', 'rss', '{:.0f}')} / {cell(r, 'ort', 'rss', '{:.0f}')} | "
            f"{agree or 'none'} |"
            + (f" {cell(r, 'lumen-onednn', 'median', '{:.2f}')} | "
               f"{r.get('lumen_median', math.nan) / r.get('lumen-onednn_median', math.nan):.3f} |"
               if onednn_only else ""))
    g = geomean(ratios)
    faster = sum(1 for x in ratios if x < 1)
    lines += ["", f"Geometric mean of Lumen/ORT: {g:.3f}; Lumen faster on {faster} of "
              f"{len(ratios)} models."]
    if onednn_only:
        own = [r.get("lumen_median", math.nan) / r.get("lumen-onednn_median", math.nan)
               for r in rows]
        only = [r.get("lumen-onednn_median", math.nan) / r.get("ort_median", math.nan)
                for r in rows]
        lines.append(f"Lumen with oneDNN's kernels only (`--cpu-kernels onednn`): Lumen/ORT "
                     f"{geomean(only):.3f}; Lumen (measured choice) / oneDNN-only "
                     f"{geomean(own):.3f}.")
    for (name, rt), e in sorted(errors.items()):
        lines.append(f"- {name} on {LABELS[rt]} failed: {e}")
    write_section(f"harness{suffix}", "\n".join(lines))
    print("\n".join(lines[-len(rows) - 4:]))
    print(f"wrote {csv_path}, {chart} and docs/benchmarks.md")


def torch_version():
    out = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def ort_version(kind):
    if kind == "node":
        return "1.30"
    out = subprocess.run([sys.executable, "-c", "import onnxruntime; print(onnxruntime.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def cpu_name():
    with open("/proc/cpuinfo") as f:
        text = f.read()
    m = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
    isa = "AVX-512" if " avx512f" in text else "AVX2" if " avx2" in text else "no AVX2"
    if " amx_tile" in text:
        isa += " + AMX"
    return f"{m.group(1).strip() if m else '?'} ({isa})"


if __name__ == "__main__":
    sys.exit(main())
