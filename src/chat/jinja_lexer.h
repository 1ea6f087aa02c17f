// Splits a Jinja2 template into tokens: literal text, the delimiters of
// `{{ }}` and `{% %}`, and the names, literals and operators between them.
// Whitespace control is applied here, as jinja2's lexer does: `{%-`/`-%}`
// strip, and trim_blocks/lstrip_blocks, which Hugging Face's
// apply_chat_template (and so every model's published output) turns on.
// Comments vanish and `{% raw %}` bodies become plain text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::jinja {

struct Token {
    enum class Kind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };
    Kind kind;
    std::string text;  // text, name, operator, or the decoded string literal
    int64_t int_value = 0;
    double float_value = 0;
    int line = 1;
};

struct LexOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
};

// Throws tessera::Error naming the line of an unterminated tag or string,
// or a character no expression may hold.
std::vector<Token> tokenize(const std::string& source, const LexOptions& options = {});

}  // namespace tessera::jinja
