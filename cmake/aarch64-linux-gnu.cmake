# Cross-compiling Lumen for arm64 (aarch64) Linux on an x86-64 Debian machine:
#   cmake/arm64-sysroot.sh DIR        # Debian's arm64 libdnnl, protobuf, onnx and gtest, unpacked
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DLUMEN_ARM64_SYSROOT=DIR
# The compiler, C library, libstdc++ and libgomp come from g++-aarch64-linux-gnu
# (/usr/aarch64-linux-gnu); the binaries run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR,
# which CTest and GoogleTest's test discovery use).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(LUMEN_ARM64_SYSROOT "" CACHE PATH "Debian's arm64 packages, unpacked (cmake/arm64-sysroot.sh)")
if(NOT LUMEN_ARM64_SYSROOT)
  message(FATAL_ERROR "set LUMEN_ARM64_SYSROOT to a folder made by cmake/arm64-sysroot.sh")
endif()
# try_compile projects see the cache variable too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES LUMEN_ARM64_SYSROOT)

set(CMAKE_FIND_ROOT_PATH ${LUMEN_ARM64_SYSROOT} /usr/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The arm64 libraries load from the sysroot under emulation; nothing of the host's is seen.
set(LUMEN_ARM64_LIBRARY_PATH
    "${LUMEN_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu:${LUMEN_ARM64_SYSROOT}/lib/aarch64-linux-gnu")
# The sysroot's libraries need others of it (protobuf needs zlib) at link time.
string(REPLACE ":" ";" _lumen_arm64_dirs "${LUMEN_ARM64_LIBRARY_PATH}")
foreach(dir ${_lumen_arm64_dirs})
  string(APPEND CMAKE_EXE_LINKER_FLAGS_INIT " -Wl,-rpath-link,${dir}")
  string(APPEND CMAKE_SHARED_LINKER_FLAGS_INIT " -Wl,-rpath-link,${dir}")
endforeach()
# The emulated CPU is a Neoverse N1 (AWS Graviton2): Armv8.2 with NEON and no SVE, the ISA Lumen
# and oneDNN see on Apple Silicon and most arm64 servers. (qemu's default, `max`, has 512-bit SVE,
# where oneDNN 2.6 JIT-compiles its kernels for A64FX, and its SVE convolution drops a HardSwish
# post-op.)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -cpu neoverse-n1 -L /usr/aarch64-linux-gnu -E
    LD_LIBRARY_PATH=${LUMEN_ARM64_LIBRARY_PATH})
