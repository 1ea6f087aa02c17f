#!/usr/bin/env bash
# Long context: quality and speed of sparse attention and quantized KV caches
# (issue 23). Prints four tables:
#   1. quality of sparse attention against dense on the bundled model at its
#      full context (512) over tests/data text: windows 32, 64, 128, each
#      landmark mode; perplexity, KL divergence and top-1 agreement
#      (`tessera perplexity --kl-divergence`);
#   2. quality of KV cache types against F16 on a TinyLlama-1.1B-shaped model
#      (random weights, heads of 64; the bundled model's heads are 8 wide, no
#      whole Q8_0/Q4_0 block): KL and top-1;
#   3. one token's attention alone at each depth, dense against sparse, F16
#      and Q8_0 caches (build/attention_bench: the 1.1B shape's 22 layers x 4
#      KV heads x 64, random rows), with the pairs a query reads and KV bytes;
#   4. whole-token generation (tessera bench -d DEPTH --depth-fill random, the
#      history stored as random K/V rows: attention's cost depends on how many
#      rows it reads, not their values) at each depth, dense against sparse,
#      F16 and Q8_0; and the prefill of a PREFILL-token prompt, dense against
#      sparse (real tokens).
# With a llama.cpp build directory, llama-bench's tg at the same depths
# (-d, flash attention on; it prefills the history for real, so only at the
# depths of --llama-depths, default 1024 and 4096) beside table 4.
#
#   benchmarks/long_context.sh [--depths "1024 4096 8192 32768"] [--prefill 8192]
#                              [--threads N] [--reps N] [--skip-quality]
#                              [--llama-depths "1024 4096"] [LLAMA_CPP_DIR]
#
# Ratios are measured in the same run; absolute rates are this machine's.
set -euo pipefail
cd "$(dirname "$0")/.."
depths="1024 4096 8192 32768"
prefill=8192
threads=$(nproc)
reps=3
quality=1
llama=""
llama_depths="1024 4096"
while [ $# -gt 0 ]; do
  case "$1" in
    --depths) depths=$2; shift 2 ;;
    --prefill) prefill=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --skip-quality) quality=0; shift ;;
    --llama-depths) llama_depths=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) llama=$1; shift ;;
  esac
done
work=${WORK:-/tmp/tessera-long-context}
mkdir -p "$work"
source benchmarks/common.sh
bench_binaries
cmake --build build --target attention_bench > /dev/null
max_depth=0
for d in $depths; do [ "$d" -gt "$max_depth" ] && max_depth=$d; done
model=$work/tinyllama-shape-32k-Q4_0.gguf
if [ ! -f "$model" ]; then
  "$bin" gen-model --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --ctx 32768 \
    --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --type Q4_0 -q -o "$model"
fi
text=tests/data/little_stories.txt
# The value after LABEL (up to a '±') in a perplexity run's output.
stat() { grep -m1 "$2" "$1" | sed 's/.*: *//; s/ *±.*//; s/ *%//'; }

