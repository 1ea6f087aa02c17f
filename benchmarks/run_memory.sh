#!/usr/bin/env bash
# Resident memory of `tessera run` on a TinyLlama-1.1B-shaped model against
# its file size, and its generation speed. Weights are memory-mapped, so peak
# RSS should be about the file size (every weight page is read by a dense
# forward) plus the KV cache and scratch, never a second copy of the weights.
#   benchmarks/run_memory.sh [TYPE] [THREADS]     (TYPE: Q4_0, Q8_0, F16; default Q4_0, 2)
set -euo pipefail
cd "$(dirname "$0")/.."
type=${1:-Q4_0}
threads=${2:-2}
bin=build/tessera
vocab=tests/data/vocab/ggml-vocab-llama-spm.gguf
[ -x "$bin" ] || { echo "build first: scripts/setup" >&2; exit 1; }
[ -f "$vocab" ] || { echo "missing $vocab (tests/data/vocab)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model=$dir/tinyllama-shape-$type.gguf
"$bin" gen-model --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab-from "$vocab" \
  --type "$type" -q -o "$model"
/usr/bin/time -f '%M' -o "$dir/rss" "$bin" run -m "$model" -p "Once upon a time" -n 16 --temp 0 \
  -t "$threads" -c 256 --json > "$dir/out.json"
file_bytes=$(stat -c %s "$model")
rss_kib=$(cat "$dir/rss")
python3 - "$file_bytes" "$rss_kib" "$dir/out.json" "$type" "$threads" <<'PY'
import json, sys
file_bytes, rss_kib, out, qtype, threads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
t = json.load(open(out))["timings"]
print(f"model: 1.1B shape {qtype}, file {file_bytes / 2**20:.1f} MiB")
print(f"peak RSS of run: {rss_kib / 1024:.1f} MiB = {rss_kib * 1024 / file_bytes:.3f} x file size")
print(f"threads {threads}: prompt {t['prompt_tokens_per_second']:.2f} tok/s, "
      f"generation {t['generation_tokens_per_second']:.2f} tok/s")
PY
