#!/usr/bin/env bash
# Load test of `tessera serve` and, side by side on the same GGUF file and the
# same load, llama.cpp's llama-server: 1, 4 and 8 concurrent clients, each
# sending N streamed chat completions one after another (distinct short
# prompts, temperature 0, max_tokens M), then a 5-turn chat that resends the
# whole history each turn (prompt-cache reuse). Driven by serve_load.mjs (node).
#
#   benchmarks/serve.sh [--llama-cpp DIR] [--model FILE] [--requests N] [--max-tokens M]
#                       [--clients "1 4 8"] [--threads 2] [--tessera BIN] [--raw DIR] [--schema FILE]
#
# Servers, each with --threads threads (default 2):
#   tessera -P 1          tessera serve -t T -P 1 -c CTX  (one slot: requests take turns)
#   tessera -P 4          tessera serve -t T -P 4 -c CTX  (four slots, continuous batching)
#   llama-server -np 1    llama-server -t T -np 1 -c CTX (one slot)
#   llama-server -np 4    llama-server -t T -np 4 -c 4*CTX (four slots batched together)
#   CTX is the model's context, at most 4096 (tessera serve's default), per slot.
# --llama-cpp: a llama.cpp checkout with DIR/build/bin/llama-server (default
#   /tmp/llama.cpp); when it is missing, only tessera is measured.
# --model: default: the TinyLlama-1.1B-shaped Q4_0 model of benchmarks/common.sh
#   (/tmp/bench-models/tinyllama-shape-Q4_0.gguf, generated when missing).
# --requests: requests per client (default 4); --max-tokens: per request (default 64).
# --raw: keep each server's JSON results and log in DIR.
# --schema: measure each server twice, the second time with every request held
#   to the JSON schema in FILE (llama.cpp's "json_schema" field; rows "+schema").
# Columns: agg tok/s = all generated tokens / the configuration's wall time;
#   client tok/s = mean over clients of each one's decode rate once its answers
#   start ((tokens - 1) / (last - first content chunk)); TTFT = request sent ->
#   first content chunk, queueing for the slot included.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

llama_dir=/tmp/llama.cpp
model=""
models=/tmp/bench-models
requests=4
max_tokens=64
clients="1 4 8"
threads=2
tessera=$repo/build/tessera
vocab=$repo/tests/data/vocab/ggml-vocab-llama-spm.gguf
raw=""
schema=""

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "serve.sh: $*" >&2; exit 1; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }

while [ $# -gt 0 ]; do
  case $1 in
    --llama-cpp) need_value "$@"; llama_dir=$2; shift 2 ;;
    --model) need_value "$@"; model=$2; shift 2 ;;
    --requests) need_value "$@"; requests=$2; shift 2 ;;
    --max-tokens) need_value "$@"; max_tokens=$2; shift 2 ;;
    --clients) need_value "$@"; clients=$2; shift 2 ;;
    --threads) need_value "$@"; threads=$2; shift 2 ;;
    --tessera) need_value "$@"; tessera=$2; shift 2 ;;
    --raw) need_value "$@"; raw=$2; shift 2 ;;
    --schema) need_value "$@"; schema=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

is_count() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ]; }
is_count "$requests" || die "--requests must be a positive integer, got '$requests'"
is_count "$max_tokens" || die "--max-tokens must be a positive integer, got '$max_tokens'"
is_count "$threads" || die "--threads must be a positive integer, got '$threads'"
for c in $clients; do is_count "$c" || die "--clients takes positive integers, got '$c'"; done
[ -x "$tessera" ] || die "tessera binary not found at $tessera: build it (scripts/setup) or pass --tessera BIN"
command -v node > /dev/null || die "node (20 or later) is needed to drive the load"
command -v python3 > /dev/null || die "python3 is needed to pick a free port"
command -v curl > /dev/null || die "curl is needed to wait for the servers' /health"

if [ -z "$model" ]; then
  model=$models/tinyllama-shape-Q4_0.gguf
  if [ ! -f "$model" ]; then
    [ -f "$vocab" ] || die "no $model and no vocabulary at $vocab to generate it; pass --model FILE"
    mkdir -p "$models"
    echo "generating $model (TinyLlama-1.1B shape, Q4_0, ~590 MiB)..."
    "$tessera" gen-model --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 \
      --vocab-from "$vocab" --type Q4_0 -q -o "$model"
  fi
