#!/usr/bin/python3
"""The `lumen` command line on the shipped digits model: inspect (FLOPs, --optimized, --dot, --svg
through Graphviz), run (--profile, --trace writes a Chrome trace whose steps cover the run), the
router's tune (fills the cache under XDG_CACHE_HOME; a second tune or a plan measures nothing; a
version change invalidates it), plan (every node, totals, --measure) and run --device auto (the
same outputs as cpu), and bad arguments failing with a message instead of a crash.

    tests/cli/check_cli.py BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "digits", "digits.onnx")


def lumen(build, *args, ok=True):
    proc = subprocess.run([os.path.join(build, "lumen"), *args], capture_output=True, text=True)
    if ok and proc.returncode != 0:
        sys.exit(f"lumen {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    if not ok and (proc.returncode == 0 or proc.returncode < 0):
        sys.exit(f"lumen {' '.join(args)} should fail with an error, got {proc.returncode}")
    return proc.stdout + proc.stderr


def measured(out):
    return int(re.search(r"calibration: (\d+) kernels measured", out).group(1))


def check_router(build, tmp):
    os.environ["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
    cache = os.path.join(tmp, "cache", "lumen", "tune.tsv")
    out = lumen(build, "tune", MODEL)
    assert measured(out) > 0 and "(new)" in out, out
    lines = open(cache).read().splitlines()
    assert lines[0] == "lumen-tune\t6" and lines[1].startswith("version\t"), lines[:3]
    out = lumen(build, "tune", MODEL)
    assert measured(out) == 0 and "(read)" in out, out

    out = lumen(build, "plan", MODEL, "--measure", "--runs", "5")
    assert measured(out) == 0, out
    nodes = int(re.search(r": (\d+) nodes on", out).group(1))
    rows = [l for l in out.splitlines() if re.match(r"^\S+\s+\S+\s+(cpu|cuda)\s", l)]
    assert nodes > 0 and len(rows) == nodes, out
    assert re.search(r"^predicted: [0-9.]+ ms per run = kernels [0-9.]+ ms \+ copies", out, re.M), out
    assert re.search(r"^measured: [0-9.]+ ms per run \(median of 5\), predicted", out, re.M), out

    # A new version's measurements differ: the old file is not used.
    lines[1] = "version\t0.0.0-old"
    open(cache, "w").write("\n".join(lines) + "\n")
    out = lumen(build, "tune", MODEL)
    assert measured(out) > 0 and "(new)" in out, out

    checksums = {}
    for device in ("cpu", "auto"):
        out = lumen(build, "run", MODEL, "--device", device, "--repeat", "2")
        checksums[device] = re.findall(r"checksum (\S+)", out)
        backends = re.search(r"\(backends: ([^)]*)\)", lumen(build, "--version")).group(1)
        if device == "auto" and "cuda" not in backends:  # the plugin may load without a GPU
            assert "0 steps on cuda" in out and "0 copies between devices" in out, out
    assert checksums["cpu"] == checksums["auto"], checksums

    err = lumen(build, "plan", MODEL, "--device", "tpu", ok=False)
    assert "tpu" in err, err
    err = lumen(build, "tune", ok=False)
    assert "give a model file" in err, err


def check_cpu_isa(build, tmp):
    """--version names the CPU kernels' level; --cpu-isa runs them lower, with the same outputs
    (within float rounding: the kernels sum in another order)."""
    version = lumen(build, "--version")
    m = re.search(r"^cpu kernels: (\w+) \(this CPU: (\w+)\)$", version, re.M)
    assert m and m.group(1) == m.group(2), version
    levels = ["baseline", "avx2", "avx512"]
    outputs = {}
    for level in levels[: levels.index(m.group(2)) + 1]:
        out = lumen(build, "--cpu-isa", level, "run", MODEL, "--repeat", "2", "--output-dir",
                    f"{tmp}/isa_{level}")
        assert f"{level} kernels" in out, out
        outputs[level] = {f: open(f"{tmp}/isa_{level}/{f}", "rb").read()
                          for f in sorted(os.listdir(f"{tmp}/isa_{level}"))}
    ref = outputs["baseline"]
    for level, files in outputs.items():
        assert files.keys() == ref.keys(), (level, files.keys())
        for f in files:
            a = np.load(f"{tmp}/isa_{level}/{f}")
            b = np.load(f"{tmp}/isa_baseline/{f}")
            assert np.allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(b).max()), (level, f)
    err = lumen(build, "--cpu-isa", "sse9", "--version", ok=False)
    assert "--cpu-isa: unknown level 'sse9'" in err, err


def main():
    build = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = lumen(build, "inspect", MODEL, "--optimized", "--dot", f"{tmp}/g.dot", "--svg",
                    f"{tmp}/g.svg")
        flops = int(re.search(r"^flops\s+(\d+)", out, re.M).group(1))
        assert flops > 0, out
        assert open(f"{tmp}/g.dot").read().startswith("digraph"), "dot file"
        svg = open(f"{tmp}/g.svg").read()
        assert "<svg" in svg and "</svg>" in svg, "svg file"

        out = lumen(build, "run", MODEL, "--repeat", "5", "--profile", "--trace", f"{tmp}/t.json")
        assert re.search(r"latency: median [0-9.]+ ms .*p90 [0-9.]+ ms", out), out
        assert re.search(r"^profile: median over 5 runs", out, re.M), out
        # After the first run, a run takes all its memory from the pool: no system allocation.
        assert re.search(r"system allocations: \d+ in the first run, 0 in the next 5", out), out
        trace = json.load(open(f"{tmp}/t.json"))["traceEvents"]
        run = [e for e in trace if e["cat"] == "run"][0]
        steps = [e for e in trace if e["cat"] != "run"]
        assert steps, "the trace has no steps"
        for e in steps:
            assert e["ph"] == "X" and e["dur"] >= 0 and e["args"]["backend"] == "cpu", e
            assert e["args"]["runs"] == 5 and e["args"]["median_us"] >= 0, e
            assert 0 <= e["ts"] and e["ts"] + e["dur"] <= run["dur"] + 1, (e, run)
        assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-3 for a, b in zip(steps, steps[1:]))

        check_router(build, tmp)

        # TF32 and float16 change only CUDA kernels: on the CPU the output is the float32 one,
        # bit for bit.
        exact = lumen(build, "run", MODEL, "--repeat", "1", "--output-dir", f"{tmp}/f32")
        for p in ("float32-strict", "tf32", "float16", "bfloat16"):
            lumen(build, "run", MODEL, "--repeat", "1", "--device", "cpu", "--precision", p,
                  "--output-dir", f"{tmp}/{p}")
            for f in os.listdir(f"{tmp}/f32"):
                assert open(f"{tmp}/f32/{f}", "rb").read() == open(f"{tmp}/{p}/{f}", "rb").read()
        assert "checksum" in exact, exact
        err = lumen(build, "run", MODEL, "--precision", "fp8", ok=False)
        assert "--precision must be float32, float32-strict, tf32, float16 or bfloat16" in err, err
        err = lumen(build, "run", MODEL, "--trace", ok=False)
        assert "--trace needs a value" in err, err
        err = lumen(build, "inspect", os.path.join(tmp, "missing.onnx"), ok=False)
        assert "missing.onnx" in err, err
        check_cpu_isa(build, tmp)
    print("cli: ok")


if __name__ == "__main__":
    main()
