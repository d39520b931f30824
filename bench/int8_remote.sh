#!/bin/bash
# bench/int8.py on another machine that has PyTorch and ONNX Runtime's Python package but no
# oneDNN or libonnx (the GPU machine's Xeon: AVX-512 VNNI and AMX).
#
#   bash bench/int8_remote.sh pack BUILD_DIR BUNDLE    # here: lumen, its libraries, the scripts
#   bash bench/int8_remote.sh run BUNDLE OUT [THREADS] [MODELS]   # there
#
# `run` exports the zoo models there (bench/gpu_bench.py's exporter), then runs bench/int8.py with
# --ort python at THREADS (default 2,16) and writes OUT/int8.log and OUT/benchmarks.md (the docs
# page with its int8-xeon section).
set -euo pipefail
mode=${1:?usage: int8_remote.sh pack BUILD_DIR BUNDLE | run BUNDLE OUT [THREADS] [MODELS]}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

if [ "$mode" = pack ]; then
  build=$2 bundle=$3
  mkdir -p "$bundle"/bin "$bundle"/lib "$bundle"/bench "$bundle"/tests/models "$bundle"/docs
  cp "$build"/lumen "$bundle"/bin/ && strip "$bundle"/bin/lumen
  cp -L "$build"/liblumen.so.0 "$bundle"/lib/ && strip "$bundle"/lib/liblumen.so.0
  bash "$here"/pack_libs.sh "$build" "$bundle"
  cp "$here"/int8.py "$here"/int8_remote.sh "$here"/bench_doc.py "$here"/ort_runner.py \
    "$here"/gpu_bench.py "$here"/gpu_env.sh "$bundle"/bench/
  cp "$root"/tests/models/export_zoo.py "$root"/tests/models/quantize_qdq.py "$bundle"/tests/models/
  cp "$root"/docs/benchmarks.md "$bundle"/docs/
  du -sh "$bundle"
  exit 0
fi

bundle=$(cd "$2" && pwd) out=$3
threads=${4:-2,16}
models=${5:-resnet50,mobilenet_v2,bert_base}
mkdir -p "$out"
source "$bundle"/bench/gpu_env.sh "$bundle"
zoo=/tmp/lumen_int8_zoo
mkdir -p "$zoo"
"$py" -c "import sys; sys.path.insert(0, '$bundle/bench'); sys.path.insert(0, '$bundle/tests/models'); \
import gpu_bench; gpu_bench.export_models('$models'.split(','), '$zoo')" > "$out"/export.log 2>&1
"$py" "$bundle"/bench/int8.py --zoo "$zoo" --models "$models" --threads "$threads" --ort python \
  --lumen "$bundle"/bin/lumen --out /tmp/lumen_int8_models --label xeon 2>&1 | tee "$out"/int8.log
cp "$bundle"/docs/benchmarks.md "$out"/
