#!/usr/bin/env bash
# Tensor parallel (SARA) on a TinyLlama-1.1B-shaped model: does splitting one
# token's work across processes cost anything, and what would separate
# machines give?
#
#   1. this machine: 1 process x 2 threads against 2 processes x 1 thread
#      (--local 2), generation tok/s and their ratio, --exact and --fast;
#      wire bytes per token per worker; the root's compute vs wait time.
#   2. "hosts" in network namespaces (root and workers each in its own, veth
#      limited by tc tbf, round trip added by tessera-relay in front of each
#      worker since this kernel has no netem): 2 and 3 nodes at 1 Gbit/0.1 ms
#      and 100 Mbit/1 ms round trip.
#   3. projected tok/s for 2, 4 and 8 separate machines like this one, from the
#      measured compute time per token, the measured cost of a sync
#      (exchange_bench) and the bytes of a partial: all-to-all (the ranks
#      exchange partials directly) and, for exact, reduce-scatter.
#   4. the sealed wire's cost: sealed/plain generation ratio over loopback TCP
#      (--local 2 --tcp against a keyless loopback worker over --tcp) and
#      across namespaces at 1 Gbit, the key handshake's time, and the time a
#      run loses recovering when a worker is killed mid-generation (a spare
#      takes its place; the history is replayed).
#
#   benchmarks/tensor_parallel.sh [--type Q4_0] [--tokens 64] [--reps 3] [--model FILE] [--keep-models DIR]
# Namespaces need root; without it part 2 is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
type=Q4_0 tokens=64 reps=3 model="" keep=""
while [ $# -gt 0 ]; do
  case $1 in
    --type) type=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --keep-models) keep=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
source benchmarks/common.sh
work=$(mktemp -d)
bench_binaries
cleanup() {
  [ -n "${ns:-}" ] && tools/netns_cluster.sh down "$ns" 3 || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "$model" ] || bench_model "$type" "$keep"
echo "model: $model"
"$bin" keygen -o "$work/key" 2>/dev/null
one_run=(-p 0 -n "$tokens" -r 1)
run_args=(-p 0 -n "$tokens" -r "$reps")

# This shared machine's speed drifts by tens of percent over minutes, so the
# three configurations take turns, one repetition each, and the ratio is of
# medians over the same stretch of time.
for ((r = 1; r <= reps; r++)); do
  bench "single.$r" -- "${one_run[@]}" -t 2
  bench "local2.$r" -- "${one_run[@]}" -t 1 --local 2
  bench "local2fast.$r" -- "${one_run[@]}" -t 1 --local 2 --fast
  bench "local2tcp.$r" -- "${one_run[@]}" -t 1 --local 2 --tcp
  # The same two processes over loopback TCP, plain: a keyless worker.
  "$bin" worker --listen 127.0.0.1:0 -m "$model" -t 1 --once > "$work/pw.out" 2> "$work/pw.err" &
  until grep -q listening "$work/pw.out" 2>/dev/null; do sleep 0.1; done
  bench "local2tcpplain.$r" -- "${one_run[@]}" -t 1 --tcp --weights 1,1 \
    --workers "127.0.0.1:$(sed -n 's/listening on port //p' "$work/pw.out")"
  wait 2>/dev/null || true
  rm -f "$work/pw.out"
done
# Peak resident memory of each rank against its share, and its compute time
# per step (the worker reports both).
grep -h "peak resident\|computing each" "$work/local2.1.err" > "$work/rss.txt" || true

