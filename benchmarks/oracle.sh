#!/usr/bin/env bash
# Tessera against llama.cpp, the second oracle: for every model family, a
# random-weight GGUF written by `tessera gen-model --arch` (llama.cpp's tensor
# names and keys) in F16 and Q8_0 goes through both engines' perplexity over
# the same text; each engine's next-token distributions are saved in
# llama.cpp's --kl-divergence-base format and compared by the other engine.
# Prints, per family and type, PPL of each, the mean KL divergence and the
# top-1 agreement both ways. Target: KL <= 1e-4 and top-1 >= 99.5%.
#
#   benchmarks/oracle.sh LLAMA_CPP_DIR [--archs "llama llama3 ..."] [--types "F16 Q8_0"] [--ctx 128] [--keep DIR]
#                        [--upcast]
#   (families: llama llama3 mistral mixtral qwen2 qwen3 qwen3moe gpt-oss gemma2 gemma3 phi3; the default leaves out
#   the mixtures of experts, mixtral, qwen3moe and gpt-oss)
#
# LLAMA_CPP_DIR: a llama.cpp checkout built outside this repository (its
# llama-perplexity at DIR/build/bin), e.g.
#   cmake -S DIR -B DIR/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF
#   cmake --build DIR/build -j --target llama-perplexity
# llama.cpp runs with -fa off (its flash-attention path keeps V sums in F16).
# The last columns are llama.cpp against itself: one position at a time
# (-ub 1) against its batched run on the same file, the floor that any two
# implementations' rounding differences reach once Q8_0 re-quantizes the
# activations of random-weight models (a difference of one unit in the last
# place can flip an int8 rounding, which grows layer by layer).
# --upcast: each F16 model also as F32 (the same values, `tessera quantize
# F32`), run by llama.cpp as the reference of exact arithmetic: KL of
# llama.cpp's F16 run from it (llama.cpp rounds the activations to F16 before
# each F16 product; Tessera does not) beside KL of Tessera's F16 run from it,
# with the share of positions above 1e-3 (a mixture of experts' router
# choosing another expert at a near tie gives a large KL at that position).
# Mistral is generated with Mistral's own window (4096), longer than the
# context: llama.cpp ignores llama.attention.sliding_window, Tessera applies it.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
llama_dir=${1:-}
[ -n "$llama_dir" ] && [ "${llama_dir#--}" = "$llama_dir" ] || { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
shift
archs="llama llama3 mistral qwen2 qwen3 gemma2 gemma3 phi3"
types="F16 Q8_0"
ctx=128
keep=""
upcast=0
while [ $# -gt 0 ]; do
  case $1 in
    --upcast) upcast=1; shift ;;
    --archs) archs=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "oracle.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
perplexity=""
for cand in "$llama_dir/build/bin/llama-perplexity" "$llama_dir/bin/llama-perplexity" "$llama_dir/llama-perplexity"; do
  [ -x "$cand" ] && { perplexity=$cand; break; }
done
if [ -z "$perplexity" ]; then
  echo "oracle.sh: llama.cpp's llama-perplexity not found under $llama_dir (build it there: see the top of this script)"
  exit 1
