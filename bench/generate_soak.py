#!/usr/bin/python3
"""Generation soak (issue 28): one generation of many tokens with `lumen generate --memory-every`,
checking that resident memory and the memory pools stay flat once the cache is allocated.

    bench/generate_soak.py BUILD_DIR [--model FILE.onnx] [--tokens 10000] [--every 1000]
                           [--device cpu|cuda] [--threads N] [--doc]

Without --model the tiny Llama-like decoder of tests/models/export_decoders.py is exported into
BUILD_DIR/decoders (rotary positions: no position table limits the length). Prints each memory
report and the growth from the first report to the last; exits 1 when resident memory grows by
more than 1% + 1 MB or a pool's bytes in use change. --doc writes docs/benchmarks.md's
"generate-soak[-DEVICE]" section.
"""
import argparse
import os
import re
import subprocess
import sys

from bench_doc import ROOT, write_section

sys.path.insert(0, os.path.join(ROOT, "tests", "models"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--model")
    ap.add_argument("--tokens", type=int, default=10000)
    ap.add_argument("--every", type=int, default=1000)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--doc", action="store_true")
    args = ap.parse_args()
    model = args.model
    if model is None:
        import export_decoders as ed
        model = ed.export("llama-tiny", os.path.join(args.build, "decoders"), log=lambda _: None)
    cmd = [os.path.join(args.build, "lumen"), "generate", model, "--ids", "5,6,7,8",
           "--max-new-tokens", str(args.tokens), "--memory-every", str(args.every), "--device",
           args.device, "--threads", str(args.threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    rows = []
    for m in re.finditer(r"^memory after (\d+) tokens: resident ([\d.]+) MB, host pool ([\d.]+) MB "
                         r"in use(?:, \S+ pool ([\d.]+) MB in use)?$", proc.stdout, re.M):
        rows.append((int(m.group(1)), float(m.group(2)), float(m.group(3)),
                     float(m.group(4)) if m.group(4) else None))
    if len(rows) < 2:
        sys.exit(f"too few memory reports:\n{proc.stdout}")
    rate = re.search(r"^decode: .*$", proc.stdout, re.M).group(0)
    first, last = rows[0], rows[-1]
    grew = last[1] - first[1]
    flat = grew <= 0.01 * first[1] + 1.0 and last[2] == first[2] and last[3] == first[3]
    lines = [f"`{' '.join(['lumen'] + cmd[1:])}`", "",
             "| tokens | resident MB | host pool in use MB | device pool in use MB |",
             "| ---: | ---: | ---: | ---: |"]
    lines += [f"| {t} | {r:.1f} | {h:.1f} | {'' if d is None else f'{d:.1f}'} |"
              for t, r, h, d in rows]
    lines += ["", f"Resident growth from {first[0]} to {last[0]} tokens: {grew:+.1f} MB; "
              f"pools {'unchanged' if flat else 'CHANGED'}. {rate}."]
    text = "\n".join(lines)
    print(text)
    if args.doc:
        write_section("generate-soak" + ("" if args.device == "cpu" else "-" + args.device), text)
    sys.exit(0 if flat else 1)


if __name__ == "__main__":
    main()
