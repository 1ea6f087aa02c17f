#include "model/vocab.h"

#include "model/gguf_file.h"
#include "util/error.h"

#include <algorithm>

namespace tessera {

namespace {

int32_t read_special_id(const GgufFile& file, const std::string& key, int32_t n_vocab, int32_t fallback) {
    const auto v = file.find_int(key);
    if (!v) return fallback;
    // llama.cpp writes "none" as -1 or as 0xffffffff in a uint32.
    if (*v == -1 || *v == 0xffffffffLL) return -1;
    if (*v < 0 || *v >= n_vocab) {
        throw make_error("{}: metadata '{}' is token {} but the vocabulary has {} tokens", file.path(), key, *v, n_vocab);
    }
    return static_cast<int32_t>(*v);
}

}  // namespace

Vocab load_vocab(const GgufFile& file) {
    Vocab vocab;
    const std::string model = file.get_string("tokenizer.ggml.model");
    if (model == "llama") {
        vocab.kind = VocabKind::Spm;
    } else if (model == "gpt2") {
        vocab.kind = VocabKind::Bpe;
        vocab.add_space_prefix = false;
        vocab.add_bos = false;
    } else {
        throw make_error("{}: tokenizer model '{}' is not supported (supported: llama, gpt2)", file.path(), model);
    }
    vocab.pre = file.find_string("tokenizer.ggml.pre").value_or("");
    // llama.cpp prepends BOS for Llama 3's pre-tokenizer unless the file says otherwise.
    if (vocab.kind == VocabKind::Bpe && (vocab.pre == "llama3" || vocab.pre == "llama-v3" || vocab.pre == "llama-bpe")) {
        vocab.add_bos = true;
    }

    const GgufValue* tokens = file.find_array("tokenizer.ggml.tokens", GgufValueType::String);
    if (tokens == nullptr || tokens->count == 0) {
        throw make_error("{}: metadata 'tokenizer.ggml.tokens' is missing or empty", file.path());
    }
    if (tokens->count > static_cast<uint64_t>(INT32_MAX)) {
        throw make_error("{}: vocabulary of {} tokens is too large", file.path(), tokens->count);
    }
    const auto n_vocab = static_cast<int32_t>(tokens->count);
    vocab.tokens.reserve(tokens->count);
    vocab.token_to_id.reserve(tokens->count);
    for (int32_t id = 0; id < n_vocab; ++id) {
        vocab.tokens.emplace_back(tokens->strings[static_cast<size_t>(id)]);
        // The first occurrence wins, as in llama.cpp, if a (broken) vocab repeats a string.
        vocab.token_to_id.emplace(vocab.tokens.back(), id);
    }

    if (const GgufValue* scores = file.find_array("tokenizer.ggml.scores", GgufValueType::Float32)) {
        if (scores->count != tokens->count) {
            throw make_error("{}: {} scores for {} tokens", file.path(), scores->count, tokens->count);
        }
        vocab.scores.resize(tokens->count);
        for (uint64_t i = 0; i < scores->count; ++i) vocab.scores[i] = static_cast<float>(scores->array_number(i));
    }

    vocab.types.assign(tokens->count, TokenType::Normal);
    if (const GgufValue* types = file.find_array("tokenizer.ggml.token_type", GgufValueType::Int32)) {
        if (types->count != tokens->count) {
            throw make_error("{}: {} token types for {} tokens", file.path(), types->count, tokens->count);
        }
        for (uint64_t i = 0; i < types->count; ++i) {
            const int64_t t = types->array_integer(i);
            vocab.types[i] = (t >= 0 && t <= 6) ? static_cast<TokenType>(t) : TokenType::Undefined;
        }
    }

    if (vocab.kind == VocabKind::Bpe) {
        const GgufValue* merges = file.find_array("tokenizer.ggml.merges", GgufValueType::String);
        if (merges == nullptr) throw make_error("{}: gpt2 tokenizer without 'tokenizer.ggml.merges'", file.path());
        vocab.merges.reserve(merges->count);
        for (uint64_t i = 0; i < merges->count; ++i) {
            const std::string_view m = merges->strings[i];
            // A merge is "left right"; the split is at the first space after
            // the first byte (a left part can itself start with a space byte).
            const size_t space = m.find(' ', 1);
            if (space == std::string_view::npos) {
                throw make_error("{}: BPE merge {} ('{}') has no space", file.path(), i, std::string(m));
            }
            vocab.merges.emplace_back(std::string(m.substr(0, space)), std::string(m.substr(space + 1)));
        }
    }

    const bool spm = vocab.kind == VocabKind::Spm;
    vocab.bos_id = read_special_id(file, "tokenizer.ggml.bos_token_id", n_vocab, spm && n_vocab > 1 ? 1 : -1);
    vocab.eos_id = read_special_id(file, "tokenizer.ggml.eos_token_id", n_vocab, spm && n_vocab > 2 ? 2 : -1);
    vocab.unk_id = read_special_id(file, "tokenizer.ggml.unknown_token_id", n_vocab, spm ? 0 : -1);
    vocab.pad_id = read_special_id(file, "tokenizer.ggml.padding_token_id", n_vocab, -1);
    vocab.add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(vocab.add_bos);
    vocab.add_eos = file.find_bool("tokenizer.ggml.add_eos_token").value_or(vocab.add_eos);
    vocab.add_space_prefix = file.find_bool("tokenizer.ggml.add_space_prefix").value_or(vocab.add_space_prefix);
    if (vocab.add_bos && vocab.bos_id < 0) vocab.add_bos = false;

    // End-of-generation tokens: EOS, the end-of-turn / end-of-message ids the
    // file names, and control tokens that end a turn in the chat formats of
    // the families we run (llama.cpp recognizes the same texts).
    static const char* const kEndOfTurn[] = {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
                                             "<|endoftext|>", "<|end_of_text|>", "<EOT>",
                                             "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>"};  // the last: DeepSeek's
    const auto add_eog = [&](int32_t id) {
        if (id >= 0 && std::find(vocab.eog_ids.begin(), vocab.eog_ids.end(), id) == vocab.eog_ids.end()) {
            vocab.eog_ids.push_back(id);
        }
    };
    add_eog(vocab.eos_id);
    add_eog(read_special_id(file, "tokenizer.ggml.eot_token_id", n_vocab, -1));
    add_eog(read_special_id(file, "tokenizer.ggml.eom_token_id", n_vocab, -1));
    const auto control_id = [&](const char* text) {
        const auto it = vocab.token_to_id.find(text);
        return it != vocab.token_to_id.end() && vocab.types[static_cast<size_t>(it->second)] == TokenType::Control
                   ? it->second
                   : -1;
    };
    // Harmony (gpt-oss) ends a turn at <|return|> or at a tool's <|call|>; its
    // <|end|> only closes one message (the analysis before the final answer).
    const int32_t harmony_return = control_id("<|return|>"), harmony_call = control_id("<|call|>");
    const bool harmony = harmony_return >= 0 && harmony_call >= 0;
    add_eog(harmony_return);
    add_eog(harmony_call);
    for (const char* text : kEndOfTurn) {
        if (harmony && std::string_view(text) == "<|end|>") continue;
        add_eog(control_id(text));
    }
    return vocab;
}

}  // namespace tessera
