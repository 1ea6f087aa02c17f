// UTF-8 as the tokenizers, the chat templates and the server read it: one
// place for what a character's bytes are. Every function takes any bytes
// (text from a model file or a client is hostile input) and never reads past
// the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// What the bytes at the start of `s` (not empty) hold: a whole character, the
// valid beginning of one that more bytes may complete, or an ill-formed
// sequence. `length` is the bytes taken; for Invalid it is the maximal
// ill-formed subpart, which becomes one U+FFFD (Unicode's recommended
// practice). Overlong forms, surrogates and code points above U+10FFFF are
// ill-formed.
struct Utf8Step {
    enum Kind { Complete, Incomplete, Invalid } kind;
    size_t length;
};
Utf8Step next_utf8(std::string_view s);

// Bytes of the character that starts at s[at], judged from its lead byte
// alone (a stray continuation byte counts as a character of its own, so any
// bytes split into symbols), clamped to what is left of `s`.
size_t utf8_char_bytes(std::string_view s, size_t at);

// Appends code point `cp` (at most U+10FFFF) as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

// The byte offset of each character (every byte that is not a continuation
// byte), then s.size(): Python's indexing of a str.
std::vector<size_t> utf8_offsets(std::string_view s);
// The number of characters, as Python's len() of a str.
size_t utf8_length(std::string_view s);

}  // namespace tessera
