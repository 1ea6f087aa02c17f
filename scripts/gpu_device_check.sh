#!/usr/bin/env bash
# The Vulkan backend on a lent GPU machine, in one call of the device tool's
# `run` (at most 8 minutes; carry [".gpu-carry"], made here by
# scripts/gpu_device_prepare.sh). Steps, by argument (default: all):
#   tests  the kernel and forward tests on the first GPU that is not
#          lavapipe: every product, norm, RoPE, softmax and the whole forward of
#          every family and weight type against the CPU's logits, bit for bit
#          (with the device's own fma if the probe takes it, then with the
#          emulated one), and which fma `tessera devices` reports
#   bench  tg128 and pp512 of the 1.1B and 8B shapes in Q4_0 and Q4_K (zero
#          weights: the speed of real ones, no time to generate): tessera on
#          the GPU, llama.cpp's Vulkan backend (carried) and CUDA backend (built
#          here from the carried sources, sm_90), side by side; tessera with
#          plain integer sums and with packed dot products (TESSERA_VULKAN_DOT)
# Figures land in $OUT/gpu_check.txt. TESSERA_GPU_CHECK_ANY=1 takes a
# software device too (a rehearsal of the script on lavapipe).
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-all}
out=${OUT:-/tmp}/gpu_check.txt
: > "$out"
say() { echo "$*" | tee -a "$out"; }
C=.gpu-carry
# The NVIDIA driver's ICD, where the machine keeps it (the device tool's README).
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f $nvidia_icd ]; then export VK_DRIVER_FILES=$nvidia_icd; fi
loader=("$C/lib/ld-linux-x86-64.so.2" --library-path "$C/lib")  # the carried libraries, whatever the image has
run() { "${loader[@]}" "$@"; }
# The test binaries were built elsewhere: their data is this tree's.
export TESSERA_SOURCE_DIR=$PWD TESSERA_TEST_TMP=/tmp/tessera-test
tessera() { run "$C/bin/tessera" "$@"; }
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null)"
tessera devices | tee -a "$out"
device=$(tessera devices --json | python3 -c '
import json, os, sys
d = json.load(sys.stdin)["vulkan"] or []
gpus = [x["index"] for x in d if x["type"] != "cpu"]
any_device = [x["index"] for x in d] if os.environ.get("TESSERA_GPU_CHECK_ANY") else []
print(gpus[0] if gpus else any_device[0] if any_device else -1)')
[ "$device" -ge 0 ] || { say "no Vulkan GPU"; exit 1; }
say "GPU: vulkan:$device"
if [ "$step" = all ] || [ "$step" = tests ]; then
  TESSERA_VULKAN_DEVICE=$device timeout 120 "${loader[@]}" "$C/bin/test_gpu" 2>&1 | tail -3 | tee -a "$out"
  TESSERA_VULKAN_DEVICE=$device timeout 180 "${loader[@]}" "$C/bin/test_gpu_model" 2>&1 | tail -16 | tee -a "$out"
  # The same with the fma built from doubles (the probe's other branch) and
  # with a dot per invocation (lavapipe's layout), on this GPU.
  TESSERA_VULKAN_FMA=emulate TESSERA_VULKAN_PRODUCTS=dots TESSERA_VULKAN_DEVICE=$device timeout 180 \
    "${loader[@]}" "$C/bin/test_gpu_model" 2>&1 | tail -3 | tee -a "$out"
fi
if [ "$step" = all ] || [ "$step" = bench ]; then
  m=/tmp/models; mkdir -p $m
  for t in Q4_0 Q4_K; do
    tessera gen-model --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000 --type $t \
      --zero-weights -q -o $m/1b-$t.gguf
    tessera gen-model --dim 4096 --layers 32 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256 --type $t \
      --zero-weights -q -o $m/8b-$t.gguf
  done
  if [ -f $C/llama-src.tar.gz ] && command -v nvcc >/dev/null; then
    mkdir -p /tmp/llama && tar -C /tmp/llama -xzf $C/llama-src.tar.gz
    (cd /tmp/llama && timeout 300 cmake -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null &&
      timeout 300 cmake --build build --target llama-bench -j16 >/dev/null) || say "llama.cpp CUDA build failed"
  fi
  packed=$(tessera devices --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["vulkan"][int(sys.argv[1])]
print("packed" if d.get("integer_dot") else "")' "$device")
  for f in $m/1b-Q4_0.gguf $m/1b-Q4_K.gguf $m/8b-Q4_0.gguf $m/8b-Q4_K.gguf; do
    say "== $(basename $f)"
    # Plain integer sums, then the packed dot instructions where the device has them.
    for dot in plain $packed; do
      TESSERA_VULKAN_DOT=$dot timeout 120 "${loader[@]}" "$C/bin/tessera" bench -m $f -p 512 -n 128 -r 2 \
        --device vulkan:$device 2>&1 | grep -E "pp|tg" | sed "s/^/tessera vulkan ($dot) /" | tee -a "$out"
    done
    [ -x $C/llama-vk/llama-bench ] && timeout 120 "$C/lib/ld-linux-x86-64.so.2" --library-path "$C/llama-vk:$C/lib" \
      $C/llama-vk/llama-bench -m $f -p 512 -n 128 -r 2 -ngl 99 2>&1 | grep -E "pp|tg" | sed 's/^/llama vulkan /' | tee -a "$out"
    [ -x /tmp/llama/build/bin/llama-bench ] && timeout 120 /tmp/llama/build/bin/llama-bench -m $f -p 512 -n 128 -r 2 \
      -ngl 99 2>&1 | grep -E "pp|tg" | sed 's/^/llama cuda /' | tee -a "$out"
  done
fi
