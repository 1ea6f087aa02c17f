// The tokenizers (SentencePiece and GPT-2 BPE, from real vocabularies; a BPE
// whose pre-tokenizer is a sequence of regexes (deepseek-coder); one with
// user-defined tokens cut out first (mpt)):
// encode arbitrary bytes, then decode arbitrary ids; the first byte picks
// the vocabulary.
#include "fuzz_common.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "util/error.h"

#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace {
std::unique_ptr<tessera::Tokenizer> load(const std::string& path) {
    return tessera::make_tokenizer(tessera::load_vocab(tessera::GgufFile(path)));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera;
    static const std::unique_ptr<Tokenizer> spm = load(fuzz::test_data() + "/vocab/ggml-vocab-llama-spm.gguf");
    static const std::unique_ptr<Tokenizer> bpe = load(fuzz::test_data() + "/vocab/ggml-vocab-gpt-2.gguf");
    static const std::unique_ptr<Tokenizer> deepseek = load(fuzz::test_data() + "/vocab/ggml-vocab-deepseek-coder.gguf");
    static const std::unique_ptr<Tokenizer> mpt = load(fuzz::test_data() + "/vocab/ggml-vocab-mpt.gguf");
    if (size < 1) return 0;
    const Tokenizer* const all[] = {spm.get(), bpe.get(), deepseek.get(), mpt.get()};
    const Tokenizer& t = *all[(data[0] & 1) | ((data[0] >> 1) & 2)];
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::vector<int32_t> ids = t.encode(text, (data[0] & 2) != 0);
    (void)decode(t, ids, true);
    std::vector<int32_t> raw;
    for (size_t i = 1; i + 4 <= size; i += 4) {
        int32_t id;
        std::memcpy(&id, data + i, 4);
        raw.push_back(id);
    }
    try {
        (void)decode(t, raw, false);
    } catch (const Error&) {
    }
    return 0;
}
