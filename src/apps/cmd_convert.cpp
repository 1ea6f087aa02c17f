// tessera convert: llama2.c checkpoint + tokenizer.bin -> GGUF.
#include "apps/commands.h"
#include "model/llama2c_import.h"
#include "util/progress.h"

#include <cstdio>
#include <memory>

namespace tessera {

namespace {

struct ConvertOptions {
    Llama2cImportOptions import;
    std::string output;
};

}  // namespace

void add_convert_command(CLI::App& app) {
    auto o = std::make_shared<ConvertOptions>();
    CLI::App* cmd = app.add_subcommand("convert", "Convert a llama2.c checkpoint (.bin) and its tokenizer.bin to GGUF");
    cmd->add_option("checkpoint", o->import.checkpoint, "llama2.c model .bin (legacy or version 1)")->required();
    cmd->add_option("tokenizer", o->import.tokenizer, "llama2.c tokenizer.bin")->required();
    cmd->add_option("-o,--output", o->output, "Output GGUF file")->required();
    cmd->add_option("--name", o->import.name, "general.name (default: the checkpoint's file name)");
    cmd->add_option("--rope-base", o->import.rope_freq_base, "RoPE frequency base")->capture_default_str();
    cmd->add_option("--rms-eps", o->import.rms_eps, "RMSNorm epsilon")->capture_default_str();
    cmd->callback([o] {
        std::unique_ptr<Progress> progress;
        import_llama2c(o->import, o->output, [&](size_t done, size_t total) {
            if (!progress) progress = std::make_unique<Progress>("writing " + o->output, static_cast<double>(total), "tensors");
            progress->update(static_cast<double>(done));
            if (done == total) progress->finish();
        });
        std::fprintf(stderr, "wrote %s\n", o->output.c_str());
    });
}

}  // namespace tessera
