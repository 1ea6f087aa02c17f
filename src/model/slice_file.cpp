#include "model/slice_file.h"

#include "model/gguf_writer.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/mapped_file.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace tessera {

namespace {

constexpr const char* kRangeKey = "tessera.slice.range";
constexpr const char* kSourceKey = "tessera.slice.source_fingerprint";
constexpr const char* kVocabKey = "tessera.slice.n_vocab";
// The balanced split's turns: deal_count and deal_index of every further
// part, written only where one is dealt (files without it deal none).
constexpr const char* kDealsKey = "tessera.slice.deals";

// The further parts' turns, two values each.
std::vector<int32_t> tail_deals(const Slice& s) {
    std::vector<int32_t> deals;
    for (const ExpertPart& t : s.tails) deals.insert(deals.end(), {t.deal_count, t.deal_index});
    return deals;
}

bool any_dealt(const Slice& s) {
    return std::any_of(s.tails.begin(), s.tails.end(), [](const ExpertPart& t) { return t.dealt(); });
}

const GgufTensorInfo& tensor(const GgufFile& file, const std::string& name) {
    const GgufTensorInfo* t = file.find_tensor(name);
    if (t == nullptr) throw make_error("{}: tensor '{}' is missing", file.path(), name);
    return *t;
}

// Rows [r0, r1) of a 2-D tensor, as they are stored.
void add_rows(GgufWriter& w, const GgufTensorInfo& t, int64_t r0, int64_t r1) {
    const uint64_t row = quant_row_bytes(t.type, t.ne[0]);
    const uint8_t* src = t.data + static_cast<uint64_t>(r0) * row;
    w.add_tensor(t.name, t.type, {t.ne[0], r1 - r0},
                 [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src, n); });
}

// Rows [r0, r1) of a projection (model/llama_model.h), stored under its own
// name whether the model keeps it alone or fused; its bias whole.
void add_projection_rows(GgufWriter& w, const ProjectionRows& p, int64_t r0, int64_t r1) {
    GgufTensorInfo t = *p.tensor;
    t.name = p.name;
    add_rows(w, t, p.first_row + r0, p.first_row + r1);
}

void add_projection_bias(GgufWriter& w, const ProjectionRows& p) {
    if (p.bias == nullptr) return;
    const GgufTensorInfo& b = *p.bias;
    const uint8_t* src = b.data + quant_row_bytes(b.type, p.bias_first);
    const std::string name = p.name.substr(0, p.name.size() - std::string(".weight").size()) + ".bias";
    w.add_tensor(name, b.type, {p.rows}, [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src, n); });
}

// Columns [c0, c1) of every row of a 2-D tensor.
void add_columns(GgufWriter& w, const GgufTensorInfo& t, int64_t c0, int64_t c1) {
    const uint64_t row = quant_row_bytes(t.type, t.ne[0]);
    const uint64_t offset = quant_row_bytes(t.type, c0);
    const uint64_t bytes = quant_row_bytes(t.type, c1 - c0);
    const uint8_t* src = t.data;
    const int64_t rows = t.ne[1];
    w.add_tensor(t.name, t.type, {c1 - c0, rows}, [=](uint8_t* dst, uint64_t) {
        for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * bytes, src + r * row + offset, bytes);
    });
}

void add_whole(GgufWriter& w, const GgufTensorInfo& t) {
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    const uint8_t* src = t.data;
    w.add_tensor(t.name, t.type, ne, [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src, n); });
}

// A mixture of experts' stacked tensor [cols, rows, n_expert] cut to the
// slice's experts [e0, e1), each cut the same way: rows [r0, r1) (gate, up)
// or columns [c0, c1) (down). The result is stacked again, [cols', rows',
// e1 - e0]: each expert's share back to back, as a rank packs it in memory.
void add_expert_rows(GgufWriter& w, const GgufTensorInfo& t, const std::string& name, int64_t e0, int64_t e1, int64_t r0,
                     int64_t r1) {
    const uint64_t row = quant_row_bytes(t.type, t.ne[0]);
    const int64_t rows = t.ne[1];
    const uint8_t* src = t.data;
    w.add_tensor(name, t.type, {t.ne[0], r1 - r0, e1 - e0}, [=](uint8_t* dst, uint64_t) {
        const uint64_t band = row * static_cast<uint64_t>(r1 - r0);
        for (int64_t e = e0; e < e1; ++e) {
            std::memcpy(dst + static_cast<uint64_t>(e - e0) * band, src + static_cast<uint64_t>(e * rows + r0) * row, band);
        }
    });
}

void add_expert_columns(GgufWriter& w, const GgufTensorInfo& t, const std::string& name, int64_t e0, int64_t e1,
                        int64_t c0, int64_t c1) {
    const uint64_t row = quant_row_bytes(t.type, t.ne[0]);
    const uint64_t offset = quant_row_bytes(t.type, c0);
    const uint64_t bytes = quant_row_bytes(t.type, c1 - c0);
    const int64_t first = e0 * t.ne[1], rows = (e1 - e0) * t.ne[1];
    const uint8_t* src = t.data;
    w.add_tensor(name, t.type, {c1 - c0, t.ne[1], e1 - e0}, [=](uint8_t* dst, uint64_t) {
        for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * bytes, src + (first + r) * row + offset, bytes);
    });
}

}  // namespace

