#!/usr/bin/env python3
"""The router on a GPU machine, run by bench/router.sh: for each zoo model at batch 1 and at a
large batch (--batch), on random inputs of that shape: `lumen tune` (the calibration time, cache
filled), `lumen plan --measure` (predicted vs measured run with device auto), then `lumen run` with
--device cpu, cuda and auto interleaved in rounds (median of the rounds' medians), so auto is
compared side by side with the better of cpu and cuda.

    python3 bench/router_bench.py LUMEN_BIN WORK_DIR [--models mlp20,resnet18|all] [--rounds 3]
        [--batch 32]
    python3 bench/router_bench.py --merge OUT_DIR ROWS.json...  # one table from several runs

Prints a table and writes it to WORK_DIR/router_section.md (the `router` section of
docs/benchmarks.md; bench/bench_doc.py puts it there) and its rows to WORK_DIR/router_rows.json.
On the CPU at the large batch each run is timed CPU_LARGE_REPEAT times instead of REPEAT (the CPU
is tens of times slower there; its median only has to show that cuda or auto is the better).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

REPEAT = 50
CPU_LARGE_REPEAT = 5


def lumen(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=900)
    text = p.stdout + p.stderr
    if p.returncode != 0:
        raise RuntimeError(f"lumen {' '.join(args)} failed:\n{text}")
    return text


def write_section(rows, gpu, rounds, work):
    """The markdown section for `rows`, printed and written to work/router_section.md."""
    def f(x, spec=".3f"):
        return "-" if x is None else format(x, spec)
    head = ("| model | input | cpu ms | cuda ms | auto ms | auto / best | auto placement | "
            "predicted ms | measured ms | calibration s |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    body = "".join(f"| {n} | {s} | {f(c)} | {g} | {f(a)} | {f(r, '.2f')} | {p} | {f(pr)} | "
                   f"{f(me)} | {f(cs, '.1f')} |\n"
                   for n, s, c, g, a, r, p, pr, me, cs in
                   [(r[0], r[1], r[2], f(r[3]), r[4], r[5], r[6], r[7], r[8], r[9])
                    for r in rows])
    ok = [r for r in rows if r[5] is not None]
    summary = ""
    if ok:
        worst = max(r[5] for r in ok)
        wins = [r[0] + " " + r[1] for r in ok if r[5] < 0.95]  # beyond run-to-run noise
        err = max(abs(r[7] - r[8]) / r[8] for r in ok)
        summary = (f"\nauto / best of cpu and cuda: worst {worst:.2f}; auto faster than both by "
                   f"more than 5% on: {', '.join(wins) or 'none'}; largest |predicted - measured| "
                   f"/ measured: {100 * err:.0f}%.\n")
        if all(" 0 on cpu" in r[6] for r in ok):
            summary += ("Every auto plan here is the cuda plan (all steps on cuda), so auto / best "
                        "differs from 1 by run-to-run noise only.\n")
    text = (f"## router: device auto vs cpu and cuda ({gpu})\n\n"
            f"float32; median over {rounds} interleaved rounds of each run's median of "
            f"{REPEAT} runs ({CPU_LARGE_REPEAT} on the CPU above batch 1) (`lumen run --device cpu | "
            f"cuda,cpu | auto --shape ...`, random inputs), "
            f"each host input -> output on the host; auto placement as `lumen run` reports it. "
            f"Predicted: the router's prediction for the auto plan; measured: "
            f"`lumen plan --measure` (median of {REPEAT}). Calibration: `lumen tune` with an empty "
            f"cache. Made by `bash bench/router.sh run` on the GPU machine.\n\n" + head + body +
            summary)
    print(text)
    with open(os.path.join(work, "router_section.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(work, "router_rows.json"), "w") as fh:
        json.dump({"gpu": gpu, "rounds": rounds, "rows": rows}, fh)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--merge":
        runs = [json.load(open(p)) for p in sys.argv[3:]]
        write_section([r for run in runs for r in run["rows"]], runs[0]["gpu"],
                      runs[0]["rounds"], sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("lumen")
    ap.add_argument("work")
    ap.add_argument("--models", default="mlp20,resnet18,mobilenet_v2,squeezenet1_1,bert_tiny,"
                                        "gpt_tiny")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "models"))
    import export_zoo  # the model list only: torch is imported by the export's own process
    names = sorted(export_zoo.MODELS) if args.models == "all" else args.models.split(",")
    zoo = os.path.join(args.work, "zoo")
    os.makedirs(zoo, exist_ok=True)
    # The export runs in a process of its own: PyTorch's thread pool, left in this one, took the
    # CPU from Lumen's calibration and runs (the cpu column of wide_deep at batch 32 read 24.8 ms
    # against 2.6 ms alone).
    subprocess.run([sys.executable, "-c", "import sys, gpu_bench; "
                    "gpu_bench.export_models(sys.argv[2].split(','), sys.argv[1])", zoo,
                    ",".join(names)], cwd=HERE, check=True)
    os.environ["XDG_CACHE_HOME"] = os.path.join(args.work, "cache")
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()[0]
    rows = []
    for name in names:
        _, input_name, zoo_shape, _ = export_zoo.MODELS[name]
        model = os.path.join(zoo, name + ".onnx")
        for batch in sorted({1, max(args.batch, zoo_shape[0])}):
            shape = "x".join(map(str, (batch,) + tuple(zoo_shape[1:])))
            given = ["--shape", f"{input_name}={shape}"]
            try:
                tune = lumen(args.lumen, "tune", model, *given)
                calib_s = float(re.search(r"measured, .* in ([0-9.]+) s", tune).group(1))
                plan = lumen(args.lumen, "plan", model, "--measure", "--runs", str(REPEAT), *given)
                print(plan, flush=True)
                m = re.search(r"measured: ([0-9.]+) ms per run .*predicted ([0-9.]+) ms", plan)
                measured, predicted = float(m.group(1)), float(m.group(2))
                times = {d: [] for d in ("cpu", "cuda", "auto")}
                placement = ""
                for _ in range(args.rounds):
                    for device in times:
                        repeat = CPU_LARGE_REPEAT if device == "cpu" and batch > 1 else REPEAT
                        out = lumen(args.lumen, "run", model, "--device",
                                    "cuda,cpu" if device == "cuda" else device,
                                    "--repeat", str(repeat), *given)
                        times[device].append(float(re.search(r"latency: median ([0-9.]+) ms",
                                                             out).group(1)))
                        if device == "auto":
                            placement = re.search(r"^placement: (.*)$", out, re.M).group(1)
                med = {d: statistics.median(v) for d, v in times.items()}
                best = min(med["cpu"], med["cuda"])
                rows.append((name, shape, med["cpu"], med["cuda"], med["auto"],
                             med["auto"] / best, placement, predicted, measured, calib_s))
                print(rows[-1], flush=True)
            except (RuntimeError, AttributeError, subprocess.TimeoutExpired) as e:
                print(f"{name} {shape}: {e}", flush=True)
                rows.append((name, shape, None, None, None, None, "FAILED", None, None, None))
            write_section(rows, gpu, args.rounds, args.work)  # so far, should the run be cut off


if __name__ == "__main__":
    main()
