// The tokenizer algorithms behind make_tokenizer (private to src/model).
#pragma once

#include "model/tokenizer.h"

#include <memory>

namespace tessera {

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab);

}  // namespace tessera
