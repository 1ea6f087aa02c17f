#include "gpu/norm.h"

#include "util/error.h"

namespace tessera::shaders {
extern const uint32_t k_rms_norm[];
extern const size_t k_rms_norm_words;
extern const uint32_t k_swiglu[];
extern const size_t k_swiglu_words;
}  // namespace tessera::shaders

namespace tessera {

namespace {
struct Params {
    uint32_t n;
    uint32_t rows;
    float eps;
};
constexpr uint32_t kGroup = 64;  // the shader's local_size_x
}  // namespace

VulkanRmsNorm::VulkanRmsNorm(VulkanContext& context)
    : context_(context),
      kernel_(std::make_unique<VulkanKernel>(context, shaders::k_rms_norm, shaders::k_rms_norm_words, 3,
                                             static_cast<uint32_t>(sizeof(Params)), "rms_norm")) {}

std::vector<float> VulkanRmsNorm::run(const float* x, int rows, int n, const float* weight, float eps) {
    if (rows <= 0 || n <= 0) throw make_error("internal: an empty RMS norm");
    const size_t cells = static_cast<size_t>(rows) * static_cast<size_t>(n);
    VulkanBuffer xb(context_, cells * 4), wb(context_, static_cast<size_t>(n) * 4), ob(context_, cells * 4);
    xb.upload(x, cells * 4);
    wb.upload(weight, static_cast<size_t>(n) * 4);
    const Params p{static_cast<uint32_t>(n), static_cast<uint32_t>(rows), eps};
    kernel_->run({&xb, &wb, &ob}, &p, (static_cast<uint32_t>(rows) + kGroup - 1) / kGroup);
    std::vector<float> out(cells);
    ob.download(out.data(), cells * 4);
    return out;
}

VulkanSwiglu::VulkanSwiglu(VulkanContext& context)
    : context_(context),
      kernel_(std::make_unique<VulkanKernel>(context, shaders::k_swiglu, shaders::k_swiglu_words, 2, 4, "swiglu")) {}

std::vector<float> VulkanSwiglu::run(const float* gate, const float* up, int n) {
    if (n <= 0) throw make_error("internal: an empty SwiGLU");
    const size_t bytes = static_cast<size_t>(n) * 4;
    VulkanBuffer gb(context_, bytes), ub(context_, bytes);
    gb.upload(gate, bytes);
    ub.upload(up, bytes);
    const uint32_t count = static_cast<uint32_t>(n);
    kernel_->run({&gb, &ub}, &count, (count + kGroup - 1) / kGroup);
    std::vector<float> out(static_cast<size_t>(n));
    gb.download(out.data(), bytes);
    return out;
}

}  // namespace tessera
