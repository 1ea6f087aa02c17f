// Elementwise steps of a layer on a Vulkan device, bit for bit the CPU's:
// RMS norm (ops/norm.cpp's rms_norm: each row of x, rows x n floats, normed
// and multiplied by weight, n floats), SwiGLU and GELU (ops/activation.h's
// swiglu with canonical exp, geglu with Highway's tanh), soft caps, RoPE (ops/rope.h's RopeTable::apply, with the
// table's cos and sin of the position) and softmax (ops/softmax.h's).
#pragma once

#include "gpu/vulkan_kernel.h"
#include "ops/activation.h"

#include <memory>
#include <vector>

namespace tessera {

class VulkanRmsNorm {
public:
    explicit VulkanRmsNorm(VulkanContext& context);
    std::vector<float> run(const float* x, int rows, int n, const float* weight, float eps);

private:
    VulkanContext& context_;
    std::unique_ptr<VulkanKernel> kernel_;
};

class RopeTable;

class VulkanRope {
public:
    explicit VulkanRope(VulkanContext& context);
    // x: n_heads heads of head_dim floats, rotated as table.apply would.
    std::vector<float> run(const float* x, int n_heads, int head_dim, const RopeTable& table);

private:
    VulkanContext& context_;
    std::unique_ptr<VulkanKernel> kernel_;
};

class VulkanSoftmax {
public:
    explicit VulkanSoftmax(VulkanContext& context);
    // Each of `rows` rows of n floats.
    std::vector<float> run(const float* x, int rows, int n);

private:
    VulkanContext& context_;
    std::unique_ptr<VulkanKernel> kernel_;
};

// A gated FFN activation: SwiGLU (kSilu) or GELU's tanh form (kGelu, as
// ops/activation_hwy.cpp's geglu, with Highway's tanh).
class VulkanGate {
public:
    VulkanGate(VulkanContext& context, FfnActivation activation);
    // gate[i] = act(gate[i]) * up[i] for n elements.
    std::vector<float> run(const float* gate, const float* up, int n);

private:
    VulkanContext& context_;
    std::unique_ptr<VulkanKernel> kernel_;
};

// x[i] = cap * tanh(x[i] / cap), as ops/activation.h's soft_cap.
class VulkanSoftCap {
public:
    explicit VulkanSoftCap(VulkanContext& context);
    std::vector<float> run(const float* x, int n, float cap);

private:
    VulkanContext& context_;
    std::unique_ptr<VulkanKernel> kernel_;
};

}  // namespace tessera
