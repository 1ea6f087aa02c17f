#!/usr/bin/env bash
# Sequence-parallel prefill (Astra): a long prompt's first token sooner on
# slow links.
#
#   1. quality, on the bundled model: codebooks fitted (tessera vq-fit) on a
#      calibration text the model wrote itself (temperature 1, 120 seeds),
#      measured (tessera vq-eval) on a held text, tests/data/little_stories.txt:
#      KL and top-1 agreement of the 64 positions after a 256-token prompt
#      against one node, for G = 1, 4, 16 and 32 groups of 1024 codes, 2 and 4
#      nodes, with the bits each position takes per layer; then (1b,
#      benchmarks/exchange_choice.cpp) the same measure for K/V rows against
#      hidden states (Astra's exchange) at equal bits.
#   2. time to first token on a TinyLlama-1.1B-shaped model in network
#      namespaces (tc tbf at 10, 20 and 100 Mbit/s; tessera-relay adds 5 ms
#      each way, this kernel has no netem), prompts of 1K and 4K tokens, one
#      thread per node: one node; 2 nodes sequence parallel, exact and with
#      codebooks (G = 4); 2-stage pipeline prefill; tensor parallel where its
#      bytes fit the time (at 100 Mbit; at 10 and 20 Mbit a 4K prompt's
#      partials alone take many minutes, which the table says).
#   3. projected time to first token for 4 and 8 nodes like these, from the
#      measured one-node compute and the bytes each exchange sends (the model
#      is printed with the table and checked against the 2-node measurement).
#
#   benchmarks/sp_prefill.sh [--skip-quality] [--skip-netns] [--prompts "1024 4096"] [--rates "10 20 100"] [--keep-models DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
skip_quality=0 skip_netns=0 prompts="1024 4096" rates="10 20 100" keep=""
while [ $# -gt 0 ]; do
  case $1 in
    --skip-quality) skip_quality=1; shift ;;
    --skip-netns) skip_netns=1; shift ;;
    --prompts) prompts=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --keep-models) keep=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
