#!/usr/bin/env bash
# Speculative decoding over slow links: plain against speculative greedy
# generation (`tessera bench --draft...`, which checks both give the same
# tokens) on "hosts" in network namespaces (root and each worker in its own,
# veth at 1 Gbit/s by tc tbf, every hop through tessera-relay adding the
# round trip, since this kernel has no netem), at 1 ms and 20 ms round trip:
#   3 stages (root / worker 1 / worker 2) and tensor parallel over 2 nodes.
# Three workloads:
#   stories:   the bundled stories260K (F32) with its own Q4_0 as the draft model
#   1.1b:      the TinyLlama-1.1B-shaped Q4_0 model with n-gram (prompt lookup) drafts
#   1.1b-self: the same model drafting for itself on the root: every draft
#              stands, and drafting costs as much as a whole token on one
#              node (Shard's case, where the draft is a 20B model)
# Reported per row: tok/s plain and speculative (median of --reps after a
# warm-up), their ratio, the acceptance rate, tokens per traversal, the time
# of one traversal and of the drafting in it; then speculative decoding that
# drafts ahead (--draft-ahead: the next draft made during the traversal),
# its ratio to plain speculative decoding, the share of traversals that
# started on a draft made ahead, and drafting per traversal left between
# traversals and hidden during them.
#
#   benchmarks/speculative.sh [--reps 3] [--rtts "1 20"] [--keep-models DIR] [--skip-1b]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=3 keep="" rtts="1 20" skip_1b=0
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --rtts) rtts=$2; shift 2 ;;
    --keep-models) keep=$2; shift 2 ;;
    --skip-1b) skip_1b=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] && command -v ip > /dev/null || { echo "speculative.sh needs root and iproute2 (namespaces)" >&2; exit 1; }
source benchmarks/common.sh
work=$(mktemp -d)
bench_binaries
ns=""
cleanup() {
  [ -n "$ns" ] && tools/netns_cluster.sh down "$ns" 2 || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
"$bin" keygen -o "$work/key" 2> /dev/null
key=(--key "$work/key")

stories=$(realpath models/stories260K.gguf)
"$bin" quantize "$stories" "$work/stories-q4_0.gguf" Q4_0 > /dev/null 2>&1
workloads=(stories)
if [ "$skip_1b" = 0 ]; then
  bench_model Q4_0 "$keep"
  big=$model
  workloads+=(1.1b 1.1b-self)
fi

port_of() {
  until grep -q listening "$work/$1.out" 2> /dev/null; do sleep 0.1; done
  sed -n 's/listening on port //p' "$work/$1.out"
}

ns=spb$$
sub=$((100 + $$ % 100))
tools/netns_cluster.sh up "$ns" 2 "$sub" 1000
hub=10.$sub.1.1
for rtt in $rtts; do
  half=$(python3 -c "print($rtt / 2)")
  for w in "${workloads[@]}"; do
    if [ "$w" = stories ]; then
      m=$stories draft=(--draft-model "$work/stories-q4_0.gguf" --draft-max 8) n=128
    elif [ "$w" = 1.1b ]; then
      m=$big draft=(--draft ngram --draft-max 8) n=48
    else
      m=$big draft=(--draft-model "$big" --draft-max 4) n=32
    fi
    for plan in s3 tp2; do
      # Workers in their namespaces, each behind a relay in the root's
      # namespace (on the hub address every node reaches).
      rm -f "$work"/w*.out "$work"/r*.out
      ip netns exec "$ns-w1" "$bin" worker --listen "10.$sub.1.2:7001" -m "$m" -t 1 --once "${key[@]}" \
        > "$work/w1.out" 2> "$work/w1.err" &
      port_of w1 > /dev/null
      ip netns exec "$ns-r" "$relay" --listen "$hub:0" --target "10.$sub.1.2:7001" --delay-ms "$half" > "$work/r1.out" &
      r1=$(port_of r1)
      if [ $plan = s3 ]; then
        ip netns exec "$ns-w2" "$bin" worker --listen "10.$sub.2.2:7002" -m "$m" -t 1 --once "${key[@]}" \
          > "$work/w2.out" 2> "$work/w2.err" &
        port_of w2 > /dev/null
        ip netns exec "$ns-r" "$relay" --listen "$hub:0" --target "10.$sub.2.2:7002" --delay-ms "$half" > "$work/r2.out" &
        r2=$(port_of r2)
        planflags=(--stages "root/$hub:$r1/$hub:$r2")
      else
        planflags=(--workers "$hub:$r1")
      fi
      name="$w-$plan-$rtt"
      echo "measuring $name ..."
      ip netns exec "$ns-r" "$bin" bench -m "$m" --json -n "$n" -r "$reps" -t 1 --timeout-ms 60000 "${key[@]}" \
        "${draft[@]}" --draft-ahead "${planflags[@]}" > "$work/$name.json" 2> "$work/$name.err" \
        || { echo "$name failed:"; cat "$work/$name.err"; exit 1; }
      jobs -p | xargs -r kill 2> /dev/null || true
      wait 2> /dev/null || true
    done
  done
done
tools/netns_cluster.sh down "$ns" 2
ns=""

python3 - "$work" "$rtts" "${workloads[@]}" <<'PY'
import json, os, sys
work, rtts, workloads = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
names = {"stories": "stories260K F32, draft: its Q4_0", "1.1b": "1.1B-shape Q4_0, n-gram drafts",
         "1.1b-self": "1.1B-shape Q4_0, itself as draft"}
plans = {"s3": "3 stages", "tp2": "tensor parallel, 2 nodes"}
print(f"\n{'workload':34} {'plan':26} {'rtt':>5} {'plain':>8} {'spec':>8} {'ratio':>6} {'accept':>7} {'tok/trav':>9} {'trav ms':>8} {'draft ms':>9}"
      f" {'ahead':>8} {'/spec':>6} {'started ahead':>14} {'between ms':>11} {'during ms':>10}")
for rtt in rtts:
    for w in workloads:
        for p in plans:
            f = os.path.join(work, f"{w}-{p}-{rtt}.json")
            if not os.path.exists(f):
                continue
            j = json.load(open(f))
            print(f"{names[w]:34} {plans[p]:26} {rtt + ' ms':>5} {j['plain_tps_median']:8.2f} {j['speculative_tps_median']:8.2f} "
                  f"{j['speedup']:6.2f} {100 * j['acceptance']:6.1f}% {j['tokens_per_traversal']:9.2f} {j['traversal_ms']:8.2f} "
                  f"{j['draft_ms']:9.3f} {j['ahead_tps_median']:8.2f} {j['ahead_speedup']:6.2f} "
                  f"{j['drafts_ahead']:6d} of {j['ahead_traversals']:<4d} {j['ahead_draft_ms']:11.3f} {j['ahead_hidden_ms']:10.3f}")
PY
