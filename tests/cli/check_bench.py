#!/usr/bin/python3
"""`lumen bench`: matmul's device-resident and host-to-host rows on the CPU backend (a small N,
whose numbers must be positive and consistent), memory on the built-in MLP and on the shipped
model, fusion's step counts, and bad arguments failing with a message instead of a crash.

    tests/cli/check_bench.py BUILD_DIR
"""
import re
import sys

from check_cli import MODEL, lumen


ROW = r"^{backend}\s+{timing}\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(.*)$"


def check_matmul(build):
    n, runs = 96, 4
    out = lumen(build, "bench", "matmul", str(n), "--runs", str(runs), "--device", "cpu")
    assert f"matmul {n} x {n}, float32 operands, precision float32" in out, out
    resident = re.search(ROW.format(backend="cpu", timing="device-resident"), out, re.M)
    host = re.search(ROW.format(backend="cpu", timing="host-to-host"), out, re.M)
    assert resident and host, out
    median, least, count = float(resident.group(1)), float(resident.group(2)), int(resident.group(3))
    assert 0 < least <= median and count == runs, out
    # The rate is the product's FLOPs over the median, which is printed rounded to 0.001 ms.
    gflops = float(re.match(r"([\d.]+) GFLOP/s", resident.group(4)).group(1))
    low = 2 * n ** 3 / ((median + 0.0005) * 1e-3) / 1e9
    high = 2 * n ** 3 / (max(median - 0.0005, 1e-9) * 1e-3) / 1e9
    assert low - 0.051 <= gflops <= high + 0.051, (gflops, low, high, out)
    assert "no copies" in host.group(4) and int(host.group(3)) == runs, out
    assert float(host.group(1)) > 0, out

    out = lumen(build, "bench", "matmul", "32", "--runs", "2", "--precision", "tf32", "--device",
                "cpu")
    assert "precision tf32" in out and "(float32: the CPU)" in out, out

    for bad, message in [
        (["bench", "matmul"], "give the matrix size N"),
        (["bench", "matmul", "0"], "N must be a positive integer, got '0'"),
        (["bench", "matmul", "x12"], "N must be a positive integer"),
        (["bench", "matmul", "99999999"], "N must be at most 65536"),
        (["bench", "matmul", "8", "--runs"], "--runs needs a value"),
        (["bench", "matmul", "8", "--runs", "-1"], "--runs must be a positive integer"),
        (["bench", "matmul", "8", "--precision", "fp8"], "--precision must be float32"),
        (["bench", "matmul", "8", "--device", "tpu"], "backend 'tpu' is not available"),
        (["bench", "matmul", "8", "--fast"], "unknown argument '--fast'"),
        (["bench", "memory", "--shape", "x"], "--shape takes NAME="),
        (["bench", "memory", "/nonexistent/m.onnx"], "m.onnx"),
        (["bench", "fusion", "--channels", "0"], "--channels must be a positive integer"),
        (["bench", "fusion", "--size"], "--size needs a value"),
        (["bench", "nothing"], "unknown command"),
    ]:
        err = lumen(build, *bad, ok=False)
        assert message in err, (bad, err)


def check_memory(build):
    out = lumen(build, "bench", "memory")
    m = re.search(r"planned: (\d+) intermediates, ([\d.]+) MB without reuse -> arena ([\d.]+) MB "
                  r"\(-([\d.]+)%; lower bound ([\d.]+) MB", out)
    assert m, out
    count, no_reuse, arena, cut, bound = (float(g) for g in m.groups())
    # The MLP, optimized: 19 hidden activations of 64 x 1024 floats; two alive at a time.
    assert count == 19 and abs(no_reuse - 19 * 64 * 1024 * 4 / 1e6) < 0.01, out
    assert bound <= arena < no_reuse and abs(cut - 100 * (1 - arena / no_reuse)) < 0.1, out
    assert re.search(r"process: peak resident [\d.]+ MB .* weights 84\.0 MB", out), out

    out = lumen(build, "bench", "memory", MODEL, "--no-optimize")
    assert "digits.onnx, cpu, as imported" in out and "planned:" in out, out


def check_fusion(build):
    out = lumen(build, "bench", "fusion", "--device", "cpu", "--channels", "8", "--size", "12",
                "--runs", "3")
    unfused = re.search(r"^cpu\s+Conv, Relu\s+(\d+)\s+([\d.]+)", out, re.M)
    fused = re.search(r"^cpu\s+FusedConv\(Relu\)\s+(\d+)\s+([\d.]+)", out, re.M)
    assert unfused and fused, out
    assert int(unfused.group(1)) == 2 and int(fused.group(1)) == 1, out
    assert re.search(r"^cpu\s+fused: 1 kernel\(s\) per run instead of 2", out, re.M), out


def main():
    build = sys.argv[1]
    check_matmul(build)
    check_memory(build)
    check_fusion(build)
    print("bench: ok")


if __name__ == "__main__":
    main()
