#include "model/tokenizer_bpe.h"

#include "model/pair_merge.h"

#include "util/error.h"
#include "util/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <queue>

namespace tessera {

namespace {

// Pre-tokenizer regexes, as published with each model family's tokenizer.
// A family may split with several in turn (llama.cpp's regex lists): each
// cuts every piece the previous ones left into its matches and the text
// between them, and no piece ever spans two earlier pieces.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// OpenAI's o200k (GPT-4o, gpt-oss): letters split at case changes, and
// contractions kept with their word.
constexpr const char* kGpt4oPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2's without the final \s+ (the text between matches is a piece anyway).
constexpr const char* kGpt2Words = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// DeepSeek LLM's letters: the Latin, Greek, Cyrillic, Armenian, Georgian,
// Cherokee ... ranges of its tokenizer.json, as llama.cpp lists them.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    "\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    "\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe"
    "\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
    "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    "\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06"
    "\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}"
    "\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}]+";
constexpr const char* kCjkHangul = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";

struct PreTokenizer {
    std::string_view name;  // tokenizer.ggml.pre
    std::vector<const char*> patterns;
    bool ignore_merges;
};

const std::vector<PreTokenizer>& pre_tokenizers() {
    static const std::vector<PreTokenizer> all = {
        {"", {kGpt2Pattern}, false},
        {"default", {kGpt2Pattern}, false},
        {"gpt2", {kGpt2Pattern}, false},
        {"gpt-2", {kGpt2Pattern}, false},
        {"phi-2", {kGpt2Pattern}, false},
        {"roberta-bpe", {kGpt2Pattern}, false},
        {"mpt", {kGpt2Words}, false},
        {"olmo", {kGpt2Words}, false},
        {"llama3", {kLlama3Pattern}, true},
        {"llama-v3", {kLlama3Pattern}, true},
        {"llama-bpe", {kLlama3Pattern}, true},
        {"qwen2", {kQwen2Pattern}, false},
        // ignore_merges as gpt-oss's tokenizer.json sets it (for a vocabulary
        // derived from its merges, a whole-word hit equals the merged result).
        {"gpt-4o", {kGpt4oPattern}, true},
        {"deepseek-r1-qwen", {kQwen2Pattern}, false},
        {"starcoder", {"\\p{N}", kGpt2Words}, false},
        {"refact", {"\\p{N}", kGpt2Words}, false},
        {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Words, "[0-9][0-9][0-9]"}, false},
        {"deepseek-llm",
         {"[\\r\\n]", kDeepseekLetters, "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
          "\\s+$", kCjkHangul, "\\p{N}+"},
         false},
        {"deepseek-coder", {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkHangul, "\\p{N}"}, false},
    };
    return all;
}

const PreTokenizer& find_pre_tokenizer(const std::string& name) {
    for (const PreTokenizer& p : pre_tokenizers()) {
        if (p.name == name) return p;
    }
    std::string known;
    for (const PreTokenizer& p : pre_tokenizers()) {
        if (!p.name.empty()) known += (known.empty() ? "" : ", ") + std::string(p.name);
    }
    throw make_error("BPE pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported; supported: {}", name, known);
}

}  // namespace

const char* bpe_pre_tokenizer_of_regex(std::string_view regex) {
    // The names llama.cpp's converter writes for these regexes.
    for (const char* name : {"llama-bpe", "qwen2", "gpt-4o"}) {
        const PreTokenizer& pre = find_pre_tokenizer(name);
        if (pre.patterns.size() == 1 && regex == pre.patterns[0]) return name;
    }
    return nullptr;
}

namespace {

// The code point of a well-formed 2- or 3-byte UTF-8 character, or -1: only
// those can be GPT-2 byte symbols (all below U+0144).
int32_t small_code_point(std::string_view c) {
    const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(c[i])); };
    if (c.size() == 1 && b(0) < 0x80) return static_cast<int32_t>(b(0));
    if (c.size() == 2 && (b(0) & 0xE0) == 0xC0 && (b(1) & 0xC0) == 0x80) {
        return static_cast<int32_t>(((b(0) & 0x1F) << 6) | (b(1) & 0x3F));
    }
    return -1;
}

std::string merge_key(std::string_view left, std::string_view right) {
    // The length prefix keeps ("a b", "c") and ("a", "b c") apart.
    std::string key = std::to_string(left.size());
    key += ':';
    key += left;
    key += right;
    return key;
}

struct MatchDataFree {
    void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return fmt::format("PCRE2 error {}", code);
    return reinterpret_cast<const char*>(buffer);
}

}  // namespace

BpeTokenizer::BpeTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
    // GPT-2's bytes_to_unicode: bytes that are printable Latin-1 stand for
    // themselves; the rest take code points 256, 257, ... in byte order, so
    // every byte string becomes printable text without spaces.
    uint32_t next_free = 256;
    symbol_byte_.assign(256 + 256, -1);
    for (uint32_t b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        const uint32_t cp = printable ? b : next_free++;
        append_utf8(byte_symbol_[b], cp);
        symbol_byte_[cp] = static_cast<int16_t>(b);
    }

    merge_ranks_.reserve(vocab_.merges.size());
    for (size_t i = 0; i < vocab_.merges.size(); ++i) {
        // A repeated merge keeps its first (best) rank.
        merge_ranks_.emplace(merge_key(vocab_.merges[i].first, vocab_.merges[i].second), static_cast<int32_t>(i));
    }

    const PreTokenizer& pre = find_pre_tokenizer(vocab_.pre);
    ignore_merges_ = pre.ignore_merges;
    for (const char* pattern : pre.patterns) {
        int error = 0;
        PCRE2_SIZE error_offset = 0;
        // MATCH_INVALID_UTF: invalid UTF-8 in the text is skipped over by the
        // matcher instead of failing the whole match; encode() keeps those bytes.
        pcre2_code* regex = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &error_offset, nullptr);
        if (regex == nullptr) {
            for (pcre2_code* r : regexes_) pcre2_code_free(r);
            throw make_error("pre-tokenizer regex for '{}' does not compile at offset {}: {}", vocab_.pre, error_offset,
                             pcre2_message(error));
        }
        // JIT is only a speed-up; the interpreter gives the same matches.
        pcre2_jit_compile(regex, PCRE2_JIT_COMPLETE);
        regexes_.push_back(regex);
    }
}

