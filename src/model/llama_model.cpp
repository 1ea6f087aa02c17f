#include "model/llama_model.h"

#include "model/slice_file.h"
#include "ops/quant_traits.h"
#include "ops/row_groups.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/progress.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

namespace tessera {

namespace {

// Slices smaller than this load too fast for a progress display to help.
constexpr uint64_t kProgressBytes = 256ull << 20;

const GgufTensorInfo& require_tensor(const GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1) {
    const GgufTensorInfo* t = file.find_tensor(name);
    if (t == nullptr) throw make_error("{}: tensor '{}' is missing", file.path(), name);
    const bool is_vector = ne1 == 0;
    const bool shape_ok = is_vector ? (t->n_dims == 1 && t->ne[0] == ne0)
                                    : (t->n_dims == 2 && t->ne[0] == ne0 && t->ne[1] == ne1);
    if (!shape_ok) {
        throw make_error("{}: tensor '{}' has shape [{}, {}], expected [{}, {}]", file.path(), name, t->ne[0],
                         t->n_dims > 1 ? t->ne[1] : 1, ne0, is_vector ? 1 : ne1);
    }
    return *t;
}

std::vector<float> vector_copy(const GgufFile& file, const std::string& name, int64_t n) {
    const GgufTensorInfo& t = require_tensor(file, name, n, 0);
    const QuantTraits& traits = require_compute_traits(t.type, name.c_str());
    std::vector<float> v(static_cast<size_t>(n));
    traits.to_float(t.data, v.data(), n);
    return v;
}

// A weight's factors (n: 1 per tensor, or one per expert), empty where the
// file has none; each must be finite. (The `.input_scale` beside them scales
// the activations of NVIDIA's FP4 tensor cores; a CPU, like llama.cpp's,
// computes them unscaled.)
std::vector<float> weight_scales(const GgufFile& file, const std::string& weight, int64_t n) {
    const std::string name = weight_scale_name(weight);
    if (file.find_tensor(name) == nullptr) return {};
    std::vector<float> v = vector_copy(file, name, n);
    for (float f : v) {
        if (!std::isfinite(f)) throw make_error("{}: tensor '{}' holds {}, not a finite factor", file.path(), name, f);
    }
    return v;
}

// A 2-D weight, its per-tensor factor attached (matmul applies it) but to the
// embedding: llama.cpp reads none for it, tied to the head or not.
Matrix matrix_view(const GgufFile& file, const std::string& name, int64_t cols, int64_t rows) {
    const GgufTensorInfo& t = require_tensor(file, name, cols, rows);
    require_weight_traits(t.type, name.c_str());
    Matrix m;
    m.type = t.type;
    m.cols = cols;
    m.rows = rows;
    m.row_bytes = quant_row_bytes(t.type, cols);
    m.data = t.data;
    if (name != "token_embd.weight") {
        const std::vector<float> scale = weight_scales(file, name, 1);
        if (!scale.empty()) m.out_scale = scale[0];
    }
    return m;
}

// Rows [r0, r0 + rows) of m as a matrix of their own.
Matrix row_band(const Matrix& m, int64_t r0, int64_t rows) {
    Matrix band = m;
    band.data = m.row(m.row_begin + r0);
    band.rows = rows;
    return band;
}

// A mixture of experts' stacked matrices: a 3-D tensor [cols, rows, n_expert]
// as one matrix of n_expert * rows rows (expert e's rows at e * rows).
Matrix experts_view(const GgufFile& file, const std::string& name, int64_t cols, int64_t rows, int64_t n_expert) {
    const GgufTensorInfo* t = file.find_tensor(name);
    if (t == nullptr) throw make_error("{}: tensor '{}' is missing", file.path(), name);
    if (t->n_dims != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n_expert) {
        throw make_error("{}: tensor '{}' has shape [{}, {}, {}], expected [{}, {}, {}]", file.path(), name, t->ne[0],
                         t->ne[1], t->ne[2], cols, rows, n_expert);
    }
    require_weight_traits(t->type, name.c_str());
    Matrix m;
    m.type = t->type;
    m.cols = cols;
    m.rows = rows * n_expert;
    m.row_bytes = quant_row_bytes(t->type, cols);
    m.data = t->data;
    return m;
}

// The rows of experts [e0, e1) of a stacked view (every expert's rows),
// indexed as in the whole: row_begin at expert e0's first row.
Matrix expert_band(const Matrix& m, int64_t per_expert, int64_t e0, int64_t e1) {
    Matrix band = m;
    band.data = m.row(m.row_begin + e0 * per_expert);
    band.row_begin = m.row_begin + e0 * per_expert;
    band.rows = (e1 - e0) * per_expert;
    return band;
}

// An optional vector of n elements (empty when the file has none).
std::vector<float> optional_vector(const GgufFile& file, const std::string& name, int64_t n) {
    return file.find_tensor(name) != nullptr ? vector_copy(file, name, n) : std::vector<float>{};
}

// An optional 2-D tensor [ne0, ne1] of floats (a bias per expert), whole;
// empty when the file has none.
std::vector<float> optional_matrix_copy(const GgufFile& file, const std::string& name, int64_t ne0, int64_t ne1) {
    if (file.find_tensor(name) == nullptr) return {};
    const GgufTensorInfo& t = require_tensor(file, name, ne0, ne1);
    const QuantTraits& traits = require_compute_traits(t.type, name.c_str());
    std::vector<float> v(static_cast<size_t>(ne0 * ne1));
    traits.to_float(t.data, v.data(), ne0 * ne1);
    return v;
}

// Elements [first, first + n) of a 1-D tensor as floats.
std::vector<float> vector_band(const GgufTensorInfo& t, int64_t first, int64_t n, const std::string& path) {
    if (t.n_dims != 1 || first < 0 || first + n > t.ne[0]) {
        throw make_error("{}: tensor '{}' has {} elements, {} needed", path, t.name, t.ne[0], first + n);
    }
    const QuantTraits& traits = require_compute_traits(t.type, t.name.c_str());
    if (layout_of(t.type).block_size != 1) throw make_error("{}: tensor '{}' must not be quantized", path, t.name);
    std::vector<float> v(static_cast<size_t>(n));
    traits.to_float(t.data + quant_row_bytes(t.type, first), v.data(), n);
    return v;
}

// The norms and biases a layer may add to Llama's (model/architecture.h);
// each checked for shape where present, and required where the family has it.
// A slice file holds Q, K and V's biases whole under their own names.
void load_layer_extras(const GgufFile& file, const ModelHParams& hp, int layer, LayerWeights& lw, bool slice_file) {
    const std::string p = fmt::format("blk.{}.", layer);
    lw.q_norm = optional_vector(file, p + "attn_q_norm.weight", hp.head_dim);
    lw.k_norm = optional_vector(file, p + "attn_k_norm.weight", hp.head_dim);
    // (gpt-oss's post_attention_norm is its FFN's input norm, not a post-norm.)
    if (hp.family->ffn_norm != "post_attention_norm") {
        lw.post_attn_norm = optional_vector(file, p + "post_attention_norm.weight", hp.n_embd);
    }
    lw.wo_bias = optional_vector(file, p + "attn_output.bias", hp.n_embd);
    lw.attn_sinks = optional_vector(file, p + "attn_sinks.weight", hp.n_head);
    if (hp.has_experts()) {
        lw.router_bias = optional_vector(file, p + "ffn_gate_inp.bias", hp.n_expert);
        lw.gate_exps_bias = optional_matrix_copy(file, p + "ffn_gate_exps.bias", hp.n_ff, hp.n_expert);
        lw.up_exps_bias = optional_matrix_copy(file, p + "ffn_up_exps.bias", hp.n_ff, hp.n_expert);
        lw.down_exps_bias = optional_matrix_copy(file, p + "ffn_down_exps.bias", hp.n_embd, hp.n_expert);
        lw.gate_exps_scale = weight_scales(file, p + "ffn_gate_exps.weight", hp.n_expert);
        lw.up_exps_scale = weight_scales(file, p + "ffn_up_exps.weight", hp.n_expert);
        lw.down_exps_scale = weight_scales(file, p + "ffn_down_exps.weight", hp.n_expert);
    }
    if (hp.family->writes_oai_extras && (lw.attn_sinks.empty() || lw.wo_bias.empty())) {
        throw make_error("{}: tensor '{}attn_sinks.weight' or '{}attn_output.bias' is missing ({} needs both)",
                         file.path(), p, p, hp.arch);
    }
    lw.post_ffn_norm = optional_vector(file, p + "post_ffw_norm.weight", hp.n_embd);
    if (hp.family->writes_qk_norm && (lw.q_norm.empty() || lw.k_norm.empty())) {
        throw make_error("{}: tensor '{}attn_q_norm.weight' or '{}attn_k_norm.weight' is missing ({} needs both)",
                         file.path(), p, p, hp.arch);
    }
    if (lw.q_norm.empty() != lw.k_norm.empty()) {
        throw make_error("{}: layer {} has a norm for only one of Q and K", file.path(), layer);
    }
    if (hp.family->writes_post_norms && (lw.post_attn_norm.empty() || lw.post_ffn_norm.empty())) {
        throw make_error("{}: tensor '{}post_attention_norm.weight' or '{}post_ffw_norm.weight' is missing ({} needs both)",
                         file.path(), p, p, hp.arch);
    }
    if (slice_file) {
        lw.q_bias = optional_vector(file, p + "attn_q.bias", hp.q_dim());
        lw.k_bias = optional_vector(file, p + "attn_k.bias", hp.kv_dim());
        lw.v_bias = optional_vector(file, p + "attn_v.bias", hp.kv_dim());
        return;
    }
    const auto bias = [&](Projection which) {
        const ProjectionRows r = find_projection(file, hp, layer, which);
        return r.bias != nullptr ? vector_band(*r.bias, r.bias_first, r.rows, file.path()) : std::vector<float>{};
    };
    lw.q_bias = bias(Projection::kQ);
    lw.k_bias = bias(Projection::kK);
    lw.v_bias = bias(Projection::kV);
}

// A slice of a matrix's columns must start and end on its type's blocks.
void check_column_range(const Matrix& m, const std::string& name, int64_t begin, int64_t end) {
    const int64_t block = layout_of(m.type).block_size;
    if (begin % block != 0 || (end % block != 0 && end != m.cols)) {
        throw make_error("tensor '{}' ({}) cannot be split at columns [{}, {}): splits must fall on {}-element blocks",
                         name, quant_type_name(m.type), begin, end, block);
    }
}

// A private copy of columns [begin, end) of every row of m.
Matrix pack_columns(const Matrix& m, int64_t begin, int64_t end, std::vector<std::unique_ptr<uint8_t[]>>& storage) {
    const uint64_t offset = quant_row_bytes(m.type, begin);
    const uint64_t bytes = quant_row_bytes(m.type, end - begin);
    storage.push_back(std::make_unique<uint8_t[]>(bytes * static_cast<uint64_t>(m.rows)));
    uint8_t* dst = storage.back().get();
    for (int64_t r = 0; r < m.rows; ++r) std::memcpy(dst + r * bytes, m.row(m.row_begin + r) + offset, bytes);
    release_pages(m.data, m.row_bytes * static_cast<uint64_t>(m.rows));
    Matrix packed = m;
    packed.cols = end - begin;
    packed.col_begin = begin;
    packed.row_bytes = bytes;
    packed.data = dst;
    return packed;
}

// Of each of n_experts stacked experts, rows [begin, end): a private matrix of
// n_experts * (end - begin) rows, expert e's at e * (end - begin).
Matrix pack_expert_rows(const Matrix& m, int64_t n_experts, int64_t begin, int64_t end,
                        std::vector<std::unique_ptr<uint8_t[]>>& storage) {
    const int64_t per_expert = m.rows / n_experts, rows = end - begin;
    storage.push_back(std::make_unique<uint8_t[]>(m.row_bytes * static_cast<uint64_t>(n_experts * rows)));
    uint8_t* dst = storage.back().get();
    for (int64_t e = 0; e < n_experts; ++e) {
        std::memcpy(dst + static_cast<uint64_t>(e * rows) * m.row_bytes, m.row(m.row_begin + e * per_expert + begin),
                    m.row_bytes * static_cast<uint64_t>(rows));
    }
    release_pages(m.data, m.row_bytes * static_cast<uint64_t>(m.rows));
    Matrix packed = m;
    packed.rows = n_experts * rows;
    packed.data = dst;
    return packed;
}

// One part of a slice's experts (model/slice.h ExpertPart) from the whole
// stacked views: views of the file's rows, or (ColumnSlices::kPack, where
// the part has some channels only) private copies of its rows of gate and up
// and its columns of down. Sets rows and first as LayerWeights describes.
void load_expert_part(const Matrix& gate, const Matrix& up, const Matrix& down, const ModelHParams& hp,
                      const ExpertPart& part, ColumnSlices columns, std::vector<std::unique_ptr<uint8_t[]>>& packed,
                      Matrix& gate_out, Matrix& up_out, Matrix& down_out, int64_t& rows, int64_t& first) {
    const bool all_experts = part.n_experts() == hp.n_expert;
    gate_out = all_experts ? gate : expert_band(gate, hp.n_ff, part.expert_begin, part.expert_end);
    up_out = all_experts ? up : expert_band(up, hp.n_ff, part.expert_begin, part.expert_end);
    down_out = all_experts ? down : expert_band(down, hp.n_embd, part.expert_begin, part.expert_end);
    rows = hp.n_ff;
    first = part.ffn_begin;
    if (columns != ColumnSlices::kPack || part.n_ffn() == hp.n_ff) return;
    // Each expert's rows of the part's channels back to back: expert e's at
    // (e - expert_begin) * n_ffn of the copy, indexed from e * n_ffn.
    gate_out = pack_expert_rows(gate_out, part.n_experts(), part.ffn_begin, part.ffn_end, packed);
    up_out = pack_expert_rows(up_out, part.n_experts(), part.ffn_begin, part.ffn_end, packed);
    gate_out.row_begin = up_out.row_begin = static_cast<int64_t>(part.expert_begin) * part.n_ffn();
    down_out = pack_columns(down_out, part.ffn_begin, part.ffn_end, packed);
    rows = part.n_ffn();
    first = 0;
}

}  // namespace

ProjectionRows find_projection(const GgufFile& file, const ModelHParams& hp, int layer, Projection which) {
    const std::string p = fmt::format("blk.{}.", layer);
    const int64_t q = hp.q_dim(), kv = hp.kv_dim();
    ProjectionRows r;
    const auto fused = [&](const std::string& name, int64_t total, int64_t first, int64_t rows) {
        const GgufTensorInfo& t = require_tensor(file, name, hp.n_embd, total);
        r.tensor = &t;
        r.first_row = first;
        r.rows = rows;
    };
    switch (which) {
        case Projection::kQ:
        case Projection::kK:
        case Projection::kV: {
            const int64_t first = which == Projection::kQ ? 0 : which == Projection::kK ? q : q + kv;
            const int64_t rows = which == Projection::kQ ? q : kv;
            const char* own = which == Projection::kQ ? "attn_q" : which == Projection::kK ? "attn_k" : "attn_v";
            r.name = p + own + ".weight";
            if (file.find_tensor(p + "attn_qkv.weight") != nullptr) {
                fused(p + "attn_qkv.weight", q + 2 * kv, first, rows);
                r.bias = file.find_tensor(p + "attn_qkv.bias");
                r.bias_first = first;
            } else {
                fused(r.name, rows, 0, rows);
                r.bias = file.find_tensor(p + own + ".bias");
            }
            break;
        }
        case Projection::kGate:
        case Projection::kUp: {
            const bool gate = which == Projection::kGate;
            r.name = p + (gate ? "ffn_gate.weight" : "ffn_up.weight");
            if (file.find_tensor(p + "ffn_gate.weight") == nullptr) {
                fused(p + "ffn_up.weight", 2 * static_cast<int64_t>(hp.n_ff), gate ? 0 : hp.n_ff, hp.n_ff);
            } else {
                fused(r.name, hp.n_ff, 0, hp.n_ff);
            }
            break;
        }
    }
    return r;
}

namespace {

Matrix projection_view(const GgufFile& file, const ModelHParams& hp, int layer, Projection which) {
    const ProjectionRows r = find_projection(file, hp, layer, which);
    const Matrix whole = matrix_view(file, r.tensor->name, hp.n_embd, r.tensor->ne[1]);
    return row_band(whole, r.first_row, r.rows);
}

}  // namespace

LlamaModel::LlamaModel(const std::string& path) : file_(std::make_unique<GgufFile>(path)), hparams_(read_hparams(*file_)) {}

namespace {
// A slice file holds exactly one slice's rows and columns: views start at the
// slice's first row or column of each whole tensor.
SliceWeights load_from_slice_file(const LlamaModel& model, const Slice& slice, const Slice& stored) {
    const GgufFile& file = model.file();
    const ModelHParams& hp = model.hparams();
    if (slice.embeds || slice.outputs || slice.layer_begin != stored.layer_begin || slice.layer_end != stored.layer_end ||
        slice.kv_head_begin != stored.kv_head_begin || slice.kv_head_end != stored.kv_head_end ||
        slice.ffn_begin != stored.ffn_begin || slice.ffn_end != stored.ffn_end ||
        slice.expert_begin != stored.expert_begin || slice.expert_end != stored.expert_end ||
        slice.tails != stored.tails ||
        slice.vocab_begin != stored.vocab_begin || slice.vocab_end != stored.vocab_end) {
        throw make_error("{} holds the slice {}, not {}", file.path(), describe_slice(stored), describe_slice(slice));
    }
    SliceWeights w;
    w.slice = slice;
    if (file.find_tensor("rope_freqs.weight") != nullptr) {
        w.rope_freqs = vector_copy(file, "rope_freqs.weight", hp.n_rot / 2);
    }
    const int64_t q_rows = static_cast<int64_t>(hp.q_per_kv()) * hp.head_dim;
    const int64_t q0 = slice.kv_head_begin * q_rows, q1 = slice.kv_head_end * q_rows;
    const int64_t k0 = static_cast<int64_t>(slice.kv_head_begin) * hp.head_dim;
    const int64_t k1 = static_cast<int64_t>(slice.kv_head_end) * hp.head_dim;
    auto rows_view = [&](const std::string& name, int64_t cols, int64_t r0, int64_t r1) {
        Matrix m = matrix_view(file, name, cols, r1 - r0);
        m.row_begin = r0;
        return m;
    };
    auto cols_view = [&](const std::string& name, int64_t c0, int64_t c1, int64_t rows) {
        Matrix m = matrix_view(file, name, c1 - c0, rows);
        m.col_begin = c0;
        return m;
    };
    for (int32_t l = slice.layer_begin; l < slice.layer_end; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        LayerWeights lw;
        lw.attn_norm = vector_copy(file, p + "attn_norm.weight", hp.n_embd);
        lw.ffn_norm = vector_copy(file, p + std::string(hp.family->ffn_norm) + ".weight", hp.n_embd);
        // A slice file stores Q, K, V, gate and up under their own names,
        // fused or not in the model, and biases whole.
        load_layer_extras(file, hp, l, lw, true);
        if (slice.n_kv_heads() > 0) {
            lw.wq = rows_view(p + "attn_q.weight", hp.n_embd, q0, q1);
            lw.wk = rows_view(p + "attn_k.weight", hp.n_embd, k0, k1);
            lw.wv = rows_view(p + "attn_v.weight", hp.n_embd, k0, k1);
            lw.wo = cols_view(p + "attn_output.weight", q0, q1, hp.n_embd);
        }
        if (slice.n_ffn() > 0 && hp.has_experts()) {
            // The slice's experts' share of channels, stacked as a rank packs
            // them (slice_file.cpp): each expert's gate and up rows from 0,
            // down's columns from the slice's first channel, and row 0 that
            // of its first expert.
            lw.router = matrix_view(file, p + "ffn_gate_inp.weight", hp.n_embd, hp.n_expert);
            const std::vector<ExpertPart> parts = expert_parts(slice);
            for (size_t i = 0; i < parts.size(); ++i) {
                const ExpertPart& e = parts[i];
                const std::string suffix = i == 0 ? "" : part_infix(i);
                const int64_t n_local = e.n_experts(), n_ffn = e.n_ffn();
                Matrix gate = experts_view(file, p + "ffn_gate_exps" + suffix + ".weight", hp.n_embd, n_ffn, n_local);
                Matrix up = experts_view(file, p + "ffn_up_exps" + suffix + ".weight", hp.n_embd, n_ffn, n_local);
                Matrix down = experts_view(file, p + "ffn_down_exps" + suffix + ".weight", n_ffn, hp.n_embd, n_local);
                gate.row_begin = up.row_begin = e.expert_begin * n_ffn;
                down.row_begin = e.expert_begin * hp.n_embd;
                down.col_begin = e.ffn_begin;
                if (i == 0) {
                    lw.gate_exps = gate, lw.up_exps = up, lw.down_exps = down;
                    lw.expert_rows = n_ffn;
                    lw.expert_first = 0;
                } else {
                    lw.tails.push_back({gate, up, down, n_ffn, 0});
                }
            }
        } else if (slice.n_ffn() > 0) {
            lw.w_gate = rows_view(p + "ffn_gate.weight", hp.n_embd, slice.ffn_begin, slice.ffn_end);
            lw.w_up = rows_view(p + "ffn_up.weight", hp.n_embd, slice.ffn_begin, slice.ffn_end);
            lw.w_down = cols_view(p + "ffn_down.weight", slice.ffn_begin, slice.ffn_end, hp.n_embd);
        }
        w.layers.push_back(std::move(lw));
    }
    if (slice.n_vocab_rows() > 0) {
        w.output = rows_view("output.weight", hp.n_embd, slice.vocab_begin, slice.vocab_end);
        w.output_bias = optional_vector(file, "output.bias", hp.n_vocab);
    }
    return w;
}
}  // namespace

SliceWeights load_slice_weights(const LlamaModel& model, const Slice& slice, ColumnSlices columns) {
    const GgufFile& file = model.file();
    const ModelHParams& hp = model.hparams();
    validate_slice(slice, hp);
    if (const std::optional<Slice> stored = stored_slice(file)) return load_from_slice_file(model, slice, *stored);
    SliceWeights w;
    w.slice = slice;
    const int64_t q_dim = hp.q_dim();
    if (slice.embeds) w.token_embd = matrix_view(file, "token_embd.weight", hp.n_embd, hp.n_vocab);
    if (slice.outputs) w.output_norm = vector_copy(file, "output_norm.weight", hp.n_embd);
    if (slice.n_vocab_rows() > 0) {
        // The whole head's view: the slice's rows are the only ones it reads.
        w.output = file.find_tensor("output.weight") != nullptr
                       ? matrix_view(file, "output.weight", hp.n_embd, hp.n_vocab)
                       : matrix_view(file, "token_embd.weight", hp.n_embd, hp.n_vocab);
    }
    if (file.find_tensor("rope_freqs.weight") != nullptr) {
        w.rope_freqs = vector_copy(file, "rope_freqs.weight", hp.n_rot / 2);
    }
    if (slice.n_vocab_rows() > 0) w.output_bias = optional_vector(file, "output.bias", hp.n_vocab);
    for (int32_t l = slice.layer_begin; l < slice.layer_end; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        LayerWeights lw;
        lw.attn_norm = vector_copy(file, p + "attn_norm.weight", hp.n_embd);
        lw.ffn_norm = vector_copy(file, p + std::string(hp.family->ffn_norm) + ".weight", hp.n_embd);
        load_layer_extras(file, hp, l, lw, false);
        lw.wq = projection_view(file, hp, l, Projection::kQ);
        lw.wk = projection_view(file, hp, l, Projection::kK);
        lw.wv = projection_view(file, hp, l, Projection::kV);
        lw.wo = matrix_view(file, p + "attn_output.weight", q_dim, hp.n_embd);
        const int64_t q_begin = static_cast<int64_t>(slice.kv_head_begin) * hp.q_per_kv() * hp.head_dim;
        const int64_t q_end = static_cast<int64_t>(slice.kv_head_end) * hp.q_per_kv() * hp.head_dim;
        check_column_range(lw.wo, p + "attn_output.weight", q_begin, q_end);
        if (columns == ColumnSlices::kPack && q_end - q_begin < lw.wo.cols) {
            lw.wo = pack_columns(lw.wo, q_begin, q_end, w.packed);
        }
        if (hp.has_experts()) {
            lw.router = matrix_view(file, p + "ffn_gate_inp.weight", hp.n_embd, hp.n_expert);
            lw.gate_exps = experts_view(file, p + "ffn_gate_exps.weight", hp.n_embd, hp.n_ff, hp.n_expert);
            lw.up_exps = experts_view(file, p + "ffn_up_exps.weight", hp.n_embd, hp.n_ff, hp.n_expert);
            lw.down_exps = experts_view(file, p + "ffn_down_exps.weight", hp.n_ff, hp.n_embd, hp.n_expert);
            // Whole views where the slice computes no channels (no part).
            lw.expert_rows = hp.n_ff;
            lw.expert_first = slice.ffn_begin;
            const Matrix gate = lw.gate_exps, up = lw.up_exps, down = lw.down_exps;
            const std::vector<ExpertPart> parts = expert_parts(slice);
            for (size_t i = 0; i < parts.size(); ++i) {
                check_column_range(down, p + "ffn_down_exps.weight", parts[i].ffn_begin, parts[i].ffn_end);
                if (i == 0) {
                    load_expert_part(gate, up, down, hp, parts[i], columns, w.packed, lw.gate_exps, lw.up_exps,
                                     lw.down_exps, lw.expert_rows, lw.expert_first);
                } else {
                    LayerWeights::ExpertTail& t = lw.tails.emplace_back();
                    load_expert_part(gate, up, down, hp, parts[i], columns, w.packed, t.gate, t.up, t.down, t.rows, t.first);
                }
            }
        } else {
            lw.w_gate = projection_view(file, hp, l, Projection::kGate);
            lw.w_up = projection_view(file, hp, l, Projection::kUp);
            lw.w_down = matrix_view(file, p + "ffn_down.weight", hp.n_ff, hp.n_embd);
            check_column_range(lw.w_down, p + "ffn_down.weight", slice.ffn_begin, slice.ffn_end);
            if (columns == ColumnSlices::kPack && slice.n_ffn() < lw.w_down.cols) {
                lw.w_down = pack_columns(lw.w_down, slice.ffn_begin, slice.ffn_end, w.packed);
            }
        }
        w.layers.push_back(std::move(lw));
    }
    return w;
}

bool holds_bf16_values(const Matrix& m) {
    if (m.type != QuantType::F32 || m.data == nullptr || m.grouped || m.col_begin != 0) return false;
    if (m.row_bytes != static_cast<uint64_t>(m.cols) * 4) return false;
    const uint64_t n = static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols);
    for (uint64_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, m.data + 4 * i, 4);
        if ((bits & 0xffffu) != 0) return false;
    }
    return true;
}

