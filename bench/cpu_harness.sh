#!/bin/bash
# Lumen beside ONNX Runtime (its Python package) on the GPU machine's CPU (Intel Xeon, AVX-512 and
# AMX), at several thread counts: bench/harness.py once per count, on zoo models exported there.
#
#   bash bench/gpu.sh pack BUILD_DIR BUNDLE          # here (the bundle carries this script)
#   bash bench/cpu_harness.sh BUNDLE OUT [MODELS] [THREADS] [HARNESS ARGS]   # there
#
# MODELS: comma-separated zoo names (default the six of issue 27's table); THREADS: comma-separated
# counts (default 2,16). Writes OUT/harness-xeon-tN.md per count, OUT/benchmarks.md and the charts
# (OUT/harness-xeon-tN.png) where matplotlib made them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle=$(cd "$1" && pwd) out=$2
models=${3:-squeezenet1_1,mobilenet_v2,efficientnet_b0,resnet18,resnet50,bert_base}
threads=${4:-2,16}
mkdir -p "$out"
source "$here"/gpu_env.sh "$bundle"
zoo=/tmp/lumen_cpu_zoo
mkdir -p "$zoo"
"$py" -c "import sys; sys.path.insert(0, '$here'); import gpu_bench; \
gpu_bench.export_models('$models'.split(','), '$zoo')"
for t in ${threads//,/ }; do
  "$py" "$here"/harness.py --zoo "$zoo" --lumen "$bundle"/bin/lumen --peak "$bundle"/bin/lumen_fma_peak \
    --models "$models" --runtimes lumen,ort --ort python --threads "$t" --label "xeon-t$t" "${@:5}"
  "$py" -c "import re, sys; d = open('$bundle/docs/benchmarks.md').read(); \
m = re.search(r'<!-- harness-xeon-t$t:begin -->\n(.*?)<!-- harness-xeon-t$t:end -->', d, re.S); \
open('$out/harness-xeon-t$t.md', 'w').write(m.group(1))"
done
cp "$bundle"/docs/benchmarks.md "$out"/
cp "$bundle"/bench/results/harness-xeon-t*.csv "$out"/ 2>/dev/null || true  # the CSVs the sections name
cp "$bundle"/docs/harness-xeon-t*.png "$out"/ 2>/dev/null || true  # the charts, where matplotlib made them
