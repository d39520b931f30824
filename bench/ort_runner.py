#!/usr/bin/python3
"""ONNX Runtime CPU through its Python package: the side of Lumen's benchmarks for machines where
onnxruntime-node is not installed (the GPU machine's Python has onnxruntime). Same protocol as
bench/ort/session.js:

    bench/ort_runner.py MODEL.onnx [--threads 2] [--repeat N] [--input NAME=FILE.npy]
                        [--output FILE.npy] [--lengths A,B,...]

Creates a session (all graph optimizations, N intra-op threads, one inter-op thread, sequential),
feeds the given .npy inputs or random ones of the declared shape (symbolic dims 1), runs once,
writes the first output to --output, times N runs and prints one JSON line:
{"create_ms": ..., "first_run_ms": ..., "median_ms": ..., "p90_ms": ...}.
"""
import argparse
import json
import time

import numpy as np
import onnxruntime as ort

DTYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
          "tensor(bool)": np.bool_}


def run_lengths(session, lengths, repeat, create_ms):
    """Each length in turn: a first run, then `repeat` timed runs; one JSON line as lengths.js."""
    name = session.get_inputs()[0].name
    rng = np.random.default_rng(0)
    runs = []
    for length in lengths:
        feeds = {name: rng.integers(0, 1000, (1, length)).astype(np.int64)}
        t = time.perf_counter()
        session.run(None, feeds)
        first_ms = (time.perf_counter() - t) * 1e3
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            session.run(None, feeds)
            times.append((time.perf_counter() - t) * 1e3)
        times.sort()
        runs.append({"length": length, "first_ms": first_ms, "median_ms": times[len(times) // 2]})
    print(json.dumps({"create_ms": create_ms, "runs": runs}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--output", default="")
    ap.add_argument("--lengths", default="",
                    help="A,B,...: a model of one int64 [1, seq] input run at each length in turn "
                         "(bench/ort/lengths.js's protocol and output)")
    args = ap.parse_args()
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    create_ms = (time.perf_counter() - t0) * 1e3
    if args.lengths:
        run_lengths(session, [int(v) for v in args.lengths.split(",")], args.repeat, create_ms)
        return
    given = dict(kv.split("=", 1) for kv in args.input)
    rng = np.random.default_rng(0)
    feeds = {}
    for meta in session.get_inputs():
        if meta.name in given:
            feeds[meta.name] = np.load(given[meta.name])
            continue
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in meta.shape]
        dtype = DTYPES[meta.type]
        feeds[meta.name] = (rng.uniform(-1, 1, shape) if dtype == np.float32
                            else rng.integers(0, 1000, shape)).astype(dtype)
    t1 = time.perf_counter()
    first = session.run(None, feeds)
    first_run_ms = (time.perf_counter() - t1) * 1e3
    if args.output:
        np.save(args.output, first[0])
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    print(json.dumps({"create_ms": create_ms, "first_run_ms": first_run_ms,
                      "median_ms": times[len(times) // 2],
                      "p90_ms": times[min(len(times) - 1, int(0.9 * len(times)))]}))


if __name__ == "__main__":
    main()
