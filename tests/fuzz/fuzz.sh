#!/usr/bin/env bash
# Fuzzes the ONNX loader and compiler with libFuzzer.
#   tests/fuzz/fuzz.sh FUZZER SECONDS [CASES_DIR]      explore for SECONDS (random seed; the corpus
#                                                      grows in corpus/ next to FUZZER)
#   tests/fuzz/fuzz.sh FUZZER --runs N [CASES_DIR]     exactly N inputs from seed 1 and the seed
#                                                      corpus alone: the same inputs on every run of
#                                                      the same build (CI)
# FUZZER is the load_model_fuzzer binary of a LUMEN_FUZZ build (`./run.sh fuzz SECONDS` builds it:
# clang, the library with AddressSanitizer, UndefinedBehaviorSanitizer and fuzzer coverage). The
# corpus is seeded with the ONNX conformance models (CASES_DIR, default build/onnx_cases); one
# worker fuzzes and libFuzzer's summary is printed (stat::number_of_executed_units is the
# execution count). A crash, leak, timeout or out-of-memory leaves its input in crashes/ next to
# FUZZER and fails the script: keep it in tests/fuzz/regressions/ once fixed (the
# fuzz_regressions test replays those).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
usage="usage: fuzz.sh FUZZER SECONDS|--runs N [CASES_DIR]"
fuzzer="$(realpath "${1:?$usage}")"
out="$(dirname "$fuzzer")"
if [ "${2:?$usage}" = --runs ]; then
  limit=(-runs="${3:?$usage}" -seed=1)
  corpus="$out/corpus-fixed"
  rm -rf "$corpus"
  cases="${4:-$root/build/onnx_cases}"
else
  limit=(-max_total_time="$2")
  corpus="$out/corpus"
  cases="${3:-$root/build/onnx_cases}"
fi

# Leak checking is off: the host pool and oneDNN's primitive cache live as long as the process.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
mkdir -p "$corpus" "$out/crashes"
if [ -d "$cases/node" ]; then
  for m in "$cases"/node/*/model.onnx; do
    cp "$m" "$corpus/$(basename "$(dirname "$m")").onnx"
  done
fi
"$fuzzer" -rss_limit_mb=4096 -timeout=20 -artifact_prefix="$out/crashes/" "$corpus" "${limit[@]}" \
  -max_len=65536 -print_final_stats=1 >"$out/fuzz.log" 2>&1 || { tail -80 "$out/fuzz.log"; exit 1; }
tail -25 "$out/fuzz.log"
