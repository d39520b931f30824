#!/bin/bash
# Today's ONNX on the GPU machine, in one go: the CUDA kernels of the opset 20-28 ops against their
# references, ONNX 1.23.1's node suite through `cuda,cpu`, and zoo models re-exported by the
# machine's PyTorch at opset 13 and at newer opsets, each checked against PyTorch and timed on the
# CPU (its 16 cores, AVX-512) side by side.
#
#   bash bench/gpu_onnx.sh pack BUILD_DIR BUNDLE   # here, after a CUDA build: gpu.sh's bundle plus
#                                                  # the conformance runner and the 1.23.1 cases
#   bash bench/gpu_onnx.sh run BUNDLE OUT [MODELS] # on the GPU machine
#   bash bench/gpu_onnx.sh ab BUNDLE OUT [ROUNDS]  # there: zoo models at an older and a newer
#                                                  # opset, optimized op counts and CPU latency
#                                                  # in alternating rounds (OUT/ab.log)
#
# `run` writes OUT/ops.log (op tests with --lumen-backends=cuda,cpu), OUT/conformance_cuda.tsv
# (one line per case of those ops; a pass says how many steps ran on CUDA), OUT/zoo.log
# (check_zoo.py rows per opset) and OUT/summary.txt.
set -uo pipefail
mode=${1:?usage: gpu_onnx.sh pack BUILD_DIR BUNDLE | run BUNDLE OUT [MODELS] | ab BUNDLE OUT}
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

if [ "$mode" = ab ]; then
  # The same models exported at an older and a newer opset: the optimized graphs' op counts side by
  # side, then ROUNDS rounds alternating the two (`lumen run --repeat 50` on the CPU, median ms).
  bundle=$(cd "$2" && pwd) out=$3 rounds=${4:-3}
  mkdir -p "$out"
  source "$bundle"/bench/gpu_env.sh "$bundle"
  lumen="$bundle"/bin/lumen
  for pair in resnet18:13:23 mobilenet_v2:13:23 efficientnet_b0:13:23 bert_tiny:14:23 \
    gpt_tiny:14:23; do
    IFS=: read -r m old new <<< "$pair"
    for o in $old $new; do
      "$py" "$bundle"/tests/models/export_zoo.py /tmp/ab$o --models $m --opset $o > /dev/null 2>&1
      "$lumen" inspect /tmp/ab$o/$m.onnx --optimized 2>&1 | sed -n '/after optimization/,$p' \
        > /tmp/ab_ops_${m}_$o.txt
    done
    same=$(cmp -s /tmp/ab_ops_${m}_$old.txt /tmp/ab_ops_${m}_$new.txt && echo same || echo differ)
    echo "$m: optimized op counts at opsets $old and $new: $same" | tee -a "$out"/ab.log
    [ "$same" = same ] || paste /tmp/ab_ops_${m}_$old.txt /tmp/ab_ops_${m}_$new.txt >> "$out"/ab.log
    input=$("$py" -c "import onnx, sys; m = onnx.load(sys.argv[1], load_external_data=False)
inits = {t.name for t in m.graph.initializer}
print(next(x.name for x in m.graph.input if x.name not in inits))" /tmp/ab$old/$m.onnx)
    for r in $(seq "$rounds"); do
      for o in $old $new; do
        ms=$("$lumen" run /tmp/ab$o/$m.onnx --input "$input=/tmp/ab$o/$m.input.npy" --repeat 50 \
          2>&1 | sed -n 's/.*latency: median \([0-9.]*\) ms.*/\1/p')
        echo "$m round $r opset $o: $ms ms" | tee -a "$out"/ab.log
      done
    done
  done
  exit 0
fi

bundle=$(cd "$2" && pwd) out=$3
models=${4:-resnet18,mobilenet_v2,efficientnet_b0,bert_tiny,gpt_tiny}
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

# Each case runs in a process of its own, which creates a CUDA context: the cases of the ops that
# gained CUDA kernels, not all 1,884.
echo "== ONNX 1.23.1 node cases of the new CUDA ops, --backends cuda,cpu" | tee -a "$out"/summary.txt
mkdir -p /tmp/onnx1231 && tar xJf "$bundle"/node-tests-onnx-1.23.1.tar.xz -C /tmp/onnx1231
for f in test_attention test_rms_normalization test_rotary_embedding test_group_normalization \
  test_gelu test_swish test_swiglu test_linear_attention test_causal_conv; do
  "$bundle"/bin/lumen_conformance /tmp/onnx1231/onnxdata --backends cuda,cpu --filter $f \
    --list /tmp/conf_$f.tsv > /dev/null 2>&1
  cat /tmp/conf_$f.tsv >> "$out"/conformance_cuda.tsv
  echo "$f: $(grep -c "	pass	" /tmp/conf_$f.tsv) of $(wc -l < /tmp/conf_$f.tsv) pass" \
    | tee -a "$out"/summary.txt
done

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
