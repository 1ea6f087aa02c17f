#include "model/llama2c_import.h"

#include "model/gguf_writer.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/mapped_file.h"

#include <climits>
#include <cstring>
#include <filesystem>
#include <vector>

namespace tessera {

namespace {

constexpr uint32_t kVersionedMagic = 0x616b3432;  // "ak42"
constexpr uint64_t kVersionedHeaderBytes = 256;

struct Llama2cConfig {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Where each weight array starts in the checkpoint, in floats from the start of the weights.
struct WeightLayout {
    uint64_t token_embd, attn_norm, ffn_norm, final_norm, wq, wk, wv, wo, w1, w2, w3, wcls, total;
};

WeightLayout layout_weights(const Llama2cConfig& c, bool versioned, bool shared_classifier) {
    const uint64_t d = static_cast<uint64_t>(c.dim);
    const uint64_t L = static_cast<uint64_t>(c.n_layers);
    const uint64_t hd = d / static_cast<uint64_t>(c.n_heads);
    const uint64_t kv = hd * static_cast<uint64_t>(c.n_kv_heads);
    const uint64_t h = static_cast<uint64_t>(c.hidden_dim);
    const uint64_t V = static_cast<uint64_t>(c.vocab_size);
    auto mul = [](uint64_t a, uint64_t b) { return checked_mul(a, b, "checkpoint size"); };
    WeightLayout w{};
    uint64_t at = 0;
    auto take = [&](uint64_t n) {
        const uint64_t start = at;
        at = checked_add(at, n, "checkpoint size");
        return start;
    };
    if (versioned) {
        // version1_export: norms first, then embeddings, then the matrices layer-major per kind.
        w.attn_norm = take(mul(L, d));
        w.ffn_norm = take(mul(L, d));
        w.final_norm = take(d);
        w.token_embd = take(mul(V, d));
        w.wq = take(mul(L, mul(d, d)));
        w.wk = take(mul(L, mul(d, kv)));
        w.wv = take(mul(L, mul(d, kv)));
        w.wo = take(mul(L, mul(d, d)));
        w.w1 = take(mul(L, mul(h, d)));
        w.w2 = take(mul(L, mul(d, h)));
        w.w3 = take(mul(L, mul(h, d)));
    } else {
        // legacy_export: the order of llama2.c's run.c TransformerWeights, with the
        // (unused) RoPE tables before the optional classifier.
        w.token_embd = take(mul(V, d));
        w.attn_norm = take(mul(L, d));
        w.wq = take(mul(L, mul(d, d)));
        w.wk = take(mul(L, mul(d, kv)));
        w.wv = take(mul(L, mul(d, kv)));
        w.wo = take(mul(L, mul(d, d)));
        w.ffn_norm = take(mul(L, d));
        w.w1 = take(mul(L, mul(h, d)));
        w.w2 = take(mul(L, mul(d, h)));
        w.w3 = take(mul(L, mul(h, d)));
        w.final_norm = take(d);
        take(mul(static_cast<uint64_t>(c.seq_len), hd));  // freq_cis_real and freq_cis_imag
    }
    w.wcls = shared_classifier ? w.token_embd : take(mul(V, d));
    w.total = at;
    return w;
}

struct Vocabulary {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
};

bool is_byte_piece(const std::string& s) {
    return s.size() == 6 && s.rfind("<0x", 0) == 0 && s[5] == '>' && std::isxdigit(static_cast<unsigned char>(s[3])) &&
           std::isxdigit(static_cast<unsigned char>(s[4]));
}

Vocabulary read_tokenizer(const std::string& path, int32_t vocab_size) {
    const MappedFile file(path);
    const uint8_t* p = file.data();
    const uint64_t size = file.size();
    uint64_t pos = 0;
    auto need = [&](uint64_t n, const char* what) {
        if (n > size - pos) {
            throw make_error("{}: truncated tokenizer: {} needs {} bytes at offset {} but the file has {}", path, what,
                             n, pos, size);
        }
    };
    need(4, "max_token_length");
    const auto max_len = load<int32_t>(p);
    pos = 4;
    if (max_len <= 0 || max_len > 4096) throw make_error("{}: max_token_length {} is not plausible", path, max_len);
    Vocabulary v;
    for (int32_t id = 0; id < vocab_size; ++id) {
        need(8, "token header");
        const auto score = load<float>(p + pos);
        const auto len = load<int32_t>(p + pos + 4);
        pos += 8;
        if (len < 0 || len > max_len) {
            throw make_error("{}: token {} has length {} (max_token_length {}) at offset {}", path, id, len, max_len, pos - 4);
        }
        need(static_cast<uint64_t>(len), "token bytes");
        std::string piece(reinterpret_cast<const char*>(p + pos), static_cast<size_t>(len));
        pos += static_cast<uint64_t>(len);
        // llama2.c's exporter wrote BOS/EOS as "\n<s>\n"/"\n</s>\n" and turned
        // SentencePiece's "▁" into spaces; undo both so the vocabulary is the
        // SentencePiece one a GGUF carries.
        int32_t type = 1;
        if (id == 0) {
            type = 2;
        } else if (id == 1) {
            piece = "<s>";
            type = 3;
        } else if (id == 2) {
            piece = "</s>";
            type = 3;
        } else if (is_byte_piece(piece)) {
            type = 6;
        }
        std::string spm;
        for (char c : piece) {
            if (c == ' ') spm += "\xe2\x96\x81";
            else spm += c;
        }
        v.tokens.push_back(std::move(spm));
        v.scores.push_back(score);
        v.types.push_back(type);
    }
    return v;
}

}  // namespace

void import_llama2c(const Llama2cImportOptions& options, const std::string& out_path,
                    const std::function<void(size_t, size_t)>& progress) {
    const MappedFile file(options.checkpoint);
    const std::string& path = options.checkpoint;
    if (file.size() < 28) throw make_error("{}: too small ({} bytes) to be a llama2.c checkpoint", path, file.size());
    const uint8_t* p = file.data();
    bool versioned = false;
    bool shared = true;
    uint64_t header_bytes = 28;
    Llama2cConfig c{};
    if (load<uint32_t>(p) == kVersionedMagic) {
        versioned = true;
        const auto version = load<int32_t>(p + 4);
        if (version != 1) {
            throw make_error("{}: llama2.c checkpoint version {} is not supported (only the fp32 version 1 and the "
                             "legacy format)",
                             path, version);
        }
        if (file.size() < kVersionedHeaderBytes) throw make_error("{}: truncated version-1 header", path);
        std::memcpy(&c, p + 8, sizeof c);
        shared = p[8 + sizeof c] != 0;
        header_bytes = kVersionedHeaderBytes;
    } else {
        std::memcpy(&c, p, sizeof c);
        // The legacy format marks a separate classifier with a negative vocab size.
        shared = c.vocab_size > 0;
        // INT32_MIN has no positive counterpart: refused below as size 0.
        if (c.vocab_size < 0) c.vocab_size = c.vocab_size == INT32_MIN ? 0 : -c.vocab_size;
    }
    const bool plausible = c.dim > 0 && c.dim <= (1 << 16) && c.hidden_dim > 0 && c.hidden_dim <= (1 << 20) &&
                           c.n_layers > 0 && c.n_layers <= 1024 && c.n_heads > 0 && c.n_kv_heads > 0 &&
                           c.n_heads % c.n_kv_heads == 0 && c.dim % c.n_heads == 0 && c.vocab_size > 0 &&
                           c.vocab_size <= (1 << 22) && c.seq_len > 0 && c.seq_len <= (1 << 24) &&
                           (c.dim / c.n_heads) % 2 == 0;
    if (!plausible) {
        throw make_error("{}: not a llama2.c checkpoint (header dim={} hidden={} layers={} heads={} kv_heads={} "
                         "vocab={} seq_len={})",
                         path, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len);
    }
    if (c.vocab_size < 3) {
        // GGUF's unknown, BOS and EOS ids are 0, 1 and 2 in llama2.c's vocabularies.
        throw make_error("{}: a vocabulary of {} tokens cannot hold llama2.c's unknown, BOS and EOS tokens (ids 0, 1, 2)",
                         path, c.vocab_size);
    }
    const WeightLayout w = layout_weights(c, versioned, shared);
    const uint64_t expected = checked_add(header_bytes, checked_mul(w.total, 4, "checkpoint size"), "checkpoint size");
    if (file.size() != expected) {
        throw make_error("{}: file has {} bytes but its header (dim {}, {} layers, vocab {}, {} classifier) implies {}",
                         path, file.size(), c.dim, c.n_layers, c.vocab_size, shared ? "shared" : "separate", expected);
    }
    const Vocabulary vocab = read_tokenizer(options.tokenizer, c.vocab_size);

    const uint64_t d = static_cast<uint64_t>(c.dim);
    const int32_t head_dim = c.dim / c.n_heads;
    const uint64_t kv = static_cast<uint64_t>(head_dim) * static_cast<uint64_t>(c.n_kv_heads);
    const uint64_t h = static_cast<uint64_t>(c.hidden_dim);
    const float* weights = reinterpret_cast<const float*>(p + header_bytes);

    GgufWriter writer;
    writer.set_string("general.architecture", "llama");
    writer.set_string("general.name", options.name.empty()
                                          ? std::filesystem::path(path).stem().string()
                                          : options.name);
    writer.set_u32("general.file_type", 0);
    writer.set_u32("llama.context_length", static_cast<uint32_t>(c.seq_len));
    writer.set_u32("llama.embedding_length", static_cast<uint32_t>(c.dim));
    writer.set_u32("llama.block_count", static_cast<uint32_t>(c.n_layers));
    writer.set_u32("llama.feed_forward_length", static_cast<uint32_t>(c.hidden_dim));
    writer.set_u32("llama.attention.head_count", static_cast<uint32_t>(c.n_heads));
    writer.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
    writer.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
    writer.set_f32("llama.rope.freq_base", options.rope_freq_base);
    writer.set_f32("llama.attention.layer_norm_rms_epsilon", options.rms_eps);
    writer.set_string("tokenizer.ggml.model", "llama");
    writer.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
    writer.set_f32_array("tokenizer.ggml.scores", vocab.scores);
    writer.set_i32_array("tokenizer.ggml.token_type", vocab.types);
    writer.set_u32("tokenizer.ggml.unknown_token_id", 0);
    writer.set_u32("tokenizer.ggml.bos_token_id", 1);
    writer.set_u32("tokenizer.ggml.eos_token_id", 2);

    // Copies `count` floats starting at float index `start` of the weights.
    auto add = [&](const std::string& name, std::vector<int64_t> ne, uint64_t start) {
        const float* src = weights + start;
        writer.add_tensor(name, QuantType::F32, ne, [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src, n); });
    };
    const auto i64 = [](uint64_t v) { return static_cast<int64_t>(v); };
    const uint64_t V = static_cast<uint64_t>(c.vocab_size);
    add("token_embd.weight", {i64(d), i64(V)}, w.token_embd);
    for (uint64_t l = 0; l < static_cast<uint64_t>(c.n_layers); ++l) {
        const std::string pre = fmt::format("blk.{}.", l);
        add(pre + "attn_norm.weight", {i64(d)}, w.attn_norm + l * d);
        add(pre + "attn_q.weight", {i64(d), i64(d)}, w.wq + l * d * d);
        add(pre + "attn_k.weight", {i64(d), i64(kv)}, w.wk + l * d * kv);
        add(pre + "attn_v.weight", {i64(d), i64(kv)}, w.wv + l * d * kv);
        add(pre + "attn_output.weight", {i64(d), i64(d)}, w.wo + l * d * d);
        add(pre + "ffn_norm.weight", {i64(d)}, w.ffn_norm + l * d);
        add(pre + "ffn_gate.weight", {i64(d), i64(h)}, w.w1 + l * h * d);
        add(pre + "ffn_down.weight", {i64(h), i64(d)}, w.w2 + l * d * h);
        add(pre + "ffn_up.weight", {i64(d), i64(h)}, w.w3 + l * h * d);
    }
    add("output_norm.weight", {i64(d)}, w.final_norm);
    // A shared classifier is the embedding itself: GGUF expresses that by
    // leaving output.weight out.
    if (!shared) add("output.weight", {i64(d), i64(V)}, w.wcls);
    writer.write(out_path, progress);
}

}  // namespace tessera
