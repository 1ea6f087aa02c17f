#include "engine/grammar_constraint.h"

#include <algorithm>
#include <cstdint>

namespace tessera {

bool VocabularyPieces::is_eog(int32_t id) const { return std::find(eog_ids.begin(), eog_ids.end(), id) != eog_ids.end(); }

std::shared_ptr<const VocabularyPieces> vocabulary_pieces(const Tokenizer& tokenizer, bool with_control) {
    const Vocab& vocab = tokenizer.vocab();
    auto v = std::make_shared<VocabularyPieces>();
    v->n_vocab = vocab.size();
    v->eog_ids = vocab.eog_ids;
    v->index_of.assign(static_cast<size_t>(vocab.size()), -1);
    std::vector<std::pair<std::string, int32_t>> texts;
    for (int32_t id = 0; id < vocab.size(); ++id) {
        const TokenType type = vocab.types[static_cast<size_t>(id)];
        // Control tokens are not text: a grammar produces them only when
        // asked to (with_control); those that end a generation never, they
        // are allowed where the grammar is complete.
        const bool control = type == TokenType::Control && with_control && !vocab.is_eog(id);
        if ((type == TokenType::Control && !control) || type == TokenType::Unused || type == TokenType::Unknown) continue;
        std::string piece = control ? vocab.tokens[static_cast<size_t>(id)] : tokenizer.token_to_piece(id);
        if (piece.empty() || piece.size() > 0xffff) continue;
        texts.emplace_back(std::move(piece), id);
    }
    std::sort(texts.begin(), texts.end());
    for (size_t i = 0; i < texts.size(); ++i) {
        size_t common = 0;
        if (i > 0) {
            const std::string& a = texts[i - 1].first;
            const std::string& b = texts[i].first;
            while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
        }
        v->index_of[static_cast<size_t>(texts[i].second)] = static_cast<int32_t>(i);
        v->sorted_ids.push_back(texts[i].second);
        v->common_prefix.push_back(static_cast<uint16_t>(common));
        v->pieces.push_back(std::move(texts[i].first));
    }
    return v;
}

namespace {

// Progress toward a complete text: code points still needed, and within the
// character begun, the bytes still to come (each token near the budget's end
// must lower it).
uint64_t remaining(const GrammarMatcher& matcher, const GrammarState& state) {
    return static_cast<uint64_t>(matcher.distance(state)) * 4 + state.pending;
}

void set_bit(std::vector<uint64_t>& mask, int32_t id) {
    mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (static_cast<unsigned>(id) & 63);
}

bool any_bit(const std::vector<uint64_t>& mask) {
    return std::any_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; });
}

constexpr size_t kMaxCachedMasks = 512;

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const VocabularyPieces> vocabulary)
    : matcher_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {
    state_ = matcher_.start();
    size_t longest = 0;
    for (const std::string& p : vocabulary_->pieces) longest = std::max(longest, p.size());
    path_.resize(longest + 1);
}

void GrammarConstraint::set_budget(int tokens) {
    budget_ = tokens;
    current_ = nullptr;
}

bool GrammarConstraint::closing() const {
    // Each token while closing brings the text at least one step nearer its
    // end; the margin covers a character begun and the end-of-generation token.
    return budget_ >= 0 && static_cast<uint64_t>(budget_) <= matcher_.distance(state_) + 4;
}

bool GrammarConstraint::text_allowed(const std::string& piece, GrammarState* end) {
    GrammarState a = state_;
    GrammarState b;
    for (const char c : piece) {
        matcher_.advance_byte_into(a, static_cast<uint8_t>(c), b);
        if (b.dead()) return false;
        std::swap(a, b);
    }
    if (end != nullptr) *end = std::move(a);
    return true;
}

bool GrammarConstraint::allows(int32_t token) {
    if (token < 0 || token >= vocabulary_->n_vocab) return false;
    if (closing()) {
        const std::vector<uint64_t>& mask = allowed();
        return (mask[static_cast<size_t>(token) >> 6] >> (static_cast<unsigned>(token) & 63)) & 1;
    }
    if (vocabulary_->is_eog(token)) return accepting();
    const int32_t index = vocabulary_->index_of[static_cast<size_t>(token)];
    return index >= 0 && text_allowed(vocabulary_->pieces[static_cast<size_t>(index)], nullptr);
}

void GrammarConstraint::walk(bool closing_only, std::vector<uint64_t>& mask) {
    ++walks_;
    const VocabularyPieces& v = *vocabulary_;
    mask.assign((static_cast<size_t>(v.n_vocab) + 63) / 64, 0);
    if (accepting()) {
        for (const int32_t id : v.eog_ids) set_bit(mask, id);
    }
    const uint64_t now = remaining(matcher_, state_);
    path_[0] = state_;
    // dead_at = d: the prefix of length d + 1 of the last piece tried is
    // refused, and so is every following piece that shares it.
    size_t dead_at = SIZE_MAX;
    for (size_t i = 0; i < v.pieces.size(); ++i) {
        const size_t common = v.common_prefix[i];
        if (dead_at != SIZE_MAX && common > dead_at) continue;
        dead_at = SIZE_MAX;
        const std::string& piece = v.pieces[i];
        size_t d = common;
        for (; d < piece.size(); ++d) {
            matcher_.advance_byte_into(path_[d], static_cast<uint8_t>(piece[d]), path_[d + 1]);
            if (path_[d + 1].dead()) {
                dead_at = d;
                break;
            }
        }
        if (dead_at != SIZE_MAX) continue;
        if (closing_only && remaining(matcher_, path_[piece.size()]) >= now) continue;
        set_bit(mask, v.sorted_ids[i]);
    }
}

const std::vector<uint64_t>& GrammarConstraint::allowed() {
    if (current_ != nullptr) return *current_;
    if (closing()) {
        walk(true, mask_);
        // No token of this vocabulary moves the text nearer its end (tokens
        // too long for the characters left): any allowed token then.
        if (!any_bit(mask_)) walk(false, mask_);
        current_ = &mask_;
    } else {
        const auto hit = cache_.find(state_);
        if (hit != cache_.end()) {
            ++cache_hits_;
            current_ = &hit->second;
        } else {
            walk(false, mask_);
            if (cache_.size() >= kMaxCachedMasks) cache_.clear();
            current_ = &cache_.emplace(state_, mask_).first->second;
        }
    }
    if (!any_bit(*current_)) {
        throw make_error("the grammar allows no token of this vocabulary after the {} bytes generated so far",
                         generated_bytes_);
    }
    return *current_;
}

void GrammarConstraint::accept(int32_t token) {
    current_ = nullptr;
    if (budget_ > 0) --budget_;
    if (vocabulary_->is_eog(token)) return;
    const int32_t index = token >= 0 && token < vocabulary_->n_vocab ? vocabulary_->index_of[static_cast<size_t>(token)] : -1;
    GrammarState end;
    if (index < 0 || !text_allowed(vocabulary_->pieces[static_cast<size_t>(index)], &end)) {
        throw make_error("internal: token {} was generated but the grammar does not allow it here", token);
    }
    generated_bytes_ += vocabulary_->pieces[static_cast<size_t>(index)].size();
    state_ = std::move(end);
}

}  // namespace tessera
