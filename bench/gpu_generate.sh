#!/bin/bash
# Generation (issue 28) and the CUDA index checks on the GPU machine, in one go.
#
#   bash bench/gpu.sh pack BUILD_DIR BUNDLE      # here: the bundle (binaries, libraries, scripts)
#   bash bench/gpu_generate.sh run BUNDLE OUT [MODELS] [THREADS]   # on the GPU machine
#
# Runs: the CUDA tests of run-time indices and MatMulNBits (with memcheck), the op tests they
# touch with --lumen-backends=cuda,cpu; `lumen generate` on the tiny decoders against PyTorch's
# references on cpu and cuda (tests/cli/check_generate.py); the 10,000-token soak on both; and
# bench/generate.py (Lumen through its command line, ONNX Runtime, PyTorch eager on CPU and CUDA,
# PyTorch static cache + CUDA graph) for MODELS (default gpt2) at THREADS CPU threads (default 16).
# Writes OUT/*.log and OUT/benchmarks.md (docs/benchmarks.md with the generate sections).
set -uo pipefail
bundle=$(cd "$2" && pwd) out=$3 models=${4:-gpt2} threads=${5:-16}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
mkdir -p "$out"
source "$here"/gpu_env.sh "$bundle"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out"/gpu.txt
grep -o 'avx512[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ' > "$out"/cpu_flags.txt

echo "== tests"
tar xJf "$bundle"/tests.tar.xz -C /tmp
for t in cuda_runtime_indices_test matmul_nbits_test indexing_test loss_test movement_test \
         rotary_swish_test generic_movement_test generic_reduce_test attention_op_test; do
  /tmp/bin/$t --gtest_brief=1 --lumen-backends=cuda,cpu > "$out"/$t.log 2>&1
  echo "$t cuda,cpu: exit $? $(grep -h 'PASSED\|FAILED  \]' "$out"/$t.log | head -3 | tr '\n' ' ')"
done
/tmp/bin/matmul_nbits_test --gtest_brief=1 > "$out"/matmul_nbits_cpu.log 2>&1
echo "matmul_nbits_test cpu (AVX-512 here): exit $? $(grep -h PASSED "$out"/matmul_nbits_cpu.log)"
"$bundle"/bin/cuda_backend_test --gtest_brief=1 > "$out"/cuda_backend_test.log 2>&1
echo "cuda_backend_test: exit $? $(grep -h 'PASSED' "$out"/cuda_backend_test.log)"
/tmp/bin/cuda_runtime_indices_test --lumen-backends=cuda,cpu --gtest_filter='*Timing*' 2>&1 \
  | grep -v "^\[" | tee "$out"/indices_timing.log
for t in cuda_runtime_indices_test matmul_nbits_test; do
  compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/bin/$t --gtest_brief=1 \
    --lumen-backends=cuda,cpu > "$out"/memcheck_$t.log 2>&1
  echo "memcheck $t: exit $? $(grep -h 'ERROR SUMMARY' "$out"/memcheck_$t.log | tail -1)"
done

echo "== lumen generate on the tiny decoders (cpu, cuda)"
"$py" "$root"/tests/cli/check_generate.py "$bundle"/bin --device cuda 2>&1 | tail -8 \
  | tee "$out"/check_generate.log

echo "== soak"
cp "$root"/docs/benchmarks.md "$out"/benchmarks.md
for dev in cuda cpu; do
  "$py" "$here"/generate_soak.py "$bundle"/bin --device $dev --threads "$threads" --doc \
    2>&1 | tail -4 | tee "$out"/soak_$dev.log
done

echo "== generate benchmark"
PYTHONUNBUFFERED=1 timeout 330 "$py" "$here"/generate.py --dir /tmp/decoders --models "$models" \
  --batches 1,8 --prompt 128 --new 128 --threads "$threads" --lumen-cli "$bundle"/bin/lumen \
  --doc 2>&1 | tee "$out"/generate.log
cp "$root"/docs/benchmarks.md "$out"/benchmarks.md
