#!/usr/bin/env python3
"""The router on a GPU machine, run by bench/router.sh (issue 31): for each model at batch 1 and
32, at each CPU thread count (OMP_NUM_THREADS, 2 and 16 by default), on random inputs:
`lumen tune` (calibration time, cache filled; a cache per thread count), `lumen plan --measure`
(the plan auto runs, checked against the single-device plans by running them, which also times
their host kernels inside runs), then `lumen run` with --device cpu, cuda,cpu and auto and
`lumen plan --device auto --measure` interleaved in rounds (median of the rounds' medians), so
auto is compared side by side with the better of cpu and cuda,cpu, and plan --measure with the
auto run; the auto run reports its plan and its predicted time.

    python3 bench/router_bench.py LUMEN_BIN WORK_DIR [--models wide_deep_small,mlp20|all]
        [--rounds 2] [--row-seconds 0] [--max-rounds 5] [--cpu-repeat 5] [--batches 1,32]
        [--threads 2,16] [--max-seconds 380]
    python3 bench/router_bench.py --merge OUT_DIR FILE[=BUILD]...  # one table from several runs

Models: the zoo's (tests/models/export_zoo.py, exported with PyTorch) and bench/router_models.py's
(built with onnx.helper: wide_deep_small, issue 31's wide-and-deep model, and pooled_mlp and
two_tower, shapes where a mixed plan may beat both devices). No new configuration starts after
--max-seconds; the table so far is written after every row. Prints the table and writes it to
WORK_DIR/router_section.md (the `router` section of docs/benchmarks.md; bench/bench_doc.py puts
it there) and its rows to WORK_DIR/router_rows.json.

--merge reads rows from router_rows.json files and from router sections (.md, as written here:
the table read back), later files replacing earlier rows of the same model, input and threads;
`=BUILD` labels a file's rows with the build (commit) that measured them, shown in a column.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

REPEAT = 50
CPU_LARGE_REPEAT = 5
DEFAULT_MODELS = ("wide_deep_small,pooled_mlp,two_tower,wide_deep,mlp20,resnet18,mobilenet_v2,"
                  "bert_tiny")
COLUMNS = ["model", "input", "threads", "cpu", "cuda", "auto", "ratio", "plan", "placement",
           "predicted", "plan_measured", "calibration"]


def lumen(binary, args, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=600, env=env)
    text = p.stdout + p.stderr
    if p.returncode != 0:
        raise RuntimeError(f"lumen {' '.join(args)} failed:\n{text}")
    return text


def method_text(rounds, cpu_repeat):
    """How a run's rows were measured, as the section's header says it."""
    return (f"median over {rounds} interleaved rounds of each run's median of {REPEAT} runs "
            f"({cpu_repeat} on the CPU above batch 1)")


def write_section(rows, gpu, method, work):
    """The markdown section for `rows` (dicts of COLUMNS), printed and written to work."""
    def f(x, spec=None):
        # Times below 1 ms to four decimals (`lumen run` prints them so): a 20 us plan read to
        # 0.5%, so the auto / best column is not a ratio of rounded times.
        if spec is None:
            spec = ".4f" if x is not None and x < 1 else ".3f"
        return "-" if x is None else format(x, spec)
    builds = any(r.get("build") for r in rows)
    head = ("| model | input | threads | cpu ms | cuda,cpu ms | auto ms | auto / best | auto plan "
            "| auto placement | predicted ms | pred / run | plan --measure ms | plan / run | "
            "calibration s |" + (" build |" if builds else "") + "\n" +
            "| --- " * (15 if builds else 14) + "|\n")
    body = ""
    for r in rows:
        a = r.get("auto")
        pr = r.get("predicted")
        pm = r.get("plan_measured")
        body += (f"| {r['model']} | {r['input']} | {r['threads']} | {f(r.get('cpu'))} | "
                 f"{f(r.get('cuda'))} | {f(a)} | {f(r.get('ratio'), '.2f')} | "
                 f"{r.get('plan', '-')} | {r.get('placement', '-')} | {f(pr)} | "
                 f"{f(pr / a if pr and a else None, '.2f')} | {f(pm)} | "
                 f"{f(pm / a if pm and a else None, '.2f')} | {f(r.get('calibration'), '.1f')} |" +
                 (f" {r.get('build', '-')} |" if builds else "") + "\n")
    ok = [r for r in rows if r.get("ratio") is not None]
    summary = ""
    if ok:
        worst = max(ok, key=lambda r: r["ratio"])
        # A win is the router's own mixed plan: a single-device plan faster than the same plan's
        # column is a second measurement of that plan.
        wins = [f"{r['model']} {r['input']} ({r['threads']} threads)" for r in ok
                if r["ratio"] < 0.95 and r.get("plan") == "auto"]
        pred = [abs(r["predicted"] - r["auto"]) / r["auto"] for r in ok if r.get("predicted")]
        plan = [abs(r["plan_measured"] - r["auto"]) / r["auto"] for r in ok
                if r.get("plan_measured")]
        summary = (f"\nauto / best of cpu and cuda,cpu: worst {worst['ratio']:.2f} "
                   f"({worst['model']} {worst['input']}, {worst['threads']} threads); rows above "
                   f"1.05: {sum(r['ratio'] > 1.05 for r in ok)} of {len(ok)}; auto's mixed plan faster "
                   f"than both by more than 5% on: {', '.join(wins) or 'none'}.\n")
        if pred:
            summary += (f"|predicted - run| / run: largest {100 * max(pred):.0f}%, rows above 20%: "
                        f"{sum(e > 0.2 for e in pred)} of {len(pred)}. ")
        if plan:
            summary += (f"|plan --measure - run| / run: largest {100 * max(plan):.0f}%, rows "
                        f"above 10%: {sum(e > 0.1 for e in plan)} of {len(plan)}.\n")
    text = (f"## router: device auto vs cpu and cuda,cpu ({gpu})\n\n"
            f"float32; {method} (`lumen run --device cpu | "
            f"cuda,cpu | auto --shape ...`, random inputs, OMP_NUM_THREADS as in the threads "
            f"column), each host input -> output on the host. Auto plan: the plan `lumen run "
            f"--device auto` ran (auto: the router's placement; cpu or cuda,cpu: a single-device "
            f"plan that measured faster, or predicted far faster, than it); predicted: its "
            f"prediction; plan --measure: `lumen plan --device auto --measure` (median of "
            f"{REPEAT}, the same timer, in each round beside the runs). Calibration: `lumen tune` "
            f"with an empty cache, then the first `lumen plan --measure`, which runs the plans "
            f"against each other and times their host kernels inside runs. Made by "
            f"`bash bench/router.sh run` on the GPU machine." +
            (" Rows of several runs (`router_bench.py --merge`): the build column names the "
             "commit each was measured with." if builds else "") + "\n\n" + head + body + summary)
    print(text)
    with open(os.path.join(work, "router_section.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(work, "router_rows.json"), "w") as fh:
        json.dump({"gpu": gpu, "method": method, "rows": rows}, fh)


def rows_of_section(path):
    """The rows of a router section written by write_section (its table read back, with the build
    column where it has one)."""
    keys = ["model", "input", "threads", "cpu", "cuda", "auto", "ratio", "plan", "placement",
            "predicted", None, "plan_measured", None, "calibration"]
    rows = []
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if (len(cells) not in (len(keys), len(keys) + 1) or not line.startswith("| ")
                or cells[0] in ("model", "---")):
            continue
        row = {}
        for key, cell in zip(keys + ["build"], cells):
            if key is None or cell == "-":
                continue
            row[key] = (int(cell) if key == "threads" else cell if key in
                        ("model", "input", "plan", "placement", "build") else float(cell))
        rows.append(row)
    return rows


def merge(out, files):
    """One section from several runs' rows (FILE[=BUILD]), later rows replacing earlier ones."""
    merged, gpu, methods = {}, None, {}
    for spec in files:
        path, _, build = spec.partition("=")
        if path.endswith(".md"):
            rows = rows_of_section(path)
            text = open(path).read()
            m = re.search(r"cuda,cpu \((.*)\)", text)
            gpu = gpu or (m.group(1) if m else None)
            m = re.search(r"float32; (.*?) \(`lumen run", text)
            label = build or ", ".join(dict.fromkeys(r["build"] for r in rows if r.get("build")))
            methods.setdefault(m.group(1) if m else method_text(2, CPU_LARGE_REPEAT),
                               []).append(label)
        else:
            run = json.load(open(path))
            rows, gpu = run["rows"], gpu or run["gpu"]
            methods.setdefault(run.get("method", method_text(run.get("rounds"), CPU_LARGE_REPEAT)),
                               []).append(build)
        for r in rows:
            if build:
                r["build"] = build
            merged[(r["model"], r["input"], r["threads"])] = r
    # One method per distinct way of measuring, with the builds measured that way.
    method = "; ".join(m + (f" ({', '.join(dict.fromkeys(b for b in builds if b))})"
                            if any(builds) else "") for m, builds in methods.items())
    write_section(list(merged.values()), gpu or "no GPU found",
                  method or method_text(2, CPU_LARGE_REPEAT), out)