namespace {

// A router that llama.cpp's converter wrote as F32 (it keeps ffn_gate_inp
// in F32) from a checkpoint trained in BF16, as Qwen3-MoE, Mixtral and
// gpt-oss ship: every value a BF16 value, its low 16 bits zero. Such a
// router is copied as BF16, half the bytes every token reads on every rank
// (each rank computes the whole router), with the same products: float dot
// products widen each weight to F32 before the same canonical sums
// (ops/float_canonical.h). Any other router stays as it is.
void narrow_router_to_bf16(Matrix& m, std::vector<std::unique_ptr<uint8_t[]>>& storage) {
    static_assert(std::endian::native == std::endian::little, "a BF16 value is the high half of an F32's bytes here");
    if (!holds_bf16_values(m)) return;
    const uint64_t n = static_cast<uint64_t>(m.rows) * static_cast<uint64_t>(m.cols);
    storage.push_back(std::make_unique<uint8_t[]>(2 * n));
    uint8_t* dst = storage.back().get();
    for (uint64_t i = 0; i < n; ++i) std::memcpy(dst + 2 * i, m.data + 4 * i + 2, 2);  // the high half (little-endian)
    release_pages(m.data, 4 * n);
    m.type = QuantType::BF16_F32ACT;
    m.row_bytes = quant_row_bytes(QuantType::BF16_F32ACT, m.cols);
    m.data = dst;
}

}  // namespace