fi
tessera=$repo/build/tessera
[ -x "$tessera" ] || { echo "oracle.sh: build tessera first (scripts/setup)"; exit 1; }
work=${keep:-$(mktemp -d)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
spm_vocab=$repo/tests/data/vocab/ggml-vocab-llama-spm.gguf
phi3_vocab=$llama_dir/models/ggml-vocab-phi-3.gguf
# Enough text for several chunks of $ctx tokens.
text=$work/text.txt
cat "$repo/tests/data/little_stories.txt" "$repo/tests/data/little_stories.txt" "$repo/tests/data/tokenizer/mixed.txt" > "$text"
echo "llama.cpp: $perplexity ($(cd "$llama_dir" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "tessera: $tessera ($(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "models: dim 512, 4 layers, 8 heads (4 KV), FFN 1536, random weights; text: $(wc -w < "$text") words, -c $ctx"

rows=$work/rows.txt
: > "$rows"
for arch in $archs; do
  vocab=$spm_vocab
  [ "$arch" = phi3 ] && vocab=$phi3_vocab
  extra=()
  [ "$arch" = mistral ] && extra=(--sliding-window 4096)
  # Mixtures of experts: 8 experts of the FFN's width, 2 chosen per token.
  case $arch in qwen3moe|mixtral|gpt-oss) extra=(--experts 8 --experts-used 2) ;; esac
  for type in $types; do
    m=$work/$arch-$type.gguf
    "$tessera" gen-model --arch "$arch" --dim 512 --layers 4 --heads 8 --kv-heads 4 --ffn 1536 \
      --vocab-from "$vocab" --type "$type" "${extra[@]}" -q -o "$m"
    # llama.cpp's distributions, compared by tessera; then the reverse.
    "$perplexity" -m "$m" -f "$text" -c "$ctx" -b "$ctx" -fa off -t "$(nproc)" --kl-divergence-base "$work/llama.kld" \
      > "$work/llama-base.out" 2>&1 || { echo "llama.cpp failed on $arch $type:"; tail -5 "$work/llama-base.out"; exit 1; }
    "$tessera" perplexity -m "$m" -f "$text" -c "$ctx" --kl-divergence-base "$work/llama.kld" --kl-divergence \
      > "$work/tessera-vs-llama.out" 2>&1 || { echo "tessera failed on $arch $type:"; tail -5 "$work/tessera-vs-llama.out"; exit 1; }
    "$tessera" perplexity -m "$m" -f "$text" -c "$ctx" --kl-divergence-base "$work/tessera.kld" \
      > "$work/tessera-base.out" 2>&1 || { echo "tessera failed on $arch $type:"; tail -5 "$work/tessera-base.out"; exit 1; }
    "$perplexity" -m "$m" -f "$text" -c "$ctx" -b "$ctx" -fa off -t "$(nproc)" --kl-divergence-base "$work/tessera.kld" \
      --kl-divergence > "$work/llama-vs-tessera.out" 2>&1 \
      || { echo "llama.cpp failed reading tessera's file on $arch $type:"; tail -5 "$work/llama-vs-tessera.out"; exit 1; }
    "$perplexity" -m "$m" -f "$text" -c "$ctx" -b "$ctx" -ub 1 -fa off -t "$(nproc)" --kl-divergence-base "$work/llama.kld" \
      --kl-divergence > "$work/llama-self.out" 2>&1 || { echo "llama.cpp -ub 1 failed on $arch $type"; exit 1; }
    python3 - "$arch" "$type" "$work/llama-base.out" "$work/tessera-base.out" "$work/tessera-vs-llama.out" \
      "$work/llama-vs-tessera.out" "$work/llama-self.out" >> "$rows" <<'PY'
import re, sys
arch, typ, lbase, tbase, tvl, lvt, lself = sys.argv[1:]
def find(path, pattern):
    m = re.search(pattern, open(path, errors="replace").read())
    return float(m.group(1)) if m else float("nan")
ppl = r"Final estimate: PPL = ([0-9.]+)"
kld = r"Mean\s+KLD:\s+(-?[0-9.e+-]+)"
top = r"Same top p:\s+([0-9.]+)"
print(f"{arch}\t{typ}\t{find(lbase, ppl):.4f}\t{find(tbase, ppl):.4f}\t{find(tvl, kld):.2e}\t{find(tvl, top):.2f}\t"
      f"{find(lvt, kld):.2e}\t{find(lvt, top):.2f}\t{find(lself, kld):.2e}\t{find(lself, top):.2f}")
PY
    if [ "$upcast" = 1 ] && [ "$type" = F16 ]; then
      "$tessera" quantize "$m" "$work/upcast.gguf" F32 > /dev/null 2>&1
      "$perplexity" -m "$work/upcast.gguf" -f "$text" -c "$ctx" -b "$ctx" -fa off -t "$(nproc)" \
        --kl-divergence-base "$work/exact.kld" > /dev/null 2>&1
      "$perplexity" -m "$m" -f "$text" -c "$ctx" -b "$ctx" -fa off -t "$(nproc)" --kl-divergence-base "$work/exact.kld" \
        --kl-divergence > "$work/llama-f16-vs-exact.out" 2>&1
      "$tessera" perplexity -m "$m" -f "$text" -c "$ctx" --kl-divergence-base "$work/exact.kld" --kl-divergence \
        > "$work/tessera-f16-vs-exact.out" 2>&1
      python3 - "$arch" "$work/llama-f16-vs-exact.out" "$work/tessera-f16-vs-exact.out" >> "$work/upcast.txt" <<'PY'
import re, sys
arch, l, t = sys.argv[1:]
def stats(path):
    text = open(path, errors="replace").read()
    mean = re.search(r"Mean\s+KLD:\s+(-?[0-9.e+-]+)", text)
    top = re.search(r"Same top p:\s+([0-9.]+)", text)
    # the per-chunk lines are not the distribution; the percentiles are
    p99 = re.search(r"99\.0%\s+KLD:\s+(-?[0-9.e+-]+)", text)
    med = re.search(r"Median\s+KLD:\s+(-?[0-9.e+-]+)", text)
    f = lambda m: float(m.group(1)) if m else float("nan")
    return f"{f(mean):.2e}\t{f(med):.1e}\t{f(p99):.1e}\t{f(top):.2f}"
print(f"{arch}\t{stats(l)}\t{stats(t)}")
PY
      rm -f "$work/upcast.gguf"
    fi
    rm -f "$m"
  done
done
python3 - "$rows" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
header = ["family", "type", "PPL llama.cpp", "PPL tessera", "KL(l||t)", "top-1 %", "KL(t||l)", "top-1 %", "target",
          "llama.cpp self KL", "top-1 %"]
out = []
for r in rows:
    ok = all(float(r[i]) <= 1e-4 for i in (4, 6)) and all(float(r[i]) >= 99.5 for i in (5, 7))
    out.append(r[:8] + ["met" if ok else "NOT met"] + r[8:])
w = [max(len(x[i]) for x in [header] + out) for i in range(len(header))]
print()
print("KL(l||t): tessera reading llama.cpp's base file; KL(t||l): llama.cpp reading tessera's (both: mean KL divergence")
print("of the base's distribution from the other engine's, and the share of positions whose most likely token agrees);")
print("llama.cpp self: llama.cpp one position at a time (-ub 1) against its own batched run")
print(" | ".join(h.ljust(w[i]) for i, h in enumerate(header)))
print("-+-".join("-" * x for x in w))
for r in out:
    print(" | ".join(c.ljust(w[i]) for i, c in enumerate(r)))
PY
if [ "$upcast" = 1 ] && [ -s "$work/upcast.txt" ]; then
  echo
  echo "F16 against exact arithmetic (llama.cpp on the same weights in F32): mean, median and 99th percentile KL, top-1 %"
  printf '%-9s | %-38s | %-38s\n' family "llama.cpp F16: mean median p99 top-1" "tessera F16: mean median p99 top-1"
  while IFS=$'\t' read -r a lm lmed lp ltop tm tmed tp ttop; do
    printf '%-9s | %-9s %-8s %-8s %-8s | %-9s %-8s %-8s %-8s\n' "$a" "$lm" "$lmed" "$lp" "$ltop" "$tm" "$tmed" "$tp" "$ttop"
  done < "$work/upcast.txt"
fi
