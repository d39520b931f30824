#!/usr/bin/env bash
# Unpacks Debian's arm64 builds of Lumen's dependencies into DIR, for the arm64 cross build
# (cmake/aarch64-linux-gnu.cmake). Their -dev packages cannot be installed beside the amd64 ones
# (both own /usr/include), so the packages are downloaded and unpacked, not installed. Needs the
# arm64 architecture in apt's sources: `dpkg --add-architecture arm64 && apt-get update` (run.sh).
set -euo pipefail
dir="$(realpath -m "${1:?usage: arm64-sysroot.sh DIR}")"
packages=(libdnnl2 libdnnl-dev libprotobuf32 libprotobuf-dev libonnx1 libonnx-dev libonnxifi libgtest-dev
  zlib1g)
stamp="$dir/.packages"
[ -f "$stamp" ] && [ "$(cat "$stamp")" = "${packages[*]}" ] && exit 0
rm -rf "$dir"
mkdir -p "$dir/debs"
(cd "$dir/debs" && apt-get download -q "${packages[@]/%/:arm64}" >/dev/null 2>&1) ||
  (cd "$dir/debs" && apt-get download "${packages[@]/%/:arm64}")
for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir"; done
rm -rf "$dir/debs"
echo "${packages[*]}" >"$stamp"
