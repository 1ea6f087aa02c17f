// Text <-> token ids, from a GGUF vocabulary. Two algorithms, chosen by
// tokenizer.ggml.model: SentencePiece-style BPE by scores with byte fallback
// ("llama") and GPT-2 byte-level BPE by merge rank ("gpt2").
#pragma once

#include "model/vocab.h"
#include "util/text_spans.h"

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
    // the vocabulary asks for one (tokenizer.ggml.add_bos_token).
    // User-defined tokens written in the text (MPT's runs of spaces, Qwen 3's
    // <think>) always become their token, as llama.cpp and Hugging Face do;
    // control tokens ("<s>", "<|im_end|>") only with parse_special (a chat
    // template's output), else they are plain text. Longer ones are cut out
    // first; the text between them goes through the algorithm.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special = false) const;
    // The same with parse_special, except that a control token never comes
    // from a byte inside `plain` (a message's content in a rendered chat
    // prompt): only what the template wrote can be one.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, const TextSpans& plain) const;

    // The raw bytes of one token as it appears in text ("▁the" -> " the",
    // "<0x0A>" -> "\n", GPT-2's byte symbols back to bytes). Control tokens
    // (BOS, EOS) give an empty string. Ids out of range throw an Error.
    virtual std::string token_to_piece(int32_t id) const = 0;

    const Vocab& vocab() const { return vocab_; }

protected:
    explicit Tokenizer(Vocab vocab);
    // Appends the ids of a run of plain text. after_special: it starts the
    // text or follows a special token (SentencePiece then adds its dummy-prefix
    // space, as llama.cpp does).
    virtual void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& ids) const = 0;
    Vocab vocab_;

private:
    std::vector<int32_t> encode_parts(std::string_view text, bool add_bos, bool parse_special, const TextSpans* plain) const;
    std::vector<int32_t> specials_;  // user-defined and control tokens, longest first
};

std::unique_ptr<Tokenizer> make_tokenizer(Vocab vocab);

// Turns a stream of token ids into text that is always valid UTF-8 at every
// step: bytes of a character split over several tokens are held back until
// the character is complete. SentencePiece's dummy-prefix space is dropped
// from the first piece of a text that starts at the beginning.
class StreamDecoder {
public:
    // at_text_start: true when no text precedes the stream (e.g. after a bare BOS).
    // special: control tokens give their text (<|channel|>) instead of
    // nothing, for output formats that are read by their control tokens.
    StreamDecoder(const Tokenizer& tokenizer, bool at_text_start, bool special = false);

    // Returns the text that became complete with this token (possibly empty).
    std::string push(int32_t id);
    // Returns whatever is held back (invalid bytes as U+FFFD) and resets.
    std::string flush();

private:
    const Tokenizer& tokenizer_;
    bool strip_leading_space_;
    bool special_;
    std::string pending_;
};

// Decodes a whole sequence (a StreamDecoder pushed and flushed).
std::string decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool at_text_start);

}  // namespace tessera
