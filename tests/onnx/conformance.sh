#!/usr/bin/env bash
# Runs ONNX's node test cases through Lumen.
#   tests/onnx/conformance.sh BUILD_DIR            check against the ratchet (what CTest runs)
#   tests/onnx/conformance.sh BUILD_DIR --update   also rewrite docs/onnx_coverage.md and raise
#                                                  the ratchet to today's pass count
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
cases="$build/onnx_cases"
if [ ! -d "$cases/node" ]; then
  /usr/bin/python3 "$root/tests/onnx/generate_cases.py" "$cases" >/dev/null 2>&1
fi
min_pass="$(cat "$root/tests/onnx/min_pass.txt")"
if [ "${2:-}" = "--update" ]; then
  out="$("$build/tests/lumen_conformance" "$cases" --report "$root/docs/onnx_coverage.md" --min-pass "$min_pass")"
  echo "$out"
  echo "$out" | sed -n 's/^conformance: \([0-9]*\) of.*/\1/p' > "$root/tests/onnx/min_pass.txt"
else
  "$build/tests/lumen_conformance" "$cases" --report "$build/onnx_coverage.md" --min-pass "$min_pass"
fi
