// The output head's logits as a sampler needs them (model/decoder.h's
// LogitsNeed): a node computing rows [first, first + width) of the head (a
// tensor-parallel worker's share of the vocabulary, a pipeline's last stage
// all of it) sends each row's top_k among the tokens the need does not name,
// and the named tokens' logits, instead of the whole row. On Qwen 3's
// vocabulary a tensor-parallel worker of two sends 304 KB of logits a token
// and a last stage 608 KB; greedy sampling needs 8 bytes of them. The root
// places them in its row and fills the rest with -inf.
//
//   root -> node  kHeadNeed   u32 top_k (0: every logit), u32 count, count x i32 token (sorted, each once);
//                             held until the next (a pipeline passes it along the stages, in order with the rows)
//   node -> root  kCandidates u32 n_tok, u32 width, per row u32 count and count x (u32 column, f32 logit),
//                             columns rising
#pragma once

#include "model/decoder.h"

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

// A root's need as its nodes hold it: set() each eval (it only marks a
// change when the need differs: a sampler's changes with its penalties'
// window, greedy's never), then take_change() before the rows go out.
class HeldNeed {
public:
    void set(const LogitsNeed* need);
    const LogitsNeed* get() const { return has_ ? &need_ : nullptr; }
    // The kHeadNeed payload when the nodes hold an older need (once per change).
    bool take_change(std::vector<uint8_t>& payload);

private:
    LogitsNeed need_;
    bool has_ = false;
    bool changed_ = false;
};

// null: every logit.
void encode_logits_need(const LogitsNeed* need, std::vector<uint8_t>& out);
// false: every logit. Checks top_k, the count, and that the tokens are
// sorted, each once, and below n_vocab.
bool decode_logits_need(std::span<const uint8_t> payload, int32_t n_vocab, LogitsNeed& need, const char* peer);

// n_tok rows of `width` logits (vocab ids first.. first + width - 1): each
// row's candidates under `need`, as kCandidates. Ties at the k-th place go to
// the lower id, as the sampler's top-k does.
void encode_candidates(const float* rows, int n_tok, int width, int32_t first, const LogitsNeed& need,
                       std::vector<uint8_t>& out);

// Writes a kCandidates payload into n_tok rows of `logits` (row stride
// `stride`) at columns [first, first + width): the candidates' logits, -inf
// elsewhere. Checks the shape, the counts against the need, the columns
// (rising, inside the width) and that every logit is finite; `peer` names
// the sender in errors.
void place_candidates(std::span<const uint8_t> payload, int n_tok, int width, int32_t first, const LogitsNeed& need,
                      float* logits, size_t stride, const char* peer);

}  // namespace tessera
