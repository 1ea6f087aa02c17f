// Hugging Face tokenizers (tokenizer.json, and tokenizer_config.json for the
// special tokens and the chat template) turned into a vocabulary-only GGUF, as
// llama.cpp's converter writes one: tokenizer.ggml.* metadata that gen-model
// --vocab-from copies into a model and the tokenizers read. Byte-level BPE
// (GPT-2 style) models only: Llama 3, Qwen 2/2.5/3 and the like.
//
// What is read, and where it goes:
//   model.vocab, model.merges     tokenizer.ggml.tokens / .merges ("a b")
//   added_tokens                  tokens at their ids; special -> control (3),
//                                 others -> user-defined (4); ids nothing
//                                 names become "[PAD<id>]" (unused, 5)
//   pre_tokenizer (Split regex)   tokenizer.ggml.pre, named as llama.cpp names
//                                 it (llama-bpe, qwen2, gpt-2) by its regex
//   bos_token, eos_token,         tokenizer.ggml.bos/eos_token_id,
//   add_bos_token, chat_template  .add_bos_token, tokenizer.chat_template
// A normalizer (Qwen's NFC) is not applied, as llama.cpp does not.
#pragma once

#include <string>

namespace tessera {

// Writes the vocabulary GGUF; config_json may be empty. Throws an Error naming
// the file and the field on anything it cannot read or does not support.
void convert_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_json, const std::string& out_path);

}  // namespace tessera
