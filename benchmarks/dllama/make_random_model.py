#!/usr/bin/python3
"""Write a distributed-llama model file (.m) with RANDOM weights (numpy only).

Layout follows distributed-llama converter/convert-hf.py + writer.py and src/llm.cpp
(loadLlmHeader / loadLlmNetWeight), commit 8d624a7b.

Header: int32 magic 0xA00ABCD, int32 headerSize (= 8 + 8*nKeys), then (key,value) int32 pairs.
Tensor order:
  embedding F32 [vocab, dim]
  per layer: q [nH*hd, dim], k [nKv*hd, dim], v [nKv*hd, dim], o [dim, nH*hd]  (weight type)
             if experts>0: moe gate F32 [nExperts, dim]; per expert: w1(gate) [ffn,dim], w2(down) [dim,ffn], w3(up) [ffn,dim]
             else: w1 [hidden,dim], w2 [dim,hidden], w3 [hidden,dim]
             (qwen3/qwen3_moe) q_norm F32 [hd], k_norm F32 [hd]
             input_layernorm F32 [dim], post_attention_layernorm F32 [dim]
  final norm F32 [dim]; lm_head [vocab, dim] (weight type)
Q40 block: f16 delta + 16 bytes (low nibbles = elems 0..15, high nibbles = 16..31), value = (q-8)*delta.
Q80 block: f16 delta + 32 int8.

Example (Qwen3-30B-A3B shape, 4 layers):
  make_random_model.py out.m --layers 4
"""
import argparse
import struct
import sys
import time
import numpy as np

ARCH = {'llama': 0xABCD00, 'qwen3': 0xABCD01, 'qwen3_moe': 0xABCD02}
FT = {'f32': 0, 'f16': 1, 'q40': 2, 'q80': 3}
KEYS = {
    'version': 0, 'arch_type': 1, 'dim': 2, 'hidden_dim': 3, 'n_layers': 4, 'n_heads': 5,
    'n_kv_heads': 6, 'n_experts': 7, 'n_active_experts': 8, 'vocab_size': 9, 'max_seq_len': 10,
    'hidden_act': 11, 'rope_theta': 12, 'weights_float_type': 13, 'head_dim': 19,
    'norm_epsilon': 20, 'moe_hidden_dim': 21,
}

CHUNK_ELEMS = 1 << 24  # elements generated per chunk


class W:
    def __init__(self, f, wtype, seed, std):
        self.f = f
        self.wtype = wtype
        self.rng = np.random.default_rng(seed)
        self.std = std
        self.nbytes = 0

    def _write(self, b):
        self.f.write(b)
        self.nbytes += len(b)

    def f32(self, n, value=None, std=None):
        for s in range(0, n, CHUNK_ELEMS):
            m = min(CHUNK_ELEMS, n - s)
            if value is not None:
                a = np.full(m, value, dtype=np.float32)
            else:
                a = (self.rng.standard_normal(m, dtype=np.float32) * (std or self.std)).astype(np.float32)
            self._write(a.tobytes())

    def matrix(self, rows, cols, wtype=None):
        wtype = self.wtype if wtype is None else wtype
        n = rows * cols
        if wtype == 'f32':
            return self.f32(n)
        if wtype == 'f16':
            for s in range(0, n, CHUNK_ELEMS):
                m = min(CHUNK_ELEMS, n - s)
                self._write((self.rng.standard_normal(m, dtype=np.float32) * self.std).astype(np.float16).tobytes())
            return
        assert cols % 32 == 0, 'row length must be a multiple of 32 for quantized types'
        nblocks = n // 32
        qbytes = 16 if wtype == 'q40' else 32
        bchunk = CHUNK_ELEMS // 32
        # uniform q40 values (q-8)*d have std ~4.6*d; q80 uniform int8 std ~74*d
        dscale = self.std / (4.6 if wtype == 'q40' else 74.0)
        for s in range(0, nblocks, bchunk):
            m = min(bchunk, nblocks - s)
            blk = np.empty((m, 2 + qbytes), dtype=np.uint8)
            d = (dscale * self.rng.uniform(0.5, 1.5, m)).astype(np.float16)
            blk[:, :2] = d.view(np.uint8).reshape(m, 2)
            blk[:, 2:] = self.rng.integers(0, 256, (m, qbytes), dtype=np.uint8)
            self._write(blk.tobytes())