fi
[ -f "$model" ] || die "model not found: $model"

llama_server=""
for cand in "$llama_dir/build/bin/llama-server" "$llama_dir/bin/llama-server" "$llama_dir/llama-server"; do
  if [ -x "$cand" ]; then llama_server=$cand; break; fi
done
if [ -z "$llama_server" ]; then
  echo "llama-server not found under $llama_dir: skipped (build it with" \
    "'cmake -S $llama_dir -B $llama_dir/build -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_SERVER=ON" \
    "&& cmake --build $llama_dir/build -j --target llama-server', or pass --llama-cpp DIR)"
fi

work=$(mktemp -d)
out=${raw:-$work}
mkdir -p "$out"
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2> /dev/null || true
    wait "$server_pid" 2> /dev/null || true
    server_pid=""
  fi
}
trap 'stop_server; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_health NAME LOG PORT: until GET /health answers 200 (at most 300 s), or
# the server exits (then its log is shown).
wait_health() {
  local name=$1 log=$2 port=$3
  for _ in $(seq 600); do
    if ! kill -0 "$server_pid" 2> /dev/null; then
      echo "serve.sh: $name failed to start; the end of its log ($log):" >&2
      tail -n 20 "$log" | sed 's/^/  /' >&2
      server_pid=""
      exit 1
    fi
    if [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" 2> /dev/null)" = 200 ]; then
      return 0
    fi
    sleep 0.5
  done
  die "$name did not answer /health within 300 s (log: $log)"
}

# measure NAME FILE: drives the server on $port into $out/FILE.json.
results=()
measure() {
  echo "measuring $1..."
  node "$repo/benchmarks/serve_load.mjs" run --url "http://127.0.0.1:$port" --label "$1" \
    --clients "$clients" --requests "$requests" --max-tokens "$max_tokens" > "$out/$2.json" \
    || die "the load against $1 failed (server log: $out/$2.log)"
  results+=("$out/$2.json")
  if [ -n "$schema" ]; then
    echo "measuring $1 with the schema..."
    node "$repo/benchmarks/serve_load.mjs" run --url "http://127.0.0.1:$port" --label "$1 +schema" --turns 0 \
      --clients "$clients" --requests "$requests" --max-tokens "$max_tokens" --schema "$schema" > "$out/$2-schema.json" \
      || die "the load with the schema against $1 failed (server log: $out/$2.log)"
    results+=("$out/$2-schema.json")
  fi
}

# n_ctx per slot: the model's context, at most 4096 (tessera serve's default).
n_ctx=$("$tessera" plan -m "$model" 2>&1 | sed -n 's/.*context \([0-9]*\).*/\1/p' | head -n 1)
n_ctx=${n_ctx:-2048}
[ "$n_ctx" -gt 4096 ] && n_ctx=4096

echo "model $model, $threads threads per server, clients: $clients, $requests requests each, max_tokens $max_tokens"
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"

# tessera: --port 0, the first line printed says which.
for np in 1 4; do
  "$tessera" serve -m "$model" -t "$threads" -P "$np" -c "$n_ctx" --port 0 > "$out/tessera-np$np.out" \
    2> "$out/tessera-np$np.log" &
  server_pid=$!
  port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/^listening on port \([0-9]*\)$/\1/p' "$out/tessera-np$np.out" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2> /dev/null || break
    sleep 0.5
  done
  wait_health "tessera -P $np" "$out/tessera-np$np.log" "$port"
  measure "tessera -P $np" "tessera-np$np"
  stop_server
done

if [ -n "$llama_server" ]; then
  for np in 1 4; do
    port=$(free_port)
    "$llama_server" -m "$model" -t "$threads" -np "$np" -c $((n_ctx * np)) --host 127.0.0.1 --port "$port" \
      --no-webui > "$out/llama-server-np$np.log" 2>&1 &
    server_pid=$!
    wait_health "llama-server -np $np" "$out/llama-server-np$np.log" "$port"
    measure "llama-server -np $np" "llama-server-np$np"
    stop_server
  done
fi

echo
node "$repo/benchmarks/serve_load.mjs" table "${results[@]}"
