// tessera convert-tokenizer: Hugging Face tokenizer.json (+ tokenizer_config.json)
// -> a vocabulary-only GGUF (model/hf_tokenizer_import.h).
#include "apps/commands.h"
#include "model/hf_tokenizer_import.h"

#include <cstdio>
#include <memory>

namespace tessera {

void add_convert_tokenizer_command(CLI::App& app) {
    struct Options {
        std::string tokenizer, config, output;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "convert-tokenizer", "Write a Hugging Face tokenizer.json (and tokenizer_config.json) as a vocabulary GGUF");
    cmd->add_option("tokenizer", o->tokenizer, "tokenizer.json (byte-level BPE: Llama 3, Qwen 2/2.5/3)")->required();
    cmd->add_option("config", o->config, "tokenizer_config.json: special tokens and the chat template");
    cmd->add_option("-o,--output", o->output, "Output GGUF (tokenizer metadata only; gen-model --vocab-from reads it)")
        ->required();
    cmd->callback([o] {
        convert_hf_tokenizer(o->tokenizer, o->config, o->output);
        std::fprintf(stderr, "wrote %s\n", o->output.c_str());
    });
}

}  // namespace tessera
