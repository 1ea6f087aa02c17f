#!/usr/bin/env bash
# Pipeline plans (LEAP, Shard) on a TinyLlama-1.1B-shaped model, beside
# tensor parallel on the same model: generation tok/s and time to first token
# (TTFT) of a 512-token prompt for 1, 2 and 3 stages, so the trade-off between
# plans is visible.
#
#   1. this machine, every node a process on loopback: 1 stage (-t 2, and -t 1:
#      what each stage below has), 2 and
#      3 stages (-t 1 each: this machine has 2 cores, so 3 stages share them),
#      and tensor parallel over 2 processes (--local 2, -t 1 each).
#   2. "hosts" in network namespaces (root and each worker in its own, veth at
#      1 Gbit/s by tc tbf, delay added by tessera-relay on every hop since this
#      kernel has no netem): 1 ms and 20 ms round trip, 2 and 3 stages and
#      tensor parallel over 2 nodes.
#
#   3. the sealed wire's cost: 3 stages sealed against the same plan plain, on
#      loopback and across namespaces at 1 Gbit (1 ms), and the time a run
#      loses recovering when the middle stage is killed mid-generation (the
#      plan is made again over the survivors and the history replayed).
#
# TTFT is the prompt's wall time (pp512: its 512 positions through every
# stage, micro-batched, and the first token's logits); tg is tok/s of 64
# generated tokens. Median of --reps runs after a warm-up.
#
#   benchmarks/pipeline.sh [--type Q4_0] [--reps 3] [--model FILE] [--keep-models DIR] [--skip-netns]
set -euo pipefail
cd "$(dirname "$0")/.."
type=Q4_0 reps=3 model="" keep="" skip_netns=0 n_prompt=512 n_gen=64
while [ $# -gt 0 ]; do
  case $1 in
    --type) type=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --keep-models) keep=$2; shift 2 ;;
    --skip-netns) skip_netns=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
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
[ -n "$model" ] || bench_model "$type" "$keep"
echo "model: $model"
"$bin" keygen -o "$work/key" 2>/dev/null
key=(--key "$work/key")
wflags=("${key[@]}")  # the flags start_worker gives workers: sealed by default
run_args=(-p "$n_prompt" -n "$n_gen" -r "$reps" --timeout-ms 60000)

# Background processes start in this shell (not in $(...)) so cleanup can
# kill them; port_of NAME reads the port a process announced.
port_of() {
  until grep -q listening "$work/$1.out" 2>/dev/null; do sleep 0.1; done
  sed -n 's/listening on port //p' "$work/$1.out"
}
# start_worker NAME [prefix...] -- LISTEN: a worker serving one session.
start_worker() {
  local name=$1; shift
  local pre=()
  while [ "$1" != -- ]; do pre+=("$1"); shift; done; shift
  rm -f "$work/$name.out"
  "${pre[@]}" "$bin" worker --listen "$1" -m "$model" -t 1 --once "${wflags[@]}" > "$work/$name.out" 2> "$work/$name.err" &
}

echo "this machine ..."
bench s1 -- "${run_args[@]}" -t 2
bench s1t1 -- "${run_args[@]}" -t 1
start_worker w1 -- 127.0.0.1:0
bench s2 -- "${run_args[@]}" -t 1 "${key[@]}" --stages "root/127.0.0.1:$(port_of w1)"
start_worker w1 -- 127.0.0.1:0
start_worker w2 -- 127.0.0.1:0
p1=$(port_of w1) p2=$(port_of w2)
bench s3 -- "${run_args[@]}" -t 1 "${key[@]}" --stages "root/127.0.0.1:$p1/127.0.0.1:$p2"
wflags=()  # the same plan plain: keyless workers (loopback)
start_worker w1 -- 127.0.0.1:0
start_worker w2 -- 127.0.0.1:0
p1=$(port_of w1) p2=$(port_of w2)
bench s3plain -- "${run_args[@]}" -t 1 --stages "root/127.0.0.1:$p1/127.0.0.1:$p2"
wflags=("${key[@]}")
bench tp2 -- "${run_args[@]}" -t 1 --local 2

