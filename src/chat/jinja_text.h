// Python's str semantics on UTF-8 text, as chat templates use them: lengths,
// indices and slices count code points (not bytes), strip/split follow
// str.strip/str.split, and JSON is written the way Python's json.dumps
// writes it (Hugging Face's tojson: ensure_ascii=False, insertion order).
#pragma once

#include "chat/jinja_value.h"
#include "util/utf8.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::jinja {

// Byte offsets of each code point's start and code point counts: util/utf8.h.
using tessera::utf8_length;
using tessera::utf8_offsets;

// str.strip/lstrip/rstrip; `chars` absent means whitespace.
std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// str.split: sep absent splits on whitespace runs; maxsplit < 0 is no limit.
std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
std::string py_capitalize(const std::string& s);  // first upper, rest lower
std::string py_title(const std::string& s);       // str.title(): each letter run capitalized

// json.dumps(v, ensure_ascii=False, indent=indent, separators=...):
// indent < 0 means none. Throws for values JSON cannot hold.
std::string to_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys);

}  // namespace tessera::jinja