if [ "$quality" = 1 ]; then
  echo "## 1. sparse attention against dense: bundled stories260K, context 512, $text"
  "$bin" perplexity -f "$text" -c 512 --kl-divergence-base "$work/dense512.kld" > "$work/dense512.out" 2>&1
  printf "| %-7s | %-9s | %10s | %10s | %8s |\n" window landmarks PPL "mean KL" "top-1 %"
  printf "| %-7s | %-9s | %10s | %10s | %8s |\n" dense - "$(grep -m1 'Final estimate' "$work/dense512.out" | sed 's/.*PPL = //; s/ .*//')" 0 100
  for w in 32 64 128; do
    for lm in all log off; do
      out=$work/sparse-$w-$lm.out
      "$bin" perplexity -f "$text" -c 512 --kl-divergence --kl-divergence-base "$work/dense512.kld" \
        --attention sparse --sparse-window "$w" --sparse-landmarks "$lm" > "$out" 2>&1
      printf "| %-7s | %-9s | %10s | %10s | %8s |\n" "$w" "$lm" "$(stat "$out" 'Mean PPL(Q)  ')" \
        "$(stat "$out" 'Mean    KLD')" "$(stat "$out" 'Same top p:')"
    done
  done
  echo
  echo "## 2. KV cache types against F16: $(basename "$model") (random weights), context 512, 3 chunks"
  "$bin" perplexity -m "$model" -f "$text" -c 512 --chunks 3 -t "$threads" \
    --kl-divergence-base "$work/f16.kld" > "$work/f16.out" 2>&1
  printf "| %-6s | %-6s | %10s | %8s |\n" K V "mean KL" "top-1 %"
  for kv in "q8_0 q8_0" "q8_0 f16" "q4_0 q4_0"; do
    set -- $kv
    out=$work/kv-$1-$2.out
    "$bin" perplexity -m "$model" -f "$text" -c 512 --chunks 3 -t "$threads" --kl-divergence \
      --kl-divergence-base "$work/f16.kld" -ctk "$1" -ctv "$2" > "$out" 2>&1
    printf "| %-6s | %-6s | %10s | %8s |\n" "$1" "$2" "$(stat "$out" 'Mean    KLD')" "$(stat "$out" 'Same top p:')"
  done
  echo
fi

echo "## 3. one token's attention alone (22 layers x 4 KV heads x 64, $threads threads, best of 20)"
build/attention_bench --depths "$(echo $depths | tr ' ' ',')" --threads "$threads"
echo

echo "## 4. whole-token generation after a history (tessera bench -d, random K/V rows; $threads threads, median of $reps)"
printf "| %-6s | %-6s | %10s | %10s | %8s |" depth cache "dense t/s" "sparse t/s" sparse/dense
[ -n "$llama" ] && printf " %14s |" "llama.cpp t/s"
echo
tg() {  # tg NAME ARGS...: the median tg rate of one bench run
  local name=$1; shift
  bench "$name" -- -p 0 -n 16 -r "$reps" -t "$threads" --depth-fill random "$@"
  python3 -c "import json,sys; print('%.2f' % json.load(open(sys.argv[1]))['tg']['tps_median'])" "$work/$name.json"
}
for d in $depths; do
  for ct in f16 q8_0; do
    dense=$(tg "tg-$d-$ct-dense" -d "$d" --cache-type "$ct")
    sparse=$(tg "tg-$d-$ct-sparse" -d "$d" --cache-type "$ct" --attention sparse)
    printf "| %-6s | %-6s | %10s | %10s | %7.2fx |" "$d" "$ct" "$dense" "$sparse" "$(echo "$sparse / $dense" | bc -l)"
    if [ -n "$llama" ]; then
      lb="$llama/bin/llama-bench"
      [ -x "$lb" ] || lb="$llama/build/bin/llama-bench"
      if ! echo " $llama_depths " | grep -q " $d "; then
        printf " %14s |" "(not run)"
      elif [ -x "$lb" ]; then
        rate=$("$lb" -m "$model" -p 0 -n 16 -d "$d" -fa 1 -ctk "$ct" -ctv "$ct" -t "$threads" -r "$reps" -o json 2>/dev/null \
          | python3 -c "import json,sys; r=json.load(sys.stdin); print('%.2f' % r[0]['avg_ts'])" || echo failed)
        printf " %14s |" "$rate"
      else
        printf " %14s |" "no llama-bench"
      fi
    fi
    echo
  done
done
echo
if [ "$prefill" -gt 0 ]; then
  echo "## prefill of a $prefill-token prompt (real tokens, $threads threads, 1 run)"
  for attn in dense sparse; do
    bench "pp-$attn" -- -p "$prefill" -n 0 -r 1 -t "$threads" --attention "$attn"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['pp']; print('%-6s %8.2f t/s  %8.1f s' % (sys.argv[2], r['tps_median'], r['tokens'] / r['tps_median']))" \
      "$work/pp-$attn.json" "$attn"
  done
fi
