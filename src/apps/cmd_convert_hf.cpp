// tessera convert-hf: a Hugging Face checkpoint folder -> GGUF (model/hf_convert.h).
#include "apps/commands.h"
#include "model/hf_convert.h"
#include "util/error.h"
#include "util/progress.h"

#include <cstdio>
#include <memory>

namespace tessera {

namespace {

struct ConvertHfOptions {
    HfConvertOptions convert;
    std::string type = "f16";
};

}  // namespace

void add_convert_hf_command(CLI::App& app) {
    auto o = std::make_shared<ConvertHfOptions>();
    CLI::App* cmd = app.add_subcommand(
        "convert-hf", "Convert a Hugging Face checkpoint folder (config.json, *.safetensors, tokenizer.json) to GGUF, as "
                      "llama.cpp's convert_hf_to_gguf.py does (Llama, Mistral, Mixtral, Qwen 2, Qwen 3, Qwen3-MoE, Phi-3, "
                      "Gemma 2, Gemma 3, gpt-oss)");
    cmd->add_option("dir", o->convert.dir, "The checkpoint folder")->required();
    cmd->add_option("-o,--output", o->convert.output, "Output GGUF file")->required();
    cmd->add_option("--type", o->type,
                    "Type of the 2D weights: f32, f16, bf16, or a block type (q8_0, q4_0, ...; `tessera quantize` makes "
                    "the mixes); norms stay f32")
        ->capture_default_str();
    cmd->add_option("--name", o->convert.name, "general.name (default: the folder's name)");
    cmd->callback([o] {
        const std::optional<QuantType> type = parse_quant_type(o->type);
        if (!type) throw make_error("--type {}: not a type (f32, f16, bf16, q8_0, q4_0, ...)", o->type);
        o->convert.type = *type;
        std::unique_ptr<Progress> progress;
        convert_hf(o->convert, [&](size_t done, size_t total) {
            if (!progress) {
                progress = std::make_unique<Progress>("writing " + o->convert.output, static_cast<double>(total), "tensors");
            }
            progress->update(static_cast<double>(done));
            if (done == total) progress->finish();
        });
        std::fprintf(stderr, "wrote %s\n", o->convert.output.c_str());
    });
}

}  // namespace tessera
