// tessera tokenize: print the token ids of a text.
#include "apps/commands.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"
#include "model/vocab.h"

#include <cstdio>
#include <memory>

namespace tessera {

namespace {

struct TokenizeOptions {
    std::string model;
    std::string prompt;
    bool no_bos = false;
    bool pieces = false;
    bool parse_special = false;
};

void tokenize(const TokenizeOptions& o) {
    const GgufFile file(o.model.empty() ? default_model_path() : o.model);
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(file));
    const std::vector<int32_t> ids = tokenizer->encode(o.prompt, !o.no_bos, o.parse_special);
    if (o.pieces) {
        for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, tokenizer->token_to_piece(id).c_str());
        return;
    }
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i == 0 ? "%d" : " %d", ids[i]);
    std::printf("\n");
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
    auto o = std::make_shared<TokenizeOptions>();
    CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
    cmd->add_option("-m,--model", o->model, "GGUF file holding the vocabulary (default: the bundled model)");
    cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize")->required();
    cmd->add_flag("--no-bos", o->no_bos, "Do not prepend the BOS token");
    cmd->add_flag("--pieces", o->pieces, "Print one 'id -> piece' line per token");
    cmd->add_flag("--parse-special", o->parse_special,
                  "Control tokens written in the text (<s>, <|im_end|>) become their ids, as in a chat prompt");
    cmd->callback([o] { tokenize(*o); });
}

}  // namespace tessera
