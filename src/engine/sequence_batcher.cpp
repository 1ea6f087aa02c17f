#include "engine/sequence_batcher.h"

#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <chrono>

namespace tessera {

class SequenceBatcher::SeqDecoder : public Decoder {
public:
    SeqDecoder(SequenceBatcher& batcher, int seq) : batcher_(batcher), seq_(seq) {}
    const ModelHParams& hparams() const override { return batcher_.decoder_.hparams(); }
    int n_ctx() const override { return batcher_.decoder_.n_ctx(); }
    const float* eval(std::span<const int32_t> tokens, int pos) override {
        return batcher_.submit(seq_, tokens, pos, false);
    }
    const float* eval_all(std::span<const int32_t> tokens, int pos) override {
        return batcher_.submit(seq_, tokens, pos, true);
    }
    void set_logits_need(const LogitsNeed* need) override { batcher_.set_need(seq_, need); }

private:
    SequenceBatcher& batcher_;
    int seq_;
};

SequenceBatcher::SequenceBatcher(Decoder& decoder, BatcherOptions options)
    : decoder_(decoder), options_(options), seqs_(static_cast<size_t>(decoder.n_seq())) {
    if (options_.prefill_chunk < 1) throw make_error("the prefill chunk must be at least 1 token");
    for (size_t s = 0; s < seqs_.size(); ++s) seqs_[s].decoder = std::make_unique<SeqDecoder>(*this, static_cast<int>(s));
    thread_ = std::thread([this] { loop(); });
}

SequenceBatcher::~SequenceBatcher() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_batcher_.notify_all();
    thread_.join();
}

Decoder& SequenceBatcher::sequence(int seq) { return *seqs_.at(static_cast<size_t>(seq)).decoder; }

void SequenceBatcher::begin(int seq) {
    std::lock_guard<std::mutex> lock(mutex_);
    seqs_.at(static_cast<size_t>(seq)).running = true;
}

void SequenceBatcher::end(int seq) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        seqs_.at(static_cast<size_t>(seq)).running = false;
    }
    // A batch waiting for this sequence's next eval need not wait any more.
    wake_batcher_.notify_all();
}

BatcherStats SequenceBatcher::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

const float* SequenceBatcher::submit(int seq, std::span<const int32_t> tokens, int pos, bool all) {
    if (tokens.empty()) throw make_error("internal: eval of no tokens");
    std::unique_lock<std::mutex> lock(mutex_);
    Seq& s = seqs_.at(static_cast<size_t>(seq));
    if (s.submitted) throw make_error("internal: sequence {} already waits for an eval", seq);
    if (stop_) throw make_error("the server is shutting down");
    s.tokens = tokens;  // the caller's, alive while it waits here
    s.pos = pos;
    s.all = all;
    if (all) s.logits.resize(tokens.size() * static_cast<size_t>(decoder_.hparams().n_vocab));
    s.done = 0;
    s.ready = false;
    s.error = nullptr;
    s.submitted = true;
    wake_batcher_.notify_all();
    wake_seqs_.wait(lock, [&] { return s.ready || s.error || stop_; });
    s.submitted = false;
    if (s.error) std::rethrow_exception(s.error);
    if (!s.ready) throw make_error("the server is shutting down");
    return s.logits.data();
}

void SequenceBatcher::set_need(int seq, const LogitsNeed* need) {
    std::lock_guard<std::mutex> lock(mutex_);
    seqs_.at(static_cast<size_t>(seq)).need = need != nullptr ? std::optional<LogitsNeed>(*need) : std::nullopt;
}

bool SequenceBatcher::batch_need(const std::vector<size_t>& seqs, LogitsNeed& need) const {
    need.top_k = 0;
    need.tokens.clear();
    for (size_t i : seqs) {
        const std::optional<LogitsNeed>& n = seqs_[i].need;
        if (!n) return false;
        need.top_k = std::max(need.top_k, n->top_k);
        need.tokens.insert(need.tokens.end(), n->tokens.begin(), n->tokens.end());
    }
    std::sort(need.tokens.begin(), need.tokens.end());
    need.tokens.erase(std::unique(need.tokens.begin(), need.tokens.end()), need.tokens.end());
    return need.top_k > 0 && need.tokens.size() <= LogitsNeed::kMaxTokens;
}