source benchmarks/common.sh
work=$(mktemp -d)
bench_binaries
cleanup() {
  [ -n "${ns:-}" ] && tools/netns_cluster.sh down "$ns" 1 || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$skip_quality" = 0 ]; then
  echo "## 1. quality of the compressed exchange (bundled model, held text, 256-token prompt, 64 positions after it)"
  for s in $(seq 1 120); do
    "$bin" run -p "Once upon a time" -n 480 --temp 1 -s "$s" -c 512 2>/dev/null; echo
  done > "$work/calibration.txt"
  printf "| %-6s | %-13s | %-11s | %-6s | %-9s | %-9s | %-6s |\n" groups "bits/pos/layer" "vs exact" nodes "KL mean" "KL max" top-1
  for g in 1 4 16 32; do
    "$bin" vq-fit -f "$work/calibration.txt" -o "$work/g$g.gguf" --groups "$g" -t 2 2> "$work/fit-$g.err"
    for n in 2 4; do
      "$bin" vq-eval --codebooks "$work/g$g.gguf" -f tests/data/little_stories.txt --prompt-tokens 256 --positions 64 \
        --local "$n" --json 2> /dev/null > "$work/eval-$g-$n.json"
      python3 - "$work/eval-$g-$n.json" "$g" "$n" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
c = j["compressed"]
print("| %-6s | %-13d | %-11s | %-6s | %-9.4f | %-9.4f | %5.1f%% |" % (sys.argv[2], j["bits_per_position_layer"],
      "%.1fx fewer" % (j["exact_bits_per_position_layer"] / j["bits_per_position_layer"]), sys.argv[3],
      c["kl_mean"], c["kl_max"], 100 * c["top1"]))
EOF
    done
  done
  grep -h "relative error" "$work"/fit-*.err | sed 's/^/  /'
  echo
  echo "## 1b. what to exchange: K/V rows against hidden states at equal bits (2-node prompt simulated in one process)"
  cmake --build build --target exchange_choice > /dev/null
  build/exchange_choice --calibration "$work/calibration.txt" --held tests/data/little_stories.txt --groups 1,4,16 -t 2 \
    2> /dev/null
  echo
fi

[ "$skip_netns" = 1 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v ip > /dev/null; then
  echo "network namespaces need root: skipping the time-to-first-token part"
  exit 0
fi
bench_model Q4_0 "$keep"
echo "## 2. time to first token, TinyLlama-1.1B shape Q4_0, 1 thread per node, 5 ms each way"
# Codebooks for this model (its own rows on a text; random weights, so only
# their size matters here): 4 groups of 1024 codes.
head -c 20000 "$work/calibration.txt" 2> /dev/null > "$work/cal.txt" || true
[ -s "$work/cal.txt" ] || cat tests/data/little_stories.txt tests/data/little_stories.txt > "$work/cal.txt"
books="$work/tiny-g4.gguf"
"$bin" vq-fit -m "$model" -f "$work/cal.txt" -o "$books" --groups 4 --max-rows 4096 --iterations 3 -c 1024 -t 2 \
  2> "$work/tiny-fit.err" || { cat "$work/tiny-fit.err"; exit 1; }
ns=tsp$$
subnet=$((100 + $$ % 100))
ip=10.$subnet.1.2
# pp NAME N ARGS...: the prompt's seconds (median of 1 warm run) as tessera bench measures it.
pp() {
  local name=$1 n=$2; shift 2
  if bench "$name" "$@" -p "$n" -n 0 -r 1 -t 1 -b 512; then
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['pp']; print('%.2f' % (r['tokens'] / r['tps_median']))" "$work/$name.json"
  fi
}
# worker ARGS...: a worker in the worker namespace behind a relay; sets $a to
# the relay's address (not in a subshell: the processes stay this shell's jobs).
worker() {
  ip netns exec "$ns-w1" "$bin" worker --listen "$ip:7000" -m "$model" -t 1 --once --insecure "$@" > "$work/w.out" 2> "$work/w.err" &
  until grep -q listening "$work/w.out" 2>/dev/null; do sleep 0.1; done
  ip netns exec "$ns-w1" "$relay" --listen "$ip:7001" --target "$ip:7000" --delay-ms 5 > "$work/r.out" &
  until grep -q listening "$work/r.out" 2>/dev/null; do sleep 0.1; done
  a="$ip:7001"
}
stop_workers() {
  jobs -p | xargs -r kill 2>/dev/null || true
  wait 2>/dev/null || true
  rm -f "$work/w.out" "$work/r.out"
}
printf "| %-6s | %-6s | %9s | %9s | %9s | %9s | %9s | %9s |\n" Mbit prompt "1 node s" "sp exact" "sp G=4" pipeline tensor "best/1"
declare -A single
for n in $prompts; do
  single[$n]=$(pp "single-$n" "$n" --)
done
for rate in $rates; do
  tools/netns_cluster.sh up "$ns" 1 "$subnet" "$rate"
  for n in $prompts; do
    worker; exact=$(pp "sp-exact-$rate-$n" "$n" ip netns exec "$ns-r" -- --workers "$a" --prefill sp); stop_workers
    worker --codebooks "$books"; vq=$(pp "sp-vq-$rate-$n" "$n" ip netns exec "$ns-r" -- --workers "$a" --prefill sp --codebooks "$books"); stop_workers
    worker; pipe=$(pp "pipe-$rate-$n" "$n" ip netns exec "$ns-r" -- --stages "root/$a"); stop_workers
    # Tensor parallel sends two exact partials (about 5 bytes a value) of
    # every position per layer: run it only where that takes under a minute.
    tp_bytes=$((n * 2048 * 5 * 2 * 22))
    if [ $((tp_bytes * 8 / (rate * 1000000))) -lt 60 ]; then
      worker; tp=$(pp "tp-$rate-$n" "$n" ip netns exec "$ns-r" -- --workers "$a"); stop_workers
    else
      tp="(~$((tp_bytes * 8 / (rate * 1000000))) s)"
    fi
    best=$(python3 -c "import sys; v=[float(x) for x in sys.argv[2:] if x and x[0] != '(']; print('%.2fx' % (float(sys.argv[1]) / min(v)) if v else '-')" \
      "${single[$n]}" "$exact" "$vq" "$pipe" "$tp")
    printf "| %-6s | %-6s | %9s | %9s | %9s | %9s | %9s | %9s |\n" "$rate" "$n" "${single[$n]}" "$exact" "$vq" "$pipe" "$tp" "$best"
  done
  tools/netns_cluster.sh down "$ns" 1
done
ns=""
echo

echo "## 3. projected time to first token for N nodes (sequence parallel, rows relayed by the root)"
# The model: every node computes C/N of the prompt one layer at a time, each
# layer after the earlier chunks' rows of that layer arrived, so the last node
# ends (N-1) layer-steps after the first (a layer-step: C/(N*L) plus a hop
# through the root, 2 x 5 ms); the root's link carries every row to every later
# node and every node's rows back (bytes from tessera plan --prefill sp), and
# the prompt cannot end before they have crossed it.
for n in $prompts; do
  for mode in exact vq; do
    flags=(); [ "$mode" = vq ] && flags=(--codebooks "$books")
    for nodes in 2 4 8; do
      "$bin" plan -m "$model" --local "$nodes" --prefill sp --prompt-tokens "$n" -c "$n" -b 512 "${flags[@]}" --json \
        > "$work/plan-$mode-$n-$nodes.json"
    done
  done
done
python3 - "$work" "$prompts" "$rates" <<'EOF'
import json, sys
work, prompts, rates = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
L, delay = 22, 0.005
print("| Mbit | prompt | exchange | %s |" % " | ".join("%d nodes s (x1)" % n for n in (2, 4, 8)))
for rate in rates:
    for n in prompts:
        c = float(json.load(open("%s/single-%s.json" % (work, n)))["pp"]["tokens"]) / \
            json.load(open("%s/single-%s.json" % (work, n)))["pp"]["tps_median"]
        for mode in ("exact", "vq"):
            cells = []
            for nodes in (2, 4, 8):
                p = json.load(open("%s/plan-%s-%s-%d.json" % (work, mode, n, nodes)))["nodes"]
                root = max(p[0]["bytes_sent"], p[0]["bytes_received"])
                compute = c / nodes * (L + nodes - 1) / L + (nodes - 1) * 2 * delay
                wire = root * 8 / (float(rate) * 1e6)
                t = max(compute, wire)
                cells.append("%.2f (%.2fx)" % (t, c / t))
            print("| %s | %s | %s | %s |" % (rate, n, "exact" if mode == "exact" else "G=4", " | ".join(cells)))
EOF
