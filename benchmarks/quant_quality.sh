#!/usr/bin/env bash
# Quantization quality against llama.cpp, per llama-quantize target: one
# generated F32 model (dim 512, 4 layers, 8 heads (4 KV), FFN 1536, random
# weights; llama.cpp's F32 logits over a text are the base), quantized by
# llama-quantize and by `tessera quantize` to each target. Per target:
#   - llama.cpp's own KL divergence from its F32 base for its file, and
#     tessera's KL computing the same file (its kernels' quality: the target
#     is within 5% of llama.cpp's), each PPL;
#   - llama.cpp's KL for tessera's file (tessera's quantizer: within 5% of
#     llama-quantize's), and whether the two files' tensors are the same bytes.
# The targets llama-quantize makes only with an importance matrix (IQ2_*,
# IQ3_XXS, IQ3_XS, Q2_K_S; marked * in the table) get llama-imatrix's of the
# model over the same text, given to both quantizers (--imatrix).
# NVFP4 (marked +; in the default list) is a type llama-quantize does not
# write (llama.cpp's files of it come from ModelOpt checkpoints, with a factor
# per tensor as `<name>.scale`): both engines compute the file `tessera
# quantize` wrote, so its row compares the two engines on it.
#
#   benchmarks/quant_quality.sh LLAMA_CPP_DIR [--targets "Q4_K_M Q5_K_M ..."] [--arch ARCH] [--ctx 128] [--keep DIR]
#
# --arch: the family of the generated model (gen-model --arch; default llama);
# a mixture of experts (qwen3moe, mixtral, gpt-oss) gets 8 experts of the FFN's
# width, 2 chosen per token, as in oracle.sh (gpt-oss's own mix: MXFP4_MOE).
#
# LLAMA_CPP_DIR: a llama.cpp checkout built outside this repository, with
# llama-perplexity and llama-quantize in DIR/build/bin (see oracle.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
llama_dir=${1:-}
[ -n "$llama_dir" ] && [ "${llama_dir#--}" = "$llama_dir" ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
shift
targets="Q8_0 Q6_K Q5_K_M Q5_K_S Q5_1 Q5_0 Q4_K_M Q4_K_S Q4_1 Q4_0 IQ4_NL IQ4_XS IQ3_M IQ3_S IQ3_XS IQ3_XXS Q3_K_L Q3_K_M Q3_K_S Q2_K Q2_K_S IQ2_M IQ2_S IQ2_XS IQ2_XXS Q2_0 TQ2_0 TQ1_0 BF16 NVFP4"
ctx=128
keep=""
arch=llama
while [ $# -gt 0 ]; do
  case $1 in
    --targets) targets=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "quant_quality.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=$llama_dir/build/bin
for tool in llama-perplexity llama-quantize llama-imatrix; do
  [ -x "$bin/$tool" ] || { echo "quant_quality.sh: $bin/$tool not found (build it: see oracle.sh)"; exit 1; }
done
tessera=$repo/build/tessera
[ -x "$tessera" ] || { echo "quant_quality.sh: build tessera first (scripts/setup)"; exit 1; }
work=${keep:-$(mktemp -d)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
text=$work/text.txt
cat "$repo/tests/data/little_stories.txt" "$repo/tests/data/little_stories.txt" "$repo/tests/data/tokenizer/mixed.txt" > "$text"
threads=$(nproc)
echo "llama.cpp: $bin ($(cd "$llama_dir" && git rev-parse --short HEAD 2>/dev/null || echo '?')); tessera $(cd "$repo" && git rev-parse --short HEAD)"

f32=$work/f32.gguf
experts=()
case $arch in qwen3moe|mixtral|gpt-oss) experts=(--experts 8 --experts-used 2) ;; esac
echo "model: $arch ${experts[*]}, dim 512, 4 layers, 8 heads (4 KV), FFN 1536, F32, random weights"
"$tessera" gen-model --arch "$arch" --dim 512 --layers 4 --heads 8 --kv-heads 4 --ffn 1536 "${experts[@]}" \
  --vocab-from "$repo/tests/data/vocab/ggml-vocab-llama-spm.gguf" --type F32 -q -o "$f32"
"$bin/llama-perplexity" -m "$f32" -f "$text" -c "$ctx" -b "$ctx" -fa off -t "$threads" \
  --kl-divergence-base "$work/base.kld" > "$work/base.out" 2>&1 || { tail -5 "$work/base.out"; exit 1; }

# Whether two GGUF files hold the same tensors (names, types, shapes, bytes).
same_tensors() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
def tensors(path):
    data = open(path, "rb").read()
    pos = 4
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, pos); pos += 20
    def string(p):
        (n,) = struct.unpack_from("<Q", data, p)
        return data[p + 8:p + 8 + n].decode(errors="replace"), p + 8 + n
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    alignment = 32
    def value(t, p):
        if t == 8: return string(p)
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, p); p += 12
            for _ in range(n): _, p = value(et, p)
            return None, p
        fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}[t]
        return struct.unpack_from(fmt, data, p)[0], p + sizes[t]
    for _ in range(n_kv):
        key, pos = string(pos)
        (t,) = struct.unpack_from("<I", data, pos); pos += 4
        v, pos = value(t, pos)
        if key == "general.alignment": alignment = v
    infos = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        (nd,) = struct.unpack_from("<I", data, pos); pos += 4
        dims = struct.unpack_from("<" + "Q" * nd, data, pos); pos += 8 * nd
        typ, off = struct.unpack_from("<IQ", data, pos); pos += 12
        infos.append((name, dims, typ, off))
    start = (pos + alignment - 1) // alignment * alignment
    offsets = sorted(i[3] for i in infos) + [len(data) - start]
    out = {}
    for name, dims, typ, off in infos:
        end = min(o for o in offsets if o > off)
        out[name] = (dims, typ, data[start + off:start + end])
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
same = a.keys() == b.keys() and all(a[k][0] == b[k][0] and a[k][1] == b[k][1] and a[k][2].rstrip(b"\0") == b[k][2].rstrip(b"\0") for k in a)
print("yes" if same else "no")
PY
}

