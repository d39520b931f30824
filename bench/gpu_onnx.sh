#!/bin/bash
# Today's ONNX on the GPU machine, in one go: the CUDA kernels of the opset 20-28 ops against their
# references, ONNX 1.23.1's node suite through `cuda,cpu`, and zoo models re-exported by the
# machine's PyTorch at opset 13 and at newer opsets, each checked against PyTorch and timed on the
# CPU (its 16 cores, AVX-512) side by side.
#
#   bash bench/gpu_onnx.sh pack BUILD_DIR BUNDLE   # here, after a CUDA build: gpu.sh's bundle plus
#                                                  # the conformance runner and the 1.23.1 cases
#   bash bench/gpu_onnx.sh run BUNDLE OUT [MODELS] # on the GPU machine
#
# `run` writes OUT/ops.log (op tests with --lumen-backends=cuda,cpu), OUT/conformance_cuda.tsv
# (one line per case), OUT/zoo.log (check_zoo.py rows per opset) and OUT/summary.txt.
set -uo pipefail
mode=${1:?usage: gpu_onnx.sh pack BUILD_DIR BUNDLE | run BUNDLE OUT [MODELS]}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

if [ "$mode" = pack ]; then
  build=$2 bundle=$3
  bash "$here"/gpu.sh pack "$build" "$bundle" || exit 1
  cp "$build"/tests/lumen_conformance "$bundle"/bin/ && strip "$bundle"/bin/lumen_conformance
  cp "$root"/../shared/onnx/node-tests-onnx-1.23.1.tar.xz "$bundle"/
  cp "$root"/tests/models/check_zoo.py "$bundle"/tests/models/
  cp "$here"/gpu_onnx.sh "$bundle"/bench/
  du -sh "$bundle"
  exit 0
fi

bundle=$(cd "$2" && pwd) out=$3
models=${4:-resnet18,mobilenet_v2,efficientnet_b0,bert_tiny,gpt_tiny,vit_b_16}
mkdir -p "$out"
source "$bundle"/bench/gpu_env.sh "$bundle"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out"/summary.txt
tar xJf "$bundle"/tests.tar.xz -C /tmp

echo "== op tests of the new ops, run_op compiling for cuda,cpu" | tee -a "$out"/summary.txt
for spec in "attention_op_test:*" "norm_extra_test:*" "rotary_swish_test:*" \
  "linear_attention_test:*" "elementwise_test:Unary.Gelu*" "newer_opsets_test:*"; do
  t=${spec%%:*} filter=${spec#*:}
  [ -x /tmp/bin/$t ] || { echo "$t: missing" | tee -a "$out"/summary.txt; continue; }
  /tmp/bin/$t --gtest_brief=1 --lumen-backends=cuda,cpu --gtest_filter="$filter" \
    >> "$out"/ops.log 2>&1
  echo "$t --lumen-backends=cuda,cpu: exit $?" | tee -a "$out"/summary.txt
done
"$bundle"/bin/cuda_backend_test --gtest_brief=1 --gtest_filter='CudaKernels.OnnxAttention*' \
  >> "$out"/ops.log 2>&1
echo "cuda_backend_test CudaKernels.OnnxAttention*: exit $?" | tee -a "$out"/summary.txt

echo "== ONNX 1.23.1 node suite, --backends cuda,cpu" | tee -a "$out"/summary.txt
mkdir -p /tmp/onnx1231 && tar xJf "$bundle"/node-tests-onnx-1.23.1.tar.xz -C /tmp/onnx1231
"$bundle"/bin/lumen_conformance /tmp/onnx1231/onnxdata --backends cuda,cpu \
  --list "$out"/conformance_cuda.tsv | tail -1 | tee -a "$out"/summary.txt

echo "== zoo at opset 13 and newer, CPU, against PyTorch" | tee -a "$out"/summary.txt
for opset in 13 18 20 23; do
  zoo=/tmp/zoo$opset
  "$py" "$bundle"/tests/models/export_zoo.py "$zoo" --models "$models" --opset $opset \
    > "$out"/export$opset.log 2>&1 || echo "export at opset $opset: some models failed" \
    | tee -a "$out"/summary.txt
  echo "-- opset $opset" >> "$out"/zoo.log
  "$py" "$bundle"/tests/models/check_zoo.py "$bundle"/bin "$zoo" --repeat 20 >> "$out"/zoo.log 2>&1
  echo "check_zoo opset $opset: exit $?" | tee -a "$out"/summary.txt
done
cat "$out"/zoo.log
