// GPT-2 byte-level BPE (tokenizer.ggml.model = "gpt2"): the text is cut into
// words by a pre-tokenizer regex (chosen by tokenizer.ggml.pre), each word's
// bytes become printable symbols through GPT-2's byte table, and adjacent
// symbols are merged by merge rank.
#pragma once

#include "model/tokenizer.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

// pcre2.h's types, without pulling the header (and its code-unit macro) into
// every includer.
struct pcre2_real_code_8;

namespace tessera {

// The tokenizer.ggml.pre name (as llama.cpp's converter writes it) of a
// Hugging Face pre-tokenizer's single Split regex, or nullptr when no family
// this build knows splits with exactly that regex.
const char* bpe_pre_tokenizer_of_regex(std::string_view regex);

class BpeTokenizer final : public Tokenizer {
public:
    // Throws an Error if vocab.pre names a pre-tokenizer this build lacks.
    explicit BpeTokenizer(Vocab vocab);
    ~BpeTokenizer() override;
    BpeTokenizer(const BpeTokenizer&) = delete;
    BpeTokenizer& operator=(const BpeTokenizer&) = delete;

    std::string token_to_piece(int32_t id) const override;

private:
    void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& ids) const override;
    // Appends to `pieces` the pieces of `text` that regexes[regex..] cut it into.
    void split(std::string_view text, size_t regex, std::vector<std::string_view>& pieces) const;
    // Appends the ids of one pre-tokenized word (raw bytes).
    void encode_word(std::string_view word, std::vector<int32_t>& ids) const;
    // The rank of merging `left` and `right`, or -1 if they never merge.
    int32_t merge_rank(std::string_view left, std::string_view right) const;

    // Compiled once, applied in order; matching is thread-safe with per-call match data.
    std::vector<pcre2_real_code_8*> regexes_;
    // Llama-3-style vocabularies take a whole word as one token when it is
    // one, before trying merges (HF's ignore_merges).
    bool ignore_merges_ = false;
    std::array<std::string, 256> byte_symbol_;  // GPT-2 bytes_to_unicode, as UTF-8
    std::vector<int16_t> symbol_byte_;          // code point -> byte, -1 where none
    std::unordered_map<std::string, int32_t> merge_ranks_;  // key: merge_key(left, right)
};

}  // namespace tessera
