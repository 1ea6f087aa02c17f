#!/usr/bin/env bash
# Generation after sequence-parallel prefill (issue 24, item 3): the root
# alone against a tensor-parallel group of the same nodes (--generate tp),
# whose ranks keep their heads' rows of the prompt's cache, gathered exactly
# or, with codebooks, rebuilt from indices, and against a pipeline of them
# (--generate pipeline: each stage keeps its layers' rows; it frees memory,
# not time, as every node prefilled with the whole model). TinyLlama-1.1B shape Q4_0, one
# thread per process, every process on this machine (loopback TCP), a prompt
# of real text: time to the first token, what the handoff sent and took, and
# tokens per second after it, beside one process; and whether the greedy
# tokens equal one process's.
#
#   benchmarks/sp_handoff.sh [--prompt-tokens 1024] [--tokens 32] [--nodes "2 3"] [--keep-models DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
n_prompt=1024 n_gen=32 node_counts="2 3" keep=""
while [ $# -gt 0 ]; do
  case $1 in
    --prompt-tokens) n_prompt=$2; shift 2 ;;
    --tokens) n_gen=$2; shift 2 ;;
    --nodes) node_counts=$2; shift 2 ;;
    --keep-models) keep=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
source benchmarks/common.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bench_binaries
bench_model Q4_0 "$keep"
# About n_prompt tokens of real text (this vocabulary takes ~4 characters a token).
: > "$work/prompt.txt"
while [ "$(wc -c < "$work/prompt.txt")" -lt $((n_prompt * 4)) ]; do
  cat tests/data/little_stories.txt >> "$work/prompt.txt"
done
head -c $((n_prompt * 4)) "$work/prompt.txt" > "$work/p.txt"
# Codebooks of this model's rows (4 groups of 1024 codes): random weights, so
# only their size and cost matter here, not their quality (sp_prefill.sh
# measures that on the trained model).
"$bin" vq-fit -m "$model" -f "$work/p.txt" -o "$work/books.gguf" --groups 4 --max-rows 4096 --iterations 3 -c 2048 -t 2 \
  2> "$work/fit.err" || { cat "$work/fit.err"; exit 1; }
ctx=$((n_prompt + n_gen + 512))
run() {
  local name=$1; shift
  "$bin" run -m "$model" -f "$work/p.txt" -n "$n_gen" --temp 0 -t 1 -c "$ctx" -b 512 --json "$@" \
    > "$work/$name.json" 2> "$work/$name.err" || { echo "$name failed:"; tail -5 "$work/$name.err"; exit 1; }
}
run single
for nodes in $node_counts; do
  run "root-$nodes" --local "$nodes" --prefill sp
  run "tp-$nodes" --local "$nodes" --prefill sp --generate tp
  run "tpvq-$nodes" --local "$nodes" --prefill sp --generate tp --codebooks "$work/books.gguf"
  run "pipe-$nodes" --local "$nodes" --prefill sp --generate pipeline
  run "plain-tp-$nodes" --local "$nodes" --tcp
done
echo "## generation after sequence-parallel prefill, TinyLlama-1.1B shape Q4_0, 1 thread a process, loopback"
python3 - "$work" "$node_counts" <<'PY'
import json, sys
work, counts = sys.argv[1], sys.argv[2].split()
def load(name): return json.load(open("%s/%s.json" % (work, name)))
single = load("single")
t = single["timings"]
print("prompt: %d tokens; %d generated" % (single["prompt_tokens"], t["generated_tokens"]))
# Generation's time includes the handoff (at its first step): shown both
# ways, the rate after it beside one process's.
print("| plan | nodes | first token ms | handoff ms | handoff MiB | gen tok/s | after handoff | vs 1 process | same tokens |")
print("|---|---|---|---|---|---|---|---|---|")
base = single["timings"]["generation_tokens_per_second"]
def row(label, nodes, j):
    t = j["timings"]
    h = j.get("handoff")
    after = t["generated_tokens"] / max(1e-9, (t["generation_ms"] - (h["ms"] if h else 0.0)) / 1e3)
    print("| %s | %s | %.0f | %s | %s | %.2f | %.2f | %.2fx | %s |" % (label, nodes, t["prompt_ms"],
          "%.1f" % h["ms"] if h else "-", "%.2f" % (h["bytes_sent"] / 1048576) if h else "-",
          t["generation_tokens_per_second"], after, after / base, "yes" if j["tokens"] == single["tokens"] else "no"))
row("one process", 1, single)
for n in counts:
    row("sp prefill, root generates", n, load("root-%s" % n))
    row("sp prefill, tp group generates (exact rows)", n, load("tp-%s" % n))
    row("sp prefill (G=4 indices), tp group generates", n, load("tpvq-%s" % n))
    row("sp prefill, pipeline generates (exact rows)", n, load("pipe-%s" % n))
    row("tensor parallel throughout (TCP)", n, load("plain-tp-%s" % n))
PY