rtts=(1 20)
if [ "$skip_netns" = 0 ] && [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null; then
  ns=tpb$$
  sub=$((100 + $$ % 100))
  tools/netns_cluster.sh up "$ns" 2 "$sub" 1000
  # Every hop runs through a relay in the root namespace that adds half the
  # round trip each way, listening on the root's address of worker 1's link
  # (reachable from the root and from worker 1, the stage that forwards to
  # stage 2): root -> stage 1, stage 1 -> stage 2, stage 2 -> root all pay it.
  hub=10.$sub.1.1
  for rtt in "${rtts[@]}"; do
    half=$(python3 -c "print($rtt / 2)")
    relay_to() {  # relay_to NAME TARGET
      rm -f "$work/$1.out"
      ip netns exec "$ns-r" "$relay" --listen "$hub:0" --target "$2" --delay-ms "$half" > "$work/$1.out" &
    }
    plans="s2 s3 tp2"; [ "$rtt" = 1 ] && plans="s2 s3 tp2 s3plain"
    for plan in $plans; do
      # Sealed, or plain (--insecure workers, a keyless root).
      if [ $plan = s3plain ]; then wflags=(--insecure); rkey=(); else wflags=("${key[@]}"); rkey=("${key[@]}"); fi
      start_worker w1 ip netns exec "$ns-w1" -- "10.$sub.1.2:7001"
      port_of w1 > /dev/null
      relay_to r1 "10.$sub.1.2:7001"
      r1=$(port_of r1)
      case $plan in
        s2) bench "ns$rtt-$plan" ip netns exec "$ns-r" -- "${run_args[@]}" -t 1 "${rkey[@]}" --stages "root/$hub:$r1" ;;
        tp2) bench "ns$rtt-$plan" ip netns exec "$ns-r" -- "${run_args[@]}" -t 1 "${rkey[@]}" --workers "$hub:$r1" ;;
        s3|s3plain)
          start_worker w2 ip netns exec "$ns-w2" -- "10.$sub.2.2:7002"
          port_of w2 > /dev/null
          relay_to r2 "10.$sub.2.2:7002"
          r2=$(port_of r2)
          bench "ns$rtt-$plan" ip netns exec "$ns-r" -- "${run_args[@]}" -t 1 "${rkey[@]}" --stages "root/$hub:$r1/$hub:$r2" ;;
      esac
      jobs -p | xargs -r kill 2>/dev/null || true
      wait 2>/dev/null || true
    done
  done
  tools/netns_cluster.sh down "$ns" 2
  ns=""
  wflags=("${key[@]}")
else
  echo "network namespaces skipped (need root and iproute2, or --skip-netns given)"
fi

# Recovery: 3 stages on persistent loopback workers; the middle stage is
# SIGKILLed 4 s into a 256-token generation.
for name in ra rb; do
  "$bin" worker --listen 127.0.0.1:0 -m "$model" -t 1 "${key[@]}" > "$work/$name.out" 2> "$work/$name.err" &
  echo $! > "$work/$name.pid"
done
ra=$(port_of ra) rb=$(port_of rb)
"$bin" run -m "$model" -p "Once upon a time" -n 256 --temp 0 -t 1 --json "${key[@]}" \
  --stages "root/127.0.0.1:$ra/127.0.0.1:$rb" > "$work/recovery.json" 2> "$work/recovery.err" &
run_pid=$!
sleep 4
kill -9 "$(cat "$work/ra.pid")"
wait $run_pid || { echo "recovery run failed:"; cat "$work/recovery.err"; }
kill "$(cat "$work/rb.pid")" 2>/dev/null || true

python3 - "$work" "$n_prompt" "${rtts[@]}" <<'PY'
import json, os, sys
work, n_prompt, rtts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(name):
    p = os.path.join(work, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def row(label, j, base):
    if j is None:
        return
    ttft = n_prompt / j["pp"]["tps_median"]
    tg = j["tg"]["tps_median"]
    rel = f"  (tg x{tg / base['tg']['tps_median']:.2f}, TTFT x{ttft / (n_prompt / base['pp']['tps_median']):.2f} of 1 stage)"
    print(f"{label:34} TTFT {ttft * 1e3:8.0f} ms   tg {tg:7.2f} tok/s{rel}")
s1 = load("s1")
print(f"\n== this machine ({s1['type']}, 2 cores): pp{n_prompt} TTFT and tg, median of {s1['reps']} ==")
row("1 stage, 1 process x 2 threads", s1, s1)
row("1 stage, 1 process x 1 thread", load("s1t1"), s1)
row("2 stages, 1 thread each", load("s2"), s1)
row("3 stages, 1 thread each", load("s3"), s1)
row("tensor parallel, 2 x 1 thread", load("tp2"), s1)
def tg(j):
    return j["tg"]["tps_median"]
sealed, plain = load("s3"), load("s3plain")
print("\n== the sealed wire (ChaCha20-Poly1305 on every frame), 3 stages ==")
if sealed and plain:
    print(f"loopback TCP          : sealed {tg(sealed):7.2f} tok/s, plain {tg(plain):7.2f} tok/s, sealed/plain {tg(sealed) / tg(plain):.3f}; "
          f"TTFT sealed/plain {plain['pp']['tps_median'] / sealed['pp']['tps_median']:.3f}")
ns_sealed, ns_plain = load("ns1-s3"), load("ns1-s3plain")
if ns_sealed and ns_plain:
    print(f"namespaces 1 Gbit, 1 ms: sealed {tg(ns_sealed):7.2f} tok/s, plain {tg(ns_plain):7.2f} tok/s, "
          f"sealed/plain {tg(ns_sealed) / tg(ns_plain):.3f}")
rec = load("recovery")
if rec:
    r = rec["recovery"]
    print(f"recovery after SIGKILL of the middle stage mid-run (re-planned over the survivors): {r['ms_lost']:.0f} ms lost, "
          f"{len(rec['tokens'])} tokens generated, {rec.get('stages')} stages at the end")
for rtt in rtts:
    if load(f"ns{rtt}-s2") is None:
        continue
    print(f"\n== separate network namespaces, 1 Gbit/s, {rtt} ms round trip per hop ==")
    row("2 stages", load(f"ns{rtt}-s2"), s1)
    row("3 stages", load(f"ns{rtt}-s3"), s1)
    row("tensor parallel, 2 nodes", load(f"ns{rtt}-tp2"), s1)
PY
