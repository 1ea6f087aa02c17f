// K/V rows from hidden states (SliceForward::kv_from_input, what a peer sent
// hidden states rather than rows would store): the normed attention input of
// a layer projects to the very V rows the layer stores, and to its K rows
// before RoPE (within RoPE's round trip), on every layer of a real model.
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tessera {

TEST(KvFromInput, HiddenStatesProjectToTheRowsTheLayerStores) {
    const LlamaModel model(test::source_dir() + "/models/stories260K.gguf");
    const ModelHParams& hp = model.hparams();
    ForwardConfig fc;
    fc.n_ctx = 64;
    fc.n_batch = 32;
    fc.kv_types = KvCacheTypes(QuantType::F32);
    LocalDecoder decoder(model, fc, 2);
    SliceForward& f = decoder.forward();
    const int n = 20;
    std::vector<int32_t> tokens(n);
    for (int t = 0; t < n; ++t) tokens[static_cast<size_t>(t)] = (t * 37 + 11) % hp.n_vocab;
    const auto n_embd = static_cast<size_t>(hp.n_embd);
    const size_t kv_dim = static_cast<size_t>(hp.n_head_kv) * hp.head_dim;
    std::vector<float> x(n * n_embd), h(n * n_embd), k(n * kv_dim), v(n * kv_dim), k2(k.size()), v2(v.size());
    f.embed(tokens, x.data());
    const SeqRun run{0, 3, n};
    for (int layer = 0; layer < hp.n_layer; ++layer) {
        f.norm_attention_input(layer, x.data(), h.data(), n);
        f.forward_layer(layer, x.data(), std::span<const SeqRun>(&run, 1));
        f.read_kv_floats(layer, run.pos0, n, k.data(), v.data());
        f.kv_from_input(layer, h.data(), n, k2.data(), v2.data());
        EXPECT_EQ(v, v2) << "layer " << layer;
        double err = 0.0, norm = 0.0;
        for (size_t i = 0; i < k.size(); ++i) {
            err += (k[i] - k2[i]) * (k[i] - k2[i]);
            norm += k[i] * k[i];
        }
        EXPECT_GT(norm, 0.0);
        EXPECT_LT(std::sqrt(err / norm), 1e-5) << "layer " << layer;
    }
}

}  // namespace tessera
