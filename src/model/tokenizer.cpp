#include "model/tokenizer.h"

#include "model/tokenizer_bpe.h"
#include "model/tokenizer_spm.h"
#include "util/error.h"
#include "util/utf8.h"

#include <algorithm>

namespace tessera {

namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Moves the valid prefix of `pending` to the result, ill-formed bytes as
// U+FFFD. An incomplete character at the end stays in `pending`, unless
// `final`, when it too becomes U+FFFD.
std::string take_complete(std::string& pending, bool final) {
    std::string out;
    out.reserve(pending.size());
    const std::string_view s = pending;
    size_t at = 0;
    while (at < s.size()) {
        const Utf8Step step = next_utf8(s.substr(at));
        if (step.kind == Utf8Step::Incomplete && !final) break;
        if (step.kind == Utf8Step::Complete) {
            out.append(s.substr(at, step.length));
        } else {
            out.append(kReplacementChar);
        }
        at += step.length;
    }
    pending.erase(0, at);
    return out;
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
    for (int32_t id = 0; id < vocab_.size(); ++id) {
        const TokenType type = vocab_.types[static_cast<size_t>(id)];
        if ((type == TokenType::UserDefined || type == TokenType::Control) && !vocab_.tokens[static_cast<size_t>(id)].empty()) {
            specials_.push_back(id);
        }
    }
    std::stable_sort(specials_.begin(), specials_.end(), [&](int32_t a, int32_t b) {
        return vocab_.tokens[static_cast<size_t>(a)].size() > vocab_.tokens[static_cast<size_t>(b)].size();
    });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
    return encode_parts(text, add_bos, parse_special, nullptr);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos, const TextSpans& plain) const {
    return encode_parts(text, add_bos, true, &plain);
}

std::vector<int32_t> Tokenizer::encode_parts(std::string_view text, bool add_bos, bool parse_special,
                                             const TextSpans* plain) const {
    std::vector<int32_t> ids;
    if (add_bos && vocab_.add_bos) ids.push_back(vocab_.bos_id);
    struct Fragment {
        std::string_view text;
        int32_t token;  // -1: plain text
    };
    std::vector<Fragment> fragments = {{text, -1}};
    for (const int32_t id : specials_) {
        const bool control = vocab_.types[static_cast<size_t>(id)] == TokenType::Control;
        if (!parse_special && control) continue;
        const std::string& t = vocab_.tokens[static_cast<size_t>(id)];
        std::vector<Fragment> next;
        for (const Fragment& f : fragments) {
            if (f.token >= 0) {
                next.push_back(f);
                continue;
            }
            const size_t base = static_cast<size_t>(f.text.data() - text.data());
            size_t at = 0;
            size_t from = 0;
            for (size_t hit = f.text.find(t); hit != std::string_view::npos; hit = f.text.find(t, from)) {
                // A control token's text that touches a plain span is text;
                // the search goes on from the next byte, so a token the
                // template wrote right after it is still found.
                if (control && plain != nullptr && overlaps_any(*plain, base + hit, base + hit + t.size())) {
                    from = hit + 1;
                    continue;
                }
                if (hit > at) next.push_back({f.text.substr(at, hit - at), -1});
                next.push_back({f.text.substr(hit, t.size()), id});
                at = from = hit + t.size();
            }
            if (at < f.text.size()) next.push_back({f.text.substr(at), -1});
        }
        fragments = std::move(next);
    }
    bool after_special = true;
    for (const Fragment& f : fragments) {
        if (f.token >= 0) {
            ids.push_back(f.token);
            after_special = true;
        } else {
            encode_text(f.text, after_special, ids);
            after_special = false;
        }
    }
    return ids;
}

std::unique_ptr<Tokenizer> make_tokenizer(Vocab vocab) {
    switch (vocab.kind) {
        case VocabKind::Spm:
            return std::make_unique<SpmTokenizer>(std::move(vocab));
        case VocabKind::Bpe:
            return std::make_unique<BpeTokenizer>(std::move(vocab));
    }
    throw make_error("unknown vocabulary kind {}", static_cast<int>(vocab.kind));
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool at_text_start, bool special)
    : tokenizer_(tokenizer),
      strip_leading_space_(at_text_start && tokenizer.vocab().kind == VocabKind::Spm &&
                           tokenizer.vocab().add_space_prefix),
      special_(special) {}

std::string StreamDecoder::push(int32_t id) {
    const Vocab& v = tokenizer_.vocab();
    std::string piece = special_ && v.is_valid(id) && v.types[static_cast<size_t>(id)] == TokenType::Control
                            ? v.tokens[static_cast<size_t>(id)]
                            : tokenizer_.token_to_piece(id);
    // The encoder put a space before the text; the first piece with any text
    // (BOS gives none) carries it.
    if (strip_leading_space_ && !piece.empty()) {
        if (piece.front() == ' ') piece.erase(0, 1);
        strip_leading_space_ = false;
    }
    pending_ += piece;
    return take_complete(pending_, false);
}

std::string StreamDecoder::flush() { return take_complete(pending_, true); }

std::string decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool at_text_start) {
    StreamDecoder stream(tokenizer, at_text_start);
    std::string text;
    for (const int32_t id : ids) text += stream.push(id);
    text += stream.flush();
    return text;
}

}  // namespace tessera
