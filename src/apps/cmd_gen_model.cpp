// tessera gen-model: write a real-shaped GGUF of any supported family with
// seeded random weights and llama.cpp's tensor names and keys.
#include "apps/commands.h"
#include "model/random_model.h"
#include "ops/quant_traits.h"
#include "util/error.h"
#include "util/progress.h"

#include <cstdio>
#include <memory>

namespace tessera {

namespace {

struct GenModelOptions {
    RandomModelSpec spec;
    std::string type = "F32";
    std::string dense_type;
    std::string output;
    std::string arch = "llama";
    bool quiet = false;
    bool given_rope_base = false, given_window = false, given_head_dim = false;
};

void gen_model(GenModelOptions& o) {
    const auto type = parse_quant_type(o.type);
    if (!type) throw make_error("--type '{}' is not a known type (one of {})", o.type, supported_weight_types());
    o.spec.type = *type;
    if (!o.dense_type.empty()) {
        const auto dense = parse_quant_type(o.dense_type);
        if (!dense) throw make_error("--dense-type '{}' is not a known type (one of {})", o.dense_type, supported_weight_types());
        o.spec.dense_type = *dense;
    }
    // The preset first; options given on the command line win over it.
    RandomModelSpec spec = o.spec;
    apply_model_preset(spec, o.arch);
    if (o.given_rope_base) spec.rope_freq_base = o.spec.rope_freq_base;
    if (o.given_window) spec.sliding_window = o.spec.sliding_window;
    if (o.given_head_dim) spec.head_dim = o.spec.head_dim;
    std::unique_ptr<Progress> progress;
    write_random_model(spec, o.output, [&](size_t done, size_t total) {
        if (o.quiet) return;
        if (!progress) progress = std::make_unique<Progress>("writing " + o.output, static_cast<double>(total), "tensors");
        progress->update(static_cast<double>(done));
        if (done == total) progress->finish();
    });
}

}  // namespace

void add_gen_model_command(CLI::App& app) {
    auto o = std::make_shared<GenModelOptions>();
    CLI::App* cmd = app.add_subcommand("gen-model", "Write a GGUF of a given family and shape with seeded random weights");
    RandomModelSpec& s = o->spec;
    cmd->add_option("--dim", s.n_embd, "Model width")->capture_default_str();
    cmd->add_option("--layers", s.n_layer, "Transformer blocks")->capture_default_str();
    cmd->add_option("--heads", s.n_head, "Query heads")->capture_default_str();
    cmd->add_option("--kv-heads", s.n_head_kv, "Key/value heads")->capture_default_str();
    cmd->add_option("--ffn", s.n_ff, "FFN hidden width (with experts: each expert's)")->capture_default_str();
    cmd->add_option("--experts", s.n_expert, "Experts per layer (a mixture of experts; 0: a dense FFN)");
    cmd->add_option("--experts-used", s.n_expert_used, "Experts chosen per token");
    cmd->add_option("--ctx", s.n_ctx, "Training context length written to the metadata")->capture_default_str();
    cmd->add_option("--vocab", s.n_vocab, "Size of a synthetic vocabulary (without --vocab-from)")->capture_default_str();
    cmd->add_option("--vocab-from", s.vocab_from, "Copy the tokenizer from this GGUF (e.g. a llama.cpp vocab file)");
    cmd->add_option("--rope-base", s.rope_freq_base, "RoPE frequency base")->capture_default_str();
    cmd->add_option("--arch", o->arch, "Family, with the options its real files have: " + model_preset_names())
        ->capture_default_str();
    cmd->add_option("--head-dim", s.head_dim, "Width of a head (written as attention.key_length; default dim / heads)");
    cmd->add_option("--sliding-window", s.sliding_window, "Sliding-window length written to the metadata (0: none)");
    cmd->add_option("--type", o->type, "Weight type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, Q1_0, Q2_0, TQ1_0, TQ2_0, NVFP4 (the 256-element types (TQ1_0, TQ2_0 too) need --dim and --ffn multiples of 256, Q1_0 of 128, Q2_0 and NVFP4 of 64)")->capture_default_str();
    cmd->add_option("--dense-type", o->dense_type,
                    "A mixture of experts' other matrices (attention, embeddings, head) in this type, the experts in "
                    "--type (gpt-oss's files: --type MXFP4 --dense-type Q8_0)");
    cmd->add_flag("--zero-weights", s.zero_weights,
                  "Every weight zero, written as holes of a sparse file (no disk space, no time): a model of the real "
                  "shape for `tessera plan` and memory planning, e.g. gpt-oss-120b; it computes nothing meaningful");
    cmd->add_option("--seed", s.seed, "Random seed (same arguments, same bytes)")->capture_default_str();
    cmd->add_option("-o,--output", o->output, "Output GGUF file")->required();
    cmd->add_flag("-q,--quiet", o->quiet, "No progress output");
    cmd->callback([o, cmd] {
        o->given_rope_base = cmd->count("--rope-base") > 0;
        o->given_window = cmd->count("--sliding-window") > 0;
        o->given_head_dim = cmd->count("--head-dim") > 0;
        gen_model(*o);
    });
}

}  // namespace tessera