def number(pattern, text):
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else None


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--merge":
        merge(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("lumen")
    ap.add_argument("work")
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--threads", default="2,16")
    ap.add_argument("--max-seconds", type=float, default=380)
    ap.add_argument("--row-seconds", type=float, default=0,
                    help="more rounds than --rounds while a row's rounds have taken less")
    ap.add_argument("--max-rounds", type=int, default=5)
    ap.add_argument("--cpu-repeat", type=int, default=CPU_LARGE_REPEAT,
                    help="runs per `lumen run --device cpu` above batch 1")
    ap.add_argument("--gpu-device", default="cuda,cpu",
                    help="the device list of the GPU column (cpu: a dry run without a GPU)")
    args = ap.parse_args()
    start = time.time()
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "models"))
    import export_zoo  # the model list only: torch is imported by the export's own process
    import router_models
    names = (sorted(export_zoo.MODELS) + list(router_models.MODELS) if args.models == "all"
             else args.models.split(","))
    zoo = os.path.join(args.work, "zoo")
    os.makedirs(zoo, exist_ok=True)
    zoo_names = [n for n in names if n in export_zoo.MODELS]
    # The export runs in a process of its own: PyTorch's thread pool, left in this one, took the
    # CPU from Lumen's calibration and runs (the cpu column of wide_deep at batch 32 read 24.8 ms
    # against 2.6 ms alone).
    if zoo_names:
        subprocess.run([sys.executable, "-c", "import sys, gpu_bench; "
                        "gpu_bench.export_models(sys.argv[2].split(','), sys.argv[1])", zoo,
                        ",".join(zoo_names)], cwd=HERE, check=True)
    router_models.export([n for n in names if n in router_models.MODELS], zoo)
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        gpu = "no GPU found"
    batches = [int(b) for b in args.batches.split(",")]
    method = method_text(f"{args.rounds} to {args.max_rounds} (more while a row's rounds had "
                         f"taken under {args.row_seconds:g} s)" if args.row_seconds > 0
                         else args.rounds, args.cpu_repeat)
    rows = []
    for name in names:
        model = os.path.join(zoo, name + ".onnx")
        for batch in batches:
            for threads in [int(t) for t in args.threads.split(",")]:
                # A cache per thread count: its measurements hold for that many threads only.
                os.environ["XDG_CACHE_HOME"] = os.path.join(args.work, f"cache{threads}")
                if name in export_zoo.MODELS:
                    _, input_name, zoo_shape, _ = export_zoo.MODELS[name]
                    b = max(batch, zoo_shape[0]) if batch > 1 else 1
                    shapes = [f"{input_name}=" + "x".join(map(str, (b,) + tuple(zoo_shape[1:])))]
                else:
                    shapes = router_models.shapes(name, batch)
                shape = ",".join(s.split("=")[1] for s in shapes)
                row = {"model": name, "input": shape, "threads": threads}
                if time.time() - start > args.max_seconds:
                    print(f"{name} {shape} {threads} threads: skipped (--max-seconds)", flush=True)
                    continue
                given = [a for s in shapes for a in ("--shape", s)]
                try:
                    tune = lumen(args.lumen, ["tune", model, *given], threads)
                    row["calibration"] = number(r"measured, .* in ([0-9.]+) s", tune)
                    plan_args = ["plan", model, "--device", "auto", "--measure", "--runs",
                                 str(REPEAT), *given]
                    # The first runs the plans against each other and learns their host kernels'
                    # times inside runs (tools/auto_plan.cc); the later ones measure the chosen
                    # plan in each round beside `lumen run`, so both are medians of rounds.
                    print(lumen(args.lumen, plan_args, threads), flush=True)
                    times = {d: [] for d in ("cpu", "cuda", "auto", "plan")}
                    # Separate processes running one plan differ by a few percent (clocks,
                    # memory placement), so a cheap row takes more rounds, decided by time spent
                    # alone, never by what the rounds measured.
                    row_start, done = time.time(), 0
                    while done < args.rounds or (done < args.max_rounds and
                                                 time.time() - row_start < args.row_seconds):
                        done += 1
                        for device in times:
                            if device == "plan":
                                out = lumen(args.lumen, plan_args, threads)
                                times[device].append(
                                    number(r"^measured: ([0-9.]+) ms per run", out))
                                continue
                            repeat = args.cpu_repeat if device == "cpu" and batch > 1 else REPEAT
                            listed = args.gpu_device if device == "cuda" else device
                            out = lumen(args.lumen, ["run", model, "--device", listed,
                                                     "--repeat", str(repeat), *given], threads)
                            times[device].append(number(r"latency: median ([0-9.]+) ms", out))
                            if device == "auto":
                                row["placement"] = re.search(r"^placement: (.*)$", out,
                                                             re.M).group(1)
                                row["plan"] = re.search(r"^auto: ran plan (\S+);", out,
                                                        re.M).group(1)
                                row["predicted"] = number(r"^auto: predicted ([0-9.]+) ms", out)
                    med = {d: statistics.median(v) for d, v in times.items()}
                    row["rounds"] = done
                    row.update(cpu=med["cpu"], cuda=med["cuda"], auto=med["auto"],
                               plan_measured=med["plan"],
                               ratio=med["auto"] / min(med["cpu"], med["cuda"]))
                except (RuntimeError, AttributeError, subprocess.TimeoutExpired) as e:
                    print(f"{name} {shape} {threads} threads: {e}", flush=True)
                    row["plan"] = "FAILED"
                rows.append(row)
                print(row, flush=True)
                write_section(rows, gpu, method, args.work)  # so far, should it be cut off
    print(f"router_bench: {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
