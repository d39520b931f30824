# Sourced by the GPU scripts on the GPU machine: `source bench/gpu_env.sh BUNDLE`.
# Unpacks the bundle's libraries (oneDNN and the CUDA plugin compressed) into /tmp/lumen_gpu_lib
# and puts them,
# the CUDA toolkit's libraries and PyTorch's NVIDIA wheel libraries (cuDNN, cuBLAS) on
# LD_LIBRARY_PATH; sets `py` to the machine's python3.
gpu_lib=/tmp/lumen_gpu_lib
mkdir -p "$gpu_lib"
cp "$1"/lib/*.so* "$gpu_lib"/ 2>/dev/null || true
for packed in "$1"/lib/*.so*.xz; do
  [ -f "$packed" ] || continue
  lib=$gpu_lib/$(basename "$packed" .xz)
  [ -f "$lib" ] && [ "$lib" -nt "$packed" ] || xz -dc "$packed" > "$lib"
done
py=$(command -v python3)
gpu_wheel_libs=$("$py" -c 'import glob, os, nvidia; b = nvidia.__path__[0]; print(":".join(sorted(set(os.path.dirname(p) for p in glob.glob(b + "/*/lib/lib*.so*")))))' 2>/dev/null || true)
export LD_LIBRARY_PATH=$gpu_lib:/usr/local/cuda/lib64:${gpu_wheel_libs}:${LD_LIBRARY_PATH:-}
