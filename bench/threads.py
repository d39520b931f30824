"""How Lumen's CPU runs scale with threads, step by step.

For each model, `lumen run --trace` at each thread count (`--repeat` profiled runs; the trace holds
every step's median time). A step "does not scale" when its time at the highest count is more than
half its time on one thread (a speedup below 2x): a serial phase. The table gives, per model and
thread count, the run's time (the sum of its steps' medians) and its speedup over one thread, and
at the highest count the share of the run spent in steps that do not scale, with the largest such
steps named. Written to docs/benchmarks.md (section threads-LABEL) and bench/results/.

  /usr/bin/python3 bench/threads.py --lumen build/lumen --zoo DIR --models resnet50,bert_base \
      --threads 1,2,8,16 --label xeon
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_doc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def step_medians(lumen, model, threads, repeat, cpu_isa):
    """{step name: median microseconds} of `repeat` profiled runs at `threads` threads."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        cmd = [lumen]
        if cpu_isa:
            cmd += ["--cpu-isa", cpu_isa]
        cmd += ["run", model, "--threads", str(threads), "--repeat", str(repeat), "--trace", trace]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(trace) as f:
            events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    steps, seen = {}, {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") == "run":
            continue
        # Steps keyed by node and op, numbered where a name repeats (copies between devices).
        key = f"{e['name']} ({e.get('cat', '')})"
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key += f" #{seen[key]}"
        steps[key] = float(e.get("args", {}).get("median_us", e.get("dur", 0.0)))
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--lumen", default=os.path.join(ROOT, "build", "lumen"))
    ap.add_argument("--zoo", required=True, help="folder of MODEL.onnx files")
    ap.add_argument("--models", required=True)
    ap.add_argument("--threads", default="1,2,8,16")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--cpu-isa", default="")
    ap.add_argument("--label", default="local")
    ap.add_argument("--top", type=int, default=3, help="steps named per model")
    args = ap.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    if counts[0] != 1:
        counts = [1] + counts
    high = counts[-1]
    rows, csv = [], ["model,threads,run_ms,speedup,serial_share_at_max"]
    for name in args.models.split(","):
        model = os.path.join(args.zoo, name + ".onnx")
        per = {t: step_medians(args.lumen, model, t, args.repeat, args.cpu_isa) for t in counts}
        total = {t: sum(per[t].values()) / 1000.0 for t in counts}
        base, top = per[1], per[high]
        serial = {s: top[s] for s in top if s in base and top[s] > 0.5 * base[s]}
        share = sum(serial.values()) / 1000.0 / total[high] if total[high] > 0 else 0.0
        worst = sorted(serial.items(), key=lambda kv: -kv[1])[:args.top]
        named = "; ".join(f"{s} {v / 1000.0:.3f} ms ({base[s] / max(v, 1e-9):.1f}x)"
                          for s, v in worst)
        cells = " | ".join(f"{total[t]:.2f} ({total[1] / total[t]:.1f}x)" for t in counts)
        rows.append(f"| {name} | {cells} | {100 * share:.1f}% | {named} |")
        for t in counts:
            csv.append(f"{name},{t},{total[t]:.4f},{total[1] / total[t]:.3f},{share:.4f}")
        print(rows[-1], flush=True)
    head = " | ".join(f"{t} thr ms (speedup)" for t in counts)
    isa = f", CPU kernels held to {args.cpu_isa}" if args.cpu_isa else ""
    text = "\n".join([
        f"### Thread scaling, {args.label}{isa}",
        "",
        f"`bench/threads.py --threads {args.threads} --repeat {args.repeat}`: per model, the sum "
        "of the steps' median times from `lumen run --trace` at each thread count, and the speedup "
        f"over one thread. Serial share: the part of the {high}-thread run spent in steps whose "
        f"time at {high} threads is more than half their one-thread time (speedup below 2x); "
        "the largest of them are named with their speedup.",
        "",
        f"| model | {head} | serial share at {high} | largest steps that do not scale |",
        "| --- | " + " | ".join("---:" for _ in counts) + " | ---: | --- |",
        *rows,
    ])
    bench_doc.write_section(f"threads-{args.label}", text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", f"threads-{args.label}.csv"), "w") as f:
        f.write("\n".join(csv) + "\n")


if __name__ == "__main__":
    main()
