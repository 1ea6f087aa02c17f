#!/usr/bin/env bash
# Larger than memory (issue 25): one process running a TinyLlama-1.1B-shaped
# model inside a memory cgroup (v1) limited to a fraction of its weights, so
# it keeps a prefix of its layers in memory and streams the rest from disk
# every token (model/streamed_layers.h). Prints, per limit: generation tok/s,
# the bytes it streams per token, the read rate that implies, and the disk's
# own sequential read rate (dd with O_DIRECT on the model file) beside it;
# and whether the tokens equal the unlimited run's.
# A mixture of experts streams expert by expert first (only the experts a
# token chooses are read): its runs also print how often a token's experts
# were the previous token's or one of the last 4 tokens' (what a cache of
# recent experts would serve), beside chance (k/n).
#   benchmarks/offload.sh [--type Q4_0] [--model FILE] [--limits "100 75 50 25"] [--tokens 16] [--keep-models DIR]
# Needs root (cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
type=Q4_0 limits="100 75 50 25" tokens=16 keep=""
while [ $# -gt 0 ]; do
  case $1 in
    --type) type=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --limits) limits=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --keep-models) keep=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] && [ -w /sys/fs/cgroup/memory/cgroup.procs ] || { echo "needs root and cgroup v1 memory" >&2; exit 1; }
source benchmarks/common.sh
work=$(mktemp -d)
bench_binaries
cg=/sys/fs/cgroup/memory/tessera-offload-$$
cleanup() { rmdir "$cg" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
[ -n "${model:-}" ] || bench_model "$type" "$keep"
weights=$(python3 -c "import os; print(os.path.getsize('$model'))")
# A prompt of real text (about 150 tokens): the first lines of the stories.
prompt=$work/prompt.txt
head -c 600 tests/data/little_stories.txt > "$prompt"
echo "model: $model ($((weights >> 20)) MiB)"
# The disk's sequential read rate, past the page cache.
disk=$(dd if="$model" of=/dev/null bs=4M count=64 iflag=direct 2>&1 | sed -n 's/.*, \([0-9.]*\) \([GM]B\)\/s$/\1 \2/p')
echo "disk: $disk/s (dd, O_DIRECT, 256 MiB of the model file)"
mkdir "$cg"
for pct in $limits; do
  # 100: no limit at all (the reference); else the limit is pct% of the file.
  if [ "$pct" = 100 ]; then echo -1 > "$cg/memory.limit_in_bytes"; else echo $((weights * pct / 100)) > "$cg/memory.limit_in_bytes"; fi
  sh -c "echo \$\$ > $cg/cgroup.procs && exec '$bin' run -m '$model' -f '$prompt' -n $tokens --temp 0 -t 2 -c 512 --json" \
    > "$work/run-$pct.json" 2> "$work/run-$pct.err" || { echo "limit $pct%: failed"; tail -3 "$work/run-$pct.err"; continue; }
done
python3 - "$work" "$weights" "$limits" "$disk" <<'PY'
import json, os, sys
work, weights, limits, disk = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
ref = None
print(f"\n{'limit':>8} {'tok/s':>8} {'streamed MiB/token':>19} {'implied read MB/s':>18}  tokens")
for pct in limits:
    p = os.path.join(work, f"run-{pct}.json")
    if not os.path.exists(p) or os.path.getsize(p) == 0:
        continue
    j = json.load(open(p))
    tps = j["timings"]["generation_tokens_per_second"]
    mib = j["plan"][0].get("streamed_mib_per_token", 0.0)
    if ref is None:
        ref = j["tokens"]
    same = "same" if j["tokens"] == ref else "DIFFERENT"
    label = "none" if pct == "100" else f"{pct}%"
    print(f"{label:>8} {tps:8.2f} {mib:19.1f} {mib * 1.048576 * tps:18.0f}  {same}")
    r = j.get("expert_reuse")
    if r:
        for part in ("prompt", "generation"):
            print(f"{'':>8} experts ({part}, {r[part]['choices']} choices): {r[part]['previous_token']:.3f} were the previous "
                  f"token's (chance {r['chance_previous_token']:.3f}), {r[part]['recent_tokens']:.3f} one of the last "
                  f"{r['last_tokens']} tokens' (chance {r['chance_recent_tokens']:.3f})")
print(f"disk read rate (dd O_DIRECT): {disk}/s")
PY
