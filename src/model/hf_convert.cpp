#include "model/hf_convert.h"

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_config.h"
#include "model/hf_families.h"
#include "model/hf_nvfp4.h"
#include "model/hf_family_keys.h"
#include "model/hf_tensor_writer.h"
#include "model/hf_tokenizer_import.h"
#include "model/quant_mix.h"
#include "util/error.h"

#include <cstring>
#include <filesystem>
#include <set>

namespace tessera {

namespace {

namespace fs = std::filesystem;

void convert_checkpoint(const HfConvertOptions& options, const std::function<void(size_t, size_t)>& progress);

// The config of the text model: config.json, or its text_config in a
// multimodal Gemma 3 checkpoint (whose text tensors live under their own
// prefix, beside a vision tower llama.cpp puts in a separate mmproj file).
struct TextModel {
    const nlohmann::json* config;
    std::string prefix;                    // of the text model's tensors
    std::vector<std::string> other_parts;  // prefixes of tensors that are not the text model's
};

TextModel text_model_of(const HfFamily& family, const HfCheckpoint& checkpoint) {
    if (std::string(family.hf) != "Gemma3ForConditionalGeneration") return {&checkpoint.config(), "model.", {}};
    const auto text = checkpoint.config().find("text_config");
    if (text == checkpoint.config().end() || !text->is_object()) {
        throw make_error("{}/config.json: a Gemma3ForConditionalGeneration without a text_config", checkpoint.dir());
    }
    // transformers < 4.52 saved language_model.model.*, later ones model.language_model.*.
    for (const char* prefix : {"language_model.model.", "model.language_model."}) {
        if (checkpoint.has(std::string(prefix) + "embed_tokens.weight")) {
            return {&*text, prefix, {"vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.",
                                     "language_model.lm_head.", "lm_head."}};
        }
    }
    throw make_error("{}: a Gemma3ForConditionalGeneration whose text model's embedding is neither "
                     "language_model.model.embed_tokens.weight nor model.language_model.embed_tokens.weight",
                     checkpoint.dir());
}

// The tokenizer's metadata into the model's GGUF; a vocabulary shorter than
// the embedding (Qwen 2.5 pads its rows to a multiple of 128) gets
// "[PAD<id>]" tokens of the unused type up to n_vocab, as llama.cpp's
// converter pads it.
void write_vocabulary(const GgufFile& vocab, const GgufValue& tokens, const GgufValue& types, int64_t n_vocab,
                      GgufWriter& writer) {
    for (const GgufKv& kv : vocab.metadata()) {
        if (kv.key.rfind("tokenizer.", 0) != 0) continue;
        if (kv.key == "tokenizer.ggml.tokens" || kv.key == "tokenizer.ggml.token_type" ||
            (kv.key == "tokenizer.ggml.scores" && kv.value.count == tokens.count)) {
            continue;
        }
        writer.set_value(kv.key, kv.value);
    }
    std::vector<std::string> token_text(tokens.strings.begin(), tokens.strings.end());
    std::vector<int32_t> token_type;
    for (uint64_t i = 0; i < types.count; ++i) token_type.push_back(static_cast<int32_t>(types.array_integer(i)));
    for (int64_t id = static_cast<int64_t>(token_text.size()); id < n_vocab; ++id) {
        token_text.push_back("[PAD" + std::to_string(id) + "]");
        token_type.push_back(5);  // unused
    }
    writer.set_string_array("tokenizer.ggml.tokens", token_text);
    writer.set_i32_array("tokenizer.ggml.token_type", token_type);
    if (const GgufValue* scores = vocab.find_array("tokenizer.ggml.scores", GgufValueType::Float32);
        scores != nullptr && scores->count == tokens.count) {
        std::vector<float> score;
        for (uint64_t i = 0; i < scores->count; ++i) score.push_back(static_cast<float>(scores->array_number(i)));
        // llama.cpp's converter gives padding -10000 (SentencePiece) or no score.
        score.resize(static_cast<size_t>(n_vocab), -10000.0f);
        writer.set_f32_array("tokenizer.ggml.scores", score);
    }
}

}  // namespace

void convert_hf(const HfConvertOptions& options, const std::function<void(size_t, size_t)>& progress) {
    try {
        convert_checkpoint(options, progress);
    } catch (const nlohmann::json::exception& e) {
        // A config field of another JSON type than the one read.
        throw make_error("{}/config.json: a field of the wrong type: {}", options.dir, e.what());
    }
}

namespace {

void convert_checkpoint(const HfConvertOptions& options, const std::function<void(size_t, size_t)>& progress) {
    const nlohmann::json top = read_checkpoint_json(options.dir + "/config.json", 4u << 20);
    const auto arch_list = top.is_object() ? top.find("architectures") : top.end();
    if (arch_list == top.end() || !arch_list->is_array() || arch_list->empty() || !(*arch_list)[0].is_string()) {
        throw make_error("{}/config.json: no architectures list", options.dir);
    }
    const std::string hf_name = (*arch_list)[0].get<std::string>();
    const HfFamily* found = find_hf_family(hf_name);
    if (found == nullptr) {
        throw make_error("{}/config.json: architecture {} is not converted yet (convert-hf converts {})", options.dir,
                         hf_name.substr(0, 100), hf_family_names());
    }
    const HfFamily& family = *found;
    const bool gemma = family.gemma(), gemma3 = family.kind == HfFamilyKind::kGemma3;
    const std::string arch = family.gguf;
    const HfCheckpoint checkpoint(options.dir);
    const TextModel text = text_model_of(family, checkpoint);
    const std::string config_path = options.dir + "/config.json" + (text.prefix == "model." ? "" : " text_config");
    const HfConfig c{*text.config, config_path};

    HfDims d;
    d.n_embd = c.integer("hidden_size", 1, 1 << 20);
    d.n_ff = c.integer("intermediate_size", 1, 1 << 22);
    d.n_layer = c.integer("num_hidden_layers", 1, 4096);
    // Gemma 3's configs leave out what transformers defaults (as llama.cpp's converter assumes too).
    d.n_head = gemma3 ? c.integer("num_attention_heads", 1, 4096, 8) : c.integer("num_attention_heads", 1, 4096);
    d.n_head_kv = c.integer("num_key_value_heads", 1, d.n_head, gemma3 ? std::min<int64_t>(4, d.n_head) : d.n_head);
    // Gemma 2 says its head width and vocabulary; Gemma 3's transformers defaults them.
    d.head_dim = gemma3                ? c.integer("head_dim", 2, 1 << 16, 256)
                 : family.gemma()      ? c.integer("head_dim", 2, 1 << 16)
                                       : c.integer("head_dim", 2, 1 << 16, d.n_embd / d.n_head);
    d.n_vocab = gemma3 ? c.integer("vocab_size", 1, 1 << 24, 262208) : c.integer("vocab_size", 1, 1 << 24);
    const int64_t n_ctx = c.integer("max_position_embeddings", 1, 1 << 24, gemma3 ? 131072 : 4096);
    if (d.n_head % d.n_head_kv != 0 || d.head_dim % 2 != 0) {
        throw make_error("{}: {} heads over {} KV heads of width {}: not a grouped-query layout", config_path, d.n_head,
                         d.n_head_kv, d.head_dim);
    }
    // Gemma's head is its embedding, always (llama.cpp skips an lm_head some exporters add).
    d.tied = gemma || c.boolean("tie_word_embeddings", false) || !checkpoint.has("lm_head.weight");
    if (family.kind == HfFamilyKind::kQwen3Moe) {
        d.n_expert = c.integer("num_experts", 1, 1 << 12);
        d.n_ff_expert = c.integer("moe_intermediate_size", 1, 1 << 22);
        if (c.integer("decoder_sparse_step", 1, 4096, 1) != 1 || (c.has("mlp_only_layers") && !c.j["mlp_only_layers"].empty())) {
            throw make_error("{}: dense layers among the experts' (decoder_sparse_step, mlp_only_layers) are not "
                             "converted: llama.cpp's qwen3moe graph has experts in every layer", config_path);
        }
        if (!c.boolean("norm_topk_prob", false)) {
            throw make_error("{}: norm_topk_prob false: llama.cpp's qwen3moe graph always normalizes the chosen "
                             "experts' weights", config_path);
        }
    } else if (family.kind == HfFamilyKind::kMixtral || family.kind == HfFamilyKind::kGptOss) {
        d.n_expert = c.integer("num_local_experts", 1, 1 << 12);
        d.n_ff_expert = d.n_ff;
    }
    // gpt-oss's config says experts_per_token.
    const char* used_key = family.kind == HfFamilyKind::kGptOss && !c.has("num_experts_per_tok") ? "experts_per_token"
                                                                                              : "num_experts_per_tok";
    const int64_t n_expert_used = d.n_expert > 0 ? c.integer(used_key, 1, d.n_expert) : 0;
    if (family.kind == HfFamilyKind::kGptOss) check_gpt_oss(c, d);
    const HfRopeScaling rope = hf_rope_scaling(c.j.contains("rope_scaling") ? c.j["rope_scaling"] : nlohmann::json(),
                                               config_path);

    // The vocabulary and chat template, through convert-tokenizer's code.
    const HfTokenizerFiles tok = hf_tokenizer_files(options.dir);
    const std::string vocab_path = options.output + ".vocab.partial";
    convert_hf_tokenizer(tok.tokenizer, tok.config, vocab_path, tok.chat_template);
    struct RemoveVocab {
        std::string path;
        ~RemoveVocab() { std::remove(path.c_str()); }
    } remove_vocab{vocab_path};
    const GgufFile vocab(vocab_path);
    const GgufValue* tokens = vocab.find_array("tokenizer.ggml.tokens", GgufValueType::String);
    const GgufValue* types = vocab.find_array("tokenizer.ggml.token_type", GgufValueType::Int32);
    if (tokens == nullptr || types == nullptr || types->count != tokens->count) {
        throw make_error("{}: the converted vocabulary has no tokens and token types of one length", tok.tokenizer);
    }
    if (tokens->count > static_cast<uint64_t>(d.n_vocab)) {
        throw make_error("{}: {} tokens, more than config.json's vocab_size {}", tok.tokenizer, tokens->count, d.n_vocab);
    }
    // Gemma 3's embedding has rows past its tokenizer's (262208 for 262144
    // tokens): llama.cpp's converter cuts them off.
    const int64_t checkpoint_vocab = d.n_vocab;
    const int64_t n_vocab = gemma3 ? static_cast<int64_t>(tokens->count) : d.n_vocab;

    GgufWriter writer;
    writer.set_string("general.architecture", arch);
    writer.set_string("general.name", options.name.empty() ? fs::path(options.dir).filename().string() : options.name);
    // llama.cpp's LLAMA_FTYPE of the chosen type, and the quantization
    // version its converter always writes.
    if (const std::optional<QuantizeTarget> target = parse_quantize_target(quant_type_name(options.type))) {
        writer.set_u32("general.file_type", target->file_type);
    }
    writer.set_u32("general.quantization_version", 2);
    const std::string p = arch + ".";
    writer.set_u32(p + "context_length", static_cast<uint32_t>(n_ctx));
    writer.set_u32(p + "embedding_length", static_cast<uint32_t>(d.n_embd));
    writer.set_u32(p + "block_count", static_cast<uint32_t>(d.n_layer));
    writer.set_u32(p + "feed_forward_length", static_cast<uint32_t>(d.n_ff));
    writer.set_u32(p + "attention.head_count", static_cast<uint32_t>(d.n_head));
    writer.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(d.n_head_kv));
    const double theta = c.number("rope_theta", gemma3 ? 1000000.0 : 10000.0), eps = c.number("rms_norm_eps", 1e-6);
    if (!(theta > 1.0 && theta < 1e12) || !(eps > 0.0 && eps < 1.0)) {
        throw make_error("{}: rope_theta {} or rms_norm_eps {} out of range ((1, 1e12) and (0, 1))", config_path, theta, eps);
    }
    writer.set_f32(p + "rope.freq_base", static_cast<float>(theta));
    writer.set_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(eps));
    writer.set_u32(p + "vocab_size", static_cast<uint32_t>(n_vocab));
    // Phi-4-mini rotates only part of each head (partial_rotary_factor).
    const double partial = c.number("partial_rotary_factor", 1.0);
    const int64_t n_rot = static_cast<int64_t>(static_cast<double>(d.head_dim) * partial);
    if (!(partial > 0.0 && partial <= 1.0) || n_rot % 2 != 0 || n_rot < 2) {
        throw make_error("{}: partial_rotary_factor {} of heads of {} rotates no even number of values", config_path,
                         partial, d.head_dim);
    }
    writer.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(n_rot));
    if (rope.kind == "linear") {
        writer.set_string(p + "rope.scaling.type", "linear");
        writer.set_f32(p + "rope.scaling.factor", static_cast<float>(rope.factor));
    } else if (rope.kind == "yarn") {
        writer.set_string(p + "rope.scaling.type", "yarn");
        writer.set_f32(p + "rope.scaling.factor", static_cast<float>(rope.factor));
        writer.set_u32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(rope.original_context));
        writer.set_f32(p + "rope.scaling.yarn_beta_fast", static_cast<float>(rope.beta_fast));
        writer.set_f32(p + "rope.scaling.yarn_beta_slow", static_cast<float>(rope.beta_slow));
    }
    if (gemma || d.head_dim != d.n_embd / d.n_head) {
        writer.set_u32(p + "attention.key_length", static_cast<uint32_t>(d.head_dim));
        writer.set_u32(p + "attention.value_length", static_cast<uint32_t>(d.head_dim));
    }
    if (d.n_expert > 0) {
        writer.set_u32(p + "expert_count", static_cast<uint32_t>(d.n_expert));
        writer.set_u32(p + "expert_used_count", static_cast<uint32_t>(n_expert_used));
        if (family.kind == HfFamilyKind::kQwen3Moe || family.kind == HfFamilyKind::kGptOss) {
            writer.set_u32(p + "expert_feed_forward_length", static_cast<uint32_t>(d.n_ff_expert));
        }
    }
    if (family.kind == HfFamilyKind::kGptOss) {
        writer.set_u32(p + "attention.sliding_window", static_cast<uint32_t>(c.integer("sliding_window", 1, 1 << 24)));
    }
    if (gemma) write_gemma_keys(c, d, family, writer);

    write_vocabulary(vocab, *tokens, *types, n_vocab, writer);

    // Every tensor the checkpoint holds has its place, or the conversion is refused.
    std::vector<HfTensorPlan> plan = hf_tensor_plan(family, d, text.prefix);
    if (gemma3 && n_vocab < checkpoint_vocab) plan.front().keep_rows = n_vocab;  // token_embd
    // A ModelOpt NVFP4 checkpoint: its weights' scales and factors come with
    // them; its KV-cache scales (FP8 caches on NVIDIA's GPUs) are dropped, as
    // llama.cpp's converter drops them.
    const bool nvfp4 = modelopt_nvfp4(checkpoint);
    std::set<std::string> planned;
    for (const HfTensorPlan& t : plan) {
        planned.insert(t.sources.begin(), t.sources.end());
        if (!t.mxfp4_scales.empty()) planned.insert(t.mxfp4_scales);
        for (const std::string& source : t.sources) {
            for (const std::string& companion : nvfp4_companions(checkpoint, source)) planned.insert(companion);
        }
    }
    const auto ends_with = [](const std::string& name, const std::string& suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    for (const std::string& name : checkpoint.names()) {
        if (planned.count(name) != 0) continue;
        // Rotary caches some exporters keep are recomputed, never read;
        // Gemma's lm_head (some exporters add one) is its embedding; a
        // multimodal checkpoint's other parts are not the text model's.
        if (name.find("rotary_emb.inv_freq") != std::string::npos || (gemma && name == "lm_head.weight")) continue;
        if (nvfp4 && (ends_with(name, ".k_scale") || ends_with(name, ".v_scale"))) continue;
        bool other_part = false;
        for (const std::string& other : text.other_parts) other_part = other_part || name.rfind(other, 0) == 0;
        if (other_part) continue;
        throw make_error("{}: tensor '{}' of {} has no place in a {} GGUF", checkpoint.shard_of(name).path(),
                         name.substr(0, 200), arch, arch);
    }
    for (const HfTensorPlan& t : plan) add_hf_tensor(checkpoint, options.type, t, writer);
    if (rope.kind == "llama3") {
        // Llama 3.1's long-context rotation, as llama.cpp carries it: a
        // divisor per rotated pair (rope_freqs.weight), the graph unchanged.
        const std::vector<float> factors = llama3_rope_factors(rope, theta, d.head_dim);
        writer.add_tensor("rope_freqs.weight", QuantType::F32, {d.head_dim / 2}, [factors](uint8_t* dst, uint64_t n) {
            std::memcpy(dst, factors.data(), std::min<uint64_t>(n, factors.size() * sizeof(float)));
        });
    }
    writer.write(options.output, progress);
}

}  // namespace

}  // namespace tessera
