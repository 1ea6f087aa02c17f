// Hugging Face tokenizers (tokenizer.json, and tokenizer_config.json for the
// special tokens and the chat template) turned into a vocabulary-only GGUF, as
// llama.cpp's converter writes one: tokenizer.ggml.* metadata that gen-model
// --vocab-from copies into a model and the tokenizers read. Byte-level BPE
// (GPT-2 style: Llama 3, Qwen 2/2.5/3, gpt-oss) becomes "gpt2"; a BPE with
// byte_fallback (SentencePiece's, as transformers writes it: Llama 2,
// Mistral, Gemma) becomes "llama", with scores and byte tokens
// (model/hf_tokenizer_spm.h).
//
// What is read, and where it goes:
//   model.vocab, model.merges     tokenizer.ggml.tokens / .merges ("a b")
//   added_tokens                  tokens at their ids; special -> control (3),
//                                 others -> user-defined (4); ids nothing
//                                 names become "[PAD<id>]" (unused, 5)
//   pre_tokenizer (Split regex)   tokenizer.ggml.pre, named as llama.cpp names
//                                 it (llama-bpe, qwen2, gpt-4o, gpt-2) by its regex
//   bos_token, eos_token,         tokenizer.ggml.bos/eos_token_id,
//   add_bos_token, chat_template  .add_bos_token, tokenizer.chat_template
//   chat_template.jinja           tokenizer.chat_template, where the config has
//                                 none (newer checkpoints keep it apart: gpt-oss)
// A normalizer (Qwen's NFC) is not applied, as llama.cpp does not.
#pragma once

#include "model/gguf_writer.h"

#include <nlohmann/json.hpp>

#include <string>

namespace tessera {

// Writes the vocabulary GGUF; config_json and chat_template may be empty (a
// template file given replaces the config's). Throws an Error naming the file
// and the field on anything it cannot read or does not support.
void convert_hf_tokenizer(const std::string& tokenizer_json, const std::string& config_json, const std::string& out_path,
                          const std::string& chat_template = "");

// The same vocabulary from parsed files (the paths name them in errors) and
// a chat template's text (empty: the config's, if any); not yet written.
GgufWriter hf_vocabulary(const nlohmann::json& tokenizer, const nlohmann::json& config, const std::string& tokenizer_json,
                         const std::string& config_json, const std::string& chat_template);

// The files of a checkpoint folder: DIR/tokenizer.json, and
// DIR/tokenizer_config.json and DIR/chat_template.jinja where they exist.
struct HfTokenizerFiles {
    std::string tokenizer, config, chat_template;
};
HfTokenizerFiles hf_tokenizer_files(const std::string& dir);

}  // namespace tessera
