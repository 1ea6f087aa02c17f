#include "model/hf_families.h"

#include <fmt/format.h>

#include <array>

namespace tessera {

namespace {

const std::array<HfFamily, 11> kFamilies = {{
    {HfFamilyKind::kLlama, "LlamaForCausalLM", "llama"},
    {HfFamilyKind::kLlama, "MistralForCausalLM", "llama"},
    {HfFamilyKind::kMixtral, "MixtralForCausalLM", "llama"},
    {HfFamilyKind::kQwen2, "Qwen2ForCausalLM", "qwen2"},
    {HfFamilyKind::kQwen3, "Qwen3ForCausalLM", "qwen3"},
    {HfFamilyKind::kQwen3Moe, "Qwen3MoeForCausalLM", "qwen3moe"},
    {HfFamilyKind::kPhi3, "Phi3ForCausalLM", "phi3"},
    {HfFamilyKind::kGemma2, "Gemma2ForCausalLM", "gemma2"},
    {HfFamilyKind::kGemma3, "Gemma3ForCausalLM", "gemma3"},
    {HfFamilyKind::kGemma3, "Gemma3ForConditionalGeneration", "gemma3"},
    {HfFamilyKind::kGptOss, "GptOssForCausalLM", "gpt-oss"},
}};

// gpt-oss's layer: biased projections, sinks, the FFN's norm under
// post_attention_norm, a biased router and MXFP4 experts.
void gpt_oss_layer(const HfDims& d, const std::string& hf, const std::string& b, std::vector<HfTensorPlan>& plan) {
    const int64_t q_rows = d.n_head * d.head_dim, kv_rows = d.n_head_kv * d.head_dim;
    const auto add = [&](std::string gguf, std::string source, std::vector<int64_t> shape, bool f32) {
        HfTensorPlan t{std::move(gguf), {hf + std::move(source)}, std::move(shape)};
        t.keep_f32 = f32;
        plan.push_back(std::move(t));
        return &plan.back();
    };
    add(b + "attn_norm.weight", "input_layernorm.weight", {d.n_embd}, true);
    for (const auto& [x, rows] : {std::pair<const char*, int64_t>{"q", q_rows}, {"k", kv_rows}, {"v", kv_rows}}) {
        add(fmt::format("{}attn_{}.weight", b, x), fmt::format("self_attn.{}_proj.weight", x), {rows, d.n_embd}, false);
        add(fmt::format("{}attn_{}.bias", b, x), fmt::format("self_attn.{}_proj.bias", x), {rows}, true);
    }
    add(b + "attn_output.weight", "self_attn.o_proj.weight", {d.n_embd, q_rows}, false);
    add(b + "attn_output.bias", "self_attn.o_proj.bias", {d.n_embd}, true);
    add(b + "attn_sinks.weight", "self_attn.sinks", {d.n_head}, true);
    add(b + "post_attention_norm.weight", "post_attention_layernorm.weight", {d.n_embd}, true);
    add(b + "ffn_gate_inp.weight", "mlp.router.weight", {d.n_expert, d.n_embd}, true);
    add(b + "ffn_gate_inp.bias", "mlp.router.bias", {d.n_expert}, true);
    const std::string e = hf + "mlp.experts.";
    for (const auto& [name, parity] : {std::pair<const char*, int>{"ffn_gate_exps", 0}, {"ffn_up_exps", 1}}) {
        HfTensorPlan* w = add(b + name + ".weight", "mlp.experts.gate_up_proj_blocks",
                              {d.n_expert, 2 * d.n_ff_expert, d.n_embd / 32, 16}, false);
        w->mxfp4_scales = e + "gate_up_proj_scales";
        w->row_parity = parity;
        add(b + name + ".bias", "mlp.experts.gate_up_proj_bias", {d.n_expert, 2 * d.n_ff_expert}, true)->column_parity = parity;
    }
    add(b + "ffn_down_exps.weight", "mlp.experts.down_proj_blocks", {d.n_expert, d.n_embd, d.n_ff_expert / 32, 16}, false)
        ->mxfp4_scales = e + "down_proj_scales";
    add(b + "ffn_down_exps.bias", "mlp.experts.down_proj_bias", {d.n_expert, d.n_embd}, true);
}

}  // namespace

const HfFamily* find_hf_family(const std::string& hf_architecture) {
    for (const HfFamily& f : kFamilies) {
        if (hf_architecture == f.hf) return &f;
    }
    return nullptr;
}

std::string hf_family_names() {
    std::string list;
    for (const HfFamily& f : kFamilies) list += (list.empty() ? "" : ", ") + std::string(f.hf);
    return list;
}

std::vector<HfTensorPlan> hf_tensor_plan(const HfFamily& family, const HfDims& d, const std::string& prefix) {
    const HfFamilyKind k = family.kind;
    const float norm_shift = family.gemma() ? 1.0f : 0.0f;
    const int64_t q_rows = d.n_head * d.head_dim, kv_rows = d.n_head_kv * d.head_dim;
    std::vector<HfTensorPlan> plan;
    const auto matrix = [&](std::string gguf, std::string hf, int64_t rows, int64_t cols) -> HfTensorPlan& {
        plan.push_back({std::move(gguf), {prefix + std::move(hf)}, {rows, cols}});
        return plan.back();
    };
    const auto vector = [&](std::string gguf, std::string hf, int64_t n, float shift) {
        plan.push_back({std::move(gguf), {prefix + std::move(hf)}, {n}, 0, shift, 0, true});
    };

    matrix("token_embd.weight", "embed_tokens.weight", d.n_vocab, d.n_embd);
    vector("output_norm.weight", "norm.weight", d.n_embd, norm_shift);
    if (!d.tied) plan.push_back({"output.weight", {"lm_head.weight"}, {d.n_vocab, d.n_embd}});
    for (int64_t l = 0; l < d.n_layer; ++l) {
        const std::string hf = fmt::format("layers.{}.", l), b = fmt::format("blk.{}.", l);
        if (k == HfFamilyKind::kGptOss) {
            gpt_oss_layer(d, prefix + hf, b, plan);
            continue;
        }
        vector(b + "attn_norm.weight", hf + "input_layernorm.weight", d.n_embd, norm_shift);
        if (k == HfFamilyKind::kPhi3) {
            matrix(b + "attn_qkv.weight", hf + "self_attn.qkv_proj.weight", q_rows + 2 * kv_rows, d.n_embd);
        } else {
            const bool permute = k == HfFamilyKind::kLlama || k == HfFamilyKind::kMixtral;
            matrix(b + "attn_q.weight", hf + "self_attn.q_proj.weight", q_rows, d.n_embd).permute_head_dim =
                permute ? d.head_dim : 0;
            matrix(b + "attn_k.weight", hf + "self_attn.k_proj.weight", kv_rows, d.n_embd).permute_head_dim =
                permute ? d.head_dim : 0;
            matrix(b + "attn_v.weight", hf + "self_attn.v_proj.weight", kv_rows, d.n_embd);
        }
        if (k == HfFamilyKind::kQwen2) {
            vector(b + "attn_q.bias", hf + "self_attn.q_proj.bias", q_rows, 0.0f);
            vector(b + "attn_k.bias", hf + "self_attn.k_proj.bias", kv_rows, 0.0f);
            vector(b + "attn_v.bias", hf + "self_attn.v_proj.bias", kv_rows, 0.0f);
        }
        if (k == HfFamilyKind::kQwen3 || k == HfFamilyKind::kQwen3Moe || k == HfFamilyKind::kGemma3) {
            vector(b + "attn_q_norm.weight", hf + "self_attn.q_norm.weight", d.head_dim, norm_shift);
            vector(b + "attn_k_norm.weight", hf + "self_attn.k_norm.weight", d.head_dim, norm_shift);
        }
        matrix(b + "attn_output.weight", hf + "self_attn.o_proj.weight", d.n_embd, q_rows);
        if (family.gemma()) {
            // Gemma norms each block's output too; its FFN's input norm is
            // pre_feedforward_layernorm, and post_attention_layernorm is the
            // attention output's (not the FFN input's, as in Llama).
            vector(b + "post_attention_norm.weight", hf + "post_attention_layernorm.weight", d.n_embd, norm_shift);
            vector(b + "ffn_norm.weight", hf + "pre_feedforward_layernorm.weight", d.n_embd, norm_shift);
            vector(b + "post_ffw_norm.weight", hf + "post_feedforward_layernorm.weight", d.n_embd, norm_shift);
        } else {
            vector(b + "ffn_norm.weight", hf + "post_attention_layernorm.weight", d.n_embd, 0.0f);
        }
        if (family.experts()) {
            // Mixtral names an expert's gate, down and up w1, w2, w3.
            const bool mixtral = k == HfFamilyKind::kMixtral;
            const std::string moe = hf + (mixtral ? "block_sparse_moe." : "mlp.");
            plan.push_back({b + "ffn_gate_inp.weight", {prefix + moe + "gate.weight"}, {d.n_expert, d.n_embd}});
            plan.back().keep_f32 = true;  // llama.cpp's converter keeps the router in F32
            const std::array<std::array<const char*, 3>, 3> experts = {{{"ffn_gate_exps", "gate_proj", "w1"},
                                                                        {"ffn_up_exps", "up_proj", "w3"},
                                                                        {"ffn_down_exps", "down_proj", "w2"}}};
            for (const auto& [gguf, qwen, mistral] : experts) {
                HfTensorPlan t{b + gguf + ".weight", {}, {}};
                for (int64_t e = 0; e < d.n_expert; ++e) {
                    t.sources.push_back(fmt::format("{}{}experts.{}.{}.weight", prefix, moe, e, mixtral ? mistral : qwen));
                }
                const bool down = std::string(gguf) == "ffn_down_exps";
                t.source_shape = down ? std::vector<int64_t>{d.n_embd, d.n_ff_expert} : std::vector<int64_t>{d.n_ff_expert, d.n_embd};
                plan.push_back(std::move(t));
            }
        } else if (k == HfFamilyKind::kPhi3) {
            matrix(b + "ffn_up.weight", hf + "mlp.gate_up_proj.weight", 2 * d.n_ff, d.n_embd);
            matrix(b + "ffn_down.weight", hf + "mlp.down_proj.weight", d.n_embd, d.n_ff);
        } else {
            matrix(b + "ffn_gate.weight", hf + "mlp.gate_proj.weight", d.n_ff, d.n_embd);
            matrix(b + "ffn_up.weight", hf + "mlp.up_proj.weight", d.n_ff, d.n_embd);
            matrix(b + "ffn_down.weight", hf + "mlp.down_proj.weight", d.n_embd, d.n_ff);
        }
    }
    return plan;
}

// The source row a GGUF row comes from under llama.cpp's Q/K permutation
// (convert_hf_to_gguf.py's LlamaModel.permute): within each head of
// head_dim rows, HF's order is [first halves | second halves] of the
// rotated pairs; GGUF's llama graph wants each pair adjacent.
int64_t permuted_source_row(int64_t row, int64_t head_dim) {
    const int64_t head = row / head_dim, j = row % head_dim, half = head_dim / 2;
    return head * head_dim + (j % 2) * half + j / 2;
}

}  // namespace tessera
