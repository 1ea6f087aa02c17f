#!/usr/bin/env bash
# What the logits cost on the wire: generation with the nodes sending only
# the logits a sampler reads (its top 40, as `run` does) against every logit
# (bench --all-logits, what perplexity and logprobs gather), on a model with
# a large vocabulary (default: a Qwen3-0.6B-shaped Q8_0, 151,936 tokens),
# across network namespaces: a tensor-parallel pair and a 2-stage pipeline,
# at 1 Gbit/0.1 ms and 100 Mbit/1 ms round trip (bursts of about 1 ms at
# the rate, not netns_cluster.sh's 256 KB). The two take turns, one
# repetition each; tok/s medians, their ratio, and for tensor parallel the
# wire KiB per token per worker.
#
#   benchmarks/logits_wire.sh [--model FILE] [--tokens 32] [--reps 3] [--nets "1000:0.1 100:1"]
# Needs root (namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
model="" tokens=32 reps=3 nets="1000:0.1 100:1"
while [ $# -gt 0 ]; do
  case $1 in
    --model) model=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --nets) nets=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "network namespaces need root" >&2; exit 1; }
source benchmarks/common.sh
work=$(mktemp -d)
bench_binaries
ns=tlw$$
subnet=$((100 + $$ % 100))
cleanup() {
  tools/netns_cluster.sh down "$ns" 1 || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "$model" ]; then
  model=$work/qwen3-0.6b-shape-Q8_0.gguf
  "$bin" gen-model --arch qwen3 --dim 1024 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --ffn 3072 \
    --vocab 151936 --type Q8_0 -q -o "$model"
fi
echo "model: $model"

ip=10.$subnet.1.2
# One worker (--once: a session) behind a relay adding half the round trip
# each way; prints the address to give the root.
start_worker() {
  # Plain frames: a keyless worker (the sealed wire's cost is tensor_parallel.sh's).
  ip netns exec "$ns-w1" "$bin" worker --listen "$ip:7000" -m "$model" -t 1 --once --insecure \
    > "$work/w.out" 2> "$work/w.err" &
  until grep -q listening "$work/w.out" 2>/dev/null; do sleep 0.1; done
  ip netns exec "$ns-w1" "$relay" --listen "$ip:7001" --target "$ip:7000" --delay-ms "$1" > "$work/r.out" &
  until grep -q listening "$work/r.out" 2>/dev/null; do sleep 0.1; done
}
stop_worker() {
  jobs -p | xargs -r kill 2>/dev/null || true
  wait 2>/dev/null || true
  rm -f "$work/w.out" "$work/r.out"
}

for net in $nets; do
  rate=${net%:*} rtt=${net#*:}
  half=$(python3 -c "print($rtt / 2)")
  # A burst of 1 ms at the rate (at least 64 KB, which the kernel's timer
  # needs at 100 Mbit): the default 256 KB would pass most of a tensor-parallel
  # worker's logits at once after each token's idle moment.
  burst=$(python3 -c "print(max(64, $rate * 1000 // 8 // 1000))")kb
  TESSERA_NETNS_BURST=$burst tools/netns_cluster.sh up "$ns" 1 "$subnet" "$rate"
  for plan in tp pipeline; do
    for ((r = 1; r <= reps; r++)); do
      for logits in top40 all; do
        start_worker "$half"
        flags=(--weights 1,1 --workers "$ip:7001")
        [ $plan = pipeline ] && flags=(--stages "root/$ip:7001")
        [ $logits = all ] && flags+=(--all-logits)
        bench "$rate-$plan-$logits.$r" ip netns exec "$ns-r" -- -p 0 -n "$tokens" -r 1 -t 1 "${flags[@]}"
        stop_worker
      done
    done
  done
  tools/netns_cluster.sh down "$ns" 1
done

python3 - "$work" "$nets" "$reps" <<'EOF'
import json, statistics, sys
work, nets, reps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
print(f"{'link':>16} {'plan':>9} {'top-40 tok/s':>13} {'all tok/s':>10} {'ratio':>6} {'wire KiB/token top-40 / all':>28}")
for net in nets:
    rate, rtt = net.split(":")
    for plan in ("tp", "pipeline"):
        def runs(logits):
            return [json.load(open(f"{work}/{rate}-{plan}-{logits}.{r}.json")) for r in range(1, reps + 1)]
        top, whole = runs("top40"), runs("all")
        t = statistics.median(j["tg"]["tps_median"] for j in top)
        a = statistics.median(j["tg"]["tps_median"] for j in whole)
        wire = ""
        if plan == "tp":
            kib = lambda js: statistics.median(j["tp"]["wire_bytes_per_token_per_worker"] for j in js) / 1024
            wire = f"{kib(top):.1f} / {kib(whole):.1f}"
        print(f"{rate + ' Mbit ' + rtt + ' ms':>16} {plan:>9} {t:>13.2f} {a:>10.2f} {t / a:>6.2f} {wire:>28}")
EOF
