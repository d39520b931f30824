#!/usr/bin/python3
"""The `lumen` command line on the shipped digits model: inspect (FLOPs, --optimized, --dot, --svg
through Graphviz), run (--profile, --trace writes a Chrome trace whose steps cover the run), and
bad arguments failing with a message instead of a crash.

    tests/cli/check_cli.py BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "digits", "digits.onnx")


def lumen(build, *args, ok=True):
    proc = subprocess.run([os.path.join(build, "lumen"), *args], capture_output=True, text=True)
    if ok and proc.returncode != 0:
        sys.exit(f"lumen {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
    if not ok and (proc.returncode == 0 or proc.returncode < 0):
        sys.exit(f"lumen {' '.join(args)} should fail with an error, got {proc.returncode}")
    return proc.stdout + proc.stderr


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
            assert 0 <= e["ts"] and e["ts"] + e["dur"] <= run["dur"] + 1, (e, run)
        assert all(a["ts"] + a["dur"] <= b["ts"] + 1e-3 for a, b in zip(steps, steps[1:]))

        err = lumen(build, "run", MODEL, "--trace", ok=False)
        assert "--trace needs a value" in err, err
        err = lumen(build, "inspect", os.path.join(tmp, "missing.onnx"), ok=False)
        assert "missing.onnx" in err, err
    print("cli: ok")


if __name__ == "__main__":
    main()
