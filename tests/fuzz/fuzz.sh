#!/usr/bin/env bash
# Fuzzes the ONNX loader and compiler with libFuzzer.
#   tests/fuzz/fuzz.sh FUZZER SECONDS [CASES_DIR]      explore for SECONDS (random seed; the corpus
#                                                      grows in corpus/ next to FUZZER)
#   tests/fuzz/fuzz.sh FUZZER --runs N [CASES_DIR]     exactly N inputs from seed 1 and the seed
#                                                      corpus alone: the same inputs on every run of
#                                                      the same build (CI)
# FUZZER is the load_model_fuzzer binary of a LUMEN_FUZZ build (`./run.sh fuzz SECONDS` builds it:
# clang, the library with AddressSanitizer, UndefinedBehaviorSanitizer and fuzzer coverage). The
# corpus is seeded with the ONNX conformance models (CASES_DIR, default build/onnx_cases, and
# CASES_DIR_1231 beside it); one
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
# Both conformance suites seed it: CASES_DIR (Debian's onnx 1.12) and, beside it, ONNX 1.23.1's
# (onnx_cases_1231, unpacked by tests/onnx/conformance.sh; opsets up to 28), prefixed so the two
# suites' cases of the same name both stay.
for suite in "$cases" "${cases%/}_1231"; do
  [ -d "$suite/node" ] || continue
  prefix="$(basename "$suite")"
  for m in "$suite"/node/*/model.onnx; do
    cp "$m" "$corpus/$prefix-$(basename "$(dirname "$m")").onnx"
  done
done
"$fuzzer" -rss_limit_mb=4096 -timeout=20 -artifact_prefix="$out/crashes/" "$corpus" "${limit[@]}" \
  -max_len=65536 -print_final_stats=1 >"$out/fuzz.log" 2>&1 || { tail -80 "$out/fuzz.log"; exit 1; }
tail -25 "$out/fuzz.log"
