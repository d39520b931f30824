#!/usr/bin/env bash
# Fuzzes the ONNX loader and compiler with libFuzzer (clang from Debian, with libclang-rt).
#   tests/fuzz/fuzz.sh SECONDS [CASES_DIR]
# Builds Lumen with clang, -fsanitize=fuzzer-no-link,address,undefined into build-fuzz/, seeds the
# corpus with the ONNX conformance models (CASES_DIR, default build/onnx_cases), fuzzes for
# SECONDS, and prints libFuzzer's summary. A crash leaves its input in build-fuzz/crashes/.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
seconds="${1:?usage: fuzz.sh SECONDS [CASES_DIR]}"
cases="${2:-$root/build/onnx_cases}"
out="$root/build-fuzz"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$root" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLUMEN_TESTS=OFF \
  -DLUMEN_CUDA=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="$san -fsanitize=fuzzer-no-link" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" >/dev/null
cmake --build "$out" --target lumen -j "$(nproc)"
clang++ -std=c++20 $san -fsanitize=fuzzer -I"$root/include" "$root/tests/fuzz/load_model_fuzzer.cc" \
  -L"$out" -llumen -Wl,-rpath,"$out" -o "$out/load_model_fuzzer"
mkdir -p "$out/corpus" "$out/crashes"
if [ -d "$cases/node" ]; then
  for m in "$cases"/node/*/model.onnx; do
    cp "$m" "$out/corpus/$(basename "$(dirname "$m")").onnx"
  done
fi
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 "$out/load_model_fuzzer" "$out/corpus" \
  -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=4096 -timeout=20 \
  -artifact_prefix="$out/crashes/" -print_final_stats=1 2>&1 | tail -25
