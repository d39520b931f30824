#!/usr/bin/env bash
# Fuzzes the ONNX loader and compiler with libFuzzer (clang from Debian, with libclang-rt).
#   tests/fuzz/fuzz.sh SECONDS [CASES_DIR]
# Builds the library alone with clang, -fsanitize=fuzzer-no-link,address,undefined into build-fuzz/
# (FUZZ_DIR overrides), links the target, replays every kept finding in tests/fuzz/regressions/
# (each must now end in a lumen::Error), seeds the corpus with the ONNX conformance models
# (CASES_DIR, default build/onnx_cases) and fuzzes with one worker for SECONDS, printing
# libFuzzer's summary (stat::number_of_executed_units is the execution count). A crash, leak,
# timeout or out-of-memory leaves its input in build-fuzz/crashes/ and fails the script.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
seconds="${1:?usage: fuzz.sh SECONDS [CASES_DIR]}"
cases="${2:-$root/build/onnx_cases}"
out="${FUZZ_DIR:-$root/build-fuzz}"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLUMEN_TESTS=OFF \
  -DLUMEN_CUDA=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="$san -fsanitize=fuzzer-no-link" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" >/dev/null
cmake --build "$out" --target lumen -j "$(nproc)"
clang++ -std=c++20 -O1 -g $san -fsanitize=fuzzer -I"$root/include" \
  "$root/tests/fuzz/load_model_fuzzer.cc" -L"$out" -llumen -Wl,-rpath,"$out" \
  -o "$out/load_model_fuzzer"

# Leak checking is off: the host pool and oneDNN's primitive cache live as long as the process.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
flags=(-rss_limit_mb=4096 -timeout=20 -artifact_prefix="$out/crashes/")
mkdir -p "$out/corpus" "$out/crashes"
regressions=("$root"/tests/fuzz/regressions/*.onnx)
if [ -e "${regressions[0]}" ]; then
  "$out/load_model_fuzzer" "${flags[@]}" "${regressions[@]}" >"$out/regressions.log" 2>&1 ||
    { tail -60 "$out/regressions.log"; exit 1; }
  echo "fuzz.sh: ${#regressions[@]} kept findings replay cleanly"
fi
if [ -d "$cases/node" ]; then
  for m in "$cases"/node/*/model.onnx; do
    cp "$m" "$out/corpus/$(basename "$(dirname "$m")").onnx"
  done
fi
"$out/load_model_fuzzer" "${flags[@]}" "$out/corpus" -max_total_time="$seconds" -max_len=65536 \
  -print_final_stats=1 >"$out/fuzz.log" 2>&1 || { tail -80 "$out/fuzz.log"; exit 1; }
tail -25 "$out/fuzz.log"
