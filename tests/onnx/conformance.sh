#!/usr/bin/env bash
# Runs ONNX's node test cases through Lumen, two suites, each with its own ratchet:
#   onnx112   Debian's python3-onnx 1.12 (opsets up to 17), generated into BUILD/onnx_cases
#   onnx1231  ONNX 1.23.1's own (opsets up to 28), unpacked from ../shared/onnx into
#             BUILD/onnx_cases_1231
#   tests/onnx/conformance.sh BUILD_DIR            check both against their ratchets (CTest)
#   tests/onnx/conformance.sh BUILD_DIR --update   also rewrite docs/onnx_coverage.md and raise
#                                                  each ratchet to today's pass count
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(cd "$1" && pwd)"
update="${2:-}"

cases112="$build/onnx_cases"
if [ ! -d "$cases112/node" ]; then
  /usr/bin/python3 "$root/tests/onnx/generate_cases.py" "$cases112" >/dev/null 2>&1
fi
cases1231="$build/onnx_cases_1231"
tarball="$root/../shared/onnx/node-tests-onnx-1.23.1.tar.xz"
if [ ! -d "$cases1231/node" ]; then
  [ -f "$tarball" ] || { echo "conformance: $tarball is missing" >&2; exit 1; }
  mkdir -p "$cases1231.tmp"
  tar -xJf "$tarball" -C "$cases1231.tmp"
  rm -rf "$cases1231"
  mv "$cases1231.tmp/onnxdata" "$cases1231"
  rmdir "$cases1231.tmp"
fi

status=0
run_suite() {  # NAME CASES TITLE
  local name="$1" cases="$2" title="$3"
  local ratchet="$root/tests/onnx/min_pass_$name.txt"
  local out
  # Two worker processes run the cases in turn (a crash or hang costs only its case).
  out="$("$build/tests/lumen_conformance" "$cases" --report "$build/onnx_coverage_$name.md" \
    --title "$title" --min-pass "$(cat "$ratchet")" --workers 2)" || status=1
  echo "$name: $out"
  if [ "$update" = "--update" ]; then
    echo "$out" | sed -n 's/^conformance: \([0-9]*\) of.*/\1/p' > "$ratchet"
  fi
}
run_suite onnx1231 "$cases1231" "ONNX 1.23.1's node test cases (opsets up to 28)"
run_suite onnx112 "$cases112" "Debian's python3-onnx 1.12 node test cases (opsets up to 17)"

if [ "$update" = "--update" ]; then
  {
    echo "# ONNX conformance"
    echo
    echo "ONNX's backend node test cases in two suites, each run by \`tests/onnx/conformance.sh\`"
    echo "with its own ratchet (tests/onnx/min_pass_*.txt). Lumen reads opsets 7 to 28 of the"
    echo "default domain. This file is written by that script; docs/onnx_coverage_cuda.md, the"
    echo "1.23.1 suite with \`--device cuda\` on the GPU machine, by \`lumen_conformance --report\`."
    echo
    cat "$build/onnx_coverage_onnx1231.md" "$build/onnx_coverage_onnx112.md"
  } > "$root/docs/onnx_coverage.md"
fi
exit $status
