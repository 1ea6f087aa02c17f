// Text <-> token ids, from a GGUF vocabulary. Two algorithms, chosen by
// tokenizer.ggml.model: SentencePiece-style BPE by scores with byte fallback
// ("llama") and GPT-2 byte-level BPE by merge rank ("gpt2").
#pragma once

#include "model/vocab.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    // Encodes `text`. With add_bos, the vocabulary's BOS id is prepended when
    // the vocabulary asks for one (tokenizer.ggml.add_bos_token). Special
    // tokens written in the text (e.g. "<s>") are plain text, not parsed.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

    // The raw bytes of one token as it appears in text ("▁the" -> " the",
    // "<0x0A>" -> "\n", GPT-2's byte symbols back to bytes). Control tokens
    // (BOS, EOS) give an empty string. Ids out of range throw an Error.
    virtual std::string token_to_piece(int32_t id) const = 0;

    const Vocab& vocab() const { return vocab_; }

protected:
    explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
    Vocab vocab_;
};

std::unique_ptr<Tokenizer> make_tokenizer(Vocab vocab);

// Turns a stream of token ids into text that is always valid UTF-8 at every
// step: bytes of a character split over several tokens are held back until
// the character is complete. SentencePiece's dummy-prefix space is dropped
// from the first piece of a text that starts at the beginning.
class StreamDecoder {
public:
    // at_text_start: true when no text precedes the stream (e.g. after a bare BOS).
    StreamDecoder(const Tokenizer& tokenizer, bool at_text_start);

    // Returns the text that became complete with this token (possibly empty).
    std::string push(int32_t id);
    // Returns whatever is held back (invalid bytes as U+FFFD) and resets.
    std::string flush();

private:
    const Tokenizer& tokenizer_;
    bool strip_leading_space_;
    std::string pending_;
};

// Decodes a whole sequence (a StreamDecoder pushed and flushed).
std::string decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool at_text_start);

}  // namespace tessera
