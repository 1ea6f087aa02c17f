#!/usr/bin/env bash
# The README's first command as a new user meets it: a fresh clone of HEAD in a
# temporary folder (nothing beside it), then
#   scripts/setup && build/tessera run --local 2 -p "Once upon a time"
# timed, and where its build spent its compile time (seconds of compiler CPU
# per library, from Ninja's log) with the build's wall time.
#   benchmarks/first_command.sh [-n TOKENS]   (default: the README's command, until the context is full)
set -euo pipefail
cd "$(dirname "$0")/.."
n_args=()
if [ "${1:-}" = -n ]; then n_args=(-n "$2"); fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git clone -q "$PWD" "$dir/tessera"
cd "$dir/tessera"
start=$(date +%s.%N)
scripts/setup > "$dir/setup.log" 2>&1 || { tail -20 "$dir/setup.log"; exit 1; }
built=$(date +%s.%N)
build/tessera run --local 2 -p "Once upon a time" "${n_args[@]}" > "$dir/run.log" 2>&1 || { tail -20 "$dir/run.log"; exit 1; }
end=$(date +%s.%N)
echo "commit $(git rev-parse --short HEAD), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
python3 - "$start" "$built" "$end" build/.ninja_log <<'PY'
import sys, collections
start, built, end, log = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
per = collections.defaultdict(float)
wall = 0
for line in open(log):
    if line.startswith('#'):
        continue
    b, e, _, out, _ = line.split('\t')
    lib = out.split('/')[1].replace('.dir', '') if out.startswith('CMakeFiles/') else out
    per[lib] += (int(e) - int(b)) / 1000
    wall = max(wall, int(e) / 1000)
print(f"first command: {end - start:.1f} s (scripts/setup {built - start:.1f} s, of which the build {wall:.1f} s wall; the run {end - built:.1f} s)")
print("compile CPU seconds by target:")
for lib, sec in sorted(per.items(), key=lambda kv: -kv[1]):
    if sec >= 0.5:
        print(f"  {lib:24s} {sec:7.1f}")
print(f"  {'total':24s} {sum(per.values()):7.1f}")
PY
