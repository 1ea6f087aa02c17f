#include "engine/drafter.h"

#include "engine/sampler.h"
#include "model/vocab.h"
#include "util/error.h"

#include <algorithm>

namespace tessera {

NgramDrafter::NgramDrafter(int max_ngram, int min_ngram) : max_ngram_(max_ngram), min_ngram_(min_ngram) {
    if (min_ngram < 1 || max_ngram < min_ngram) throw make_error("n-gram sizes {}..{} are not valid", min_ngram, max_ngram);
}

void NgramDrafter::propose(std::span<const int32_t> context, int max_tokens, std::vector<int32_t>& draft) {
    draft.clear();
    const int64_t n_ctx = static_cast<int64_t>(context.size());
    for (int n = max_ngram_; n >= min_ngram_ && draft.empty(); --n) {
        if (n_ctx <= n) continue;
        const std::span<const int32_t> tail = context.subspan(static_cast<size_t>(n_ctx - n));
        // The most recent earlier occurrence: text repeats most where it
        // was written last (code, a list, a quoted passage).
        for (int64_t start = n_ctx - n - 1; start >= 0; --start) {
            if (!std::equal(tail.begin(), tail.end(), context.begin() + start)) continue;
            for (int64_t i = start + n; i < n_ctx && static_cast<int>(draft.size()) < max_tokens; ++i) {
                draft.push_back(context[static_cast<size_t>(i)]);
            }
            break;
        }
    }
}

void require_same_vocabulary(const LlamaModel& draft, const LlamaModel& target) {
    const Vocab a = load_vocab(draft.file());
    const Vocab b = load_vocab(target.file());
    const auto refuse = [&](const std::string& what) {
        return make_error("the draft model {} has another vocabulary than {} ({}): a draft must share the target's "
                          "tokenizer",
                          draft.path(), target.path(), what);
    };
    if (a.size() != b.size()) throw refuse(fmt::format("{} tokens against {}", a.size(), b.size()));
    if (draft.hparams().n_vocab != target.hparams().n_vocab) {
        throw refuse(fmt::format("{} output rows against {}", draft.hparams().n_vocab, target.hparams().n_vocab));
    }
    for (int32_t i = 0; i < a.size(); ++i) {
        if (a.tokens[static_cast<size_t>(i)] != b.tokens[static_cast<size_t>(i)] ||
            a.types[static_cast<size_t>(i)] != b.types[static_cast<size_t>(i)]) {
            throw refuse(fmt::format("token {} differs", i));
        }
    }
    if (a.bos_id != b.bos_id || a.eos_id != b.eos_id || a.eog_ids != b.eog_ids) throw refuse("special tokens differ");
}

ModelDrafter::ModelDrafter(const std::string& path, const LlamaModel& target, int n_ctx, int n_threads)
    : path_(path), model_(path) {
    require_same_vocabulary(model_, target);
    ForwardConfig config;
    config.n_ctx = n_ctx;
    decoder_ = std::make_unique<LocalDecoder>(model_, config, n_threads);
}

void ModelDrafter::propose(std::span<const int32_t> context, int max_tokens, std::vector<int32_t>& draft) {
    draft.clear();
    const int n_ctx = decoder_->n_ctx();
    const int32_t n_vocab = decoder_->hparams().n_vocab;
    if (context.empty() || max_tokens < 1) return;
    // Evaluate what the draft's cache lacks (at least the last token, for
    // its logits), then guess greedily, one token at a time.
    size_t common = 0;
    while (common < cached_.size() && common < context.size() && cached_[common] == context[common]) ++common;
    common = std::min(common, context.size() - 1);
    if (static_cast<int64_t>(context.size()) + max_tokens > n_ctx) {
        max_tokens = static_cast<int>(std::max<int64_t>(0, n_ctx - static_cast<int64_t>(context.size())));
        if (max_tokens < 1) return;
    }
    cached_.assign(context.begin(), context.begin() + static_cast<std::ptrdiff_t>(common));
    const float* logits = decoder_->eval(context.subspan(common), static_cast<int>(common));
    cached_.insert(cached_.end(), context.begin() + static_cast<std::ptrdiff_t>(common), context.end());
    for (int i = 0; i < max_tokens; ++i) {
        const int32_t t = Sampler::argmax(logits, n_vocab);
        draft.push_back(t);
        if (i + 1 == max_tokens) break;  // the last guess needs no logits
        const int32_t next[1] = {t};
        logits = decoder_->eval(next, static_cast<int>(cached_.size()));
        cached_.push_back(t);
    }
}

}  // namespace tessera
