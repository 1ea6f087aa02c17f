// A stranger's tokenizer.json (convert-tokenizer, convert-hf): any bytes
// parsed as one (depth-bounded, as the command reads it) and turned into a
// vocabulary, byte-level or SentencePiece-style; a zero byte, if any,
// starts the tokenizer_config.json. An Error is the only way out.
#include "model/hf_checkpoint.h"
#include "model/hf_tokenizer_import.h"
#include "util/error.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera;
    const std::string_view all(reinterpret_cast<const char*>(data), size);
    const size_t zero = all.find('\0');
    try {
        const nlohmann::json tokenizer = parse_checkpoint_json(all.substr(0, zero), "tokenizer.json");
        const nlohmann::json config =
            zero == std::string_view::npos ? nlohmann::json::object() : parse_checkpoint_json(all.substr(zero + 1), "config");
        (void)hf_vocabulary(tokenizer, config, "tokenizer.json", "tokenizer_config.json", "");
    } catch (const Error&) {
    }
    return 0;
}
