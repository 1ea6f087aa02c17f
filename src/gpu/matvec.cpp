#include "gpu/matvec.h"

#include "gpu/shaders.h"
#include "util/error.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>


namespace tessera {

namespace {
// TESSERA_VULKAN_PRODUCTS, checked; empty when unset.
std::string products_mode() {
    const char* v = std::getenv("TESSERA_VULKAN_PRODUCTS");
    if (v == nullptr || *v == '\0') return "";
    const std::string mode = v;
    if (mode != "rows" && mode != "dots" && mode != "subgroups" && mode != "tiles") {
        throw make_error("TESSERA_VULKAN_PRODUCTS={}: rows (a workgroup per row), subgroups (one token's block products "
                         "a subgroup per row, the rest as rows), tiles (block products in tiles of dots and tokens, the "
                         "rest as rows) or dots (an invocation per dot)", mode);
    }
    return mode;
}
}  // namespace

bool serial_products(const VulkanDeviceInfo& info) {
    const std::string mode = products_mode();
    return mode.empty() ? info.type == "cpu" : mode == "dots";
}

bool subgroup_rows(VulkanContext& context) {
    const VulkanDeviceInfo& info = context.info();
    const std::string mode = products_mode();
    if (mode == "subgroups") {
        if (const std::string& why = context.subgroup_mismatch(); !why.empty()) {
            throw make_error("TESSERA_VULKAN_PRODUCTS=subgroups: Vulkan device {} ({}) has {}", info.index, info.name, why);
        }
        return true;
    }
    return mode.empty() && info.type != "cpu" && context.subgroup_mismatch().empty();
}

ProductTiles tiled_products() {
    const std::string mode = products_mode();
    if (mode == "tiles") return ProductTiles::kEvery;
    // Prompts in tiles on every device: lavapipe too (a 1024-wide Q4_K model's
    // pp128 ~1.15-1.3x its invocation per dot, 2.5x a workgroup per row).
    return mode.empty() ? ProductTiles::kPrompts : ProductTiles::kNone;
}

ProductTile product_tile() {
    const char* v = std::getenv("TESSERA_VULKAN_TILE");
    if (v == nullptr || *v == '\0') return {};
    unsigned dots = 0, tokens = 0;
    char end = 0;
    if (std::sscanf(v, "%ux%u%c", &dots, &tokens, &end) != 2 || dots < 1 || dots > 16 || tokens < 1 || tokens > 16) {
        throw make_error("TESSERA_VULKAN_TILE={}: DOTSxTOKENS, each 1 to 16 (e.g. 2x4, the default)", v);
    }
    return {dots, tokens};
}

// matmul_common.glsl's tiled_dots: a workgroup takes 8 x kTileDots dots by
// 8 x kTileTokens tokens (the shader strides over what the limit leaves).
uint32_t tile_groups(int64_t rows, int64_t units) {
    const int64_t per_group = 8 * static_cast<int64_t>(product_tile().dots);
    return static_cast<uint32_t>(std::min<int64_t>((rows * units + per_group - 1) / per_group, 65535));
}
uint32_t tile_token_groups(int64_t tokens) {
    const int64_t per_group = 8 * static_cast<int64_t>(product_tile().tokens);
    return static_cast<uint32_t>((tokens + per_group - 1) / per_group);
}

uint32_t subgroup_row_groups(const VulkanDeviceInfo& info, int64_t rows) {
    const int64_t per_group = std::max<int64_t>(1, 64 / std::max<int64_t>(1, info.subgroup_size));
    return static_cast<uint32_t>(std::min<int64_t>((rows + per_group - 1) / per_group, 65535));
}

uint32_t product_token_groups(bool serial, int64_t tokens) {
    return static_cast<uint32_t>(serial ? tokens : (tokens + 7) / 8);
}

uint32_t product_groups(bool serial, int64_t rows, int64_t units) {
    if (serial) return static_cast<uint32_t>((rows * units + 63) / 64);
    return static_cast<uint32_t>(std::min<int64_t>(rows, 65535));
}

namespace {

using Params = VulkanMatmulParams;


// A buffer holding `bytes` bytes, padded to whole 32-bit words.
std::unique_ptr<VulkanBuffer> filled(VulkanContext& c, const void* data, size_t bytes) {
    const size_t padded = (bytes + 3) / 4 * 4;
    auto buffer = std::make_unique<VulkanBuffer>(c, padded);
    buffer->upload(data, bytes);
    if (padded > bytes) {
        const uint32_t zero = 0;
        buffer->upload(&zero, padded - bytes, bytes);
    }
    return buffer;
}

}  // namespace

VulkanMatvec::VulkanMatvec(VulkanContext& context, bool serial, bool packed, bool subgroup_rows)
    : context_(context), serial_(serial), subgroup_rows_(subgroup_rows) {
    const auto kernel = [&](const uint32_t* spirv, size_t words, const char* name) {
        return LazyVulkanKernel(context, spirv, words, 3, static_cast<uint32_t>(sizeof(Params)), name);
    };
    if (!serial && subgroup_trees(context.info())) {
        f32_ = kernel(TESSERA_SPIRV(matvec_f32_sg), "matvec_f32_sg");
        f16_ = kernel(TESSERA_SPIRV(matvec_f16_sg), "matvec_f16_sg");
    } else {
        f32_ = kernel(TESSERA_SPIRV(matvec_f32), "matvec_f32");
        f16_ = kernel(TESSERA_SPIRV(matvec_f16), "matvec_f16");
    }
    if (packed) {
        if (!context.info().integer_dot) throw make_error("Vulkan device {} has no integer dot products", context.info().name);
        q8_0_ = kernel(TESSERA_SPIRV(matvec_q8_0_idot), "matvec_q8_0_idot");
        q4_0_ = kernel(TESSERA_SPIRV(matvec_q4_0_idot), "matvec_q4_0_idot");
        q4_k_ = kernel(TESSERA_SPIRV(matvec_q4_k_idot), "matvec_q4_k_idot");
        q6_k_ = kernel(TESSERA_SPIRV(matvec_q6_k_idot), "matvec_q6_k_idot");
    } else {
        q8_0_ = kernel(TESSERA_SPIRV(matvec_q8_0), "matvec_q8_0");
        q4_0_ = kernel(TESSERA_SPIRV(matvec_q4_0), "matvec_q4_0");
        q4_k_ = kernel(TESSERA_SPIRV(matvec_q4_k), "matvec_q4_k");
        q6_k_ = kernel(TESSERA_SPIRV(matvec_q6_k), "matvec_q6_k");
    }
    if (subgroup_rows && packed) {
        q8_0_ = kernel(TESSERA_SPIRV(matvec_q8_0_idot_sr), "matvec_q8_0_idot_sr");
        q4_0_ = kernel(TESSERA_SPIRV(matvec_q4_0_idot_sr), "matvec_q4_0_idot_sr");
        q4_k_ = kernel(TESSERA_SPIRV(matvec_q4_k_idot_sr), "matvec_q4_k_idot_sr");
        q6_k_ = kernel(TESSERA_SPIRV(matvec_q6_k_idot_sr), "matvec_q6_k_idot_sr");
    } else if (subgroup_rows) {
        q8_0_ = kernel(TESSERA_SPIRV(matvec_q8_0_sr), "matvec_q8_0_sr");
        q4_0_ = kernel(TESSERA_SPIRV(matvec_q4_0_sr), "matvec_q4_0_sr");
        q4_k_ = kernel(TESSERA_SPIRV(matvec_q4_k_sr), "matvec_q4_k_sr");
        q6_k_ = kernel(TESSERA_SPIRV(matvec_q6_k_sr), "matvec_q6_k_sr");
    }
}

VulkanMatvec::~VulkanMatvec() = default;

std::vector<float> VulkanMatvec::run(VulkanKernel& kernel, const void* w, size_t w_bytes, const void* x, size_t x_bytes,
                                     uint32_t a, int rows, bool by_subgroup) {
    const auto wb = filled(context_, w, w_bytes);
    const auto xb = filled(context_, x, x_bytes);
    VulkanBuffer yb(context_, static_cast<size_t>(rows) * 4);
    const auto n_rows = static_cast<uint32_t>(rows);
    Params p{a, 1, n_rows, a, 0, a, n_rows, 1, a};
    p.serial = serial_ ? 1 : 0;
    kernel.run({wb.get(), xb.get(), &yb}, &p,
               by_subgroup ? subgroup_row_groups(context_.info(), rows) : product_groups(serial_, rows, 1));
    std::vector<float> y(static_cast<size_t>(rows));
    yb.download(y.data(), y.size() * 4);
    return y;
}

std::vector<float> VulkanMatvec::f32(const float* w, int rows, int n, const float* x) {
    if (rows <= 0 || n <= 0) throw make_error("internal: an empty matrix-vector product");
    const size_t cells = static_cast<size_t>(rows) * static_cast<size_t>(n);
    return run(f32_.get(), w, cells * 4, x, static_cast<size_t>(n) * 4, static_cast<uint32_t>(n), rows);
}

std::vector<float> VulkanMatvec::f16(const void* w, int rows, int n, const float* x) {
    if (rows <= 0 || n <= 0) throw make_error("internal: an empty matrix-vector product");
    const size_t cells = static_cast<size_t>(rows) * static_cast<size_t>(n);
    return run(f16_.get(), w, cells * 2, x, static_cast<size_t>(n) * 4, static_cast<uint32_t>(n), rows);
}

// Rows of whole blocks: `block` elements in w_bytes per weight block and
// x_bytes per activation block.
std::vector<float> VulkanMatvec::blocks(VulkanKernel& kernel, const char* type, int block, size_t w_bytes,
                                        size_t x_bytes, const void* w, int rows, int n, const void* x,
                                        bool by_subgroup) {
    if (rows <= 0 || n <= 0 || n % block != 0) throw make_error("internal: {} rows must be whole blocks (n = {})", type, n);
    const size_t count = static_cast<size_t>(n / block);
    return run(kernel, w, static_cast<size_t>(rows) * count * w_bytes, x, count * x_bytes, static_cast<uint32_t>(count),
               rows, by_subgroup);
}

std::vector<float> VulkanMatvec::q8_0(const void* w, int rows, int n, const void* x) {
    return blocks(q8_0_.get(), "Q8_0", 32, 34, 34, w, rows, n, x, subgroup_rows_);
}
std::vector<float> VulkanMatvec::q4_0(const void* w, int rows, int n, const void* x) {
    return blocks(q4_0_.get(), "Q4_0", 32, 18, 34, w, rows, n, x, subgroup_rows_);
}
std::vector<float> VulkanMatvec::q4_k(const void* w, int rows, int n, const void* x) {
    return blocks(q4_k_.get(), "Q4_K", 256, 144, 292, w, rows, n, x, subgroup_rows_);
}
std::vector<float> VulkanMatvec::q6_k(const void* w, int rows, int n, const void* x) {
    return blocks(q6_k_.get(), "Q6_K", 256, 210, 292, w, rows, n, x, subgroup_rows_);
}

}  // namespace tessera
