#!/usr/bin/env bash
# Prepares, on this machine, what scripts/gpu_device_check.sh needs on a lent
# GPU machine (the device tool's `run`, which can reach nothing outside it):
#   .gpu-carry/bin, lib  tessera and the GPU test binaries, built here, with every
#                        shared library they load (their own loader too: the
#                        GPU machine's image has other system libraries)
#   .gpu-carry/llama-vk.tar.xz    llama.cpp's llama-bench built here with its
#                                 Vulkan backend (PEER/build-vulkan, PEER default
#                                 /work/peers/llama.cpp), if present
#   .gpu-carry/llama-cuda.tar.xz  the same with its CUDA backend (PEER/build-cuda,
#                                 sm_90), if present; else
#   .gpu-carry/llama-src.tar.gz   llama.cpp's sources, for a CUDA build there
# Then: run with carry [".gpu-carry", ".gl"], command "scripts/gpu_device_check.sh all"
# (.gl: the Vulkan and GL dispatch libraries as Debian packages, made as the
# device tool's README says; the check unpacks them where the image lacks them).
set -euo pipefail
cd "$(dirname "$0")/.."
PEER=${PEER:-/work/peers/llama.cpp}
grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >> .git/info/exclude
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target tessera test_gpu test_gpu_model
rm -rf .gpu-carry && mkdir -p .gpu-carry/bin .gpu-carry/lib
cp build/tessera build/tests/test_gpu build/tests/test_gpu_model .gpu-carry/bin/
carry_libs() {  # every library the binaries load, the C library and its loader included
  # (not llama.cpp's own libraries: those travel in its packed build)
  for b in "$@"; do ldd "$b" | awk '/=> \//{print $3} /^[ \t]*\/lib/{print $1}'; done | grep -v "^$PEER/" | sort -u |
    while read -r lib; do
    cp -L "$lib" .gpu-carry/lib/
  done
}
carry_libs .gpu-carry/bin/*
# llama.cpp's builds travel packed (their shaders and kernels compress well):
# Vulkan with the libraries it loads; CUDA without CUDA's own libraries, which
# the GPU machine's toolkit has (the same CUDA 13 as this machine's nvcc).
pack_peer() {  # NAME BUILD-DIR
  local stage=.gpu-carry/$1
  mkdir -p "$stage"
  cp "$2"/bin/llama-bench "$2"/bin/*.so* "$stage"/ 2>/dev/null || true
  tar -C .gpu-carry -cJf .gpu-carry/$1.tar.xz "$1" && rm -rf "$stage"
}
if [ -x "$PEER/build-vulkan/bin/llama-bench" ]; then
  carry_libs "$PEER/build-vulkan/bin/llama-bench"
  pack_peer llama-vk "$PEER/build-vulkan"
fi
if [ -x "$PEER/build-cuda/bin/llama-bench" ]; then
  pack_peer llama-cuda "$PEER/build-cuda"
elif [ -d "$PEER/ggml" ]; then  # no CUDA build here: its sources, to build there
  tar -C "$PEER" -czf .gpu-carry/llama-src.tar.gz --exclude='build*' --exclude=.git --exclude=models --exclude=docs \
    --exclude=media --exclude=examples --exclude=app --exclude=gguf-py --exclude=tests \
    CMakeLists.txt cmake common ggml include src tools vendor licenses LICENSE
fi
du -sh .gpu-carry
