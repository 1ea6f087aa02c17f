# Sourced by the distributed benchmarks (tensor_parallel.sh, pipeline.sh):
# the binaries, a TinyLlama-1.1B-shaped model, and `bench` that keeps each
# tessera bench run's JSON. Expects $work (a scratch directory) to be set.

# bench_binaries: sets $bin and $relay, or exits with a message.
bench_binaries() {
  bin=$(realpath build/tessera)
  relay=$(realpath build/tessera-relay)
  [ -x "$bin" ] && [ -x "$relay" ] || { echo "build first: scripts/test, or cmake --build build --target tessera tessera-relay" >&2; exit 1; }
}

# bench_model TYPE [DIR]: sets $model to a TinyLlama-1.1B-shaped model of TYPE
# in DIR (default $work), generating it when missing.
bench_model() {
  local dir=${2:-$work}
  mkdir -p "$dir"
  model=$dir/tinyllama-shape-$1.gguf
  if [ ! -f "$model" ]; then
    "$bin" gen-model --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 \
      --vocab-from tests/data/vocab/ggml-vocab-llama-spm.gguf --type "$1" -q -o "$model"
  fi
}

# bench NAME [prefix...] -- ARGS: `prefix tessera bench -m $model --json ARGS`
# into $work/NAME.json; on failure prints its errors and exits.
bench() {
  local name=$1; shift
  local pre=()
  while [ "$1" != -- ]; do pre+=("$1"); shift; done; shift
  "${pre[@]}" "$bin" bench -m "$model" --json "$@" > "$work/$name.json" 2> "$work/$name.err" \
    || { echo "$name failed:"; cat "$work/$name.err"; exit 1; }
}