BpeTokenizer::~BpeTokenizer() {
    for (pcre2_code* r : regexes_) pcre2_code_free(r);
}

void BpeTokenizer::split(std::string_view text, size_t regex, std::vector<std::string_view>& pieces) const {
    if (regex == regexes_.size()) {
        pieces.push_back(text);
        return;
    }
    pcre2_code* re = regexes_[regex];
    const std::unique_ptr<pcre2_match_data, MatchDataFree> match(pcre2_match_data_create_from_pattern(re, nullptr));
    if (!match) throw make_error("out of memory creating PCRE2 match data");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t at = 0;
    // The text between matches is a piece too (invalid UTF-8 the matcher
    // skipped included: byte-level BPE still encodes it, so nothing is lost).
    const auto piece = [&](size_t begin, size_t end) {
        if (end > begin) split(text.substr(begin, end - begin), regex + 1, pieces);
    };
    while (at < text.size()) {
        const int rc = pcre2_match(re, subject, text.size(), at, 0, match.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) throw make_error("pre-tokenizing {} bytes of text failed: {}", text.size(), pcre2_message(rc));
        const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
        piece(at, span[0]);
        if (span[1] <= span[0]) {  // an empty match (\s+$ at the end): nothing to cut here
            piece(span[0], std::min(text.size(), span[0] + 1));
            at = span[0] + 1;
            continue;
        }
        piece(span[0], span[1]);
        at = span[1];
    }
    piece(at, text.size());
}

int32_t BpeTokenizer::merge_rank(std::string_view left, std::string_view right) const {
    const auto it = merge_ranks_.find(merge_key(left, right));
    return it == merge_ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_text(std::string_view text, bool, std::vector<int32_t>& ids) const {
    // Symbols are indexed by int; a byte's symbol takes up to 2 bytes.
    if (text.size() > INT_MAX / 2) throw make_error("cannot tokenize {} bytes of text at once", text.size());
    std::vector<std::string_view> pieces;
    split(text, 0, pieces);
    for (const std::string_view piece : pieces) encode_word(piece, ids);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
    if (word.empty()) return;
    std::string mapped;
    mapped.reserve(word.size() * 2);
    for (const char c : word) mapped += byte_symbol_[static_cast<uint8_t>(c)];

    if (ignore_merges_) {
        const auto it = vocab_.token_to_id.find(mapped);
        if (it != vocab_.token_to_id.end()) {
            ids.push_back(it->second);
            return;
        }
    }

    const auto priority = [this](std::string_view left, std::string_view right) -> std::optional<double> {
        const int32_t rank = merge_rank(left, right);
        if (rank < 0) return std::nullopt;
        return -static_cast<double>(rank);  // lower rank merges first
    };
    for (const std::string_view p : merge_pairs(std::string_view(mapped), utf8_char_bytes, priority)) {
        const auto it = vocab_.token_to_id.find(std::string(p));
        if (it != vocab_.token_to_id.end()) {
            ids.push_back(it->second);
            continue;
        }
        // A symbol the merges built but the vocabulary lacks (a broken
        // vocabulary): fall back to its characters, or <unk>.
        for (size_t at = 0; at < p.size();) {
            const size_t n = utf8_char_bytes(p, at);
            const auto one = vocab_.token_to_id.find(std::string(p.substr(at, n)));
            if (one != vocab_.token_to_id.end()) {
                ids.push_back(one->second);
            } else if (vocab_.unk_id >= 0) {
                ids.push_back(vocab_.unk_id);
            }
            at += n;
        }
    }
}

std::string BpeTokenizer::token_to_piece(int32_t id) const {
    if (!vocab_.is_valid(id)) {
        throw make_error("token id {} is out of range: the vocabulary has {} tokens", id, vocab_.size());
    }
    const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
    switch (vocab_.types[static_cast<size_t>(id)]) {
        case TokenType::Control:
        case TokenType::Unused:
            return {};
        case TokenType::UserDefined:
        case TokenType::Unknown:
            return text;  // added tokens are stored as plain text, not byte symbols
        default:
            break;
    }
    std::string out;
    out.reserve(text.size());
    for (size_t at = 0; at < text.size();) {
        const size_t n = utf8_char_bytes(text, at);
        const std::string_view c = std::string_view(text).substr(at, n);
        const int32_t cp = small_code_point(c);
        if (cp >= 0 && static_cast<size_t>(cp) < symbol_byte_.size() && symbol_byte_[static_cast<size_t>(cp)] >= 0) {
            out += static_cast<char>(symbol_byte_[static_cast<size_t>(cp)]);
        } else {
            out += c;  // not a byte symbol: keep the character as it is
        }
        at += n;
    }
    return out;
}

}  // namespace tessera