std::string part_infix(size_t part) { return fmt::format(".part{}", part); }

void write_slice_file(const LlamaModel& model, const Slice& slice, const std::string& path) {
    const GgufFile& file = model.file();
    const ModelHParams& hp = model.hparams();
    validate_slice(slice, hp);
    if (stored_slice(file)) throw make_error("{} is already a slice file", file.path());
    GgufWriter w;
    for (const GgufKv& kv : file.metadata()) {
        if (kv.key.rfind("tessera.slice.", 0) != 0) w.set_value(kv.key, kv.value);
    }
    std::vector<int32_t> range = {slice.layer_begin, slice.layer_end, slice.kv_head_begin, slice.kv_head_end,
                                  slice.ffn_begin,   slice.ffn_end,   slice.vocab_begin,   slice.vocab_end,
                                  slice.expert_begin, slice.expert_end};
    for (const ExpertPart& t : slice.tails) range.insert(range.end(), {t.expert_begin, t.expert_end, t.ffn_begin, t.ffn_end});
    w.set_i32_array(kRangeKey, range);
    if (any_dealt(slice)) w.set_i32_array(kDealsKey, tail_deals(slice));
    w.set_string(kSourceKey, file.fingerprint_hex());
    w.set_i32(kVocabKey, hp.n_vocab);
    if (const GgufTensorInfo* f = file.find_tensor("rope_freqs.weight")) add_whole(w, *f);
    const int64_t q_per_kv_rows = static_cast<int64_t>(hp.q_per_kv()) * hp.head_dim;
    const int64_t q0 = slice.kv_head_begin * q_per_kv_rows, q1 = slice.kv_head_end * q_per_kv_rows;
    const int64_t k0 = static_cast<int64_t>(slice.kv_head_begin) * hp.head_dim;
    const int64_t k1 = static_cast<int64_t>(slice.kv_head_end) * hp.head_dim;
    for (int l = slice.layer_begin; l < slice.layer_end; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        add_whole(w, tensor(file, p + "attn_norm.weight"));
        const std::string ffn_norm = std::string(hp.family->ffn_norm) + ".weight";
        add_whole(w, tensor(file, p + ffn_norm));
        // The norms, biases and sinks the layer reads whole on every rank
        // (model/architecture.h).
        for (const char* extra : {"attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight",
                                  "post_ffw_norm.weight", "attn_output.bias", "attn_sinks.weight"}) {
            if (extra == ffn_norm) continue;
            if (const GgufTensorInfo* t = file.find_tensor(p + extra)) add_whole(w, *t);
        }
        // NVFP4 files' factors of each weight (`*.scale`, one or one per
        // expert), whole: a rank's share of a weight takes its factor.
        for (const GgufTensorInfo& t : file.tensors()) {
            const std::string_view name = t.name;
            if (name.starts_with(p) && name.ends_with(".scale")) add_whole(w, t);
        }
        const ProjectionRows q = find_projection(file, hp, l, Projection::kQ);
        const ProjectionRows k = find_projection(file, hp, l, Projection::kK);
        const ProjectionRows v = find_projection(file, hp, l, Projection::kV);
        for (const ProjectionRows* b : {&q, &k, &v}) add_projection_bias(w, *b);
        // A rank with no heads (or no channels) holds no such matrices.
        if (slice.n_kv_heads() > 0) {
            add_projection_rows(w, q, q0, q1);
            add_projection_rows(w, k, k0, k1);
            add_projection_rows(w, v, k0, k1);
            add_columns(w, tensor(file, p + "attn_output.weight"), q0, q1);
        }
        if (slice.n_ffn() > 0 && hp.has_experts()) {
            // The router and the biases whole (each rank routes every token
            // itself), and this slice's channels of every expert.
            for (const char* whole : {"ffn_gate_inp.weight", "ffn_gate_inp.bias", "ffn_gate_exps.bias",
                                      "ffn_up_exps.bias", "ffn_down_exps.bias"}) {
                if (const GgufTensorInfo* t = file.find_tensor(p + whole)) add_whole(w, *t);
            }
            // A mixed split's second part under names of its own.
            const std::vector<ExpertPart> parts = expert_parts(slice);
            for (size_t i = 0; i < parts.size(); ++i) {
                const ExpertPart& e = parts[i];
                const std::string part = i == 0 ? "" : part_infix(i);
                add_expert_rows(w, tensor(file, p + "ffn_gate_exps.weight"), p + "ffn_gate_exps" + part + ".weight",
                                e.expert_begin, e.expert_end, e.ffn_begin, e.ffn_end);
                add_expert_rows(w, tensor(file, p + "ffn_up_exps.weight"), p + "ffn_up_exps" + part + ".weight",
                                e.expert_begin, e.expert_end, e.ffn_begin, e.ffn_end);
                add_expert_columns(w, tensor(file, p + "ffn_down_exps.weight"), p + "ffn_down_exps" + part + ".weight",
                                   e.expert_begin, e.expert_end, e.ffn_begin, e.ffn_end);
            }
        } else if (slice.n_ffn() > 0) {
            add_projection_rows(w, find_projection(file, hp, l, Projection::kGate), slice.ffn_begin, slice.ffn_end);
            add_projection_rows(w, find_projection(file, hp, l, Projection::kUp), slice.ffn_begin, slice.ffn_end);
            add_columns(w, tensor(file, p + "ffn_down.weight"), slice.ffn_begin, slice.ffn_end);
        }
    }
    if (slice.n_vocab_rows() > 0) {
        // Stored as output.weight even when the model ties its head to the
        // embedding: the slice holds only these rows of it.
        const GgufTensorInfo* head = file.find_tensor("output.weight");
        GgufTensorInfo rows = head != nullptr ? *head : tensor(file, "token_embd.weight");
        rows.name = "output.weight";
        add_rows(w, rows, slice.vocab_begin, slice.vocab_end);
        if (const GgufTensorInfo* b = file.find_tensor("output.bias")) add_whole(w, *b);
        if (head != nullptr) {
            if (const GgufTensorInfo* s = file.find_tensor("output.scale")) add_whole(w, *s);
        }
    }
    w.write(path);
}

