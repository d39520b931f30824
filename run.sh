#!/usr/bin/env bash
# Lumen's two entry points on a fresh Debian 12 machine:
#   ./run.sh        install build dependencies if missing, build Release, run the main job
#   ./run.sh test   install, build, run every test, then again under ASan + UBSan (no zoo), fuzz
#                   the ONNX loader (300,000 fixed inputs), the concurrency tests under TSan
#   ./run.sh tsan   the concurrency tests under ThreadSanitizer alone
#   ./run.sh arm64  cross-build for arm64 (aarch64) and run the unit and op tests under qemu-user
#   ./run.sh fuzz [SECONDS]   explore with the ONNX loader fuzzer (default a minute)
set -euo pipefail
cd "$(dirname "$0")"
mode="${1:-run}"
build_dir="${LUMEN_BUILD_DIR:-build}"
jobs="$(nproc)"

packages=(cmake ninja-build g++ pkg-config libdnnl-dev libgtest-dev libonnx-dev libprotobuf-dev
  protobuf-compiler python3-onnx python3-numpy python3-torch python3-torchvision libopenblas0-openmp
  graphviz pybind11-dev python3-dev python3-pytest python3-setuptools python3-pip python3-venv
  clang libclang-rt-14-dev libomp-dev qemu-user libvulkan-dev glslang-tools mesa-vulkan-drivers)
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
install_deps() {
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "run.sh: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# ccache, where installed, makes rebuilds (and the sanitizer builds of unchanged files) cheap.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# The test run compiles CUDA code for the GPU its device tests run on (sm_90) alone, not for
# every architecture a user's build targets (CMakeLists.txt).
cuda_arch=()
build() {
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLUMEN_TESTS=ON -DLUMEN_PYTHON=ON \
    "${launcher[@]}" "${cuda_arch[@]}" >/dev/null
  cmake --build "$build_dir" -j "$jobs"
}

# A second build, with clang, AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's coverage,
# runs every test but the model zoo and the emulated CPU (the unit and op tests, ONNX's conformance cases and the kept
# fuzz findings); any report fails the run. The same build then fuzzes the ONNX loader.
sanitized_dir="$build_dir-asan"
# Sanitizer builds compile at -O1 with line tables only: they take CI's time twice more, and the
# reports need file and line, not variables.
sanitizer_opt="-O1 -g1 -fno-omit-frame-pointer"
# AddressSanitizer's checks as calls rather than inline code: the same checks, and the unrolled
# SIMD kernels (hundreds of loads in one function) compile in half the time (depthwise_conv_avx512.cc
# 279 -> 116 s).
asan_calls="-mllvm -asan-instrumentation-with-call-threshold=0"
sanitized_build() {
  local flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
  cmake -S . -B "$sanitized_dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DLUMEN_TESTS=ON \
    -DLUMEN_CUDA=OFF -DLUMEN_VULKAN=OFF -DLUMEN_PYTHON=OFF -DLUMEN_FUZZ=ON -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
    -DCMAKE_CXX_FLAGS="$flags -fsanitize=fuzzer-no-link $asan_calls $sanitizer_opt" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$sanitized_dir" -j "$jobs"
}
sanitize_tests() {
  sanitized_build
  # The conformance cases are generated (and unpacked) once, by the main build's test run.
  for cases in onnx_cases onnx_cases_1231; do
    [ -e "$sanitized_dir/$cases" ] || ln -s "$PWD/$build_dir/$cases" "$sanitized_dir/$cases"
  done
  # Leak checking is off here: the host pool and oneDNN's primitive cache live as long as the
  # process. The soak samples resident memory, which ASan's quarantine of freed blocks makes grow.
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir "$sanitized_dir" --output-on-failure -j "$jobs" \
    -LE "zoo|soak|emulated"
  # The soak once more, with LeakSanitizer on and no quarantine (so resident memory is the
  # program's): 100,000 runs must leak nothing and keep their memory steady.
  ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=0 ctest --test-dir "$sanitized_dir" \
    --output-on-failure -L soak
}

# libFuzzer on the ONNX loader, seeded with the conformance models the main build's tests
# generated: for SECONDS (the corpus grows in build-asan/tests/corpus between runs), or, in CI,
# a fixed 300,000 inputs from a fixed seed, so that a commit that passed passes again.
fuzz() {
  tests/fuzz/fuzz.sh "$sanitized_dir/tests/load_model_fuzzer" "$@" "$PWD/$build_dir/onnx_cases"
}

# ThreadSanitizer (g++) on the library and the concurrency tests alone: one compiled model run
# from 8 threads against serial runs, models compiled in parallel. libgomp (OpenMP, which Lumen's
# kernels and oneDNN use) is not built with TSan, so TSan cannot see its barriers and would report
# every OpenMP team's hand-off as a race; one OpenMP thread per caller keeps each parallel region
# on the calling thread, so what TSan checks is Lumen's own concurrency (shared executables,
# arenas, kernels, oneDNN primitives, the host pool). Nothing is suppressed.
tsan_tests() {
  local dir="$build_dir-tsan" flags="-fsanitize=thread"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=None -DLUMEN_TESTS=ON -DLUMEN_CUDA=OFF -DLUMEN_VULKAN=OFF \
    "${launcher[@]}" -DCMAKE_CXX_FLAGS="$flags $sanitizer_opt" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
    -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$dir" -j "$jobs" --target concurrency_test
  OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$dir" --output-on-failure -L concurrency
}

# arm64: Debian's cross compiler builds the library, the CLI and the tests for aarch64 against
# Debian's arm64 oneDNN, protobuf, ONNX and GoogleTest (unpacked into the build folder, since their
# -dev packages cannot be installed beside the amd64 ones: cmake/arm64-sysroot.sh), and the unit,
# op and ONNX tests run under qemu-user, one emulator per test program.
arm64_tests() {
  local dir="$build_dir-arm64"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
    $sudo apt-get update -qq
  fi
  install_deps g++-aarch64-linux-gnu qemu-user
  cmake/arm64-sysroot.sh "$dir/sysroot"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLUMEN_TESTS=ON -DLUMEN_CUDA=OFF -DLUMEN_VULKAN=OFF \
    -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DLUMEN_ARM64_SYSROOT="$PWD/$dir/sysroot" \
    "${launcher[@]}" >/dev/null
  cmake --build "$dir" -j "$jobs"
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" -LE "soak|concurrency"
}

# A project outside the tree finds the installed package and runs the API example.
check_install() {
  local prefix="$PWD/$build_dir/install"
  cmake --install "$build_dir" --prefix "$prefix" >/dev/null
  cmake -S tests/install -B "$build_dir/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$build_dir/consumer" >/dev/null
  LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" "$build_dir/consumer/consumer"
}

install_deps "${packages[@]}"
[ "$mode" = test ] && cuda_arch=(-DCMAKE_CUDA_ARCHITECTURES=90)
[ "$mode" = arm64 ] || build
case "$mode" in
  run)
    "$build_dir/classify_digits" models/digits
    "$build_dir/api_example"
    "$build_dir/lumen" --version
    # The three headline results: a 4096 x 4096 matmul per backend (device-resident and host to
    # host), the memory planner on the 20-layer MLP, Conv+ReLU fused into one kernel.
    "$build_dir/lumen" bench matmul 4096
    "$build_dir/lumen" bench memory
    "$build_dir/lumen" bench fusion
    ;;
  test)
    ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
    check_install
    sanitize_tests
    fuzz --runs 300000
    tsan_tests
    arm64_tests
    echo "run.sh: all tests passed"
    ;;
  tsan)
    tsan_tests
    ;;
  arm64)
    arm64_tests
    ;;
  fuzz)
    [ -x "$sanitized_dir/tests/load_model_fuzzer" ] || sanitized_build
    fuzz "${2:-60}"
    ;;
  *)
    echo "usage: ./run.sh [test|tsan|arm64|fuzz]" >&2
    exit 2
    ;;
esac
