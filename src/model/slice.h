// A slice: the part of the model one process computes (see DESIGN.md). A
// layer range, and inside every layer of it a range of KV heads (with their
// query heads) and a range of FFN channels. The first stage embeds tokens;
// the last stage owns the output norm and returns the logits. The output
// head's rows (the vocabulary) may be split too: each slice computes the
// logits of its vocab rows, and the slice with `outputs` gathers them.
#pragma once

#include "model/hparams.h"

#include <cstdint>
#include <string>

namespace tessera {

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
    bool embeds = true;
    bool outputs = true;

    int32_t n_layers() const { return layer_end - layer_begin; }
    int32_t n_kv_heads() const { return kv_head_end - kv_head_begin; }
    int32_t n_ffn() const { return ffn_end - ffn_begin; }
    int32_t n_vocab_rows() const { return vocab_end - vocab_begin; }
};

// Everything: a single-node run.
Slice full_slice(const ModelHParams& hp);

// Throws an Error if the slice does not fit inside the model.
void validate_slice(const Slice& slice, const ModelHParams& hp);

std::string describe_slice(const Slice& slice);

}  // namespace tessera
