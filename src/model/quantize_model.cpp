#include "model/quantize_model.h"

#include "model/gguf_writer.h"
#include "model/llama_model.h"
#include "ops/quant_importance.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/thread_pool.h"
#include "util/timer.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace tessera {

namespace {

// ggml's GGML_QNT_VERSION: the block layouts this file's quantized tensors use.
constexpr uint32_t kQuantizationVersion = 2;

// A type this build can write: it has a quantizer (from_float).
bool can_write(QuantType type) {
    const QuantTraits* t = scalar_traits(type);
    return t != nullptr && t->from_float != nullptr;
}

bool can_read(QuantType type) {
    const QuantTraits* t = scalar_traits(type);
    return t != nullptr && t->to_float != nullptr;
}

// The type to write instead when rows do not split into `type`'s blocks
// (llama.cpp's tensor_type_fallback: a 32-element type of about the same
// quality; F16 when even that does not fit).
std::vector<QuantType> fallbacks_of(QuantType type) {
    switch (type) {
        case QuantType::IQ4_XS:
        case QuantType::IQ1_S:
        case QuantType::IQ1_M:
        case QuantType::IQ2_XXS:
        case QuantType::IQ2_XS:
        case QuantType::IQ2_S:
        case QuantType::IQ3_XXS:
        case QuantType::IQ3_S: return {QuantType::IQ4_NL, QuantType::F16};
        case QuantType::Q2_0:
        case QuantType::TQ1_0:
        case QuantType::TQ2_0:
        case QuantType::Q2_K:
        case QuantType::Q3_K: return {QuantType::Q4_0, QuantType::F16};
        case QuantType::Q4_K: return {QuantType::Q5_0, QuantType::F16};
        case QuantType::Q5_K: return {QuantType::Q5_1, QuantType::F16};
        case QuantType::Q6_K: return {QuantType::Q8_0, QuantType::F16};
        default: return {QuantType::F16};
    }
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What llama.cpp's mixes look at: the architecture's hyper-parameters and
// which matrices the file has.
MixModel mix_model_of(const GgufFile& in) {
    MixModel model;
    model.arch = in.find_string("general.architecture").value_or("");
    const auto count = [&](const char* key) {
        return static_cast<int>(in.find_int(model.arch + "." + key).value_or(0));
    };
    model.n_layer = count("block_count");
    model.n_head = count("attention.head_count");
    model.n_head_kv = count("attention.head_count_kv");
    if (model.n_head_kv == 0) model.n_head_kv = model.n_head;
    model.n_expert = count("expert_count");
    for (const auto& t : in.tensors()) {
        if (t.name == "output.weight") model.has_output = true;
        if (t.name.find("attn_v.weight") != std::string::npos) ++model.n_attn_v;
    }
    return model;
}

// Matrices and a mixture of experts' stacked ones (3-D: each expert's rows in
// turn), but never a router (ffn_gate_inp): as llama-quantize, which keeps it
// as it is, the experts' choice depending on it.
bool is_weight_matrix(const GgufTensorInfo& t) {
    return (t.n_dims == 2 || t.n_dims == 3) && ends_with(t.name, "weight") &&
           t.name.find("ffn_gate_inp.weight") == std::string::npos;
}

// NVFP4 as ModelOpt quantizes it: a second-level factor per tensor (per
// expert of a stacked tensor) divided out before the blocks are quantized,
// so that each sub-block's UE4M3 scale uses the whole of its range: without
// it a weight of magnitude ~0.01 falls among UE4M3's seven subnormal codes.
// ModelOpt takes amax / (6 * 448); here amax / (6 * 240), because ggml's
// rounding to UE4M3 (which the blocks' bytes follow) sends every scale from
// 256 up to 448, a block's largest weight then 1.75x too coarse. Readers
// (llama.cpp, model/llama_model.cpp) multiply each product by
// `<name>.scale`. An all-zero tensor takes 1.
std::vector<float> second_level_scales(const GgufTensorInfo& src, const TensorQuantPlan& plan) {
    const int64_t cols = plan.ne[0];
    const int64_t rows = src.n_elements() / cols;
    const int64_t per = plan.ne.size() == 3 ? plan.ne[1] : rows;
    const uint64_t src_row = quant_row_bytes(plan.from, cols);
    const QuantTraits& from = *scalar_traits(plan.from);
    std::vector<float> scales(static_cast<size_t>(rows / per), 0.0f), row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        from.to_float(src.data + r * src_row, row.data(), cols);
        float& amax = scales[static_cast<size_t>(r / per)];
        for (float v : row) amax = std::max(amax, std::fabs(v));
    }
    for (float& s : scales) {
        s = s / (6.0f * 240.0f);
        if (!(s > 0.0f) || !std::isfinite(s)) s = 1.0f;
    }
    return scales;
}

// Converts `rows` rows of `cols` elements from one type to another, the rows
// split over the pool.
void convert_rows(const GgufTensorInfo& src, const TensorQuantPlan& plan, uint8_t* dst, ThreadPool& pool) {
    const int64_t cols = plan.ne[0];
    const int64_t rows = src.n_elements() / cols;
    const uint64_t src_row = quant_row_bytes(plan.from, cols);
    const uint64_t dst_row = quant_row_bytes(plan.to, cols);
    const QuantTraits& from = *scalar_traits(plan.from);
    const QuantTraits& to = *scalar_traits(plan.to);
    const std::vector<float> second = plan.second_level ? second_level_scales(src, plan) : std::vector<float>{};
    const int64_t per_scale = second.empty() ? rows : rows / static_cast<int64_t>(second.size());
    pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
        std::vector<float> row(static_cast<size_t>(cols));
        for (int64_t r = begin; r < end; ++r) {
            from.to_float(src.data + r * src_row, row.data(), cols);
            if (!second.empty()) {
                const float s = second[static_cast<size_t>(r / per_scale)];
                for (float& v : row) v /= s;
            }
            if (plan.importance != nullptr) {
                // A 3-D tensor's importance is per expert (llama-imatrix): rows
                // of expert e take values [e * cols, (e + 1) * cols).
                const int64_t expert = plan.importance->size() > static_cast<size_t>(cols) ? r / plan.ne[1] : 0;
                quantize_row_with_importance(plan.to, row.data(), dst + r * dst_row, cols,
                                             plan.importance->data() + expert * cols);
            } else {
                to.from_float(row.data(), dst + r * dst_row, cols);
            }
        }
    });
}

}  // namespace

