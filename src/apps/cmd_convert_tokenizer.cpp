// tessera convert-tokenizer: Hugging Face tokenizer.json (+ tokenizer_config.json)
// -> a vocabulary-only GGUF (model/hf_tokenizer_import.h).
#include "apps/commands.h"
#include "model/hf_tokenizer_import.h"

#include "util/error.h"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace tessera {

void add_convert_tokenizer_command(CLI::App& app) {
    struct Options {
        std::string tokenizer, config, chat_template, output;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "convert-tokenizer", "Write a Hugging Face tokenizer.json (and tokenizer_config.json) as a vocabulary GGUF");
    cmd->add_option("tokenizer", o->tokenizer,
                    "tokenizer.json (byte-level BPE: Llama 3, Qwen 2/2.5/3, gpt-oss; SentencePiece BPE: Llama 2, Mistral, Gemma), or a checkpoint's folder holding it "
                    "(its tokenizer_config.json and chat_template.jinja are read too)")
        ->required();
    cmd->add_option("config", o->config, "tokenizer_config.json: special tokens and the chat template");
    cmd->add_option("--chat-template", o->chat_template,
                    "A Jinja chat template file, in place of the config's (gpt-oss ships chat_template.jinja apart)");
    cmd->add_option("-o,--output", o->output, "Output GGUF (tokenizer metadata only; gen-model --vocab-from reads it)")
        ->required();
    cmd->callback([o] {
        if (std::filesystem::is_directory(o->tokenizer)) {
            if (!o->config.empty()) throw make_error("give either a checkpoint's folder or its files, not both");
            const HfTokenizerFiles files = hf_tokenizer_files(o->tokenizer);
            o->tokenizer = files.tokenizer;
            o->config = files.config;
            if (o->chat_template.empty()) o->chat_template = files.chat_template;
        }
        convert_hf_tokenizer(o->tokenizer, o->config, o->output, o->chat_template);
        std::fprintf(stderr, "wrote %s\n", o->output.c_str());
    });
}

}  // namespace tessera
