#!/bin/bash
# On the GPU machine, over a bundle made by bench/pack_libs.sh-style packing (BUNDLE/bin/lumen,
# BUNDLE/lib with liblumen, its plugins, Debian's libvulkan.so.1): the Vulkan tests and
# bench/vulkan.py, whose docs/benchmarks.md comes back in OUT.
# Usage: bench/gpu_vulkan.sh BUNDLE OUT
set -uo pipefail
b=$(cd "$1" && pwd); out=$2
root=$(cd "$(dirname "$0")"/.. && pwd)
source "$root"/bench/gpu_env.sh "$b"
[ -f "$b"/lib/liblumen_cuda.so.0.xz ] && xz -dc "$b"/lib/liblumen_cuda.so.0.xz > "$gpu_lib"/liblumen_cuda.so.0
# The machine's NVIDIA Vulkan manifest names libGLX_nvidia, which needs an X server; without one
# the loader must be pointed at the EGL library of the same driver.
printf '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}\n' \
  > /tmp/nvidia_egl_icd.json
export VK_ICD_FILENAMES=/tmp/nvidia_egl_icd.json
cp "$b"/bin/lumen "$gpu_lib"/lumen
"$gpu_lib"/lumen --version
if [ -f "$b"/tests.tar.xz ]; then
  rm -rf /tmp/tb && mkdir -p /tmp/tb && tar xJf "$b"/tests.tar.xz -C /tmp/tb
  /tmp/tb/bin/vulkan_backend_test --gtest_brief=1 2>&1 | tail -2
  for t in /tmp/tb/bin/*_test; do
    n=$(basename "$t")
    case $n in vulkan_backend_test | generic_*) continue ;; esac
    echo "$n (vulkan,cpu): $("$t" --gtest_brief=1 --lumen-backends=vulkan,cpu 2>&1 | grep -E 'PASSED|FAILED' | tr '\n' ' ')"
  done
fi
"$py" "$root"/bench/vulkan.py --lumen "$gpu_lib"/lumen
mkdir -p "$out" && cp "$root"/docs/benchmarks.md "$out"/
