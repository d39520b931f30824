#!/bin/bash
# Copies into BUNDLE/lib the Debian libraries BUILD/lumen loads that the GPU machine lacks, each
# under its soname (oneDNN xz-compressed; bench/gpu_env.sh unpacks it there).
#
#   bash bench/pack_libs.sh BUILD_DIR BUNDLE
set -euo pipefail
build=$1 bundle=$2
mkdir -p "$bundle"/lib
for lib in libdnnl.so.2 libprotobuf.so.32 libonnx_proto.so.1 libOpenCL.so.1 libgomp.so.1; do
  path=$(ldd "$build"/lumen | awk -v l="$lib" '$1 == l {print $3}')
  [ -n "$path" ] || continue
  if [ "$lib" = libdnnl.so.2 ]; then xz -T2 -c "$path" > "$bundle"/lib/$lib.xz
  else cp -L "$path" "$bundle"/lib/$lib; fi
done
