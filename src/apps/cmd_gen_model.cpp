// tessera gen-model: write a real-shaped Llama GGUF with seeded random weights.
#include "apps/commands.h"
#include "model/random_model.h"
#include "util/error.h"

#include <cstdio>
#include <memory>

namespace tessera {

namespace {

struct GenModelOptions {
    RandomModelSpec spec;
    std::string type = "F32";
    std::string output;
    bool quiet = false;
};

void gen_model(GenModelOptions& o) {
    const auto type = parse_quant_type(o.type);
    if (!type) throw make_error("--type '{}' is not a known type (F32, F16, Q8_0, Q4_0, Q4_K, Q6_K)", o.type);
    o.spec.type = *type;
    write_random_model(o.spec, o.output, [&](size_t done, size_t total) {
        if (o.quiet) return;
        std::fprintf(stderr, "\rwriting %s: %zu/%zu tensors", o.output.c_str(), done, total);
        if (done == total) std::fprintf(stderr, "\n");
    });
}

}  // namespace

void add_gen_model_command(CLI::App& app) {
    auto o = std::make_shared<GenModelOptions>();
    CLI::App* cmd = app.add_subcommand("gen-model", "Write a Llama GGUF of a given shape with seeded random weights");
    RandomModelSpec& s = o->spec;
    cmd->add_option("--dim", s.n_embd, "Model width")->capture_default_str();
    cmd->add_option("--layers", s.n_layer, "Transformer blocks")->capture_default_str();
    cmd->add_option("--heads", s.n_head, "Query heads")->capture_default_str();
    cmd->add_option("--kv-heads", s.n_head_kv, "Key/value heads")->capture_default_str();
    cmd->add_option("--ffn", s.n_ff, "FFN hidden width")->capture_default_str();
    cmd->add_option("--ctx", s.n_ctx, "Training context length written to the metadata")->capture_default_str();
    cmd->add_option("--vocab", s.n_vocab, "Size of a synthetic vocabulary (without --vocab-from)")->capture_default_str();
    cmd->add_option("--vocab-from", s.vocab_from, "Copy the tokenizer from this GGUF (e.g. a llama.cpp vocab file)");
    cmd->add_option("--rope-base", s.rope_freq_base, "RoPE frequency base")->capture_default_str();
    cmd->add_option("--type", o->type, "Weight type: F32, F16, Q8_0, Q4_0, Q4_K, Q6_K (K-quants need --dim and --ffn multiples of 256)")->capture_default_str();
    cmd->add_option("--seed", s.seed, "Random seed (same arguments, same bytes)")->capture_default_str();
    cmd->add_option("-o,--output", o->output, "Output GGUF file")->required();
    cmd->add_flag("-q,--quiet", o->quiet, "No progress output");
    cmd->callback([o] { gen_model(*o); });
}

}  // namespace tessera
