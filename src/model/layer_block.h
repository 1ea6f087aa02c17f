// A block of whole layers that runs residual rows in place, wherever its
// work happens: one process (SliceForward over a whole-layer slice) or a
// tensor-parallel group (TensorParallelDecoder over its ranks). A pipeline
// stage drives one without knowing which.
#pragma once

namespace tessera {

class LayerBlock {
public:
    virtual ~LayerBlock() = default;
    // x: n_tok rows of n_embd residual values at positions pos0.., updated in
    // place by every layer of the block (n_tok at most the block's batch).
    virtual void forward_layers(float* x, int pos0, int n_tok) = 0;
};

}  // namespace tessera
