#include "model/hf_tensor_writer.h"

#include "model/gguf_writer.h"
#include "model/hf_checkpoint.h"
#include "model/hf_families.h"
#include "model/hf_nvfp4.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/mapped_file.h"

#include <fmt/ranges.h>

#include <memory>

namespace tessera {

namespace {

// A source dtype as the type whose converter reads it (F32, F16, BF16).
QuantType quant_type_of(SafetensorsDtype dtype) {
    switch (dtype) {
        case SafetensorsDtype::F16: return QuantType::F16;
        case SafetensorsDtype::BF16: return QuantType::BF16;
        default: return QuantType::F32;
    }
}

// gpt-oss's MXFP4 experts, block by block: the scale byte (E8M0, the same
// in both formats) and the 32 4-bit codes, which the checkpoint packs two
// neighbours to a byte (element 2k low, 2k + 1 high) and ggml packs half a
// block apart (element j low, j + 16 high). No value is rounded.
void add_mxfp4_tensor(const HfCheckpoint& checkpoint, const HfTensorPlan& t, GgufWriter& writer) {
    for (const std::string& name : {t.sources[0], t.mxfp4_scales}) {
        if (!checkpoint.has(name)) throw make_error("{}: the checkpoint has no tensor '{}'", checkpoint.dir(), name);
        if (checkpoint.tensor(name).dtype != SafetensorsDtype::U8) {
            throw make_error("{}: tensor '{}' is {}, and MXFP4 blocks and scales are U8", checkpoint.shard_of(name).path(),
                             name, safetensors_dtype_name(checkpoint.tensor(name).dtype));
        }
    }
    const std::vector<int64_t>& shape = t.source_shape;  // [experts, rows, blocks, 16]
    const std::vector<int64_t> scale_shape = {shape[0], shape[1], shape[2]};
    for (const auto& [name, want] : {std::pair{t.sources[0], shape}, std::pair{t.mxfp4_scales, scale_shape}}) {
        if (checkpoint.tensor(name).shape != want) {
            throw make_error("{}: tensor '{}' has shape [{}], and config.json makes it [{}]", checkpoint.shard_of(name).path(),
                             name, fmt::join(checkpoint.tensor(name).shape, ", "), fmt::join(want, ", "));
        }
    }
    const int64_t experts = shape[0], rows = shape[1], blocks = shape[2];
    const int64_t out_rows = t.row_parity >= 0 ? rows / 2 : rows;
    const std::span<const uint8_t> codes = checkpoint.data(t.sources[0]), scales = checkpoint.data(t.mxfp4_scales);
    writer.add_tensor_rows(t.gguf, QuantType::MXFP4, {blocks * 32, out_rows, experts},
                           [=, parity = t.row_parity](uint8_t* dst, int64_t first, int64_t n) {
        for (int64_t g = first; g < first + n; ++g) {
            const int64_t e = g / out_rows, r = g % out_rows;
            const int64_t from = e * rows + (parity >= 0 ? 2 * r + parity : r);
            for (int64_t b = 0; b < blocks; ++b) {
                const uint8_t* in = codes.data() + (from * blocks + b) * 16;
                *dst++ = scales[static_cast<size_t>(from * blocks + b)];
                const auto code = [in](int m) { return (in[m / 2] >> (4 * (m % 2))) & 0x0F; };
                for (int j = 0; j < 16; ++j) *dst++ = static_cast<uint8_t>(code(j) | code(j + 16) << 4);
            }
        }
        if (first + n == experts * out_rows) release_pages(codes.data(), codes.size());
    });
}

}  // namespace

// One GGUF tensor, its sources checked against the plan and converted row
// by row when the writer asks for its bytes.
void add_hf_tensor(const HfCheckpoint& checkpoint, QuantType chosen, const HfTensorPlan& t, GgufWriter& writer) {
    if (!t.mxfp4_scales.empty()) {
        add_mxfp4_tensor(checkpoint, t, writer);
        return;
    }
    if (!t.sources.empty() && nvfp4_weight(checkpoint, t.sources[0])) {
        add_nvfp4_tensor(checkpoint, t, writer);
        return;
    }
    std::vector<std::span<const uint8_t>> sources;
    SafetensorsDtype dtype = SafetensorsDtype::F32;
    for (const std::string& name : t.sources) {
        if (!checkpoint.has(name)) throw make_error("{}: the checkpoint has no tensor '{}'", checkpoint.dir(), name);
        const SafetensorsTensor& src = checkpoint.tensor(name);
        const std::string where = fmt::format("{}: tensor '{}'", checkpoint.shard_of(name).path(), name);
        if (src.dtype != SafetensorsDtype::F32 && src.dtype != SafetensorsDtype::F16 && src.dtype != SafetensorsDtype::BF16) {
            throw make_error("{} is {}: convert-hf reads F32, F16 and BF16 weights", where, safetensors_dtype_name(src.dtype));
        }
        if (src.shape != t.source_shape) {
            throw make_error("{} has shape [{}], and config.json makes it [{}]", where, fmt::join(src.shape, ", "),
                             fmt::join(t.source_shape, ", "));
        }
        if (!sources.empty() && src.dtype != dtype) {
            throw make_error("{} is {}, unlike the other experts it is stacked with", where, safetensors_dtype_name(src.dtype));
        }
        dtype = src.dtype;
        sources.push_back(checkpoint.data(name));
    }
    const bool matrix = t.source_shape.size() == 2;
    const int64_t source_cols = t.source_shape.back();
    const int parity = t.column_parity;
    const int64_t cols = parity >= 0 ? source_cols / 2 : source_cols;
    const int64_t rows = matrix ? (t.keep_rows > 0 ? t.keep_rows : t.source_shape[0]) : 1;
    const QuantType type = matrix && !t.keep_f32 ? chosen : QuantType::F32;
    if (cols % layout_of(type).block_size != 0) {
        throw make_error("{}: rows of {} values do not divide into {} blocks of {}", t.sources[0], cols,
                         quant_type_name(type), layout_of(type).block_size);
    }
    std::vector<int64_t> ne = {cols};
    if (matrix) ne.push_back(rows);
    if (sources.size() > 1) ne.push_back(static_cast<int64_t>(sources.size()));
    const uint64_t elem = safetensors_dtype_bytes(dtype);
    const QuantTraits* in = scalar_traits(quant_type_of(dtype));
    const QuantTraits* out = scalar_traits(type);
    const size_t out_row = quant_row_bytes(type, cols);
    // The shards' pages go back to the page cache every 32 MiB read (Q/K
    // rows are permuted within a head only, so the rows before the current
    // head are done): memory stays near the writer's chunk of rows.
    auto released = std::make_shared<std::vector<uint64_t>>(sources.size(), 0);
    writer.add_tensor_rows(t.gguf, type, ne, [=, permute = t.permute_head_dim, shift = t.shift](uint8_t* dst, int64_t first,
                                                                                                 int64_t n) {
        constexpr uint64_t kReleaseBytes = 32u << 20;
        std::vector<float> source_row(static_cast<size_t>(source_cols)), row(static_cast<size_t>(cols));
        const uint64_t row_bytes = static_cast<uint64_t>(source_cols) * elem;
        for (int64_t g = first; g < first + n; ++g) {
            const size_t s = static_cast<size_t>(g / rows);
            const int64_t r = g % rows;
            const std::span<const uint8_t> bytes = sources[s];
            const int64_t from = permute > 0 ? permuted_source_row(r, permute) : r;
            const uint8_t* src = bytes.data() + static_cast<uint64_t>(from) * row_bytes;
            in->to_float(src, source_row.data(), source_cols);
            for (int64_t i = 0; i < cols; ++i) {
                const int64_t at = parity >= 0 ? 2 * i + parity : i;
                row[static_cast<size_t>(i)] = source_row[static_cast<size_t>(at)] + shift;
            }
            out->from_float(row.data(), dst + static_cast<uint64_t>(g - first) * out_row, cols);
            uint64_t& done_before = (*released)[s];
            if (r + 1 == rows) {
                release_pages(bytes.data(), bytes.size());
                continue;
            }
            const int64_t done_rows = permute > 0 ? (r + 1) / permute * permute : r + 1;
            const uint64_t done = static_cast<uint64_t>(done_rows) * row_bytes;
            if (done - done_before >= kReleaseBytes) {
                release_pages(bytes.data() + done_before, done - done_before);
                done_before = done;
            }
        }
    });
}

}  // namespace tessera
