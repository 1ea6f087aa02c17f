#include "model/hf_convert.h"

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_tokenizer_import.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/mapped_file.h"

#include <unistd.h>

#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace tessera {

namespace {

namespace fs = std::filesystem;

// What differs between the families convert-hf knows, as llama.cpp's
// converter writes each: GGUF's architecture; whether Q/K rows are permuted
// (the llama graph rotates adjacent pairs; qwen's, like HF, halves); biases
// on Q, K and V; per-head RMS norms of Q and K.
struct Family {
    const char* gguf;
    bool permute_qk;
    bool qkv_bias;
    bool qk_norm;
    bool fused = false;  // Phi-3: one qkv_proj and one gate_up_proj, kept fused (attn_qkv, ffn_up of 2 x FFN rows)
};

// HF's architectures[0] -> its family.
const std::map<std::string, Family> kArchitectures = {
    {"LlamaForCausalLM", {"llama", true, false, false}},
    {"MistralForCausalLM", {"llama", true, false, false}},
    {"Qwen2ForCausalLM", {"qwen2", false, true, false}},
    {"Qwen3ForCausalLM", {"qwen3", false, false, true}},
    {"Phi3ForCausalLM", {"phi3", false, false, false, true}},
};

const Family& family_of(const std::string& dir);

// A config field as the converter needs it: present, of its type, in range.
struct Config {
    const nlohmann::json& j;
    std::string path;

    int64_t integer(const char* key, int64_t lo, int64_t hi) const {
        const auto it = j.find(key);
        if (it == j.end() || !it->is_number_integer()) throw make_error("{}: no integer '{}'", path, key);
        const int64_t v = it->get<int64_t>();
        if (v < lo || v > hi) throw make_error("{}: '{}' is {}, outside [{}, {}]", path, key, v, lo, hi);
        return v;
    }
    int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
        const auto it = j.find(key);
        return it == j.end() || it->is_null() ? fallback : integer(key, lo, hi);
    }
    double number(const char* key, double fallback) const {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null()) return fallback;
        if (!it->is_number()) throw make_error("{}: '{}' is not a number", path, key);
        return it->get<double>();
    }
    bool boolean(const char* key, bool fallback) const {
        const auto it = j.find(key);
        if (it == j.end() || it->is_null()) return fallback;
        if (!it->is_boolean()) throw make_error("{}: '{}' is not true or false", path, key);
        return it->get<bool>();
    }
};

// One element of a source tensor as float.
float element(SafetensorsDtype dtype, const uint8_t* p) {
    switch (dtype) {
        case SafetensorsDtype::F32: {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
        case SafetensorsDtype::F16: {
            uint16_t h;
            std::memcpy(&h, p, 2);
            return fp16_to_fp32(h);
        }
        case SafetensorsDtype::BF16: {
            uint16_t b;
            std::memcpy(&b, p, 2);
            const uint32_t bits = static_cast<uint32_t>(b) << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            return f;
        }
        default: return 0.0f;
    }
}

// The source row a GGUF row comes from under llama.cpp's Q/K permutation
// (convert_hf_to_gguf.py's LlamaModel.permute): within each head of
// head_dim rows, HF's order is [first halves | second halves] of the
// rotated pairs; GGUF's llama graph wants each pair adjacent.
int64_t permuted_source_row(int64_t row, int64_t head_dim) {
    const int64_t head = row / head_dim, j = row % head_dim, half = head_dim / 2;
    return head * head_dim + (j % 2) * half + j / 2;
}

struct TensorPlan {
    std::string hf, gguf;
    int64_t permute_head_dim = 0;  // > 0: Q or K rows, permuted per head
};

// config.json's rope_scaling: none, "linear" (positions divided by the
// factor) or "llama3" (Llama 3.1+: low frequencies divided by the factor,
// high ones kept, a smooth blend between); anything else is refused.
struct RopeScaling {
    std::string kind;  // "" (none), "linear" or "llama3"
    double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_context = 8192.0;
};

RopeScaling rope_scaling_of(const nlohmann::json& config, const std::string& path) {
    RopeScaling r;
    const auto it = config.find("rope_scaling");
    if (it == config.end() || it->is_null()) return r;
    if (!it->is_object()) throw make_error("{}: rope_scaling is not an object", path);
    const Config s{*it, path + " rope_scaling"};
    const auto type = it->find("rope_type") != it->end() ? it->find("rope_type") : it->find("type");
    const std::string kind = type != it->end() && type->is_string() ? type->get<std::string>() : "?";
    r.factor = s.number("factor", 1.0);
    if (!(r.factor >= 1.0 && r.factor <= 1024.0)) throw make_error("{}: rope_scaling factor {} out of [1, 1024]", path, r.factor);
    if (kind == "default") return r;
    if (kind == "linear") {
        r.kind = kind;
        return r;
    }
    if (kind == "llama3") {
        r.kind = kind;
        r.low_freq_factor = s.number("low_freq_factor", 1.0);
        r.high_freq_factor = s.number("high_freq_factor", 4.0);
        r.original_context = s.number("original_max_position_embeddings", 8192.0);
        if (!(r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor && r.original_context >= 1)) {
            throw make_error("{}: llama3 rope_scaling with low_freq_factor {}, high_freq_factor {}, original context {}",
                             path, r.low_freq_factor, r.high_freq_factor, r.original_context);
        }
        return r;
    }
    throw make_error("{}: rope_scaling of type '{}' is not converted yet (none, linear and llama3 are)", path,
                     kind.substr(0, 40));
}

// llama.cpp's convert_hf_to_gguf.py (LlamaModel, rope_type llama3): per
// rotated pair, the factor its frequency is divided by.
std::vector<float> llama3_rope_factors(const RopeScaling& r, double theta, int64_t head_dim) {
    const double pi = 3.14159265358979323846;
    const double low_wavelen = r.original_context / r.low_freq_factor;
    const double high_wavelen = r.original_context / r.high_freq_factor;
    std::vector<float> factors;
    for (int64_t i = 0; i < head_dim; i += 2) {
        const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / static_cast<double>(head_dim));
        const double wavelen = 2 * pi / freq;
        if (wavelen < high_wavelen) {
            factors.push_back(1.0f);
        } else if (wavelen > low_wavelen) {
            factors.push_back(static_cast<float>(r.factor));
        } else {
            const double smooth = (r.original_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
            factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / r.factor + smooth)));
        }
    }
    return factors;
}

}  // namespace

