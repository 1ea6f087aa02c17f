#!/usr/bin/env bash
# The Vulkan backend on a lent GPU machine, in one call (the device tool's
# `run`): lists the devices and runs the kernel tests (the canonical-order
# products against the CPU's bits) on the first GPU that is not lavapipe.
# Built here beforehand (`cmake --build build --target tessera test_gpu`) and
# carried with the loader packages:
#   echo /.gl/ >> .git/info/exclude; mkdir -p .gl /tmp/amd64/partial
#   o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
#   apt-get $o update; (cd .gl && apt-get $o download libvulkan1)
#   run: carry [".gl", "build"], command "scripts/gpu_device_check.sh"
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .gl ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
# The NVIDIA driver's ICD, where the machine keeps it.
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
build/tessera devices
device=$(build/tessera devices --json | python3 -c '
import json, sys
d = json.load(sys.stdin)["vulkan"] or []
gpus = [x["index"] for x in d if x["type"] != "cpu"]
print(gpus[0] if gpus else (d[0]["index"] if d else -1))')
[ "$device" -ge 0 ] || { echo "no Vulkan device"; exit 1; }
echo "testing on vulkan:$device"
TESSERA_VULKAN_DEVICE=$device build/tests/test_gpu
