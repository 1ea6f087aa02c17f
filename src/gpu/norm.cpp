#include "gpu/norm.h"

#include "ops/rope.h"
#include "gpu/shaders.h"
#include "util/error.h"


namespace tessera {

namespace {
struct NormParams {
    uint32_t n;
    uint32_t rows;
    float eps;
};
constexpr uint32_t kGroup = 64;  // the shader's local_size_x
}  // namespace

VulkanRmsNorm::VulkanRmsNorm(VulkanContext& context)
    : context_(context),
      kernel_(std::make_unique<VulkanKernel>(context, shaders::k_rms_norm, shaders::k_rms_norm_words, 3,
                                             static_cast<uint32_t>(sizeof(NormParams)), "rms_norm")) {}

std::vector<float> VulkanRmsNorm::run(const float* x, int rows, int n, const float* weight, float eps) {
    if (rows <= 0 || n <= 0) throw make_error("internal: an empty RMS norm");
    const size_t cells = static_cast<size_t>(rows) * static_cast<size_t>(n);
    VulkanBuffer xb(context_, cells * 4), wb(context_, static_cast<size_t>(n) * 4), ob(context_, cells * 4);
    xb.upload(x, cells * 4);
    wb.upload(weight, static_cast<size_t>(n) * 4);
    const NormParams p{static_cast<uint32_t>(n), static_cast<uint32_t>(rows), eps};
    kernel_->run({&xb, &wb, &ob}, &p, static_cast<uint32_t>(std::min(rows, 65535)));  // a workgroup per row
    std::vector<float> out(cells);
    ob.download(out.data(), cells * 4);
    return out;
}

VulkanRope::VulkanRope(VulkanContext& context)
    : context_(context),
      kernel_(std::make_unique<VulkanKernel>(context, shaders::k_rope, shaders::k_rope_words, 3,
                                             static_cast<uint32_t>(sizeof(VulkanRopeParams)), "rope")) {}

std::vector<float> VulkanRope::run(const float* x, int n_heads, int head_dim, const RopeTable& table) {
    const size_t pairs = table.cos_table().size();
    if (n_heads <= 0 || pairs == 0 || 2 * pairs > static_cast<size_t>(head_dim)) {
        throw make_error("internal: RoPE of {} pairs over heads of {}", pairs, head_dim);
    }
    const size_t bytes = static_cast<size_t>(n_heads) * static_cast<size_t>(head_dim) * 4;
    VulkanBuffer xb(context_, bytes), cb(context_, pairs * 4), sb(context_, pairs * 4);
    xb.upload(x, bytes);
    cb.upload(table.cos_table().data(), pairs * 4);
    sb.upload(table.sin_table().data(), pairs * 4);
    const VulkanRopeParams params{static_cast<uint32_t>(n_heads), static_cast<uint32_t>(head_dim),
                                  static_cast<uint32_t>(pairs), table.layout() == RopeLayout::kHalves ? 1u : 0u, 1,
                                  static_cast<uint32_t>(n_heads * head_dim)};
    const uint32_t work = params.heads * params.pairs;
    kernel_->run({&xb, &cb, &sb}, &params, (work + kGroup - 1) / kGroup);
    std::vector<float> out(bytes / 4);
    xb.download(out.data(), bytes);
    return out;
}

VulkanSoftmax::VulkanSoftmax(VulkanContext& context)
    : context_(context),
      kernel_(std::make_unique<VulkanKernel>(context, shaders::k_softmax, shaders::k_softmax_words, 1, 8, "softmax")) {}

std::vector<float> VulkanSoftmax::run(const float* x, int rows, int n) {
    if (rows <= 0 || n <= 0) throw make_error("internal: an empty softmax");
    const size_t bytes = static_cast<size_t>(rows) * static_cast<size_t>(n) * 4;
    VulkanBuffer xb(context_, bytes);
    xb.upload(x, bytes);
    const uint32_t params[2] = {static_cast<uint32_t>(n), static_cast<uint32_t>(rows)};
    kernel_->run({&xb}, params, (params[1] + kGroup - 1) / kGroup);
    std::vector<float> out(bytes / 4);
    xb.download(out.data(), bytes);
    return out;
}

VulkanGate::VulkanGate(VulkanContext& context, FfnActivation activation) : context_(context) {
    if (activation == FfnActivation::kSilu) {
        kernel_ = std::make_unique<VulkanKernel>(context, TESSERA_SPIRV(swiglu), 2, 8, "swiglu");
    } else if (activation == FfnActivation::kGelu) {
        kernel_ = std::make_unique<VulkanKernel>(context, TESSERA_SPIRV(geglu), 2, 8, "geglu");
    } else {
        throw make_error("internal: no Vulkan kernel for this FFN activation");
    }
}

std::vector<float> VulkanGate::run(const float* gate, const float* up, int n) {
    if (n <= 0) throw make_error("internal: an empty gated activation");
    const size_t bytes = static_cast<size_t>(n) * 4;
    VulkanBuffer gb(context_, bytes), ub(context_, bytes);
    gb.upload(gate, bytes);
    ub.upload(up, bytes);
    const uint32_t params[2] = {static_cast<uint32_t>(n), 1};
    kernel_->run({&gb, &ub}, params, (params[0] + kGroup - 1) / kGroup);
    std::vector<float> out(static_cast<size_t>(n));
    gb.download(out.data(), bytes);
    return out;
}

VulkanSoftCap::VulkanSoftCap(VulkanContext& context)
    : context_(context), kernel_(std::make_unique<VulkanKernel>(context, TESSERA_SPIRV(soft_cap), 1, 8, "soft_cap")) {}

std::vector<float> VulkanSoftCap::run(const float* x, int n, float cap) {
    if (n <= 0) throw make_error("internal: an empty soft cap");
    const size_t bytes = static_cast<size_t>(n) * 4;
    VulkanBuffer xb(context_, bytes);
    xb.upload(x, bytes);
    struct {
        uint32_t n;
        float cap;
    } params{static_cast<uint32_t>(n), cap};
    kernel_->run({&xb}, &params, (params.n + kGroup - 1) / kGroup);
    std::vector<float> out(static_cast<size_t>(n));
    xb.download(out.data(), bytes);
    return out;
}

}  // namespace tessera
