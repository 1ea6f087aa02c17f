// A slice: the part of the model one process computes (see DESIGN.md). A
// layer range, and inside every layer of it a range of KV heads (with their
// query heads) and a range of FFN channels. The first stage embeds tokens;
// the last stage owns the output norm and returns the logits. The output
// head's rows (the vocabulary) may be split too: each slice computes the
// logits of its vocab rows, and the slice with `outputs` gathers them.
#pragma once

#include "model/hparams.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

// One rectangle of a mixture of experts' channels a slice computes: channels
// [ffn_begin, ffn_end) of each of experts [expert_begin, expert_end).
//
// A dealt part (deal_count > 1; the balanced split) is held by deal_count
// ranks alike, and each computes only its turns of it: of a token's chosen
// experts in the part, in the router's order, the i-th where i % deal_count
// == deal_index (a batch: of the part's experts with rows, in ascending
// order). Every rank routes the same way, so every chosen expert's channels
// are computed once in the group, and their grid sums add up to a single
// node's bits in any deal.
struct ExpertPart {
    int32_t expert_begin = 0, expert_end = 0, ffn_begin = 0, ffn_end = 0;
    int32_t deal_count = 1, deal_index = 0;
    int32_t n_experts() const { return expert_end - expert_begin; }
    int32_t n_ffn() const { return ffn_end - ffn_begin; }
    bool contains(int expert) const { return expert >= expert_begin && expert < expert_end; }
    bool dealt() const { return deal_count > 1; }
    // Whether the i-th of the part's chosen experts (or of its experts with rows) is this rank's turn.
    bool my_turn(int i) const { return i % deal_count == deal_index; }
    bool operator==(const ExpertPart&) const = default;
};

// The most parts (the first and its tails) a slice of the mixed split has.
constexpr int kMaxExpertParts = 64;

struct Slice {
    int32_t layer_begin = 0;
    int32_t layer_end = 0;
    int32_t kv_head_begin = 0;
    int32_t kv_head_end = 0;
    int32_t ffn_begin = 0;
    int32_t ffn_end = 0;
    // Rows of the output head this slice computes (empty: none).
    int32_t vocab_begin = 0;
    int32_t vocab_end = 0;
    // A mixture of experts: the experts whose channels [ffn_begin, ffn_end)
    // this slice computes. Every expert with a share of its channels (the
    // channel split), or whole experts: a range of them with every channel
    // (the expert split). Both 0 in a dense model.
    int32_t expert_begin = 0;
    int32_t expert_end = 0;
    // The mixed split's further parts: channels of other ranges of experts,
    // each range disjoint from the first part's and from each other's.
    // Empty in the other splits.
    std::vector<ExpertPart> tails;
    bool embeds = true;
    bool outputs = true;

    int32_t n_layers() const { return layer_end - layer_begin; }
    int32_t n_kv_heads() const { return kv_head_end - kv_head_begin; }
    int32_t n_ffn() const { return ffn_end - ffn_begin; }
    int32_t n_vocab_rows() const { return vocab_end - vocab_begin; }
    int32_t n_experts() const { return expert_end - expert_begin; }
    bool has_tail() const { return !tails.empty(); }
};

// The slice's parts, its first one first; none where it computes no channels.
std::vector<ExpertPart> expert_parts(const Slice& slice);

// How a mixture of experts' FFN is split across tensor-parallel ranks:
//   kChannels: every rank holds its share of every expert's channels, so
//              every token's work is balanced (as distributed-llama and exo
//              split), but an expert's width moves in reduction units, which
//              may not divide evenly (Qwen3-30B-A3B's 768 channels of Q4_K are
//              three units of 256);
//   kExperts:  whole experts per rank, every channel; a token's k experts
//              fall where they fall, so one rank may get more of them;
//   kMixed:    channels, split differently for each of as many groups of
//              experts as there are ranks: group g's units go to the ranks
//              in turn from rank g, so a rank holding more units of one
//              group holds fewer of another (three units over two ranks:
//              2+1 of the first half, 1+2 of the second), and a token's load
//              is balanced but for how its experts fall between the groups.
//   kBalanced: each rank holds its even share of every expert's units (as
//              kChannels), and the units left over (three over two ranks:
//              one) are held by every rank and dealt per token, a chosen
//              expert's to each rank in turn (ExpertPart::deal_count): every
//              token's load is even, for the memory of the shared units on
//              every rank (2/3 of the experts on each of 2 ranks, not 1/2).
//              Never chosen by "auto" for that memory.
// All sum the same per-unit numbers: --exact gives a single node's bits.
enum class MoeSplit { kChannels, kExperts, kMixed, kBalanced };
const char* moe_split_name(MoeSplit split);
// "channels", "experts", "mixed" or "balanced" as the split; "auto" (or "") as none: the planner chooses.
std::optional<MoeSplit> parse_moe_split(const std::string& text);

// Everything: a single-node run.
Slice full_slice(const ModelHParams& hp);

// Throws an Error if the slice does not fit inside the model (or splits a
// mixture of experts by experts and channels at once).
void validate_slice(const Slice& slice, const ModelHParams& hp);

std::string describe_slice(const Slice& slice);

}  // namespace tessera