kl_of() { grep -oE "Mean +KLD: +-?[0-9.e+-]+" "$1" | awk '{print $3}'; }
ppl_of() { grep -oE "Mean PPL\(Q\) +: +[0-9.]+" "$1" | awk '{print $NF}'; }

"$bin/llama-imatrix" -m "$f32" -f "$text" -c "$ctx" -o "$work/imatrix.gguf" > "$work/imatrix.out" 2>&1 \
  || { tail -5 "$work/imatrix.out"; exit 1; }

rows=$work/rows.txt
: > "$rows"
for t in $targets; do
  l=$work/llama-$t.gguf
  m=$work/tessera-$t.gguf
  lq=() tq=() label=$t
  case $t in
    IQ2_*|IQ3_XXS|IQ3_XS|Q2_K_S) lq=(--imatrix "$work/imatrix.gguf"); tq=(--imatrix "$work/imatrix.gguf"); label="$t*" ;;
    NVFP4) l=$m; label="$t+" ;;
  esac
  "$tessera" quantize "${tq[@]}" "$f32" "$m" "$t" -t "$threads" > "$work/tq.out" 2>&1 || { echo "tessera quantize $t failed"; tail -3 "$work/tq.out"; continue; }
  if [ "$l" != "$m" ]; then
    "$bin/llama-quantize" "${lq[@]}" "$f32" "$l" "$t" "$threads" > "$work/lq.out" 2>&1 || { echo "llama-quantize $t failed"; tail -3 "$work/lq.out"; continue; }
  fi
  "$bin/llama-perplexity" -m "$l" -f "$text" -c "$ctx" -b "$ctx" -fa off -t "$threads" --kl-divergence \
    --kl-divergence-base "$work/base.kld" > "$work/ll.out" 2>&1 || { echo "llama.cpp $t failed"; continue; }
  "$tessera" perplexity -m "$l" -f "$text" -c "$ctx" -t "$threads" --kl-divergence \
    --kl-divergence-base "$work/base.kld" > "$work/tl.out" 2>&1 || { echo "tessera $t failed"; continue; }
  "$bin/llama-perplexity" -m "$m" -f "$text" -c "$ctx" -b "$ctx" -fa off -t "$threads" --kl-divergence \
    --kl-divergence-base "$work/base.kld" > "$work/lt.out" 2>&1 || { echo "llama.cpp on tessera's $t failed"; continue; }
  bpw=$(python3 -c "import os; print(f'{os.path.getsize(\"$l\") / os.path.getsize(\"$f32\") * 32:.2f}')")
  same=$(same_tensors "$l" "$m")
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$label" "$bpw" "$(ppl_of "$work/ll.out")" "$(ppl_of "$work/tl.out")" \
    "$(kl_of "$work/ll.out")" "$(kl_of "$work/tl.out")" "$(kl_of "$work/lt.out")" "$same" >> "$rows"
  rm -f "$l" "$m"
done
python3 - "$rows" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
header = ["target", "bpw (file)", "PPL llama.cpp", "PPL tessera", "ratio", "KL llama.cpp", "KL tessera", "ratio",
          "KL of tessera's file", "ratio", "same bytes"]
out = []
def num(v):
    try:
        return float(v)
    except ValueError:
        return float("nan")  # a figure the run did not print (shown as nan)
for t, bpw, pl, pt, kl, kt, klt, same in rows:
    r1 = num(kt) / num(kl) if num(kl) > 0 else float("nan")
    r2 = num(klt) / num(kl) if num(kl) > 0 else float("nan")
    rp = num(pt) / num(pl) if num(pl) > 0 else float("nan")
    out.append([t, bpw, pl, pt, f"{rp:.5f}", kl, kt, f"{r1:.4f}", klt, f"{r2:.4f}", same])
w = [max(len(x[i]) for x in [header] + out) for i in range(len(header))]
print()
print("KL: mean KL divergence from llama.cpp's F32 logits of the same model; 'KL tessera': tessera computing llama-quantize's")
print("file; 'KL of tessera's file': llama.cpp computing the file `tessera quantize` wrote (targets: KL ratios <= 1.05,")
print("PPL within 0.5%; the random model's PPL is in the tens of thousands); *: both quantized with llama-imatrix's")
print("importance matrix of the model over the same text; +: a type llama-quantize does not write, both engines computing")
print("tessera's file")
print(" | ".join(h.ljust(w[i]) for i, h in enumerate(header)))
print("-+-".join("-" * x for x in w))
for r in out:
    print(" | ".join(c.ljust(w[i]) for i, c in enumerate(r)))
PY
