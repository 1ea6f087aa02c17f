#!/usr/bin/python3
"""A small Llama (or Qwen 2, Qwen 3, Phi-3, Gemma 2, Gemma 3, Qwen3-MoE, Mixtral, gpt-oss) checkpoint in Hugging
Face's own layout, and a reference forward pass written directly on that
layout as transformers computes it (HF's rotary convention: rotate_half over
the two halves of each head; Gemma's norms multiplying by 1 + w, its soft
caps, windows and scaled embedding; the experts' softmax router; gpt-oss's
MXFP4 experts, sinks, biases and YaRN; with --nvfp4, every projection in
NVIDIA ModelOpt's NVFP4 as its checkpoints ship it, computed as stored), for
`tessera convert-hf`'s tests. Uses only Debian's python3-numpy: no torch,
no transformers.

  llama_checkpoint.py write DIR --tokenizer-dir D [--arch llama|qwen2|qwen3|phi3|gemma2|gemma3|gemma3mm|qwen3moe|mixtral|gptoss]
                      [--seed S] [--layers L] [--dim N] [--heads H]
                      [--kv-heads K] [--ff F] [--dtype f32|f16|bf16] [--shards N] [--tie] [--nvfp4]
  llama_checkpoint.py forward DIR --tokens 1,2,3 [--n 8]   -> JSON {"tokens": [...]} (greedy)
  llama_checkpoint.py kl-base DIR --like TESSERA.kld -o REFERENCE.kld   (the reference's distributions)
"""
import argparse
import json
import os
import re
import shutil
import struct

import numpy as np


def to_bf16_bits(a):
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
    return rounded.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def encode(a, dtype):
    """A float32 array as the dtype's bytes, and the values those bytes hold."""
    if dtype == "f32":
        return a.astype(np.float32).tobytes(), a.astype(np.float32)
    if dtype == "f16":
        h = a.astype(np.float16)
        return h.tobytes(), h.astype(np.float32)
    b = to_bf16_bits(a)
    return b.tobytes(), from_bf16_bits(b)


