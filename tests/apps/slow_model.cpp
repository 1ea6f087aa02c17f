#include "slow_model.h"

#include "model/random_model.h"

namespace tessera::test {

std::string write_slow_model(const std::string& dir) {
    const std::string path = dir + "/slow.gguf";
    RandomModelSpec spec;
    spec.n_embd = 512;
    spec.n_layer = 8;
    spec.n_head = 8;
    spec.n_head_kv = 4;
    spec.n_ff = 1536;
    spec.n_vocab = 1000;
    spec.n_ctx = 4096;
    spec.type = QuantType::F32;
    write_random_model(spec, path);
    return path;
}

}  // namespace tessera::test
