// Converts llama2.c checkpoints (.bin: the legacy header of 7 int32, or the
// version-1 "ak42" header; shared or separate classifier) and their
// tokenizer.bin into a GGUF file with the tokenizer embedded. llama2.c keeps
// wq/wk in the same interleaved-pair RoPE layout that GGUF's llama
// architecture uses, so tensors are copied without permutation.
#pragma once

#include <functional>
#include <string>

namespace tessera {

struct Llama2cImportOptions {
    std::string checkpoint;  // model .bin
    std::string tokenizer;   // tokenizer.bin
    std::string name;        // general.name; defaults to the checkpoint's file name
    float rope_freq_base = 10000.0f;
    float rms_eps = 1e-5f;
};

// Writes the GGUF; throws an Error naming the file and what is wrong (bad
// header, size that does not match the header, truncated tokenizer).
// progress(done, total) after each tensor written.
void import_llama2c(const Llama2cImportOptions& options, const std::string& out_path,
                    const std::function<void(size_t, size_t)>& progress = {});

}  // namespace tessera
