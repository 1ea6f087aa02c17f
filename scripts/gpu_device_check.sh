#!/usr/bin/env bash
# The Vulkan backend on a lent GPU machine, in one call of the device tool's
# `run` (at most 9 minutes; carry [".gpu-carry", ".gl"], made here by
# scripts/gpu_device_prepare.sh and the device tool's README). Steps, by argument (default: all):
#   tests  the kernel and forward tests on the first GPU that is not
#          lavapipe: every product, norm, RoPE, softmax and the whole forward of
#          every family and weight type against the CPU's logits, bit for bit
#          (with the device's own fma if the probe takes it, then with the
#          emulated one), and which fma `tessera devices` reports
#   bench  tg128 and pp512 of the 1.1B and 8B shapes in Q4_0 and Q4_K (zero
#          weights: the speed of real ones, no time to generate): tessera on
#          the GPU, llama.cpp's Vulkan and CUDA backends (carried builds, or
#          CUDA built there from carried sources), side by side; tessera with
#          its defaults, with prompts' products a workgroup per row as before
#          the tiles (TESSERA_VULKAN_PRODUCTS=subgroups) and with plain integer
#          sums (TESSERA_VULKAN_DOT=plain)
# Figures land in $OUT/gpu_check.txt, everything printed in $OUT/gpu_log.txt,
# the device's time per kernel (TESSERA_VULKAN_PROFILE) in $OUT/gpu_profile.txt.
# TESSERA_GPU_CHECK_ANY=1 takes a software device too (a rehearsal of the
# script on lavapipe); GPU_CHECK_SHAPES names the shapes (default "1b 8b"; tiny
# for a rehearsal),
# GPU_CHECK_PP and GPU_CHECK_TG set the prompt and generated lengths,
# GPU_CHECK_CUDA_BUILD=0 skips building llama.cpp's CUDA backend there,
# GPU_CHECK_PEERS=0 llama.cpp's runs, GPU_CHECK_VARIANTS names tessera's
# (default, TESSERA_VULKAN_PRODUCTS=subgroups, TESSERA_VULKAN_DOT=plain;
# TESSERA_VULKAN_PRODUCTS=rows, everything a workgroup per row, runs 32 tokens;
# TESSERA_VULKAN_TILE=DxT measures another shape of the prompts' tiles),
# GPU_CHECK_TYPES the weight types (default "Q4_0 Q4_K").
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-all}
out=${OUT:-/tmp}/gpu_check.txt
log=${OUT:-/tmp}/gpu_log.txt
: > "$out"
: > "$log"
t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$out"; }
W=${GPU_CHECK_TMP:-/tmp/gpu-check}
mkdir -p $W
tar -C $W -xJf .gpu-carry/carry.tar.xz || { echo "no .gpu-carry/carry.tar.xz: run scripts/gpu_device_prepare.sh"; exit 1; }
C=$W/carry
# The Vulkan loader and the GL dispatch libraries NVIDIA's driver loads, where
# the image lacks them (the device tool's README).
if [ -d .gl ] && ! ldconfig -p | grep -q libGLdispatch.so.0; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# The NVIDIA driver's ICD, where the machine keeps it (the device tool's README).
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f $nvidia_icd ]; then export VK_DRIVER_FILES=$nvidia_icd; fi
# The carried libraries the image lacks (by soname): its own C library, C++
# library and the like are newer than this build's and the driver needs them.
mkdir -p $C/run-lib
for lib in $C/lib/*; do
  name=$(basename $lib)
  ldconfig -p | grep -q "^[[:space:]]*$name " || ln -sf $lib $C/run-lib/$name
done
loader=(env LD_LIBRARY_PATH=$C/run-lib)
# The test binaries were built elsewhere: their data is this tree's.
export TESSERA_SOURCE_DIR=$PWD TESSERA_TEST_TMP=$W/tessera-test
tessera() { "${loader[@]}" "$C/bin/tessera" "$@"; }
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null)"
say "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
tessera devices 2>&1 | tee -a "$out"
device=$(tessera devices --json | python3 -c '
import json, os, sys
d = json.load(sys.stdin)["vulkan"] or []
gpus = [x["index"] for x in d if x["type"] != "cpu"]
any_device = [x["index"] for x in d] if os.environ.get("TESSERA_GPU_CHECK_ANY") else []
print(gpus[0] if gpus else any_device[0] if any_device else -1)')
[ "${device:--1}" -ge 0 ] || { say "no Vulkan GPU"; exit 1; }
say "GPU: vulkan:$device"

# Work that needs only the CPUs starts at once, beside the GPU tests: the
# models, the peer's builds unpacked (or its CUDA build from sources).
m=$W/models
pp=${GPU_CHECK_PP:-512} tg=${GPU_CHECK_TG:-128}  # smaller for a rehearsal
if [ "$step" = all ] || [ "$step" = bench ]; then
  mkdir -p $m
  shapes=${GPU_CHECK_SHAPES:-1b 8b}
  (
    for t in ${GPU_CHECK_TYPES:-Q4_0 Q4_K}; do
      for shape in $shapes; do
        case $shape in
          tiny) dims="--dim 256 --layers 2 --heads 8 --kv-heads 2 --ffn 512 --vocab 1024" ;;
          1b) dims="--dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000" ;;
          8b) dims="--dim 4096 --layers 32 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256" ;;
          *) echo "GPU_CHECK_SHAPES: tiny, 1b or 8b, not $shape"; exit 1 ;;
        esac
        tessera gen-model $dims --type $t --zero-weights -q -o $m/$shape-$t.gguf
      done
    done
  ) >> "$log" 2>&1 &
  gen=$!
  cuda_build=
  # Without its flash-attention kernels (GGML_CUDA_FA=OFF): their ~100 template
  # instances would double the build, and pp512/tg128 at a short context
  # barely use them.
  if [ ! -x $C/llama-cuda/llama-bench ] && [ -f .gpu-carry/llama-src.tar.gz ] && command -v nvcc >/dev/null &&
    [ "${GPU_CHECK_CUDA_BUILD:-1}" = 1 ]; then
    mkdir -p $W/llama-src && tar -C $W/llama-src -xzf .gpu-carry/llama-src.tar.gz
    (cd $W/llama-src && cmake -B build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_FA=OFF \
      -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF &&
      nice -n 19 cmake --build build --target llama-bench -j$(($(nproc) - 2)) && mkdir -p $C/llama-cuda &&
      cp -P build/bin/llama-bench build/bin/*.so* $C/llama-cuda/ && touch $C/llama-cuda/built-there) >> "$log" 2>&1 &
    cuda_build=$!
  fi
fi

if [ "$step" = all ] || [ "$step" = tests ]; then
  say "tests"
  TESSERA_VULKAN_DEVICE=$device timeout 60 "${loader[@]}" "$C/bin/test_gpu" 2>&1 | tee -a "$log" |
    grep -E "FAILED|PASSED|tests ran" | tee -a "$out"
  TESSERA_VULKAN_DEVICE=$device timeout 120 "${loader[@]}" "$C/bin/test_gpu_model" 2>&1 | tee -a "$log" |
    grep -E "FAILED|PASSED|tests ran" | tee -a "$out"
fi

if [ "$step" = all ] || [ "$step" = bench ]; then
  wait $gen || say "gen-model failed (see gpu_log.txt)"
  say "models ready"
  # CUDA's runtime and cuBLAS: the machine's toolkit (the carried build links CUDA 13's).
  cuda_lib=$(dirname "$(ls /usr/local/cuda/lib64/libcublas.so.* /usr/local/cuda*/lib64/libcublas.so.* \
    /usr/local/cuda*/targets/x86_64-linux/lib/libcublas.so.* 2>/dev/null | head -1)" 2>/dev/null)
  llama_cuda() {
    if [ -f $C/llama-cuda/built-there ]; then
      LD_LIBRARY_PATH=$C/llama-cuda:${cuda_lib:-/usr/local/cuda/lib64} timeout 120 $C/llama-cuda/llama-bench "$@"
    else  # built on Debian 12
      LD_LIBRARY_PATH=$C/llama-cuda:$C/run-lib:${cuda_lib:-/usr/local/cuda/lib64} timeout 120 $C/llama-cuda/llama-bench "$@"
    fi
  }
  capture() {  # LABEL, then the command: its pp and tg rows, or why there are none
    local label=$1; shift
    "$@" > $W/run.txt 2>&1
    cat $W/run.txt >> "$log"
    grep -E "^\|.*(pp|tg)[0-9]" $W/run.txt | sed "s/^/$label /" | tee -a "$out" | grep -q . ||
      say "$label: no figures: $(tail -3 $W/run.txt | tr '\n' ' ')"
  }
  # The largest shape first (the issue's targets are on it); each step only
  # while the call has time left (GPU_CHECK_DEADLINE seconds for tessera's and
  # llama.cpp's Vulkan runs, 60 more for CUDA's).
  deadline=${GPU_CHECK_DEADLINE:-420}
  models=$(ls $m/*.gguf | sort -r)
  late() { [ $(($(date +%s) - t0)) -ge "$1" ] && say "skipped for time: $2"; }
  for f in $models; do
    say "== $(basename $f)"
    # The defaults (packed dot instructions where the device has them, one
    # token's products a subgroup per row where its subgroups pass the probe,
    # prompts' block products in tiles), then prompts a workgroup per row
    # (the layout before the tiles), then plain integer sums.
    for variant in ${GPU_CHECK_VARIANTS:-default TESSERA_VULKAN_PRODUCTS=subgroups TESSERA_VULKAN_DOT=plain}; do
      late $deadline "tessera $variant on $(basename $f)" && continue
      n=$tg; [ $variant = TESSERA_VULKAN_PRODUCTS=rows ] && n=32
      capture "tessera vulkan ($variant)" env $([ $variant = default ] || echo $variant) timeout 120 "${loader[@]}" \
        "$C/bin/tessera" bench -m $f -p $pp -n $n -r 2 --device vulkan:$device
    done
    late $deadline "llama vulkan on $(basename $f)" && continue
    [ -x $C/llama-vk/llama-bench ] && [ "${GPU_CHECK_PEERS:-1}" = 1 ] && capture "llama vulkan" timeout 90 env LD_LIBRARY_PATH=$C/llama-vk:$C/run-lib \
      $C/llama-vk/llama-bench -m $f -p $pp -n $tg -r 2 -ngl 99
  done
  # Where the device's time goes (TESSERA_VULKAN_PROFILE), the largest Q4_K
  # shape: generation, then a prompt.
  f=
  for shape in tiny 1b 8b; do [ -f $m/$shape-Q4_K.gguf ] && f=$m/$shape-Q4_K.gguf; done
  prof=${OUT:-/tmp}/gpu_profile.txt
  : > $prof
  for args in "-p 0 -n 64" "-p $pp -n 0"; do
    late $((deadline + 30)) "the profile of $(basename $f) $args" && continue
    echo "== $(basename $f) $args" >> $prof
    TESSERA_VULKAN_PROFILE=1 timeout 60 "${loader[@]}" "$C/bin/tessera" bench -m $f $args -r 1 \
      --device vulkan:$device >> $prof 2>&1
  done
  say "profile in gpu_profile.txt"
  # llama.cpp's CUDA backend last: where it is built here, the build has had
  # the time of everything above (niced, so the runs above come first).
  if [ -n "$cuda_build" ]; then
    say "waiting for llama.cpp's CUDA build"
    while kill -0 $cuda_build 2>/dev/null && [ $(($(date +%s) - t0)) -lt $((deadline + 90)) ]; do sleep 3; done
    if kill -0 $cuda_build 2>/dev/null; then
      say "llama.cpp's CUDA build did not finish in time"
    else
      wait $cuda_build || say "llama.cpp CUDA build failed (see gpu_log.txt)"
    fi
  fi
  if [ -x $C/llama-cuda/llama-bench ] && [ "${GPU_CHECK_PEERS:-1}" = 1 ]; then
    for f in $models; do
      late $((deadline + 120)) "llama cuda on $(basename $f)" && continue
      say "== $(basename $f)"
      capture "llama cuda" llama_cuda -m $f -p $pp -n $tg -r 2 -ngl 99
    done
  fi
fi
if [ "$step" = all ] || [ "$step" = tests ]; then
  # What time is left: the forward tests again with the fma built from
  # doubles (the probe's other branch) and a dot per invocation (lavapipe's
  # layout), on this GPU.
  if [ "$step" = tests ] || [ $(($(date +%s) - t0)) -lt ${GPU_CHECK_DEADLINE:-420} ]; then
    TESSERA_VULKAN_FMA=emulate TESSERA_VULKAN_PRODUCTS=dots TESSERA_VULKAN_DEVICE=$device timeout 60 \
      "${loader[@]}" "$C/bin/test_gpu_model" 2>&1 | tee -a "$log" | grep -E "FAILED|PASSED|tests ran" | tee -a "$out"
  fi
fi
say "done"
