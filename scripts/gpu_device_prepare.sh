#!/usr/bin/env bash
# Prepares, on this machine, what scripts/gpu_device_check.sh needs on a lent
# GPU machine (the device tool's `run`, which can reach nothing outside it):
#   .gpu-carry/carry.tar.xz  carry/bin, lib: tessera and the GPU test binaries,
#                            built here, with every shared library they load
#                            (their own loader too: the GPU machine's image has
#                            other system libraries); carry/llama-vk: llama.cpp's
#                            llama-bench built here with its Vulkan backend
#                            (PEER/build-vulkan, PEER default /work/peers/llama.cpp),
#                            if present; carry/llama-cuda: the same with its CUDA
#                            backend (CUDA_BUILD, default PEER/build-cuda, sm_90),
#                            if present; else
#   .gpu-carry/llama-src.tar.gz  llama.cpp's sources, for a CUDA build there
# Then: run with carry [".gpu-carry", ".gl"], command "scripts/gpu_device_check.sh all"
# (.gl: the Vulkan and GL dispatch libraries as Debian packages, made as the
# device tool's README says; the check unpacks them where the image lacks them).
set -euo pipefail
cd "$(dirname "$0")/.."
PEER=${PEER:-/work/peers/llama.cpp}
CUDA_BUILD=${CUDA_BUILD:-$PEER/build-cuda}  # llama.cpp with -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF
grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >> .git/info/exclude
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target tessera test_gpu test_gpu_model
# Everything but llama.cpp's sources travels as one xz archive, carry.tar.xz
# (the device tool's working tree holds at most 64 MiB), staged in S.
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S"/carry/bin "$S"/carry/lib
cp build/tessera build/tests/test_gpu build/tests/test_gpu_model "$S"/carry/bin/
carry_libs() {  # every library the binaries load, the C library and its loader included
  # (not llama.cpp's own libraries, which travel beside its llama-bench, nor
  # CUDA's, which the GPU machine has)
  for b in "$@"; do ldd "$b" | awk '/=> \//{print $3} /^[ \t]*\/lib/{print $1}'; done |
    grep -v -e "^$PEER/" -e "^$CUDA_BUILD/" -e "^/usr/local/cuda" | sort -u |
    while read -r lib; do cp -L "$lib" "$S"/carry/lib/; done
}
carry_libs "$S"/carry/bin/*
# llama.cpp's builds: Vulkan with the libraries it loads; CUDA without CUDA's
# own libraries, which the GPU machine's toolkit has (the same CUDA 13 as this
# machine's nvcc).
peer() {  # NAME BUILD-DIR
  mkdir -p "$S/carry/$1"
  cp -P "$2"/bin/llama-bench "$2"/bin/*.so* "$S/carry/$1"/ 2>/dev/null || true  # -P: the links stay links
}
if [ -x "$PEER/build-vulkan/bin/llama-bench" ]; then
  carry_libs "$PEER/build-vulkan/bin/llama-bench"
  peer llama-vk "$PEER/build-vulkan"
fi
rm -rf .gpu-carry && mkdir -p .gpu-carry
if [ -x "$CUDA_BUILD/bin/llama-bench" ]; then
  carry_libs "$CUDA_BUILD/bin/llama-bench"
  peer llama-cuda "$CUDA_BUILD"
elif [ -d "$PEER/ggml" ]; then  # no CUDA build here: its sources, to build there
  tar -C "$PEER" -czf .gpu-carry/llama-src.tar.gz --exclude=.git \
    CMakeLists.txt cmake common ggml include src tools vendor licenses LICENSE
fi
tar -C "$S" -cf - carry | xz -T0 -6 > .gpu-carry/carry.tar.xz
du -sh .gpu-carry
