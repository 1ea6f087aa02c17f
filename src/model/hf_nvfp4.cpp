#include "model/hf_nvfp4.h"

#include "model/gguf_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_families.h"
#include "model/llama_model.h"
#include "util/error.h"
#include "util/mapped_file.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace tessera {

namespace {

constexpr int64_t kBlock = 64;     // ggml's NVFP4 block
constexpr int64_t kSubBlock = 16;  // one E4M3 scale each

// The string at key of a JSON object, "" where it is absent or not a string.
std::string string_at(const nlohmann::json& j, const char* key) {
    if (!j.is_object()) return "";
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// `name` without its ".weight" (the stem its companions share).
std::string stem_of(const std::string& name) {
    const std::string suffix = ".weight";
    const bool has = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    return has ? name.substr(0, name.size() - suffix.size()) : name;
}

// A one-value tensor (weight_scale_2, input_scale: shape [] or [1]) as a float.
float factor_of(const HfCheckpoint& checkpoint, const std::string& name) {
    const SafetensorsTensor& t = checkpoint.tensor(name);
    int64_t n = 1;
    for (int64_t e : t.shape) n *= e;
    const std::span<const uint8_t> bytes = checkpoint.data(name);
    if (n == 1 && t.dtype == SafetensorsDtype::F32 && bytes.size() == 4) {
        float f;
        std::memcpy(&f, bytes.data(), 4);
        return f;
    }
    if (n == 1 && t.dtype == SafetensorsDtype::BF16 && bytes.size() == 2) {
        uint16_t h;
        std::memcpy(&h, bytes.data(), 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
    throw make_error("{}: tensor '{}' is {} [{}], not one F32 factor", checkpoint.shard_of(name).path(), name,
                     safetensors_dtype_name(t.dtype), fmt::join(t.shape, ", "));
}

void require(const HfCheckpoint& checkpoint, const std::string& name, SafetensorsDtype dtype,
             const std::vector<int64_t>& shape) {
    if (!checkpoint.has(name)) throw make_error("{}: the checkpoint has no tensor '{}'", checkpoint.dir(), name);
    const SafetensorsTensor& t = checkpoint.tensor(name);
    if (t.dtype != dtype || t.shape != shape) {
        throw make_error("{}: tensor '{}' is {} [{}], and config.json's NVFP4 weight needs {} [{}] there",
                         checkpoint.shard_of(name).path(), name, safetensors_dtype_name(t.dtype), fmt::join(t.shape, ", "),
                         safetensors_dtype_name(dtype), fmt::join(shape, ", "));
    }
}

}  // namespace

bool modelopt_nvfp4(const HfCheckpoint& checkpoint) {
    const nlohmann::json& config = checkpoint.config();
    const auto q = config.find("quantization_config");
    const nlohmann::json none = nlohmann::json::object();
    const nlohmann::json& quant = q != config.end() && q->is_object() ? *q : none;
    std::string method = string_at(quant, "quant_method"), algo = string_at(quant, "quant_algo");
    // ModelOpt's own file, which older exports have instead (and newer beside config.json).
    const std::string side = checkpoint.dir() + "/hf_quant_config.json";
    if (std::filesystem::exists(side)) {
        const nlohmann::json h = read_checkpoint_json(side, 4u << 20);
        if (method.empty() && h.is_object() && h.contains("producer")) method = string_at(h["producer"], "name");
        if (h.is_object() && h.contains("quantization")) {
            const std::string a = string_at(h["quantization"], "quant_algo");
            if (!a.empty()) algo = a;
        }
    }
    std::transform(method.begin(), method.end(), method.begin(), [](unsigned char c) { return std::tolower(c); });
    if (method != "modelopt") return false;
    if (algo != "NVFP4") {
        throw make_error("{}: a ModelOpt checkpoint quantized as {}: convert-hf reads ModelOpt's NVFP4 only",
                         checkpoint.dir(), algo.empty() ? "(no quant_algo)" : algo.substr(0, 40));
    }
    return true;
}

bool nvfp4_weight(const HfCheckpoint& checkpoint, const std::string& name) {
    return checkpoint.has(stem_of(name) + ".weight_scale") && checkpoint.has(name) &&
           checkpoint.tensor(name).dtype == SafetensorsDtype::U8;
}

std::vector<std::string> nvfp4_companions(const HfCheckpoint& checkpoint, const std::string& name) {
    std::vector<std::string> out;
    // Only an NVFP4 weight's: a scale beside a weight of another dtype stays
    // unplanned, and the conversion is refused naming it.
    if (!nvfp4_weight(checkpoint, name)) return out;
    for (const char* suffix : {".weight_scale", ".weight_scale_2", ".input_scale"}) {
        if (checkpoint.has(stem_of(name) + suffix)) out.push_back(stem_of(name) + suffix);
    }
    return out;
}

void add_nvfp4_tensor(const HfCheckpoint& checkpoint, const HfTensorPlan& t, GgufWriter& writer) {
    const std::vector<int64_t>& shape = t.source_shape;  // [rows, cols] as config.json makes it
    if (shape.size() != 2 || t.keep_rows > 0 || t.row_parity >= 0 || t.column_parity >= 0 || t.shift != 0.0f || t.keep_f32) {
        throw make_error("{}: '{}' is NVFP4, and its GGUF tensor {} changes its values on the way: convert-hf repacks "
                         "whole NVFP4 matrices only", checkpoint.dir(), t.sources[0], t.gguf);
    }
    const int64_t rows = shape[0], cols = shape[1];
    if (cols % kBlock != 0) {
        throw make_error("{}: '{}' has rows of {} values, which ggml's NVFP4 blocks of {} do not divide", checkpoint.dir(),
                         t.sources[0], cols, kBlock);
    }
    std::vector<std::span<const uint8_t>> codes, scales;
    std::vector<float> factors, inputs;
    for (const std::string& name : t.sources) {
        const std::string stem = stem_of(name);
        require(checkpoint, name, SafetensorsDtype::U8, {rows, cols / 2});
        require(checkpoint, stem + ".weight_scale", SafetensorsDtype::F8_E4M3, {rows, cols / kSubBlock});
        if (!checkpoint.has(stem + ".weight_scale_2")) {
            throw make_error("{}: NVFP4 weight '{}' has no weight_scale_2", checkpoint.dir(), name);
        }
        codes.push_back(checkpoint.data(name));
        scales.push_back(checkpoint.data(stem + ".weight_scale"));
        const float factor = factor_of(checkpoint, stem + ".weight_scale_2");
        if (!std::isfinite(factor)) {
            throw make_error("{}: tensor '{}' holds {}, not a finite factor", checkpoint.dir(), stem + ".weight_scale_2", factor);
        }
        factors.push_back(factor);
        inputs.push_back(checkpoint.has(stem + ".input_scale") ? factor_of(checkpoint, stem + ".input_scale") : 1.0f);
    }
    std::vector<int64_t> ne = {cols, rows};
    if (t.sources.size() > 1) ne.push_back(static_cast<int64_t>(t.sources.size()));
    // Per block of 64: its 4 scale bytes (E4M3's sign bit dropped: ggml's
    // UE4M3 has the same exponent and mantissa), then 8 bytes a sub-block of
    // 16, byte j holding element j low and j + 8 high.
    writer.add_tensor_rows(t.gguf, QuantType::NVFP4, ne, [=, permute = t.permute_head_dim](uint8_t* dst, int64_t first, int64_t n) {
        for (int64_t g = first; g < first + n; ++g) {
            const size_t s = static_cast<size_t>(g / rows);
            const int64_t r = g % rows;
            const int64_t from = permute > 0 ? permuted_source_row(r, permute) : r;
            const uint8_t* in = codes[s].data() + from * (cols / 2);
            const uint8_t* sc = scales[s].data() + from * (cols / kSubBlock);
            const auto code = [in](int64_t m) { return (in[m / 2] >> (4 * (m % 2))) & 0x0F; };
            for (int64_t b = 0; b < cols / kBlock; ++b) {
                for (int j = 0; j < 4; ++j) *dst++ = sc[4 * b + j] & 0x7F;
                for (int j = 0; j < 4; ++j) {
                    const int64_t m0 = kBlock * b + kSubBlock * j;
                    for (int i = 0; i < 8; ++i) *dst++ = static_cast<uint8_t>(code(m0 + i) | code(m0 + i + 8) << 4);
                }
            }
            if ((g + 1) % rows == 0) {
                release_pages(codes[s].data(), codes[s].size());
                release_pages(scales[s].data(), scales[s].size());
            }
        }
    });
    const auto add_floats = [&writer](const std::string& name, const std::vector<float>& values) {
        writer.add_tensor(name, QuantType::F32, {static_cast<int64_t>(values.size())}, [values](uint8_t* dst, uint64_t n) {
            std::memcpy(dst, values.data(), std::min<uint64_t>(n, values.size() * sizeof(float)));
        });
    };
    add_floats(weight_scale_name(t.gguf), factors);
    add_floats(stem_of(t.gguf) + ".input_scale", inputs);
}

}  // namespace tessera