std::vector<TensorQuantPlan> plan_quantization(const GgufFile& in, const QuantizeParams& params) {
    const QuantizeTarget& target = params.target;
    if (!can_write(target.type)) {
        throw make_error("{}: this build cannot write {} tensors (no quantizer for the type yet)", target.name,
                         quant_type_name(target.type));
    }
    MixModel model = mix_model_of(in);
    model.has_imatrix = params.importance != nullptr;
    const bool mix = !params.pure && is_block_quantized(target.type);
    int i_attn_v = 0;

    std::vector<TensorQuantPlan> plans;
    plans.reserve(in.tensors().size());
    for (const auto& t : in.tensors()) {
        TensorQuantPlan p;
        p.name = t.name;
        p.ne.assign(t.ne, t.ne + t.n_dims);
        p.from = t.type;
        p.bytes_in = t.n_bytes;
        if (!is_weight_matrix(t)) {
            // Norms, biases and other small tensors are copied as they are.
            p.mixed = p.wanted = p.to = t.type;
            p.bytes_out = t.n_bytes;
            plans.push_back(std::move(p));
            continue;
        }
        p.mixed = mix ? mixed_type(target, t.name, t.ne[0], t.n_dims == 3 ? t.ne[2] : 1, i_attn_v, model) : target.type;
        if (t.name.find("attn_v.weight") != std::string::npos) ++i_attn_v;
        p.wanted = can_write(p.mixed) ? p.mixed : target.type;
        const int64_t cols = t.ne[0];
        p.to = p.wanted;
        if (cols % layout_of(p.to).block_size != 0) {
            p.to = QuantType::F16;
            for (QuantType f : fallbacks_of(p.wanted)) {
                if (cols % layout_of(f).block_size == 0 && can_write(f)) {
                    p.to = f;
                    break;
                }
            }
        }
        if (params.importance != nullptr && p.to != p.from) {
            p.importance = params.importance->find(t.name);
            const int64_t experts = t.n_dims == 3 ? t.ne[2] : 1;
            if (p.importance != nullptr && p.importance->size() != static_cast<size_t>(cols) &&
                p.importance->size() != static_cast<size_t>(cols * experts)) {
                // llama-quantize: an importance matrix of another model. (The
                // embedding, a lookup, never gets one that fits: ignored.)
                if (t.name != "token_embd.weight") {
                    throw make_error("{}: importance of '{}' has {} values, the matrix {} columns (an importance "
                                     "matrix of another model?)",
                                     params.importance->path, t.name, p.importance->size(), cols);
                }
                p.importance = nullptr;
            }
        }
        if (p.to != p.from && p.importance == nullptr && requires_importance(target, t.name, p.to)) {
            // llama-quantize refuses these too: without one the result is garbage.
            if (params.importance != nullptr) {
                throw make_error("{}: tensor '{}' would be {}, which needs an importance matrix, and {} has none "
                                 "for it",
                                 target.name, t.name, quant_type_name(p.to), params.importance->path);
            }
            throw make_error("{}: tensor '{}' would be {}, which needs an importance matrix: pass llama-imatrix's "
                             "output with --imatrix FILE (targets that need none: IQ3_S, IQ3_M, IQ4_XS, IQ4_NL and "
                             "the K-quant mixes)",
                             target.name, t.name, quant_type_name(p.to));
        }
        if (p.to != p.from) {
            if (!can_read(p.from)) {
                throw make_error("{}: tensor '{}' is {}, which tessera cannot convert (it reads F32, F16 and the "
                                 "types it computes with)",
                                 in.path(), t.name, quant_type_name(p.from));
            }
            if (is_block_quantized(p.from) && is_block_quantized(p.to) && !params.allow_requantize) {
                throw make_error("{}: tensor '{}' is already {}; quantizing it again to {} adds a second rounding "
                                 "error. Quantize from the F32/F16 model, or pass --allow-requantize",
                                 in.path(), t.name, quant_type_name(p.from), quant_type_name(p.to));
            }
            p.converted = true;
        }
        // (A source that has the factor already keeps it: copied as it is.)
        p.second_level = p.converted && p.to == QuantType::NVFP4 && in.find_tensor(weight_scale_name(t.name)) == nullptr;
        p.bytes_out = static_cast<uint64_t>(t.n_elements() / cols) * quant_row_bytes(p.to, cols);
        plans.push_back(std::move(p));
    }
    return plans;
}

