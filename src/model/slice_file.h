// Slice files: a GGUF holding only one rank's share of a model, for a worker
// that was started without the model file. The root writes it from its own
// copy (write_slice_file) and sends it once; the worker checks it against the
// model's fingerprint, caches it on disk and loads it like any model.
//
// The file keeps every metadata key of the model, so hyper-parameters and the
// vocabulary read as usual, and adds:
//   tessera.slice.range               i32[8, or 10 + 4n]: layers, KV heads,
//                                     FFN channels, vocab rows; experts; the
//                                     mixed split's further parts (Slice::tails:
//                                     experts and channels of each)
//   tessera.slice.source_fingerprint  the full model's fingerprint (hex)
//   tessera.slice.n_vocab             the vocabulary size (no embedding here)
// Its tensors keep their names; matrices hold only the slice's rows (attn_q/
// k/v, ffn_gate/up) or columns (attn_output, ffn_down), and only the slice's
// layers are present. A mixed split's further parts store their experts'
// matrices as blk.N.ffn_{gate,up,down}_exps.partK.weight (K from 1).
#pragma once

#include "model/llama_model.h"

#include <cstdint>
#include <optional>
#include <string>

namespace tessera {

// Infix of the names of the matrices of a mixed split's part `part` (1 and
// up: the first part's keep the model's names): ".part1", ...
std::string part_infix(size_t part);

void write_slice_file(const LlamaModel& model, const Slice& slice, const std::string& path);

// The slice a slice file holds, or nullopt for a full model file.
std::optional<Slice> stored_slice(const GgufFile& file);

// The fingerprint of the model a slice file was cut from ("" if not one).
std::string slice_source_fingerprint(const GgufFile& file);

// A file name for the cache: fingerprint and slice ranges.
std::string slice_file_name(const std::string& fingerprint, const Slice& slice);

// XXH3-64 of a file's bytes (transfer check).
uint64_t file_checksum(const std::string& path);

}  // namespace tessera
