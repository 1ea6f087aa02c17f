#include "model/tokenizer_spm.h"

#include "model/pair_merge.h"

#include "util/error.h"
#include "util/utf8.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <functional>
#include <queue>
#include <unordered_map>

namespace tessera {

namespace {

// U+2581 LOWER ONE EIGHTH BLOCK: SentencePiece's stand-in for a space.
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(text.size());
    size_t at = 0;
    while (true) {
        const size_t hit = text.find(from, at);
        if (hit == std::string_view::npos) break;
        out.append(text.substr(at, hit - at));
        out.append(to);
        at = hit + from.size();
    }
    out.append(text.substr(at));
    return out;
}

// One call's merging state: the symbols, the queue and, for each merged
// text, where it was split, so a piece can be taken apart again.
class SpmMerger {
public:
    SpmMerger(const std::string& text, std::function<int32_t(const std::string&)> id_of,
              std::function<float(int32_t)> score_of)
        : text_(text), id_of_(std::move(id_of)), score_of_(std::move(score_of)) {}

    // Splits into characters and merges until no adjacent pair is a token.
    // Returns the final pieces, left to right.
    std::vector<std::string_view> run() {
        const auto priority = [this](std::string_view left, std::string_view right) -> std::optional<double> {
            std::string merged(left);
            merged += right;
            const int32_t id = id_of_(merged);
            if (id < 0) return std::nullopt;
            split_[std::move(merged)] = left.size();
            return score_of_(id);
        };
        return merge_pairs(text_, utf8_char_bytes, priority);
    }

    // Where `piece` was split when it was merged, or 0 if it never was.
    size_t split_of(std::string_view piece) const {
        const auto it = split_.find(std::string(piece));
        return it == split_.end() ? 0 : it->second;
    }

private:
    const std::string& text_;
    std::function<int32_t(const std::string&)> id_of_;
    std::function<float(int32_t)> score_of_;
    std::unordered_map<std::string, size_t> split_;
};

}  // namespace

SpmTokenizer::SpmTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {
    for (int b = 0; b < 256; ++b) {
        const auto it = vocab_.token_to_id.find(fmt::format("<0x{:02X}>", b));
        byte_ids_[static_cast<size_t>(b)] = it != vocab_.token_to_id.end() ? it->second : vocab_.unk_id;
    }
}

int32_t SpmTokenizer::mergeable_id(const std::string& text) const {
    const auto it = vocab_.token_to_id.find(text);
    if (it == vocab_.token_to_id.end()) return -1;
    switch (vocab_.types[static_cast<size_t>(it->second)]) {
        case TokenType::Control:
        case TokenType::Byte:
        case TokenType::Unknown:
            return -1;
        default:
            return it->second;
    }
}

float SpmTokenizer::score(int32_t id) const {
    return vocab_.scores.empty() ? 0.0f : vocab_.scores[static_cast<size_t>(id)];
}

void SpmTokenizer::encode_text(std::string_view text, bool after_special, std::vector<int32_t>& ids) const {
    // An empty text gives no tokens at all, not a lone dummy-prefix space.
    if (text.empty()) return;
    // Symbols are indexed by int; every byte may become "▁" (3 bytes).
    if (text.size() > INT_MAX / 4) throw make_error("cannot tokenize {} bytes of text at once", text.size());

    std::string prefixed;
    prefixed.reserve(text.size() + 1);
    if (vocab_.add_space_prefix && after_special) prefixed += ' ';
    prefixed += text;
    const std::string escaped = replace_all(prefixed, " ", kSpaceMark);

    SpmMerger merger(escaped, [this](const std::string& s) { return mergeable_id(s); },
                     [this](int32_t id) { return score(id); });

    // A piece that is no token is taken apart along the merges that built it;
    // what is left over becomes byte tokens. (Merges only ever build tokens,
    // so in practice only unmerged characters reach the byte fallback.)
    const std::function<void(std::string_view)> emit = [&](std::string_view piece) {
        const int32_t id = mergeable_id(std::string(piece));
        if (id >= 0) {
            ids.push_back(id);
            return;
        }
        const size_t split = merger.split_of(piece);
        if (split > 0 && split < piece.size()) {
            emit(piece.substr(0, split));
            emit(piece.substr(split));
            return;
        }
        for (const char c : piece) {
            const int32_t byte_id = byte_ids_[static_cast<uint8_t>(c)];
            if (byte_id >= 0) ids.push_back(byte_id);  // no byte token and no <unk>: the byte is lost
        }
    };
    for (const std::string_view piece : merger.run()) emit(piece);
}

std::string SpmTokenizer::token_to_piece(int32_t id) const {
    if (!vocab_.is_valid(id)) {
        throw make_error("token id {} is out of range: the vocabulary has {} tokens", id, vocab_.size());
    }
    const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
    switch (vocab_.types[static_cast<size_t>(id)]) {
        case TokenType::Control:
        case TokenType::Unused:
            return {};
        case TokenType::Byte: {
            // "<0xXX>" stands for the single raw byte XX.
            unsigned value = 0;
            if (text.size() == 6 && text.starts_with("<0x") && text.ends_with(">")) {
                const auto [end, ec] = std::from_chars(text.data() + 3, text.data() + 5, value, 16);
                if (ec == std::errc() && end == text.data() + 5) return std::string(1, static_cast<char>(value));
            }
            break;  // a malformed byte token reads as its text
        }
        default:
            break;
    }
    return replace_all(text, kSpaceMark, " ");
}

}  // namespace tessera