void copy_to_private_memory(SliceWeights& w, const ModelHParams& hp, int64_t wo_unit_cols, int64_t down_unit_cols,
                            uint64_t budget) {
    // Packed column slices are private already, but are moved too, so that
    // they get the group layout as well.
    // The packed buffer holding m, or nullptr when m is a view of the file.
    const auto packed_buffer = [&](const Matrix& m) -> std::unique_ptr<uint8_t[]>* {
        for (auto& p : w.packed) {
            if (p && m.data == p.get()) return &p;
        }
        return nullptr;
    };
    // Each view with the rows the slice computes (a view of the whole file
    // holds every rank's rows).
    struct Part {
        Matrix* m;
        int64_t row_begin, row_end;
        bool grouped;       // stored in groups of 16 rows (ops/row_groups.h)
        int64_t unit_cols;  // a column-split product's units, or 0
        int layer;          // index into w.layers, or -1 (the head)
        bool packed;        // a packed column slice (private already: never streamed)
        bool expert = false;  // a mixture of experts' stacked matrix (may stay mapped)
    };
    const Slice& s = w.slice;
    const int64_t q_rows = static_cast<int64_t>(hp.q_per_kv()) * hp.head_dim;
    std::vector<Part> parts;
    int layer_of_part = -1;
    const auto add = [&](Matrix& m, int64_t begin, int64_t end, int64_t unit_cols = 0, bool may_group = true) {
        begin = std::max(begin, m.row_begin);
        end = std::min(end, m.row_end());
        // A rank may hold none of a matrix: no heads of its own, or no channels.
        if (m.data == nullptr || begin >= end || m.cols == 0) return;
        // Grouped only where this CPU has a kernel that reads the groups, and
        // where the columns and a column-split product's units are whole
        // blocks of the layout (F16's 16-element pieces: a float type's
        // matrix may have any width).
        const QuantTraits* traits = compute_traits(m.type);
        const bool grouped = may_group && has_group_layout(m.type) && traits != nullptr &&
                             traits->vec_dot_groups != nullptr && m.cols % group_block_size(m.type) == 0 &&
                             unit_cols % group_block_size(m.type) == 0;
        parts.push_back({&m, begin, end, grouped, unit_cols, layer_of_part, packed_buffer(m) != nullptr});
    };
    for (LayerWeights& lw : w.layers) {
        layer_of_part = static_cast<int>(&lw - w.layers.data());
        add(lw.wq, s.kv_head_begin * q_rows, s.kv_head_end * q_rows);
        add(lw.wk, s.kv_head_begin * hp.head_dim, s.kv_head_end * hp.head_dim);
        add(lw.wv, s.kv_head_begin * hp.head_dim, s.kv_head_end * hp.head_dim);
        add(lw.wo, lw.wo.row_begin, lw.wo.row_end(), wo_unit_cols);
        add(lw.w_gate, s.ffn_begin, s.ffn_end);
        add(lw.w_up, s.ffn_begin, s.ffn_end);
        add(lw.w_down, lw.w_down.row_begin, lw.w_down.row_end(), down_unit_cols);
        if (hp.has_experts() && s.n_ffn() > 0) {
            // Every expert's rows the slice holds (all, or a rank's packed
            // share): grouped where each expert's rows start a group.
            const bool aligned = lw.expert_rows % kGroupRows == 0 && hp.n_embd % kGroupRows == 0;
            narrow_router_to_bf16(lw.router, w.packed);
            add(lw.router, 0, lw.router.rows);
            const size_t first_expert_part = parts.size();
            add(lw.gate_exps, lw.gate_exps.row_begin, lw.gate_exps.row_end(), 0, aligned);
            add(lw.up_exps, lw.up_exps.row_begin, lw.up_exps.row_end(), 0, aligned);
            add(lw.down_exps, lw.down_exps.row_begin, lw.down_exps.row_end(), down_unit_cols, aligned);
            for (LayerWeights::ExpertTail& t : lw.tails) {
                const bool tail_aligned = t.rows % kGroupRows == 0 && hp.n_embd % kGroupRows == 0;
                add(t.gate, t.gate.row_begin, t.gate.row_end(), 0, tail_aligned);
                add(t.up, t.up.row_begin, t.up.row_end(), 0, tail_aligned);
                add(t.down, t.down.row_begin, t.down.row_end(), down_unit_cols, tail_aligned);
            }
            for (size_t i = first_expert_part; i < parts.size(); ++i) parts[i].expert = true;
        }
    }
    // A tied head is the token embeddings' matrix: its rows are copied and
    // the embeddings' view stays on the mapped file.
    layer_of_part = -1;
    add(w.output, s.vocab_begin, s.vocab_end);
    constexpr uint64_t kAlign = 64;  // each matrix on its own cache lines
    const auto panels_of = [](const Part& p) {
        const int64_t groups = (p.row_end - p.row_begin + kGroupRows - 1) / kGroupRows;  // the last one padded
        return GroupPanels::for_matrix(p.m->type, p.m->cols, groups, p.unit_cols);
    };
    const auto bytes_of = [&](const Part& p) {
        if (!p.grouped) return p.m->row_bytes * static_cast<uint64_t>(p.row_end - p.row_begin);
        return panels_of(p).total_bytes();
    };
    const auto rounded = [](uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
    // Which layers stream from disk: the fewest trailing ones that bring the
    // private copy, plus a window of two of them, within the budget (a token
    // visits layers in order, so a resident prefix is as good as any
    // resident set of the same size).
    const auto n_layers = static_cast<int>(w.layers.size());
    std::vector<uint64_t> layer_bytes(static_cast<size_t>(n_layers), 0);
    uint64_t all = 0;
    for (const Part& p : parts) {
        all += rounded(bytes_of(p));
        // The head and packed column slices are private whatever streams.
        if (p.layer >= 0 && !p.packed) layer_bytes[static_cast<size_t>(p.layer)] += rounded(bytes_of(p));
    }
    // Expert by expert first: the last layers' experts stay mapped.
    std::vector<bool> experts_mapped(static_cast<size_t>(n_layers), false);
    for (int l = n_layers - 1; l >= 0 && all > budget; --l) {
        uint64_t experts = 0;
        for (const Part& p : parts) {
            if (p.layer == l && p.expert && !p.packed) experts += rounded(bytes_of(p));
        }
        if (experts == 0) continue;
        experts_mapped[static_cast<size_t>(l)] = true;
        all -= experts;
        layer_bytes[static_cast<size_t>(l)] -= experts;
    }
    const auto mapped = [&](const Part& p) {
        return p.expert && !p.packed && p.layer >= 0 && experts_mapped[static_cast<size_t>(p.layer)];
    };
    int first_streamed = n_layers;
    if (all > budget) {
        uint64_t resident = all, window = 0;
        while (first_streamed > 0 && resident + 2 * window > budget) {
            --first_streamed;
            resident -= layer_bytes[static_cast<size_t>(first_streamed)];
            window = std::max(window, layer_bytes[static_cast<size_t>(first_streamed)]);
        }
    }
    // Streamed layers, and experts streamed one by one: both in the file of
    // streamed weights, in the same layout as in memory (the same bits), but
    // only whole layers go through its window; a mapped expert's pages come
    // in when a token chooses it and stay while the page cache keeps them.
    const auto streamed = [&](const Part& p) { return p.layer >= first_streamed && !p.packed && !mapped(p); };
    const auto in_stream = [&](const Part& p) { return streamed(p) || mapped(p); };
    uint64_t total = 0, streamed_total = 0;
    for (const Part& p : parts) {
        (in_stream(p) ? streamed_total : total) += rounded(bytes_of(p));
        if (mapped(p)) {
            w.layers[static_cast<size_t>(p.layer)].experts_mapped = true;
            w.mapped_expert_bytes += rounded(bytes_of(p));
        }
    }
    AnonymousMemory memory(total);
    std::unique_ptr<StreamedLayers> stream;
    if (streamed_total > 0) stream = std::make_unique<StreamedLayers>(streamed_total);
    uint8_t* at = memory.data();
    uint8_t* streamed_at = stream ? stream->data() : nullptr;
    // A large slice takes seconds to read from disk: show it.
    std::unique_ptr<Progress> progress;
    if (total + streamed_total >= kProgressBytes) {
        progress = std::make_unique<Progress>(stream ? "loading weights (and writing the streamed layers)" : "loading weights",
                                              (total + streamed_total) / 1048576.0, "MiB");
    }
    uint64_t copied = 0;
    std::vector<std::vector<StreamedRange>> ranges(stream ? static_cast<size_t>(n_layers) : 0);
    for (const Part& p : parts) {
        if (progress) progress->update(static_cast<double>(copied) / 1048576.0);
        const uint64_t bytes = rounded(bytes_of(p));
        copied += bytes;
        uint8_t*& to = in_stream(p) ? streamed_at : at;
        Matrix& m = *p.m;
        const int64_t rows = p.row_end - p.row_begin;
        const uint8_t* source = m.row(p.row_begin);
        const uint64_t source_bytes = m.row_bytes * static_cast<uint64_t>(rows);
        int64_t panel_cols = 0;
        if (p.grouped) {
            const GroupPanels panels = panels_of(p);
            group_matrix(panels, source, m.row_bytes, rows, to);
            panel_cols = panels.panel_cols;
        } else {
            std::memcpy(to, source, source_bytes);
        }
        // A packed buffer is freed at once, so that two copies never add up
        // over the whole slice. Mapped pages shared with a neighbouring
        // tensor come back from the page cache if that one is read again.
        if (std::unique_ptr<uint8_t[]>* packed = packed_buffer(m)) {
            packed->reset();
        } else {
            release_pages(source, source_bytes);
        }
        if (in_stream(p)) stream->flush(to, bytes);
        if (streamed(p)) ranges[static_cast<size_t>(p.layer)].push_back({to, bytes});
        m.data = to;
        m.row_begin = p.row_begin;
        m.rows = rows;
        m.grouped = p.grouped;
        m.panel_cols = panel_cols;
        to += bytes;
    }
    if (progress) progress->finish();
    w.packed.clear();  // every packed matrix was a part
    w.private_copy = std::move(memory);
    if (stream) {
        stream->finish(s.layer_begin, std::move(ranges));
        w.streamed = std::move(stream);
    }
}

std::string weight_scale_name(const std::string& weight) {
    const std::string suffix = ".weight";
    const bool has_suffix = weight.size() > suffix.size() && weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) == 0;
    return (has_suffix ? weight.substr(0, weight.size() - suffix.size()) : weight) + ".scale";
}

}  // namespace tessera
