#!/bin/bash
# The router's benchmark on a machine with an NVIDIA GPU: cpu, cuda and auto side by side.
#
#   bash bench/router.sh pack BUILD_DIR BUNDLE   # here: bench/gpu.sh's bundle plus this script
#   bash bench/router.sh run BUNDLE OUT [MODELS [ARGS]]  # there: OUT/router.log, router_section.md
#                                                        # (ARGS go to router_bench.py: --rounds 3
#                                                        # --threads 2,16 --batches 1,32
#                                                        # --max-seconds 380)
#
# Then, here: python3 bench/bench_doc.py's write_section("router", ...) with router_section.md.
set -euo pipefail
mode=${1:?usage: router.sh pack BUILD_DIR BUNDLE | run BUNDLE OUT [MODELS]}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$mode" = pack ]; then
  bash "$here"/gpu.sh pack "$2" "$3"
  cp "$here"/router.sh "$here"/router_bench.py "$here"/router_models.py "$3"/bench/
  exit 0
fi
bundle=$(cd "$2" && pwd) out=$3 models=${4:-wide_deep_small,pooled_mlp,two_tower,wide_deep,mlp20,resnet18,mobilenet_v2,bert_tiny}
mkdir -p "$out"
source "$here"/gpu_env.sh "$bundle"
"$bundle"/bin/lumen --version
# Stopped at 560 s whatever happens (the device tool's commands end at 600 s), so the table so far
# is still copied to OUT.
PYTHONUNBUFFERED=1 timeout 560 "$py" "$bundle"/bench/router_bench.py "$bundle"/bin/lumen \
  /tmp/lumen_router_work --models "$models" "${@:5}" 2>&1 | tee "$out"/router.log || true
cp /tmp/lumen_router_work/router_section.md /tmp/lumen_router_work/router_rows.json "$out"/ \
  2>/dev/null || true
