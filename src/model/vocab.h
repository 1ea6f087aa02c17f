// The vocabulary a GGUF file carries in its tokenizer.ggml.* metadata:
// token strings, scores, types, BPE merges and the special ids. Tokenizers
// (tokenizer.h) are built from this; nothing here encodes or decodes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera {

class GgufFile;

// tokenizer.ggml.token_type values, as llama.cpp writes them.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

enum class VocabKind {
    Spm,  // tokenizer.ggml.model = "llama": SentencePiece BPE with scores and byte fallback
    Bpe,  // tokenizer.ggml.model = "gpt2": byte-level BPE with merges
};

struct Vocab {
    VocabKind kind = VocabKind::Spm;
    std::string pre;  // tokenizer.ggml.pre (BPE pre-tokenizer name), may be empty
    std::vector<std::string> tokens;
    std::vector<float> scores;     // empty if the file has none
    std::vector<TokenType> types;  // Normal for every token if the file has none
    std::vector<std::pair<std::string, std::string>> merges;  // BPE only, in rank order
    std::unordered_map<std::string, int32_t> token_to_id;
    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t unk_id = -1;
    int32_t pad_id = -1;
    // Tokens that end a generation: EOS, EOT/EOM and the chat formats'
    // end-of-turn control tokens (<|eot_id|>, <|im_end|>, <end_of_turn>, ...).
    std::vector<int32_t> eog_ids;
    bool add_bos = true;
    bool add_eos = false;
    bool add_space_prefix = true;  // SentencePiece's dummy prefix

    int32_t size() const { return static_cast<int32_t>(tokens.size()); }
    bool is_valid(int32_t id) const { return id >= 0 && id < size(); }
    bool is_eog(int32_t id) const {
        for (const int32_t e : eog_ids) {
            if (e == id) return true;
        }
        return false;
    }
};

// Reads the vocabulary from a GGUF file's metadata. Throws an Error naming the
// file and key if it is missing, inconsistent (arrays of different lengths,
// special ids out of range) or of an unsupported tokenizer model.
Vocab load_vocab(const GgufFile& file);

}  // namespace tessera