std::optional<Slice> stored_slice(const GgufFile& file) {
    const GgufValue* v = file.find_array(kRangeKey, GgufValueType::Int32);
    if (v == nullptr) return std::nullopt;
    // 8 values before slices had experts (a dense model's: none); 4 more for
    // each further part of a mixed split.
    if (v->count != 8 && (v->count < 10 || (v->count - 10) % 4 != 0 || v->count > 10 + 4 * kMaxExpertParts)) {
        throw make_error("{}: {} holds {} values, expected 10 and 4 per further part", file.path(), kRangeKey, v->count);
    }
    Slice s;
    s.layer_begin = static_cast<int32_t>(v->array_integer(0));
    s.layer_end = static_cast<int32_t>(v->array_integer(1));
    s.kv_head_begin = static_cast<int32_t>(v->array_integer(2));
    s.kv_head_end = static_cast<int32_t>(v->array_integer(3));
    s.ffn_begin = static_cast<int32_t>(v->array_integer(4));
    s.ffn_end = static_cast<int32_t>(v->array_integer(5));
    s.vocab_begin = static_cast<int32_t>(v->array_integer(6));
    s.vocab_end = static_cast<int32_t>(v->array_integer(7));
    if (v->count >= 10) {
        s.expert_begin = static_cast<int32_t>(v->array_integer(8));
        s.expert_end = static_cast<int32_t>(v->array_integer(9));
    }
    for (uint64_t i = 10; i + 4 <= v->count; i += 4) {
        const auto at = [&](uint64_t k) { return static_cast<int32_t>(v->array_integer(i + k)); };
        s.tails.push_back({at(0), at(1), at(2), at(3)});
    }
    if (const GgufValue* d = file.find_array(kDealsKey, GgufValueType::Int32)) {
        if (d->count != 2 * s.tails.size()) {
            throw make_error("{}: {} holds {} values, expected 2 per further part ({})", file.path(), kDealsKey, d->count,
                             s.tails.size());
        }
        for (size_t i = 0; i < s.tails.size(); ++i) {
            // (validate_slice checks the turn against the deal.)
            s.tails[i].deal_count = static_cast<int32_t>(d->array_integer(2 * i));
            s.tails[i].deal_index = static_cast<int32_t>(d->array_integer(2 * i + 1));
        }
    }
    s.embeds = false;
    s.outputs = false;
    return s;
}

std::string slice_source_fingerprint(const GgufFile& file) { return file.find_string(kSourceKey).value_or(""); }

std::string slice_file_name(const std::string& fingerprint, const Slice& s) {
    std::string experts = s.n_experts() > 0 ? fmt::format("-E{}-{}", s.expert_begin, s.expert_end) : "";
    if (!s.tails.empty()) {
        // Up to 63 further parts: their count and a hash, not every range
        // (a file name holds 255 bytes).
        std::vector<int32_t> ranges;
        for (const ExpertPart& t : s.tails) ranges.insert(ranges.end(), {t.expert_begin, t.expert_end, t.ffn_begin, t.ffn_end});
        if (any_dealt(s)) {
            const std::vector<int32_t> deals = tail_deals(s);
            ranges.insert(ranges.end(), deals.begin(), deals.end());
        }
        experts += fmt::format("-T{}x{:016x}", s.tails.size(), XXH3_64bits(ranges.data(), ranges.size() * sizeof(int32_t)));
    }
    return fmt::format("{}-L{}-{}-H{}-{}-F{}-{}{}-V{}-{}.gguf", fingerprint, s.layer_begin, s.layer_end, s.kv_head_begin,
                       s.kv_head_end, s.ffn_begin, s.ffn_end, experts, s.vocab_begin, s.vocab_end);
}

uint64_t file_checksum(const std::string& path) {
    const MappedFile file(path);
    return XXH3_64bits(file.data(), file.size());
}

}  // namespace tessera