QuantizeSummary quantize_model(const std::string& in_path, const std::string& out_path, const QuantizeParams& params,
                               const std::function<void(const TensorQuantPlan&, size_t, size_t)>& progress) {
    const double t0 = now_seconds();
    if (std::filesystem::exists(out_path) && std::filesystem::exists(in_path) &&
        std::filesystem::equivalent(in_path, out_path)) {
        throw make_error("{}: the output would overwrite the input model", out_path);
    }
    const GgufFile in(in_path);
    QuantizeSummary summary;
    summary.tensors = plan_quantization(in, params);
    bool any_quantized = false;
    for (const auto& p : summary.tensors) any_quantized = any_quantized || is_block_quantized(p.to);

    GgufWriter writer;
    bool wrote_file_type = false;
    for (const auto& kv : in.metadata()) {
        if (kv.key == "general.file_type") {
            writer.set_u32(kv.key, params.target.file_type);
            wrote_file_type = true;
        } else {
            writer.set_value(kv.key, kv.value);
        }
    }
    if (!wrote_file_type) writer.set_u32("general.file_type", params.target.file_type);
    if (params.importance != nullptr) {
        // What llama-quantize records of the importance matrix it used.
        const ImportanceMatrix& m = *params.importance;
        writer.set_string("quantize.imatrix.file", m.path);
        if (!m.datasets.empty()) writer.set_string("quantize.imatrix.dataset", m.datasets.front());
        writer.set_i32("quantize.imatrix.entries_count", static_cast<int32_t>(m.entries.size()));
        if (m.chunk_count > 0) writer.set_i32("quantize.imatrix.chunks_count", m.chunk_count);
    }
    if (any_quantized) writer.set_u32("general.quantization_version", kQuantizationVersion);

    ThreadPool pool(std::max(1, params.n_threads));
    for (size_t i = 0; i < summary.tensors.size(); ++i) {
        const TensorQuantPlan& plan = summary.tensors[i];
        const GgufTensorInfo& src = in.tensors()[i];
        writer.add_tensor(plan.name, plan.to, plan.ne, [&plan, &src, &pool](uint8_t* dst, uint64_t n) {
            if (n != plan.bytes_out) throw make_error("internal: tensor '{}' size {} != {}", plan.name, n, plan.bytes_out);
            if (plan.converted) {
                convert_rows(src, plan, dst, pool);
            } else {
                std::memcpy(dst, src.data, n);
            }
            // Each source tensor is read once: dropping its pages keeps the
            // resident memory at about one tensor instead of the whole input.
            release_pages(src.data, src.n_bytes);
        });
    }
    // NVFP4's second-level factors after the tensors (F32: [1], or one per expert).
    for (size_t i = 0; i < summary.tensors.size(); ++i) {
        const TensorQuantPlan& plan = summary.tensors[i];
        if (!plan.second_level) continue;
        const GgufTensorInfo& src = in.tensors()[i];
        const int64_t n = plan.ne.size() == 3 ? plan.ne[2] : 1;
        writer.add_tensor(weight_scale_name(plan.name), QuantType::F32, {n}, [&plan, &src](uint8_t* dst, uint64_t bytes) {
            const std::vector<float> scales = second_level_scales(src, plan);
            if (bytes != scales.size() * sizeof(float)) throw make_error("internal: '{}' scales", plan.name);
            std::memcpy(dst, scales.data(), bytes);
        });
    }
    // Written under a temporary name and renamed at the end, so a failed or
    // interrupted run never leaves a truncated model under the real name.
    const std::string partial = out_path + ".partial";
    try {
        writer.write(partial, [&](size_t done, size_t total) {
            if (progress && done <= summary.tensors.size()) progress(summary.tensors[done - 1], done, total);
        });
    } catch (...) {
        std::error_code ignored;
        std::filesystem::remove(partial, ignored);
        throw;
    }
    std::error_code ec;
    std::filesystem::rename(partial, out_path, ec);
    if (ec) throw make_error("{}: cannot rename {} to it: {}", out_path, partial, ec.message());
    summary.file_bytes_in = in.file_size();
    summary.file_bytes_out = std::filesystem::file_size(out_path);
    summary.seconds = now_seconds() - t0;
    return summary;
}

}  // namespace tessera