nets=("1000 0.1" "100 1")
node_counts=(2 3)
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null; then
  ns=tsb$$
  for net in "${nets[@]}"; do
    set -- $net
    rate=$1 rtt=$2
    half=$(python3 -c "print($rtt / 2)")
    for nodes in "${node_counts[@]}"; do
      n_workers=$((nodes - 1))
      tools/netns_cluster.sh up "$ns" "$n_workers" $((100 + $$ % 100)) "$rate"
      # Runs at 1 Gbit with 2 nodes: the sealed (exact) and plain runs take
      # turns, one repetition each, like the loopback pair above; the other
      # rows run their repetitions in one go.
      runs=("exact:$reps" "fast:$reps")
      # At 1 Gbit with 3 nodes, exact through the reduce-scatter too, whole
      # and in bands (segments sent as the product computes them).
      [ "$rate" = 1000 ] && [ "$nodes" = 3 ] && runs+=("rs:$reps" "rsbands:$reps")
      if [ "$rate" = 1000 ] && [ "$nodes" = 2 ]; then
        runs=("fast:$reps")
        for ((r = 1; r <= reps; r++)); do runs+=("exact.$r:1" "plain.$r:1"); done
      fi
      for run in "${runs[@]}"; do
        name=${run%:*} n_reps=${run#*:} mode=${run%%[.:]*}
        # Sealed (the cluster key on every node), or plain (--insecure workers, keyless root).
        flag=(--key "$work/key"); wflag=(--key "$work/key")
        [ $mode = fast ] && flag+=(--fast)
        [ $mode = rs ] && flag+=(--exchange reduce-scatter)
        [ $mode = rsbands ] && flag+=(--exchange reduce-scatter --partial-bands "$nodes")
        [ $mode = plain ] && flag=() && wflag=(--insecure)
        addresses=""
        for ((i = 1; i <= n_workers; i++)); do
          ip=10.$((100 + $$ % 100)).$i.2
          ip netns exec "$ns-w$i" "$bin" worker --listen "$ip:7000" -m "$model" -t 1 --once "${wflag[@]}" > "$work/w$i.out" 2> "$work/w$i.err" &
          until grep -q listening "$work/w$i.out" 2>/dev/null; do sleep 0.1; done
          # Each worker's relay sits in front of its port, in its namespace:
          # every connection to it (the root's, and the other workers' for the
          # exchange of partials) gets the round trip.
          ip netns exec "$ns-w$i" "$relay" --listen "$ip:7001" --target "$ip:7000" --delay-ms "$half" > "$work/r$i.out" &
          until grep -q listening "$work/r$i.out" 2>/dev/null; do sleep 0.1; done
          addresses+="${addresses:+,}$ip:7001"
        done
        # The planner's view of the same nodes (a survey does not spend a
        # --once worker's session): every option's predicted tok/s.
        if [ "$name" = exact ] || [ "$name" = exact.1 ]; then
          ip netns exec "$ns-r" "$bin" plan -m "$model" --auto --json -t 1 --workers "$addresses" "${flag[@]}" \
            > "$work/plan-$rate-$rtt-n$nodes.json" 2> "$work/plan-$rate-$rtt-n$nodes.err" || true
        fi
        bench "ns-$rate-$rtt-n$nodes-$name" ip netns exec "$ns-r" -- -p 0 -n "$tokens" -r "$n_reps" -t 1 --workers "$addresses" "${flag[@]}"
        jobs -p | xargs -r kill 2>/dev/null || true
        wait 2>/dev/null || true
        rm -f "$work"/w*.out "$work"/r*.out
      done
      tools/netns_cluster.sh down "$ns" "$n_workers"
    done
  done
  ns=""
else
  echo "network namespaces need root: skipping the multi-host part"
fi

# Recovery: root + 2 workers + a spare, all persistent on loopback, 1 thread
# each; a worker is SIGKILLed 4 s into a 256-token generation.
for name in ra rb rspare; do
  "$bin" worker --listen 127.0.0.1:0 -m "$model" -t 1 --key "$work/key" > "$work/$name.out" 2> "$work/$name.err" &
  echo $! > "$work/$name.pid"
done
for name in ra rb rspare; do until grep -q listening "$work/$name.out" 2>/dev/null; do sleep 0.1; done; done
rport() { sed -n 's/listening on port //p' "$work/$1.out"; }
"$bin" run -m "$model" -p "Once upon a time" -n 256 --temp 0 -t 1 --json --key "$work/key" \
  --workers "127.0.0.1:$(rport ra),127.0.0.1:$(rport rb)" --spare "127.0.0.1:$(rport rspare)" \
  > "$work/recovery.json" 2> "$work/recovery.err" &
run_pid=$!
sleep 4
kill -9 "$(cat "$work/rb.pid")"
wait $run_pid || { echo "recovery run failed:"; cat "$work/recovery.err"; }
kill "$(cat "$work/ra.pid")" "$(cat "$work/rspare.pid")" 2>/dev/null || true

# The software cost of one sync alone: two rank processes over loopback TCP
# exchanging partials of this model's width with no compute between syncs.
cmake --build build --target exchange_bench > /dev/null
for mode in exact fast; do
  fast_flag=(); [ $mode = fast ] && fast_flag=(--fast)
  build/exchange_bench -m "$model" --syncs 20000 "${fast_flag[@]}" > "$work/xb-$mode.txt"
done

python3 - "$work" "$tokens" "${nets[@]}" <<'PY'
import json, os, sys
work, tokens, nets = sys.argv[1], int(sys.argv[2]), [n.split() for n in sys.argv[3:]]
def load(name):
    p = os.path.join(work, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def merged(prefix):
    # One run per repetition: tok/s median and min over the runs, the
    # tensor-parallel counters averaged.
    runs = []
    r = 1
    while load(f"{prefix}.{r}"):
        runs.append(load(f"{prefix}.{r}"))
        r += 1
    j = dict(runs[0])
    tps = sorted(x["tg"]["tps_median"] for x in runs)
    j["tg"] = {"tps_median": tps[len(tps) // 2] if len(tps) % 2 else (tps[len(tps) // 2 - 1] + tps[len(tps) // 2]) / 2,
               "tps_min": tps[0]}
    j["reps"] = len(runs)
    if "tp" in j:
        j["tp"] = {k: sum(x["tp"][k] for x in runs) / len(runs) for k in runs[0]["tp"]}
    return j
single, local2, fast, tcp = merged("single"), merged("local2"), merged("local2fast"), merged("local2tcp")
tg = lambda j: j["tg"]["tps_median"]
print(f"\n== this machine: {single['type']}, {tokens} generated tokens, median of {single['reps']} ==")
print(f"1 process x 2 threads      : {tg(single):8.2f} tok/s (min {single['tg']['tps_min']:.2f})")
# Ranks on one host exchange frames through shared memory; the TCP row is the
# same exact run over loopback TCP, as separate machines would talk.
for name, j in (("2 processes x 1 thread    ", local2), ("2 processes x 1 thread fast", fast),
                ("2 processes x 1 thread TCP ", tcp)):
    t = j["tp"]
    print(f"{name}: {tg(j):8.2f} tok/s (min {j['tg']['tps_min']:.2f})  ratio {tg(j) / tg(single):.3f}  "
          f"wire {t['wire_bytes_per_token_per_worker'] / 1024:.1f} KiB/token/worker  "
          f"root computes {t['own_ms_per_token']:.2f} ms, waits {t['wait_ms_per_token']:.2f} ms per token "
          f"({t['attention_wait_ms_per_token']:.2f} at attention syncs, {t['ffn_wait_ms_per_token']:.2f} at FFN syncs)")
rss = open(os.path.join(work, "rss.txt")).read().strip() if os.path.exists(os.path.join(work, "rss.txt")) else ""
if rss:
    print("worker (exact):", rss.replace("worker: ", "").replace("\n", "; "))

rows = []
for rate, rtt in nets:
    for nodes in (2, 3):
        for mode in ("exact", "fast", "rs", "rsbands"):
            prefix = f"ns-{rate}-{rtt}-n{nodes}-{mode}"
            j = load(prefix) or (merged(prefix) if load(f"{prefix}.1") else None)
            if j:
                rows.append((rate, rtt, nodes, mode, j))
names = {"exact": "exact", "fast": "fast", "rs": "exact, reduce-scatter", "rsbands": "exact, reduce-scatter in bands"}
if rows:
    print("\n== root and workers each in their own network namespace (1 thread each; the ratio is to 1 process x 2 threads) ==")
    for rate, rtt, nodes, mode, j in rows:
        t = j["tp"]
        print(f"{rate:>5} Mbit/s, {rtt:>4} ms round trip, {nodes} nodes, {names[mode]:<28}: {tg(j):8.2f} tok/s  ratio {tg(j) / tg(single):.3f}  "
              f"wait {t['wait_ms_per_token']:.2f} ms/token over {t['syncs_per_token']} syncs, "
              f"{t['wire_bytes_per_token_per_worker'] / 1024:.1f} KiB/token per worker link")

# The planner (tessera plan --auto, root with 1 thread as in these runs):
# its predictions against what the same nodes measured.
plans = []
for rate, rtt in nets:
    for nodes in (2, 3):
        p = os.path.join(work, f"plan-{rate}-{rtt}-n{nodes}.json")
        if os.path.exists(p) and os.path.getsize(p) > 0:
            plans.append((rate, rtt, nodes, json.load(open(p))))
if plans:
    print("\n== the planner: predicted tok/s per plan (tessera plan --auto, measured links), * = chosen ==")
    for rate, rtt, nodes, p in plans:
        measured = {m: load(f"ns-{rate}-{rtt}-n{nodes}-{m}") or (merged(f"ns-{rate}-{rtt}-n{nodes}-{m}") if load(f"ns-{rate}-{rtt}-n{nodes}-{m}.1") else None) for m in ("exact",)}
        links = ", ".join(f"{n['rtt_ms']:.2f} ms / {n['mbit_per_second']:.0f} Mbit/s" for n in p["nodes"][1:])
        print(f"{rate:>5} Mbit/s, {rtt:>4} ms, {nodes} nodes (links measured: {links})")
        for o in p["options"]:
            print(f"   {'*' if o['chosen'] else ' '} {o['plan']:<60} {o['tokens_per_second']:8.2f} tok/s "
                  f"(compute {o['compute_ms']:.2f} + network {o['network_ms']:.2f} ms)")
        if measured["exact"]:
            print(f"     measured tensor parallel over all {nodes} nodes, exact: {tg(measured['exact']):.2f} tok/s "
                  f"(1 process x 2 threads: {tg(single):.2f})")

# The sealed wire's cost.
plain = merged("local2tcpplain")
print("\n== the sealed wire (ChaCha20-Poly1305 on every frame) ==")
print(f"loopback TCP, 2 x 1 thread : sealed {tg(tcp):8.2f} tok/s, plain {tg(plain):8.2f} tok/s, "
      f"sealed/plain {tg(tcp) / tg(plain):.3f} (median of {tcp['reps']} alternating runs)")
ns_prefix = f"ns-{nets[0][0]}-{nets[0][1]}-n2"
ns_sealed = merged(f"{ns_prefix}-exact") if load(f"{ns_prefix}-exact.1") else None
ns_plain = merged(f"{ns_prefix}-plain") if load(f"{ns_prefix}-plain.1") else None
if ns_sealed and ns_plain:
    print(f"namespaces {nets[0][0]} Mbit/s, {nets[0][1]} ms : sealed {tg(ns_sealed):8.2f} tok/s, plain {tg(ns_plain):8.2f} tok/s, "
          f"sealed/plain {tg(ns_sealed) / tg(ns_plain):.3f} (median of {ns_sealed['reps']} alternating runs)")
print(f"key handshake (connect to first sealed frame): {tcp['tp'].get('handshake_ms', 0):.2f} ms on loopback"
      + (f", {ns_sealed['tp'].get('handshake_ms', 0):.2f} ms across namespaces" if ns_sealed else ""))
rec = load("recovery")
if rec:
    r = rec["recovery"]
    print(f"recovery after SIGKILL of a worker mid-run (spare in its place): {r['ms_lost']:.0f} ms lost over "
          f"{r['recoveries']} recovery, {len(rec['tokens'])} tokens generated; replaced {', '.join(r['replaced'])}")

# Projection for N machines like this one (2 threads each). Per token:
#   compute = T / N                        (every layer matrix and the head's rows are split; what is
#                                          not, the embedding row and the norms, is ~1e-6 of the bytes)
#   syncs   = S * (o + rtt / 2 + P * (N - 1) / bandwidth)
#   head    = rtt + o                      (the root gathers the head's logits once per token)
# Every rank sends its partial (P bytes) to every other rank directly: one
# hop (half a round trip) per sync, and each node's link carries N - 1
# partials each way. T from the 2-thread single process; o (software cost of
# a sync) from the loopback TCP run (separate machines cannot share memory):
# the root's wait in the exchange, per sync; it holds the loopback round trip
# and any imbalance between the ranks, so it errs on the slow side. P from
# the bytes the root and its worker exchanged per sync in that run.
#
# o is exchange_bench's time per sync (sealed, no compute: framing, sealing,
# encoding, the kernel and waking up). The loopback run's wait per sync, also
# printed, holds the imbalance between the ranks' compute as well.
import re
T = 1.0 / tg(single)
S = local2["tp"]["syncs_per_token"]
o_wait = max(0.0, (tcp["tp"]["wait_ms_per_token"] / 1e3) / S)
# With --exchange reduce-scatter (exact) each sync is two hops, and each
# node's link carries 2 (N - 1) / N of a partial instead of N - 1 partials:
#   syncs = S * (2 o + rtt + 2 P (N - 1) / (N * bandwidth))
# Reduce-scatter in bands (--partial-bands 2 or more): each rank's last
# product of a sync (wo or w_down, a fraction of T from their bytes) is cut
# into N bands, one per segment, computed from the segment after its own, each
# sent to its owner as soon as it is done; the uplink carries one segment
# (x = P / (N bandwidth)) at a time. With tb a band's compute:
#   shares in  = max((N - 1) tb + x, tb + (N - 1) x) + rtt / 2  (from the product's start)
#   exposed    = max(0, shares in - N tb) + (N - 1) x + rtt / 2 + 2 o
# (the gather phase cannot start before the last share of its segment).
def banded_sync(n, tb, P, bw, half, o):
    x = P / (n * bw)
    shares_in = max((n - 1) * tb + x, tb + (n - 1) * x) + half
    return max(0.0, shares_in - n * tb) + (n - 1) * x + half + 2 * o
def token_seconds(T, n, topology, P, bw, half, o):
    """One token on n machines each taking T alone, per the models above."""
    t = T / n
    if n == 1:
        return t
    if topology == "all-to-all":
        return t + S * (o + half + P * (n - 1) / bw) + 2 * half + o
    if topology == "reduce-scatter in bands":
        layers = S / 2
        per_byte = T / single["weight_bytes_per_token"]
        for product in ("wo_bytes_per_token", "w_down_bytes_per_token"):
            tb = single[product] * per_byte / layers / n / n
            t += layers * banded_sync(n, tb, P, bw, half, o)
        return t + 2 * half + o
    return t + S * (2 * o + 2 * half + 2 * P * (n - 1) / (n * bw)) + 2 * half + o
options = []
for label, j, topology in (("exact", local2, "all-to-all"), ("exact", local2, "reduce-scatter"),
                           ("exact", local2, "reduce-scatter in bands"), ("fast", fast, "all-to-all")):
    xb = open(os.path.join(work, f"xb-{label}.txt")).read()
    print(f"\nexchange_bench: {xb.strip()}")
    o = float(re.search(r"([0-9.]+) us per sync", xb).group(1)) / 1e6
    P = j["tp"]["wire_bytes_per_token_per_worker"] / 2 / S  # one direction, per sync
    options.append((label, topology, P, o))
    print(f"== projected tok/s, N machines like this one ({label}, {topology}; sync overhead {o * 1e6:.0f} us alone, "
          f"{o_wait * 1e6:.0f} us waited per sync on loopback TCP; {P / 1024:.1f} KiB per partial; ratio to one node "
          f"in brackets) ==")
    print("network               N=1             N=2             N=4             N=8")
    for rate, rtt in nets + [["50", "5"]]:
        bw = float(rate) * 1e6 / 8
        half = float(rtt) / 2e3
        cells = []
        for n in (1, 2, 4, 8):
            t = token_seconds(T, n, topology, P, bw, half, o)
            cells.append(f"{1 / t:7.2f} ({T / t:4.2f}x)")
        print(f"{rate:>5} Mbit/{rtt:>4} ms  " + " ".join(cells))

# The same 4 nodes on 1 Gbit/0.1 ms, each node k times slower than this one
# (a board computes a token of the same model k times longer; the wire and
# the per-sync software cost kept): the sync's share shrinks as compute grows.
print("\n== projected ratio to one node, 4 nodes on 1 Gbit/0.1 ms, nodes k times slower than this one ==")
print(f"{'exchange':<40}" + "".join(f"   k={k:<4}" for k in (1, 2, 4, 8)))
for label, topology, P, o in options:
    cells = []
    for k in (1, 2, 4, 8):
        t = token_seconds(k * T, 4, topology, P, 1000e6 / 8, 0.1 / 2e3, o)
        cells.append(f"{k * T / t:7.2f}x")
    print(f"{label + ', ' + topology:<40}" + "".join(f" {c:>8}" for c in cells))
PY
