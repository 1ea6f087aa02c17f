// SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"), the one
// llama.cpp calls SPM: greedy merging of adjacent pieces by vocabulary score,
// with byte-token fallback for characters the vocabulary lacks.
#pragma once

#include "model/tokenizer.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class SpmTokenizer final : public Tokenizer {
public:
    explicit SpmTokenizer(Vocab vocab);

    std::string token_to_piece(int32_t id) const override;

private:
    void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& ids) const override;
    // The id a merge may produce for `text`, or -1. Control, byte and unknown
    // tokens are never produced by merging, so "<s>" or "<0x41>" written in
    // the text stays plain text, as SentencePiece itself does.
    int32_t mergeable_id(const std::string& text) const;
    float score(int32_t id) const;

    std::array<int32_t, 256> byte_ids_;  // the "<0xXX>" token of each byte, or unk (-1 if none)
};

}  // namespace tessera