bool SequenceBatcher::all_running_submitted() const {
    // A sequence whose logits are ready but whose thread has not woken yet
    // is still to hand in its next token.
    return std::all_of(seqs_.begin(), seqs_.end(),
                       [](const Seq& s) { return !s.running || (s.submitted && !s.ready && !s.error); });
}

void SequenceBatcher::loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    const size_t n_vocab = static_cast<size_t>(decoder_.hparams().n_vocab);
    std::vector<SeqEval> evals;
    std::vector<size_t> who;
    LogitsNeed need;
    for (;;) {
        const auto pending = [&] {
            return std::any_of(seqs_.begin(), seqs_.end(), [](const Seq& s) { return s.submitted && !s.ready && !s.error; });
        };
        wake_batcher_.wait(lock, [&] { return stop_ || pending(); });
        if (stop_) break;
        // Give the other running generations a moment to hand in their next
        // token, so they share this pass over the weights.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(options_.grace_us);
        wake_batcher_.wait_until(lock, deadline, [&] { return stop_ || all_running_submitted(); });
        if (stop_) break;
        evals.clear();
        who.clear();
        bool decoding = false;  // some sequence evaluates a single token
        for (const Seq& s : seqs_) {
            if (s.submitted && !s.ready && !s.error && s.tokens.size() - s.done == 1) decoding = true;
        }
        for (size_t i = 0; i < seqs_.size(); ++i) {
            Seq& s = seqs_[i];
            if (!s.submitted || s.ready || s.error) continue;
            size_t take = s.tokens.size() - s.done;
            if (decoding && take > 1) take = std::min(take, static_cast<size_t>(options_.prefill_chunk));
            evals.push_back({static_cast<int>(i), s.pos + static_cast<int>(s.done), s.tokens.subspan(s.done, take), s.all});
            who.push_back(i);
        }
        const bool sparse = batch_need(who, need);
        // The decoder runs unlocked: generations may submit meanwhile (they
        // join the next batch), and begin/end need not wait for it.
        lock.unlock();
        const double t0 = now_seconds();
        const float* logits = nullptr;
        std::exception_ptr error;
        try {
            decoder_.set_logits_need(sparse ? &need : nullptr);
            logits = decoder_.eval_seqs(evals);
        } catch (...) {
            error = std::current_exception();
        }
        const double seconds = now_seconds() - t0;
        std::vector<NodeStepTime> nodes;
        if (options_.node_times) nodes = options_.node_times();
        lock.lock();
        stats_.nodes = std::move(nodes);
        stats_.batches += 1;
        stats_.sequences += evals.size();
        stats_.seconds += seconds;
        stats_.last_seconds = seconds;
        size_t out_row = 0;  // eval e's first row of logits
        for (size_t e = 0; e < evals.size(); ++e) {
            Seq& s = seqs_[who[e]];
            const size_t n = evals[e].tokens.size();
            stats_.rows += n;
            const size_t rows = s.all ? n : 1;
            if (error) {
                s.error = error;
                continue;
            }
            if (s.all) {
                // Every token's row, chunk after chunk.
                std::copy_n(logits + out_row * n_vocab, n * n_vocab, s.logits.data() + s.done * n_vocab);
            }
            s.done += n;
            if (s.done == s.tokens.size()) {
                if (!s.all) s.logits.assign(logits + out_row * n_vocab, logits + (out_row + 1) * n_vocab);
                s.ready = true;
            }
            out_row += rows;
        }
        wake_seqs_.notify_all();
    }
    wake_seqs_.notify_all();
}

}  // namespace tessera
