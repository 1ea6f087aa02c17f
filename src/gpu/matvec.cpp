#include "gpu/matvec.h"

#include "util/error.h"

#include <cstring>

namespace tessera::shaders {
extern const uint32_t k_matvec_f32[];
extern const size_t k_matvec_f32_words;
extern const uint32_t k_matvec_q8_0[];
extern const size_t k_matvec_q8_0_words;
}  // namespace tessera::shaders

namespace tessera {

namespace {

struct Params {
    uint32_t a;
    uint32_t rows;
};

constexpr uint32_t kGroup = 64;  // the shaders' local_size_x

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

VulkanMatvec::VulkanMatvec(VulkanContext& context)
    : context_(context),
      f32_(std::make_unique<VulkanKernel>(context, shaders::k_matvec_f32, shaders::k_matvec_f32_words, 3,
                                          static_cast<uint32_t>(sizeof(Params)), "matvec_f32")),
      q8_0_(std::make_unique<VulkanKernel>(context, shaders::k_matvec_q8_0, shaders::k_matvec_q8_0_words, 3,
                                           static_cast<uint32_t>(sizeof(Params)), "matvec_q8_0")) {}

VulkanMatvec::~VulkanMatvec() = default;

std::vector<float> VulkanMatvec::f32(const float* w, int rows, int n, const float* x) {
    if (rows <= 0 || n <= 0) throw make_error("internal: an empty matrix-vector product");
    const auto wb = filled(context_, w, static_cast<size_t>(rows) * static_cast<size_t>(n) * 4);
    const auto xb = filled(context_, x, static_cast<size_t>(n) * 4);
    VulkanBuffer yb(context_, static_cast<size_t>(rows) * 4);
    const Params p{static_cast<uint32_t>(n), static_cast<uint32_t>(rows)};
    f32_->run({wb.get(), xb.get(), &yb}, &p, (static_cast<uint32_t>(rows) + kGroup - 1) / kGroup);
    std::vector<float> y(static_cast<size_t>(rows));
    yb.download(y.data(), y.size() * 4);
    return y;
}

std::vector<float> VulkanMatvec::q8_0(const void* w, int rows, int n, const void* x) {
    if (rows <= 0 || n <= 0 || n % 32 != 0) throw make_error("internal: Q8_0 rows must be whole blocks (n = {})", n);
    const size_t blocks = static_cast<size_t>(n) / 32;
    const auto wb = filled(context_, w, static_cast<size_t>(rows) * blocks * 34);
    const auto xb = filled(context_, x, blocks * 34);
    VulkanBuffer yb(context_, static_cast<size_t>(rows) * 4);
    const Params p{static_cast<uint32_t>(blocks), static_cast<uint32_t>(rows)};
    q8_0_->run({wb.get(), xb.get(), &yb}, &p, (static_cast<uint32_t>(rows) + kGroup - 1) / kGroup);
    std::vector<float> y(static_cast<size_t>(rows));
    yb.download(y.data(), y.size() * 4);
    return y;
}

}  // namespace tessera