def write_safetensors(path, tensors, dtype):
    """tensors: list of (name, shape, bytes[, safetensors dtype]); the format's header, padded to 8."""
    name = {"f32": "F32", "f16": "F16", "bf16": "BF16"}[dtype]
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for t, shape, data, *own in tensors:
        header[t] = {"dtype": own[0] if own else name, "shape": list(shape), "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, data, *_ in tensors:
            f.write(data)


def write(args):
    os.makedirs(args.dir, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer_dir, f), os.path.join(args.dir, f))
    vocab = len(json.load(open(os.path.join(args.dir, "tokenizer.json")))["model"]["vocab"])
    added = json.load(open(os.path.join(args.dir, "tokenizer.json"))).get("added_tokens", [])
    vocab = max([vocab] + [t["id"] + 1 for t in added]) + args.pad_vocab  # embedding rows no token names
    hd = args.dim // args.heads
    gemma = args.arch in ("gemma2", "gemma3", "gemma3mm")
    if gemma:
        args.tie = True  # Gemma's output head is its embedding
    architecture = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                    "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM",
                    "gemma3mm": "Gemma3ForConditionalGeneration", "qwen3moe": "Qwen3MoeForCausalLM",
                    "mixtral": "MixtralForCausalLM", "gptoss": "GptOssForCausalLM"}[args.arch]
    config = {"architectures": [architecture], "model_type": args.arch, "hidden_size": args.dim, "head_dim": hd,
              "intermediate_size": args.ff, "num_hidden_layers": args.layers, "num_attention_heads": args.heads,
              "num_key_value_heads": args.kv_heads, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
              "max_position_embeddings": 256, "vocab_size": vocab, "tie_word_embeddings": args.tie,
              "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[args.dtype]}
    if gemma:
        config.update({"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": hd,
                       "sliding_window": args.window, "rms_norm_eps": 1e-6})
    if args.arch == "gemma2":
        config.update({"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0})
    if args.arch in ("gemma3", "gemma3mm"):
        config.update({"model_type": "gemma3_text", "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                       "attn_logit_softcapping": None, "final_logit_softcapping": None})
        if args.layer_types:
            config["layer_types"] = ["full_attention" if (l + 1) % args.window_period == 0 else "sliding_attention"
                                     for l in range(args.layers)]
        else:
            config["sliding_window_pattern"] = args.window_period
    if args.arch == "qwen3moe":
        config.update({"num_experts": args.experts, "num_experts_per_tok": args.experts_used,
                       "moe_intermediate_size": args.ff, "intermediate_size": 3 * args.ff, "norm_topk_prob": True,
                       "decoder_sparse_step": 1, "mlp_only_layers": []})
    if args.arch == "mixtral":
        config.update({"num_local_experts": args.experts, "num_experts_per_tok": args.experts_used})
    if args.arch == "gptoss":
        config.update({"model_type": "gpt_oss", "num_local_experts": args.experts, "experts_per_token": args.experts_used,
                       "num_experts_per_tok": args.experts_used, "rope_theta": 150000.0, "sliding_window": args.window,
                       "layer_types": ["sliding_attention" if l % 2 == 0 else "full_attention" for l in range(args.layers)],
                       "swiglu_limit": 7.0, "attention_bias": True, "max_position_embeddings": 131072,
                       "quantization_config": {"quant_method": "mxfp4"},
                       "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                        "original_max_position_embeddings": 4096, "truncate": args.yarn_truncate}})
    if args.partial_rotary < 1.0:
        config["partial_rotary_factor"] = args.partial_rotary
    if args.rope_scaling == "linear":
        config["rope_scaling"] = {"rope_type": "linear", "factor": 4.0}
    elif args.rope_scaling == "llama3":
        config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    if args.arch == "gemma3mm":  # the text model's config nested, as the multimodal checkpoints keep it
        text = dict(config, architectures=None)
        del text["architectures"]
        config = {"architectures": [architecture], "model_type": "gemma3", "text_config": text,
                  "vision_config": {"hidden_size": 16, "model_type": "siglip_vision_model"},
                  "torch_dtype": config["torch_dtype"]}
    if args.nvfp4:  # ModelOpt: its own file, and (newer exports) the same in config.json
        quant = {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head"]}
        json.dump({"producer": {"name": "modelopt", "version": "0.29.0"}, "quantization": quant},
                  open(os.path.join(args.dir, "hf_quant_config.json"), "w"), indent=2)
        config["quantization_config"] = dict(quant, quant_method="modelopt")
    json.dump(config, open(os.path.join(args.dir, "config.json"), "w"), indent=2)
    if args.big:
        write_big(args, config, vocab)
        return
    rng = np.random.default_rng(args.seed)

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def norm(n):  # Gemma's norms multiply by 1 + w: its weights sit near 0
        return ((0.0 if gemma else 1.0) + 0.1 * rng.standard_normal(n)).astype(np.float32)

    # Gemma scales its embedding by sqrt(dim) on the way in and ties it to
    # the head: rows of norm ~1 keep the last token from always winning.
    embedding = mat(vocab, args.dim, 0.15 if gemma else 1.0)
    if args.pad_vocab and args.arch in ("gemma3", "gemma3mm"):
        embedding[vocab - args.pad_vocab:] = 0  # rows no token names (llama.cpp's converter cuts them off)
    tensors = [("model.embed_tokens.weight", embedding)]
    for l in range(args.layers):
        p = f"model.layers.{l}."
        if args.arch == "gptoss":
            tensors += gpt_oss_layer(args, p, rng, mat, norm)
            continue
        tensors += [(p + "input_layernorm.weight", norm(args.dim)),
                    (p + "self_attn.q_proj.weight", mat(args.heads * hd, args.dim, args.dim ** -0.5)),
                    (p + "self_attn.k_proj.weight", mat(args.kv_heads * hd, args.dim, args.dim ** -0.5)),
                    (p + "self_attn.v_proj.weight", mat(args.kv_heads * hd, args.dim, args.dim ** -0.5)),
                    *([(p + "self_attn.q_proj.bias", (0.5 * rng.standard_normal(args.heads * hd)).astype(np.float32)),
                       (p + "self_attn.k_proj.bias", (0.5 * rng.standard_normal(args.kv_heads * hd)).astype(np.float32)),
                       (p + "self_attn.v_proj.bias", (0.5 * rng.standard_normal(args.kv_heads * hd)).astype(np.float32))]
                      if args.arch == "qwen2" else []),
                    *([(p + "self_attn.q_norm.weight", ((0.0 if gemma else 1.0) + 0.2 * rng.standard_normal(hd)).astype(np.float32)),
                       (p + "self_attn.k_norm.weight", ((0.0 if gemma else 1.0) + 0.2 * rng.standard_normal(hd)).astype(np.float32))]
                      if args.arch in ("qwen3", "qwen3moe", "gemma3", "gemma3mm") else []),
                    (p + "self_attn.o_proj.weight", mat(args.dim, args.heads * hd, args.dim ** -0.5)),
                    (p + "post_attention_layernorm.weight", norm(args.dim)),
                    *([(p + "pre_feedforward_layernorm.weight", norm(args.dim)),
                       (p + "post_feedforward_layernorm.weight", norm(args.dim))] if gemma else [])]
        if args.arch == "qwen3moe":
            tensors.append((p + "mlp.gate.weight", mat(args.experts, args.dim, args.dim ** -0.5)))
            for e in range(args.experts):
                tensors += [(p + f"mlp.experts.{e}.gate_proj.weight", mat(args.ff, args.dim, args.dim ** -0.5)),
                            (p + f"mlp.experts.{e}.up_proj.weight", mat(args.ff, args.dim, args.dim ** -0.5)),
                            (p + f"mlp.experts.{e}.down_proj.weight", mat(args.dim, args.ff, args.ff ** -0.5))]
        elif args.arch == "mixtral":
            tensors.append((p + "block_sparse_moe.gate.weight", mat(args.experts, args.dim, args.dim ** -0.5)))
            for e in range(args.experts):
                tensors += [(p + f"block_sparse_moe.experts.{e}.w1.weight", mat(args.ff, args.dim, args.dim ** -0.5)),
                            (p + f"block_sparse_moe.experts.{e}.w3.weight", mat(args.ff, args.dim, args.dim ** -0.5)),
                            (p + f"block_sparse_moe.experts.{e}.w2.weight", mat(args.dim, args.ff, args.ff ** -0.5))]
        else:
            tensors += [(p + "mlp.gate_proj.weight", mat(args.ff, args.dim, args.dim ** -0.5)),
                        (p + "mlp.up_proj.weight", mat(args.ff, args.dim, args.dim ** -0.5)),
                        (p + "mlp.down_proj.weight", mat(args.dim, args.ff, args.ff ** -0.5))]
    if args.arch == "phi3":  # Phi-3 keeps Q, K, V in one projection, gate and up in another
        fused = []
        for l in range(args.layers):
            p = f"model.layers.{l}."
            named = dict(t for t in tensors if t[0].startswith(p))
            for n, a in [(p + "self_attn.qkv_proj.weight", np.concatenate(
                             [named[p + f"self_attn.{x}_proj.weight"] for x in "qkv"])),
                         (p + "mlp.gate_up_proj.weight", np.concatenate(
                             [named[p + "mlp.gate_proj.weight"], named[p + "mlp.up_proj.weight"]]))]:
                fused.append((n, a))
        drop = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
        tensors = [t for t in tensors if not any(d in t[0] for d in drop)] + fused
    tensors.append(("model.norm.weight", norm(args.dim)))
    if not args.tie:
        tensors.append(("lm_head.weight", mat(vocab, args.dim, 3 * args.dim ** -0.5)))
    if args.arch == "gemma3mm":  # the text model under language_model.model., beside a vision tower
        tensors = [("language_model." + n, a) for n, a in tensors]
        tensors += [("vision_tower.vision_model.embeddings.patch_embedding.weight", mat(16, 48, 0.1)),
                    ("multi_modal_projector.mm_input_projection_weight", mat(16, args.dim, 0.1))]
    if args.nvfp4:
        tensors = nvfp4_tensors(tensors)
    # MXFP4 blocks and scales (gpt-oss) are bytes, kept as U8; a third item names a tensor's own dtype.
    encoded = [(t[0], t[1].shape, t[1].tobytes(), t[2]) if len(t) == 3 else
               (t[0], t[1].shape, t[1].tobytes(), "U8") if t[1].dtype == np.uint8 else
               (t[0], t[1].shape, encode(t[1], args.dtype)[0]) for t in tensors]
    if args.shards == 1:
        write_safetensors(os.path.join(args.dir, "model.safetensors"), encoded, args.dtype)
        return
    per = -(-len(encoded) // args.shards)
    weight_map = {}
    for s in range(args.shards):
        name = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
        part = encoded[s * per:(s + 1) * per]
        write_safetensors(os.path.join(args.dir, name), part, args.dtype)
        weight_map.update({t[0]: name for t in part})
    json.dump({"metadata": {"total_size": sum(len(t[2]) for t in encoded)}, "weight_map": weight_map},
              open(os.path.join(args.dir, "model.safetensors.index.json"), "w"), indent=2)


# E4M3 (fp8 e4m3fn) bytes 0..126 as values: exponent bias 7, subnormals below 2^-6.
E4M3 = np.array([(m / 8) * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
                 for e in range(16) for m in range(8)][:127])
NVFP4_PROJ = re.compile(r"\.(q|k|v|o|gate|up|down)_proj\.weight$|\.experts\.\d+\.w[123]\.weight$")


def nvfp4_quantize(w):
    """ModelOpt's NVFP4 of a float matrix [rows, cols]: a tensor factor
    amax / (6 * 448), an E4M3 scale per 16 values (the block's amax / 6 over
    the factor, to the nearest E4M3), E2M1 codes to the nearest; returns the
    packed codes (element 2k low, 2k + 1 high), the scale bytes and the factor."""
    rows, cols = w.shape
    factor = np.float32(np.abs(w).max() / (6 * 448))
    blocks = w.reshape(rows, cols // 16, 16).astype(np.float64)
    want = np.abs(blocks).max(axis=-1) / 6 / float(factor)
    scale_bytes = np.abs(E4M3[None, None, :] - want[..., None]).argmin(axis=-1).astype(np.uint8)
    step = E4M3[scale_bytes][..., None] * float(factor)
    x = np.divide(blocks, step, out=np.zeros_like(blocks), where=step > 0)
    codes = np.abs(FP4[None, None, None, :] - x[..., None]).argmin(axis=-1).astype(np.uint8)
    codes = codes.reshape(rows, cols)
    return codes[:, 0::2] | (codes[:, 1::2] << 4), scale_bytes.reshape(rows, cols // 16), factor


def nvfp4_tensors(tensors):
    """Every projection as ModelOpt ships it (weight, weight_scale,
    weight_scale_2, input_scale), with FP8 KV-cache scales beside K and V."""
    out = []
    for name, a in tensors:
        if not NVFP4_PROJ.search(name):
            out.append((name, a))
            continue
        stem = name[:-len(".weight")]
        packed, scale_bytes, factor = nvfp4_quantize(a)
        out += [(name, packed, "U8"), (stem + ".weight_scale", scale_bytes, "F8_E4M3"),
                (stem + ".weight_scale_2", np.array(factor, dtype=np.float32), "F32"),
                (stem + ".input_scale", np.array(0.02, dtype=np.float32), "F32")]
        if name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
            out.append((stem + "." + name.split(".")[-2][0] + "_scale", np.array(1.0, dtype=np.float32), "F32"))
    return out


def dequantize_nvfp4(w):
    """The ModelOpt NVFP4 weights of a read checkpoint as the values they
    stand for: code * scale * factor; their scale tensors dropped."""
    for name in [n for n in w if n.endswith(".weight_scale")]:
        stem = name[:-len(".weight_scale")]
        packed, scale_bytes = w[stem + ".weight"], w[name]
        codes = np.empty((packed.shape[0], packed.shape[1] * 2), dtype=np.uint8)
        codes[:, 0::2], codes[:, 1::2] = packed & 0x0F, packed >> 4
        step = np.repeat(E4M3[scale_bytes & 0x7F], 16, axis=1) * float(w[stem + ".weight_scale_2"])
        w[stem + ".weight"] = FP4[codes] * step
        for suffix in (".weight_scale", ".weight_scale_2", ".input_scale"):
            del w[stem + suffix]
    for name in [n for n in w if n.endswith((".k_scale", ".v_scale"))]:
        del w[name]
    return w


def mxfp4(rng, experts, rows, cols):
    """Random MXFP4 weights as the gpt-oss checkpoints ship them: [experts,
    rows, cols / 32, 16] bytes of two 4-bit codes, [experts, rows, cols / 32]
    E8M0 scales near 2^-5 (values near 1 / sqrt(64))."""
    blocks = rng.integers(0, 256, size=(experts, rows, cols // 32, 16), dtype=np.uint8)
    scales = rng.integers(121, 124, size=(experts, rows, cols // 32), dtype=np.uint8)
    return blocks, scales


def gpt_oss_layer(args, p, rng, mat, norm):
    hd, E, ff = args.dim // args.heads, args.experts, args.ff

    def bias(*shape):
        return (0.3 * rng.standard_normal(shape)).astype(np.float32)

    gate_up_blocks, gate_up_scales = mxfp4(rng, E, 2 * ff, args.dim)
    down_blocks, down_scales = mxfp4(rng, E, args.dim, ff)
    return [(p + "input_layernorm.weight", norm(args.dim)),
            (p + "self_attn.q_proj.weight", mat(args.heads * hd, args.dim, args.dim ** -0.5)),
            (p + "self_attn.q_proj.bias", bias(args.heads * hd)),
            (p + "self_attn.k_proj.weight", mat(args.kv_heads * hd, args.dim, args.dim ** -0.5)),
            (p + "self_attn.k_proj.bias", bias(args.kv_heads * hd)),
            (p + "self_attn.v_proj.weight", mat(args.kv_heads * hd, args.dim, args.dim ** -0.5)),
            (p + "self_attn.v_proj.bias", bias(args.kv_heads * hd)),
            (p + "self_attn.o_proj.weight", mat(args.dim, args.heads * hd, args.dim ** -0.5)),
            (p + "self_attn.o_proj.bias", bias(args.dim)),
            (p + "self_attn.sinks", bias(args.heads) * 5),
            (p + "post_attention_layernorm.weight", norm(args.dim)),
            (p + "mlp.router.weight", mat(E, args.dim, args.dim ** -0.5)),
            (p + "mlp.router.bias", bias(E)),
            (p + "mlp.experts.gate_up_proj_blocks", gate_up_blocks),
            (p + "mlp.experts.gate_up_proj_scales", gate_up_scales),
            (p + "mlp.experts.gate_up_proj_bias", bias(E, 2 * ff)),
            (p + "mlp.experts.down_proj_blocks", down_blocks),
            (p + "mlp.experts.down_proj_scales", down_scales),
            (p + "mlp.experts.down_proj_bias", bias(E, args.dim))]


def write_big(args, config, vocab):
    """A checkpoint too large to hold (the 8B shape): tensors generated and
    written in slices straight into their shards, BF16 values from random
    bits in [-2, 2), for memory and time figures; no reference forward."""
    hd = args.dim // args.heads
    names = [("model.embed_tokens.weight", (vocab, args.dim))]
    for l in range(args.layers):
        p = f"model.layers.{l}."
        names += [(p + "input_layernorm.weight", (args.dim,)), (p + "self_attn.q_proj.weight", (args.heads * hd, args.dim)),
                  (p + "self_attn.k_proj.weight", (args.kv_heads * hd, args.dim)),
                  (p + "self_attn.v_proj.weight", (args.kv_heads * hd, args.dim)),
                  (p + "self_attn.o_proj.weight", (args.dim, args.heads * hd)),
                  (p + "post_attention_layernorm.weight", (args.dim,)), (p + "mlp.gate_proj.weight", (args.ff, args.dim)),
                  (p + "mlp.up_proj.weight", (args.ff, args.dim)), (p + "mlp.down_proj.weight", (args.dim, args.ff))]
    names.append(("model.norm.weight", (args.dim,)))
    if not args.tie:
        names.append(("lm_head.weight", (vocab, args.dim)))
    rng = np.random.default_rng(args.seed)
    per = -(-len(names) // args.shards)
    weight_map = {}
    for s in range(args.shards):
        shard = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
        part = names[s * per:(s + 1) * per]
        header, at = {"__metadata__": {"format": "pt"}}, 0
        for n, shape in part:
            size = 2 * int(np.prod(shape))
            header[n] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [at, at + size]}
            at += size
            weight_map[n] = shard
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(args.dir, shard), "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for n, shape in part:
                left = int(np.prod(shape))
                while left > 0:
                    k = min(left, 1 << 26)
                    bits = rng.integers(0x3800, 0x4000, size=k, dtype=np.uint16) | (
                        rng.integers(0, 2, size=k, dtype=np.uint16) << 15)
                    f.write(bits.tobytes())
                    left -= k
    json.dump({"metadata": {}, "weight_map": weight_map},
              open(os.path.join(args.dir, "model.safetensors.index.json"), "w"), indent=2)


def read_checkpoint(d):
    files = ["model.safetensors"]
    if os.path.exists(os.path.join(d, "model.safetensors.index.json")):
        files = sorted(set(json.load(open(os.path.join(d, "model.safetensors.index.json")))["weight_map"].values()))
    out = {}
    for f in files:
        raw = open(os.path.join(d, f), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        data = raw[8 + n:]
        for name, t in header.items():
            if name == "__metadata__":
                continue
            b, e = t["data_offsets"]
            if t["dtype"] == "F32":
                a = np.frombuffer(data[b:e], dtype=np.float32)
            elif t["dtype"] in ("U8", "F8_E4M3"):  # bytes: MXFP4's, NVFP4's codes and scales
                out[name] = np.frombuffer(data[b:e], dtype=np.uint8).reshape(t["shape"])
                continue
            elif t["dtype"] == "F16":
                a = np.frombuffer(data[b:e], dtype=np.float16).astype(np.float32)
            else:
                a = from_bf16_bits(np.frombuffer(data[b:e], dtype=np.uint16))
            out[name] = a.reshape(t["shape"]).astype(np.float64)
    return out


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def gelu_tanh(x):  # transformers' gelu_pytorch_tanh
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def rope_tables(c, rot, T, theta, scaled):
    """cos and sin of each position and rotated value; `scaled`: with config's rope_scaling."""
    inv_freq = 1.0 / (theta ** (np.arange(0, rot, 2) / rot))
    scaling = (c.get("rope_scaling") or {}) if scaled else {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":  # transformers' _compute_linear_scaling_rope_parameters
        inv_freq = inv_freq / scaling["factor"]
    elif kind == "llama3":  # transformers' _compute_llama3_parameters
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        wavelen = 2 * np.pi / inv_freq
        scaled = np.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        inv_freq = np.where(medium, smoothed, scaled)
    magnitude = 1.0
    if kind == "yarn":  # transformers' _compute_yarn_parameters
        factor, dim = scaling["factor"], rot
        magnitude = 0.1 * np.log(factor) + 1.0

        def correction_dim(rotations):
            return dim * np.log(scaling["original_max_position_embeddings"] / (rotations * 2 * np.pi)) / (2 * np.log(theta))

        low, high = correction_dim(scaling.get("beta_fast", 32)), correction_dim(scaling.get("beta_slow", 1))
        if scaling.get("truncate", True):
            low, high = np.floor(low), np.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
        extrapolation = 1 - ramp
        inv_freq = inv_freq / factor * (1 - extrapolation) + inv_freq * extrapolation
    freqs = np.outer(np.arange(T), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb)[:, None, :] * magnitude, np.sin(emb)[:, None, :] * magnitude


FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])


def dequantize_mxfp4(blocks, scales):
    """[..., rows, cols / 32, 16] bytes and [..., rows, cols / 32] scales ->
    [..., rows, cols] (transformers' convert_moe_packed_tensors)."""
    values = np.empty(blocks.shape[:-1] + (32,))
    values[..., 0::2] = FP4[blocks & 0x0F]
    values[..., 1::2] = FP4[blocks >> 4]
    values *= np.exp2(scales.astype(np.float64) - 127)[..., None]
    return values.reshape(blocks.shape[:-2] + (-1,))


def gpt_oss_experts(w, p, c, h):
    """gpt-oss's FFN: the router's top k logits (with its bias), a softmax
    over those; each expert's clamped SwiGLU with biases."""
    e = p + "mlp.experts."
    gate_up = dequantize_mxfp4(w[e + "gate_up_proj_blocks"], w[e + "gate_up_proj_scales"])
    down = dequantize_mxfp4(w[e + "down_proj_blocks"], w[e + "down_proj_scales"])
    logits = h @ w[p + "mlp.router.weight"].T + w[p + "mlp.router.bias"]
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        top = np.argsort(-logits[t])[:c["num_experts_per_tok"]]
        weights = np.exp(logits[t, top] - logits[t, top].max())
        weights /= weights.sum()
        for x, weight in zip(top, weights):
            gu = gate_up[x] @ h[t] + w[e + "gate_up_proj_bias"][x]
            g, u = np.minimum(gu[0::2], 7.0), np.clip(gu[1::2], -7.0, 7.0)
            y = down[x] @ ((u + 1) * g / (1 + np.exp(-1.702 * g))) + w[e + "down_proj_bias"][x]
            out[t] += weight * y
    return out


def experts_of(w, p, c, h):
    """A mixture of experts' FFN (Qwen3-MoE, Mixtral): softmax over the
    router's logits, the top k, their weights renormalized to sum to 1."""
    mixtral = p + "block_sparse_moe.gate.weight" in w
    moe = p + ("block_sparse_moe." if mixtral else "mlp.")
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    k = c["num_experts_per_tok"]
    logits = h @ w[moe + "gate.weight"].T
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        top = np.argsort(-probs[t])[:k]
        weights = probs[t, top] / probs[t, top].sum()
        for e, weight in zip(top, weights):
            g = h[t] @ w[moe + f"experts.{e}.{names[0]}.weight"].T
            u = h[t] @ w[moe + f"experts.{e}.{names[1]}.weight"].T
            out[t] += weight * (((g / (1 + np.exp(-g))) * u) @ w[moe + f"experts.{e}.{names[2]}.weight"].T)
    return out


def logits_of(w, c, tokens, all_positions=False):
    H, K = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c["head_dim"]
    eps, T = c["rms_norm_eps"], len(tokens)
    gemma = c["model_type"].startswith("gemma")
    x = w["model.embed_tokens.weight"][tokens]
    if gemma:
        x = x * np.sqrt(c["hidden_size"])  # Gemma scales its embedding (sqrt of 64: exact in any dtype)

    def norm(v, weight):
        return rms_norm(v, (1 + weight) if gemma else weight, eps)

    rot = int(hd * c.get("partial_rotary_factor", 1.0))
    global_rope = rope_tables(c, rot, T, c["rope_theta"], True)
    # Gemma 3's local layers: their own base, no scaling.
    local_rope = rope_tables(c, rot, T, c.get("rope_local_base_freq", c["rope_theta"]), not gemma)
    causal = np.triu(np.full((T, T), -np.inf), 1)
    gpt_oss = c["model_type"] == "gpt_oss"
    window = c.get("sliding_window") if gemma or gpt_oss else None
    distance = np.arange(T)[:, None] - np.arange(T)[None, :]
    windowed = np.where(distance >= window, -np.inf, causal) if window else causal
    scale = c.get("query_pre_attn_scalar", hd) ** -0.5
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        if c["model_type"] in ("gemma2", "gpt_oss"):
            sliding = l % 2 == 0
        elif "layer_types" in c:
            sliding = c["layer_types"][l] == "sliding_attention"
        elif gemma:
            sliding = (l + 1) % c["sliding_window_pattern"] != 0
        else:
            sliding = False
        cos, sin = local_rope if sliding else global_rope
        mask = windowed if sliding else causal
        h = norm(x, w[p + "input_layernorm.weight"])
        if p + "self_attn.qkv_proj.weight" in w:
            qkv = h @ w[p + "self_attn.qkv_proj.weight"].T
            q, k, v = qkv[:, :H * hd], qkv[:, H * hd:(H + K) * hd], qkv[:, (H + K) * hd:]
        else:
            q, k, v = (h @ w[p + f"self_attn.{n}_proj.weight"].T + w.get(p + f"self_attn.{n}_proj.bias", 0.0)
                       for n in "qkv")
        q, k, v = q.reshape(T, H, hd), k.reshape(T, K, hd), v.reshape(T, K, hd)
        if p + "self_attn.q_norm.weight" in w:  # Qwen 3: each head's Q and K normed before the rotation
            q = norm(q, w[p + "self_attn.q_norm.weight"])
            k = norm(k, w[p + "self_attn.k_norm.weight"])
        # Only the first `rot` values of a head rotate (Phi-4-mini: partial_rotary_factor).
        q = np.concatenate([q[..., :rot] * cos + rotate_half(q[..., :rot]) * sin, q[..., rot:]], axis=-1)
        k = np.concatenate([k[..., :rot] * cos + rotate_half(k[..., :rot]) * sin, k[..., rot:]], axis=-1)
        out = np.zeros((T, H, hd))
        for head in range(H):
            kv = head // (H // K)
            s = q[:, head, :] @ k[:, kv, :].T * scale
            if c.get("attn_logit_softcapping"):
                s = np.tanh(s / c["attn_logit_softcapping"]) * c["attn_logit_softcapping"]
            s = s + mask
            if gpt_oss:  # the sink: a logit per head in each softmax's denominator
                s = np.concatenate([s, np.full((T, 1), w[p + "self_attn.sinks"][head])], axis=-1)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s = s / s.sum(axis=-1, keepdims=True)
            out[:, head, :] = s[:, :T] @ v[:, kv, :]
        attn = out.reshape(T, H * hd) @ w[p + "self_attn.o_proj.weight"].T + w.get(p + "self_attn.o_proj.bias", 0.0)
        if gemma:  # Gemma: a norm on each block's output; the FFN's input norm is pre_feedforward_layernorm
            x = x + norm(attn, w[p + "post_attention_layernorm.weight"])
            h = norm(x, w[p + "pre_feedforward_layernorm.weight"])
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + norm((gelu_tanh(g) * u) @ w[p + "mlp.down_proj.weight"].T, w[p + "post_feedforward_layernorm.weight"])
            continue
        x = x + attn
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        if gpt_oss:
            x = x + gpt_oss_experts(w, p, c, h)
            continue
        if "num_experts_per_tok" in c:
            x = x + experts_of(w, p, c, h)
            continue
        if p + "mlp.gate_up_proj.weight" in w:
            gu = h @ w[p + "mlp.gate_up_proj.weight"].T
            g, u = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        else:
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * u) @ w[p + "mlp.down_proj.weight"].T
    x = norm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if gemma else w.get("lm_head.weight", w["model.embed_tokens.weight"])
    logits = (x if all_positions else x[-1]) @ head.T
    if c.get("final_logit_softcapping"):
        logits = np.tanh(logits / c["final_logit_softcapping"]) * c["final_logit_softcapping"]
    return logits


def load(d):
    c = json.load(open(os.path.join(d, "config.json")))
    w = dequantize_nvfp4(read_checkpoint(d))
    if "text_config" in c:  # a multimodal Gemma 3: its text model
        c = c["text_config"]
        w = {n[len("language_model."):]: a for n, a in w.items() if n.startswith("language_model.")}
    return c, w


def kl_base(args):
    """The reference's distributions in llama-perplexity's KL base file
    format (src/eval/kl_divergence.h), over the tokens of a base file
    `tessera perplexity --chunks 1` wrote for the converted model: `tessera
    perplexity --kl-divergence` then compares the converted model with HF's
    forward at every scored position, over the whole vocabulary."""
    c, w = load(args.dir)
    raw = open(args.like, "rb").read()
    assert raw[:8] == b"_logits_", "not a KL base file"
    n_ctx, n_vocab, n_chunk = struct.unpack("<iii", raw[8:20])
    if n_chunk != 1:
        raise SystemExit(f"{args.like}: {n_chunk} chunks; write it with --chunks 1")
    tokens = list(struct.unpack(f"<{n_ctx}i", raw[20:20 + 4 * n_ctx]))
    logits = logits_of(w, c, tokens, all_positions=True)[:, :n_vocab]  # Gemma 3's rows past its tokenizer are cut
    out = [raw[:20 + 4 * n_ctx]]
    for i in range(n_ctx // 2, n_ctx - 1):
        row = logits[i].astype(np.float64)
        top, low = row.max(), max(row.min(), row.max() - 16)
        scale = (top - low) / 65535
        log_sum = top + np.log(np.exp(row - top).sum())
        codes = np.where(row > low, np.rint((row - low) / scale) if scale > 0 else 0, 0).astype(np.uint16)
        out.append(struct.pack("<ff", scale, low - log_sum))
        out.append(codes.tobytes())
        if n_vocab % 2:
            out.append(b"\0\0")
    open(args.output, "wb").write(b"".join(out))


def forward(args):
    c, w = load(args.dir)
    tokens = [int(t) for t in args.tokens.split(",")]
    generated, first = [], None
    for _ in range(args.n):
        logits = logits_of(w, c, tokens)
        if first is None:
            first = logits
        nxt = int(np.argmax(logits))
        generated.append(nxt)
        tokens.append(nxt)
    top = np.sort(first)[::-1]
    print(json.dumps({"tokens": generated, "first_gap": float(top[0] - top[1])}))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--tokenizer-dir", required=True)
    w.add_argument("--arch", default="llama",
                   choices=["llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gemma3mm", "qwen3moe", "mixtral",
                            "gptoss"])
    w.add_argument("--yarn-truncate", type=lambda v: v == "true", default=True,
                   help="gpt-oss's rope_scaling truncate (true|false; the released config says false)")
    w.add_argument("--window", type=int, default=4, help="Gemma's sliding_window")
    w.add_argument("--window-period", type=int, default=3, help="Gemma 3's sliding_window_pattern")
    w.add_argument("--layer-types", action="store_true", help="Gemma 3's window pattern as layer_types (newer configs)")
    w.add_argument("--experts", type=int, default=4)
    w.add_argument("--experts-used", type=int, default=2)
    w.add_argument("--partial-rotary", type=float, default=1.0, help="partial_rotary_factor (Phi-4-mini: 0.75)")
    w.add_argument("--seed", type=int, default=1)
    w.add_argument("--layers", type=int, default=2)
    w.add_argument("--dim", type=int, default=64)
    w.add_argument("--heads", type=int, default=4)
    w.add_argument("--kv-heads", type=int, default=2)
    w.add_argument("--ff", type=int, default=160)
    w.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    w.add_argument("--shards", type=int, default=2)
    w.add_argument("--tie", action="store_true")
    w.add_argument("--rope-scaling", default="none", choices=["none", "linear", "llama3"])
    w.add_argument("--big", action="store_true", help="stream random BF16 bits into the shards (8B-shaped checkpoints)")
    w.add_argument("--pad-vocab", type=int, default=0, help="embedding rows beyond the tokenizer's (as Qwen 2.5 pads)")
    w.add_argument("--nvfp4", action="store_true", help="every projection in ModelOpt's NVFP4 (rows of multiples of 64)")
    f = sub.add_parser("forward")
    f.add_argument("dir")
    f.add_argument("--tokens", required=True)
    f.add_argument("--n", type=int, default=8)
    k = sub.add_parser("kl-base")
    k.add_argument("dir")
    k.add_argument("--like", required=True, help="a base file of `tessera perplexity --chunks 1` (its tokens)")
    k.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    {"write": write, "forward": forward, "kl-base": kl_base}[args.command](args)


if __name__ == "__main__":
    main()