std::string hf_architecture(const std::string& dir) { return family_of(dir).gguf; }

namespace {

const Family& family_of(const std::string& dir) {
    const nlohmann::json config = read_checkpoint_json(dir + "/config.json", 4u << 20);
    const auto arch = config.is_object() ? config.find("architectures") : config.end();
    if (arch == config.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string()) {
        throw make_error("{}/config.json: no architectures list", dir);
    }
    const std::string name = (*arch)[0].get<std::string>();
    const auto known = kArchitectures.find(name);
    if (known == kArchitectures.end()) {
        std::string list;
        for (const auto& [hf, gguf] : kArchitectures) list += (list.empty() ? "" : ", ") + hf;
        throw make_error("{}/config.json: architecture {} is not converted yet (convert-hf converts {})", dir,
                         name.substr(0, 100), list);
    }
    return known->second;
}

}  // namespace

void convert_hf(const HfConvertOptions& options, const std::function<void(size_t, size_t)>& progress) {
    const Family& family = family_of(options.dir);
    const std::string arch = family.gguf;
    const HfCheckpoint checkpoint(options.dir);
    const Config c{checkpoint.config(), options.dir + "/config.json"};
    const int64_t n_embd = c.integer("hidden_size", 1, 1 << 20);
    const int64_t n_ff = c.integer("intermediate_size", 1, 1 << 22);
    const int64_t n_layer = c.integer("num_hidden_layers", 1, 4096);
    const int64_t n_head = c.integer("num_attention_heads", 1, 4096);
    const int64_t n_head_kv = c.integer("num_key_value_heads", 1, n_head, n_head);
    const int64_t head_dim = c.integer("head_dim", 2, 1 << 16, n_embd / n_head);
    const int64_t n_vocab = c.integer("vocab_size", 1, 1 << 24);
    const int64_t n_ctx = c.integer("max_position_embeddings", 1, 1 << 24, 4096);
    if (n_head % n_head_kv != 0 || head_dim % 2 != 0) {
        throw make_error("{}/config.json: {} heads over {} KV heads of width {}: not a grouped-query layout", options.dir,
                         n_head, n_head_kv, head_dim);
    }
    const RopeScaling rope = rope_scaling_of(checkpoint.config(), options.dir + "/config.json");
    const bool tied = c.boolean("tie_word_embeddings", false) || !checkpoint.has("lm_head.weight");

    // The vocabulary and chat template, through convert-tokenizer's code.
    const HfTokenizerFiles tok = hf_tokenizer_files(options.dir);
    const std::string vocab_path = options.output + ".vocab.partial";
    convert_hf_tokenizer(tok.tokenizer, tok.config, vocab_path, tok.chat_template);
    struct RemoveVocab {
        std::string path;
        ~RemoveVocab() { std::remove(path.c_str()); }
    } remove_vocab{vocab_path};
    const GgufFile vocab(vocab_path);

    GgufWriter writer;
    writer.set_string("general.architecture", arch);
    writer.set_string("general.name", options.name.empty() ? fs::path(options.dir).filename().string() : options.name);
    const std::string p = arch + ".";
    writer.set_u32(p + "context_length", static_cast<uint32_t>(n_ctx));
    writer.set_u32(p + "embedding_length", static_cast<uint32_t>(n_embd));
    writer.set_u32(p + "block_count", static_cast<uint32_t>(n_layer));
    writer.set_u32(p + "feed_forward_length", static_cast<uint32_t>(n_ff));
    writer.set_u32(p + "attention.head_count", static_cast<uint32_t>(n_head));
    writer.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(n_head_kv));
    const double theta = c.number("rope_theta", 10000.0), eps = c.number("rms_norm_eps", 1e-6);
    if (!(theta > 1.0 && theta < 1e12) || !(eps > 0.0 && eps < 1.0)) {
        throw make_error("{}/config.json: rope_theta {} or rms_norm_eps {} out of range ((1, 1e12) and (0, 1))",
                         options.dir, theta, eps);
    }
    writer.set_f32(p + "rope.freq_base", static_cast<float>(theta));
    writer.set_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(eps));
    writer.set_u32(p + "vocab_size", static_cast<uint32_t>(n_vocab));
    // Phi-4-mini rotates only part of each head (partial_rotary_factor).
    const double partial = c.number("partial_rotary_factor", 1.0);
    const int64_t n_rot = static_cast<int64_t>(static_cast<double>(head_dim) * partial);
    if (!(partial > 0.0 && partial <= 1.0) || n_rot % 2 != 0 || n_rot < 2) {
        throw make_error("{}/config.json: partial_rotary_factor {} of heads of {} rotates no even number of values",
                         options.dir, partial, head_dim);
    }
    writer.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(n_rot));
    if (rope.kind == "linear") {
        writer.set_string(p + "rope.scaling.type", "linear");
        writer.set_f32(p + "rope.scaling.factor", static_cast<float>(rope.factor));
    }
    if (head_dim != n_embd / n_head) {
        writer.set_u32(p + "attention.key_length", static_cast<uint32_t>(head_dim));
        writer.set_u32(p + "attention.value_length", static_cast<uint32_t>(head_dim));
    }
    // A vocabulary shorter than the embedding (Qwen 2.5 pads its rows to a
    // multiple of 128) gets "[PAD<id>]" tokens of the unused type up to
    // vocab_size, as llama.cpp's converter pads it.
    const GgufValue* tokens = vocab.find_array("tokenizer.ggml.tokens", GgufValueType::String);
    const GgufValue* types = vocab.find_array("tokenizer.ggml.token_type", GgufValueType::Int32);
    if (tokens == nullptr || types == nullptr || types->count != tokens->count) {
        throw make_error("{}: the converted vocabulary has no tokens and token types of one length", tok.tokenizer);
    }
    if (tokens->count > static_cast<uint64_t>(n_vocab)) {
        throw make_error("{}: {} tokens, more than config.json's vocab_size {}", tok.tokenizer, tokens->count, n_vocab);
    }
    for (const GgufKv& kv : vocab.metadata()) {
        if (kv.key.rfind("tokenizer.", 0) != 0) continue;
        if (kv.key == "tokenizer.ggml.tokens" || kv.key == "tokenizer.ggml.token_type" ||
            (kv.key == "tokenizer.ggml.scores" && kv.value.count == tokens->count)) {
            continue;
        }
        writer.set_value(kv.key, kv.value);
    }
    std::vector<std::string> token_text(tokens->strings.begin(), tokens->strings.end());
    std::vector<int32_t> token_type;
    for (uint64_t i = 0; i < types->count; ++i) token_type.push_back(static_cast<int32_t>(types->array_integer(i)));
    for (int64_t id = static_cast<int64_t>(token_text.size()); id < n_vocab; ++id) {
        token_text.push_back("[PAD" + std::to_string(id) + "]");
        token_type.push_back(5);  // unused
    }
    writer.set_string_array("tokenizer.ggml.tokens", token_text);
    writer.set_i32_array("tokenizer.ggml.token_type", token_type);
    if (const GgufValue* scores = vocab.find_array("tokenizer.ggml.scores", GgufValueType::Float32);
        scores != nullptr && scores->count == tokens->count) {
        std::vector<float> score;
        for (uint64_t i = 0; i < scores->count; ++i) score.push_back(static_cast<float>(scores->array_number(i)));
        score.resize(static_cast<size_t>(n_vocab), 0.0f);
        writer.set_f32_array("tokenizer.ggml.scores", score);
    }

    // Every tensor the checkpoint holds has its place, or the conversion is refused.
    std::vector<TensorPlan> plan = {{"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"}};
    if (!tied) plan.push_back({"lm_head.weight", "output.weight"});
    const std::vector<std::pair<const char*, const char*>> per_layer =
        family.fused ? std::vector<std::pair<const char*, const char*>>{
                           {"input_layernorm", "attn_norm"}, {"self_attn.qkv_proj", "attn_qkv"},
                           {"self_attn.o_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"},
                           {"mlp.gate_up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"}}
                     : std::vector<std::pair<const char*, const char*>>{
                           {"input_layernorm", "attn_norm"}, {"self_attn.q_proj", "attn_q"},
                           {"self_attn.k_proj", "attn_k"}, {"self_attn.v_proj", "attn_v"},
                           {"self_attn.o_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"},
                           {"mlp.gate_proj", "ffn_gate"}, {"mlp.up_proj", "ffn_up"}, {"mlp.down_proj", "ffn_down"}};
    for (int64_t l = 0; l < n_layer; ++l) {
        for (const auto& [hf, gguf] : per_layer) {
            TensorPlan t{fmt::format("model.layers.{}.{}.weight", l, hf), fmt::format("blk.{}.{}.weight", l, gguf)};
            const bool qk = std::strcmp(gguf, "attn_q") == 0 || std::strcmp(gguf, "attn_k") == 0;
            if (qk && family.permute_qk) t.permute_head_dim = head_dim;
            plan.push_back(t);
            if (family.qkv_bias && (qk || std::strcmp(gguf, "attn_v") == 0)) {
                plan.push_back({fmt::format("model.layers.{}.{}.bias", l, hf), fmt::format("blk.{}.{}.bias", l, gguf)});
            }
        }
        if (family.qk_norm) {
            plan.push_back({fmt::format("model.layers.{}.self_attn.q_norm.weight", l), fmt::format("blk.{}.attn_q_norm.weight", l)});
            plan.push_back({fmt::format("model.layers.{}.self_attn.k_norm.weight", l), fmt::format("blk.{}.attn_k_norm.weight", l)});
        }
    }
    std::set<std::string> planned;
    for (const TensorPlan& t : plan) planned.insert(t.hf);
    for (const std::string& name : checkpoint.names()) {
        // Rotary caches some exporters keep are recomputed, never read.
        if (planned.count(name) == 0 && name.find("rotary_emb.inv_freq") == std::string::npos) {
            throw make_error("{}: tensor '{}' of {} has no place in a {} GGUF", checkpoint.shard_of(name).path(),
                             name.substr(0, 200), arch, arch);
        }
    }
    const std::map<std::string, std::vector<int64_t>> want_shape = [&] {
        std::map<std::string, std::vector<int64_t>> w;
        w["token_embd.weight"] = {n_vocab, n_embd};
        w["output.weight"] = {n_vocab, n_embd};
        w["output_norm.weight"] = {n_embd};
        for (int64_t l = 0; l < n_layer; ++l) {
            const std::string b = fmt::format("blk.{}.", l);
            w[b + "attn_norm.weight"] = {n_embd};
            w[b + "ffn_norm.weight"] = {n_embd};
            w[b + "attn_q.weight"] = {n_head * head_dim, n_embd};
            w[b + "attn_k.weight"] = {n_head_kv * head_dim, n_embd};
            w[b + "attn_v.weight"] = {n_head_kv * head_dim, n_embd};
            w[b + "attn_output.weight"] = {n_embd, n_head * head_dim};
            w[b + "ffn_gate.weight"] = {n_ff, n_embd};
            w[b + "ffn_up.weight"] = {family.fused ? 2 * n_ff : n_ff, n_embd};
            w[b + "attn_qkv.weight"] = {(n_head + 2 * n_head_kv) * head_dim, n_embd};
            w[b + "ffn_down.weight"] = {n_embd, n_ff};
            w[b + "attn_q.bias"] = {n_head * head_dim};
            w[b + "attn_k.bias"] = {n_head_kv * head_dim};
            w[b + "attn_v.bias"] = {n_head_kv * head_dim};
            w[b + "attn_q_norm.weight"] = {head_dim};
            w[b + "attn_k_norm.weight"] = {head_dim};
        }
        return w;
    }();
    for (const TensorPlan& t : plan) {
        if (!checkpoint.has(t.hf)) throw make_error("{}: the checkpoint has no tensor '{}'", options.dir, t.hf);
        const SafetensorsTensor& src = checkpoint.tensor(t.hf);
        const std::string where = fmt::format("{}: tensor '{}'", checkpoint.shard_of(t.hf).path(), t.hf);
        if (src.dtype != SafetensorsDtype::F32 && src.dtype != SafetensorsDtype::F16 && src.dtype != SafetensorsDtype::BF16) {
            throw make_error("{} is {}: convert-hf reads F32, F16 and BF16 weights", where, safetensors_dtype_name(src.dtype));
        }
        if (src.shape != want_shape.at(t.gguf)) {
            throw make_error("{} has shape [{}], and config.json makes it [{}]", where, fmt::join(src.shape, ", "),
                             fmt::join(want_shape.at(t.gguf), ", "));
        }
        const bool matrix = src.shape.size() == 2;
        const int64_t cols = src.shape.back(), rows = matrix ? src.shape[0] : 1;
        const QuantType type = matrix ? options.type : QuantType::F32;
        if (matrix && cols % layout_of(type).block_size != 0) {
            throw make_error("{}: rows of {} values do not divide into {} blocks of {}", where, cols,
                             quant_type_name(type), layout_of(type).block_size);
        }
        std::vector<int64_t> ne = {cols};
        if (matrix) ne.push_back(rows);
        const std::span<const uint8_t> bytes = checkpoint.data(t.hf);
        const uint64_t elem = safetensors_dtype_bytes(src.dtype);
        const int64_t permute = t.permute_head_dim;
        const SafetensorsDtype dtype = src.dtype;
        const QuantTraits* out = scalar_traits(type);
        const size_t out_row = quant_row_bytes(type, cols);
        writer.add_tensor(t.gguf, type, ne, [=](uint8_t* dst, uint64_t n) {
            if (n != out_row * static_cast<uint64_t>(rows)) throw make_error("{}: {} bytes asked for", t.gguf, n);
            std::vector<float> row(static_cast<size_t>(cols));
            const uint64_t row_bytes = static_cast<uint64_t>(cols) * elem;
            // Read once: the shard's pages go back to the page cache every
            // 32 MiB (Q/K rows are permuted within a head only, so the rows
            // before the current head are done), keeping memory near the
            // output buffer alone.
            constexpr uint64_t kReleaseBytes = 32u << 20;
            uint64_t released = 0;
            for (int64_t r = 0; r < rows; ++r) {
                const int64_t from = permute > 0 ? permuted_source_row(r, permute) : r;
                const uint8_t* s = bytes.data() + static_cast<uint64_t>(from) * row_bytes;
                for (int64_t i = 0; i < cols; ++i) row[static_cast<size_t>(i)] = element(dtype, s + i * elem);
                out->from_float(row.data(), dst + static_cast<uint64_t>(r) * out_row, cols);
                const int64_t done_rows = permute > 0 ? (r + 1) / permute * permute : r + 1;
                const uint64_t done = static_cast<uint64_t>(done_rows) * row_bytes;
                if (done - released >= kReleaseBytes) {
                    release_pages(bytes.data() + released, done - released);
                    released = done;
                }
            }
            release_pages(bytes.data(), bytes.size());
        });
    }
    if (rope.kind == "llama3") {
        // Llama 3.1's long-context rotation, as llama.cpp carries it: a
        // divisor per rotated pair (rope_freqs.weight), the graph unchanged.
        const std::vector<float> factors = llama3_rope_factors(rope, c.number("rope_theta", 10000.0), head_dim);
        writer.add_tensor("rope_freqs.weight", QuantType::F32, {head_dim / 2}, [factors](uint8_t* dst, uint64_t n) {
            std::memcpy(dst, factors.data(), std::min<uint64_t>(n, factors.size() * sizeof(float)));
        });
    }
    writer.write(options.output, progress);
}

}  // namespace tessera
