#!/bin/bash
# The CUDA backend's tests and GPU benchmark, in one go on a machine with an NVIDIA GPU.
#
#   bash bench/gpu.sh pack BUILD_DIR BUNDLE   # here: a CUDA build (-DLUMEN_CUDA=ON) -> a bundle of
#                                             # binaries, the libraries they load and the scripts
#   bash bench/gpu.sh run BUNDLE OUT [ARGS]   # on the GPU machine (which has CUDA 13, cuDNN 9 and
#                                             # PyTorch, but no oneDNN or libonnx): CUDA tests,
#                                             # benchmark table, every other zoo model checked
#                                             # against PyTorch (ARGS go to gpu_bench.py)
#
# `run` writes OUT/cuda_tests.log, OUT/bench.log, OUT/gpu_section.md and OUT/benchmarks.md (the
# docs page with its gpu section replaced).
set -euo pipefail
mode=${1:?usage: gpu.sh pack BUILD_DIR BUNDLE | run BUNDLE OUT}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

if [ "$mode" = pack ]; then
  build=$2 bundle=$3
  mkdir -p "$bundle"/bin "$bundle"/lib "$bundle"/bench "$bundle"/tests/models "$bundle"/docs
  cp "$build"/lumen "$build"/lumen_fma_peak "$build"/lumen_attention_bench \
    "$build"/tests/cuda_backend_test "$bundle"/bin/
  strip "$bundle"/bin/*
  # Every other test program, compressed: run with --lumen-backends=cuda,cpu, the op tests check
  # the CUDA kernels (where CUDA takes the node) against their double-precision references.
  mkdir -p "$bundle"/tests/bin
  for t in "$build"/tests/*_test; do
    # plugin_test loads test plugins by their paths in the build tree (a CPU test; CI runs it).
    case $(basename "$t") in cuda_backend_test|soak_test|concurrency_test|plugin_test) continue ;; esac
    cp "$t" "$bundle"/tests/bin/ && strip "$bundle"/tests/bin/"$(basename "$t")"
  done
  tar cJf "$bundle"/tests.tar.xz -C "$bundle"/tests bin && rm -r "$bundle"/tests/bin
  cp -L "$build"/liblumen.so.0 "$bundle"/lib/ && strip "$bundle"/lib/liblumen.so.0
  # The CUDA backend's plugin, which liblumen loads from its own folder (gpu_env.sh keeps them
  # together).
  # Compressed (47 MB, 6 MB as .xz): a bundle travels to the GPU machine under a size limit.
  cp -L "$build"/liblumen_cuda.so.0 "$bundle"/lib/ && strip "$bundle"/lib/liblumen_cuda.so.0
  xz -f -T2 "$bundle"/lib/liblumen_cuda.so.0
  # The Debian libraries the GPU machine lacks, each under its soname (oneDNN compressed).
  bash "$here"/pack_libs.sh "$build" "$bundle"
  cp "$here"/gpu.sh "$here"/gpu_env.sh "$here"/gpu_bench.py "$here"/bench_doc.py "$here"/headline.py \
    "$here"/harness.py "$here"/ort_runner.py "$here"/torch_runner.py "$here"/cpu_harness.sh \
    "$here"/attention.py "$bundle"/bench/
  cp "$root"/tests/models/export_zoo.py "$bundle"/tests/models/
  cp "$root"/docs/benchmarks.md "$bundle"/docs/
  du -sh "$bundle"
  exit 0
fi

bundle=$(cd "$2" && pwd) out=$3
shift 3
mkdir -p "$out"
source "$here"/gpu_env.sh "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out"/gpu.txt
ldd "$bundle"/bin/lumen | grep "not found" && { echo "missing libraries"; exit 1; } || true

echo "== CUDA tests"
set +e
"$bundle"/bin/cuda_backend_test --gtest_output=xml:"$out"/cuda_tests.xml 2>&1 | tee "$out"/cuda_tests.log
tests_rc=${PIPESTATUS[0]}
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer (memcheck) over the CUDA kernel tests"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$bundle"/bin/cuda_backend_test \
    --gtest_filter='CudaKernels.*:CudaBackend.Copies*' > "$out"/sanitizer.log 2>&1
  echo "compute-sanitizer exit $? ($(grep -c 'ERROR SUMMARY: 0' "$out"/sanitizer.log) clean summaries)"
  tail -3 "$out"/sanitizer.log
fi
echo "== every other test program, run_op compiling for cuda,cpu"
mkdir -p "$out"/tests
tar xJf "$bundle"/tests.tar.xz -C /tmp
for t in /tmp/bin/*_test; do
  log="$out"/tests/$(basename "$t").log
  "$t" --gtest_brief=1 --lumen-backends=cuda,cpu > "$log" 2>&1
  rc=$?
  echo "$(basename "$t"): exit $rc ($(grep -h "PASSED" "$log" | head -1))"
done | tee "$out"/other_tests.log
grep -h "^\[  FAILED  \]" "$out"/tests/*.log | sort -u | head -40 || true
other_failed=$(grep -vc ": exit 0 " "$out"/other_tests.log)
echo "== zoo on CUDA vs PyTorch"
PYTHONUNBUFFERED=1 "$py" "$bundle"/bench/gpu_bench.py "$bundle"/bin/lumen /tmp/lumen_gpu_work "$@" \
  2>&1 | tee "$out"/bench.log
bench_rc=${PIPESTATUS[0]}
set -e
cp /tmp/lumen_gpu_work/gpu_section.md "$out"/ 2>/dev/null || true
cp "$bundle"/docs/benchmarks.md "$out"/benchmarks.md
echo "cuda tests exit $tests_rc, other test programs failing $other_failed, bench exit $bench_rc"
exit $(( tests_rc != 0 || other_failed != 0 || bench_rc != 0 ))
