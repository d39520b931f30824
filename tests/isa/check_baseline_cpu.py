"""Lumen on an x86-64 CPU without AVX: the library is built for the x86-64-v2 baseline and must
run there, choosing its baseline kernels at start-up. Runs the CLI and some op test programs
under qemu-x86_64 emulating a Nehalem (SSE4.2, no AVX), where any AVX instruction raises SIGILL,
and checks the model's outputs against a native run with --cpu-isa baseline.

    tests/isa/check_baseline_cpu.py BUILD_DIR

Exits 77 (CTest's skip) on a machine that is not x86-64 or has no qemu-x86_64 (Debian's
qemu-user, which run.sh installs).
"""
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "models", "digits", "digits.onnx")
CPU = "Nehalem-v1"
# Op test programs whose kernels have AVX2 forms (pooling, transposes, casts, attention,
# MatMulNBits, the epilogues), run emulated: a few seconds natively, a few minutes emulated.
OP_TESTS = [
    ("pool_channels_last_test", "*"),
    ("matmul_nbits_test", "*MatchesReference*"),
    ("attention_op_test", "*"),
    ("depthwise_conv_test", "*"),
]


def run(cmd, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    return p.stdout


def main():
    build = sys.argv[1]
    qemu = shutil.which("qemu-x86_64")
    if platform.machine() != "x86_64" or qemu is None:
        print("SKIP: needs an x86-64 machine with qemu-x86_64 (Debian's qemu-user)")
        sys.exit(77)
    emulated = [qemu, "-cpu", CPU]
    lumen = os.path.join(build, "lumen")

    # The old build (-march=x86-64-v3) died here with SIGILL before main().
    version = run(emulated + [lumen, "--version"])
    assert re.search(r"^cpu kernels: baseline \(this CPU: baseline\)$", version, re.M), version

    with tempfile.TemporaryDirectory() as tmp:
        out = run(emulated + [lumen, "run", MODEL, "--repeat", "2", "--output-dir", f"{tmp}/emu"])
        assert "baseline kernels" in out, out
        run([lumen, "--cpu-isa", "baseline", "run", MODEL, "--repeat", "1", "--output-dir",
             f"{tmp}/native"])
        files = sorted(os.listdir(f"{tmp}/native"))
        assert files and files == sorted(os.listdir(f"{tmp}/emu")), files
        for f in files:
            a, b = np.load(f"{tmp}/emu/{f}"), np.load(f"{tmp}/native/{f}")
            assert a.shape == b.shape and np.allclose(a, b, rtol=1e-4, atol=1e-5 * abs(b).max()), f

    for program, pattern in OP_TESTS:
        out = run(emulated + [os.path.join(build, "tests", program), f"--gtest_filter={pattern}"],
                  timeout=1200)
        assert "PASSED" in out, out[-2000:]
        print(f"{program}: passed on an emulated {CPU}")
    print("baseline cpu: ok")


if __name__ == "__main__":
    main()