def main():
    p = argparse.ArgumentParser()
    p.add_argument('output')
    p.add_argument('--arch', default='qwen3_moe', choices=list(ARCH))
    p.add_argument('--layers', type=int, default=48)
    p.add_argument('--dim', type=int, default=2048)
    p.add_argument('--heads', type=int, default=32)
    p.add_argument('--kv-heads', type=int, default=4)
    p.add_argument('--head-dim', type=int, default=128)
    p.add_argument('--experts', type=int, default=128)
    p.add_argument('--active-experts', type=int, default=8)
    p.add_argument('--moe-ffn', type=int, default=768)
    p.add_argument('--hidden-dim', type=int, default=6144, help='dense FFN width (only used when experts=0)')
    p.add_argument('--vocab', type=int, default=151936)
    p.add_argument('--max-seq-len', type=int, default=40960)
    p.add_argument('--rope-theta', type=int, default=1000000)
    p.add_argument('--weights', default='q40', choices=list(FT))
    p.add_argument('--std', type=float, default=0.02)
    p.add_argument('--seed', type=int, default=1234)
    a = p.parse_args()

    params = {
        'version': 0, 'arch_type': ARCH[a.arch], 'hidden_act': 1,  # silu
        'dim': a.dim, 'hidden_dim': a.hidden_dim, 'n_layers': a.layers, 'n_heads': a.heads,
        'n_kv_heads': a.kv_heads, 'weights_float_type': FT[a.weights], 'max_seq_len': a.max_seq_len,
        'vocab_size': a.vocab, 'n_experts': a.experts, 'n_active_experts': a.active_experts,
        'rope_theta': a.rope_theta, 'head_dim': a.head_dim, 'norm_epsilon': 6,
    }
    if a.experts > 0:
        params['moe_hidden_dim'] = a.moe_ffn
    data = b''.join(struct.pack('ii', KEYS[k], v) for k, v in params.items())
    qdim, kvdim = a.heads * a.head_dim, a.kv_heads * a.head_dim
    t0 = time.time()
    with open(a.output, 'wb') as f:
        f.write(struct.pack('ii', 0xA00ABCD, 8 + len(data)))
        f.write(data)
        w = W(f, a.weights, a.seed, a.std)
        w.f32(a.vocab * a.dim)  # embedding
        for l in range(a.layers):
            w.matrix(qdim, a.dim)
            w.matrix(kvdim, a.dim)
            w.matrix(kvdim, a.dim)
            w.matrix(a.dim, qdim)
            if a.experts > 0:
                w.f32(a.experts * a.dim, std=0.02)  # router gate, always F32
                for e in range(a.experts):
                    w.matrix(a.moe_ffn, a.dim)  # gate_proj (w1)
                    w.matrix(a.dim, a.moe_ffn)  # down_proj (w2)
                    w.matrix(a.moe_ffn, a.dim)  # up_proj (w3)
            else:
                w.matrix(a.hidden_dim, a.dim)
                w.matrix(a.dim, a.hidden_dim)
                w.matrix(a.hidden_dim, a.dim)
            if a.arch in ('qwen3', 'qwen3_moe'):
                w.f32(a.head_dim, value=1.0)
                w.f32(a.head_dim, value=1.0)
            w.f32(a.dim, value=1.0)
            w.f32(a.dim, value=1.0)
            print(f'layer {l + 1}/{a.layers} written, {w.nbytes / 2**30:.2f} GiB, {time.time() - t0:.0f}s', flush=True)
        w.f32(a.dim, value=1.0)  # final norm
        w.matrix(a.vocab, a.dim)  # lm_head
    print(f'done: {a.output} header {8 + len(data)} B + weights {w.nbytes} B in {time.time() - t0:.0f}s')


if __name__ == '__main__':
    main()
