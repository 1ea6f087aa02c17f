#!/usr/bin/env bash
# Prepares, on this machine, what scripts/gpu_device_check.sh needs on a lent
# GPU machine (the device tool's `run`, which can reach nothing outside it):
#   .gpu-carry/bin, lib  tessera and the GPU test binaries, built here, with every
#                        shared library they load (their own loader too: the
#                        GPU machine's image has other system libraries)
#   .gpu-carry/llama-vk  llama.cpp's llama-bench built here with its Vulkan
#                        backend (from PEER, default /work/peers/llama.cpp), if present
#   .gpu-carry/llama-src.tar.gz  llama.cpp's sources for its CUDA build there
# Then: run with carry [".gpu-carry"], command "scripts/gpu_device_check.sh all".
set -euo pipefail
cd "$(dirname "$0")/.."
PEER=${PEER:-/work/peers/llama.cpp}
grep -qx '/.gpu-carry/' .git/info/exclude 2>/dev/null || echo '/.gpu-carry/' >> .git/info/exclude
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target tessera test_gpu test_gpu_model
rm -rf .gpu-carry && mkdir -p .gpu-carry/bin .gpu-carry/lib
cp build/tessera build/tests/test_gpu build/tests/test_gpu_model .gpu-carry/bin/
carry_libs() {  # every library the binaries load, the C library and its loader included
  for b in "$@"; do ldd "$b" | awk '/=> \//{print $3} /^[ \t]*\/lib/{print $1}'; done | sort -u | while read -r lib; do
    cp -L "$lib" .gpu-carry/lib/
  done
}
carry_libs .gpu-carry/bin/*
if [ -x "$PEER/build-vulkan/bin/llama-bench" ]; then
  mkdir -p .gpu-carry/llama-vk
  cp "$PEER"/build-vulkan/bin/llama-bench "$PEER"/build-vulkan/bin/*.so* .gpu-carry/llama-vk/ 2>/dev/null || true
  carry_libs .gpu-carry/llama-vk/llama-bench
fi
if [ -d "$PEER/ggml" ]; then
  tar -C "$PEER" -czf .gpu-carry/llama-src.tar.gz --exclude='build*' --exclude=.git --exclude=models --exclude=docs \
    --exclude=media --exclude=examples --exclude=app --exclude=gguf-py --exclude=tests \
    CMakeLists.txt cmake common ggml include src tools vendor licenses LICENSE
fi
du -sh .gpu-carry
