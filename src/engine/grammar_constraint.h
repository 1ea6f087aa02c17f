// A grammar held over generation: at each step, the tokens whose text keeps
// the output a prefix of something the grammar matches. The vocabulary's
// token texts are sorted once (VocabularyPieces) so a step's walk shares
// every common prefix: a prefix the grammar refuses cuts off all tokens that
// begin with it, and a prefix's state is computed once for all of them. Masks
// are cached by grammar state (inside a JSON string or number the same state
// recurs token after token). Near the end of the token budget the constraint
// only lets through tokens that bring the text closer to complete, so output
// that has to stop still parses: whatever the weights, a model that runs out
// of tokens closes its brackets first.
#pragma once

#include "grammar/grammar_matcher.h"
#include "model/tokenizer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {

// A vocabulary's token texts, sorted, with what the walk needs.
struct VocabularyPieces {
    int32_t n_vocab = 0;
    std::vector<int32_t> sorted_ids;      // text tokens, by their bytes
    std::vector<std::string> pieces;      // their bytes, in that order
    std::vector<uint16_t> common_prefix;  // bytes shared with the previous piece
    std::vector<int32_t> index_of;        // id -> index in sorted_ids, -1 for no text (control, unused)
    std::vector<int32_t> eog_ids;         // the tokens that end a generation
    bool is_eog(int32_t id) const;
};

// Built once per tokenizer (a few tens of milliseconds for 150k tokens).
// with_control: control tokens (but those that end a generation) count as
// their text, for a grammar that writes them (harmony's <|channel|>).
std::shared_ptr<const VocabularyPieces> vocabulary_pieces(const Tokenizer& tokenizer, bool with_control = false);

class GrammarConstraint {
public:
    GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabularyPieces> vocabulary);

    // How many tokens the generation may still take (< 0: no limit known);
    // each accepted token takes one.
    void set_budget(int tokens);
    // Whether `token` may come next. Cheap: the token's bytes alone.
    bool allows(int32_t token);
    // Every token that may come next, one bit per id. Throws an Error when
    // the grammar allows no token of this vocabulary here.
    const std::vector<uint64_t>& allowed();
    // Takes a generated token: it must be allowed.
    void accept(int32_t token);
    // The output is complete and the grammar allows nothing more.
    bool finished() const { return GrammarMatcher::finished(state_); }
    bool accepting() const { return GrammarMatcher::accepting(state_); }
    // True when the budget forces the output to be closed from here on.
    bool closing() const;

    // What the walks cost, for benchmarks: mask computations and cache hits.
    int walks() const { return walks_; }
    int cache_hits() const { return cache_hits_; }

private:
    void walk(bool closing_only, std::vector<uint64_t>& mask);
    bool text_allowed(const std::string& piece, GrammarState* end);

    GrammarMatcher matcher_;
    std::shared_ptr<const VocabularyPieces> vocabulary_;
    GrammarState state_;
    int budget_ = -1;
    std::vector<GrammarState> path_;  // the walk's state per depth
    std::unordered_map<GrammarState, std::vector<uint64_t>, GrammarStateHash> cache_;
    std::vector<uint64_t> mask_;
    const std::vector<uint64_t>* current_ = nullptr;  // allowed() for state_, when computed
    size_t generated_bytes_ = 0;
    int walks_ = 0;
    int cache_hits_ = 0;
};

}  // namespace tessera
