// Text assembled from the template's own words and the caller's data, with
// the caller's bytes marked (Value::input_spans). The renderer writes its
// output through it, and so do the operations that build a string from
// parts of others (`+`, `~`, slices, strip, split, join), so a message's
// text keeps its mark however the template cuts and joins it.
#pragma once

#include "chat/jinja_value.h"
#include "util/text_spans.h"

#include <string>

namespace tessera::jinja {

class MarkedText {
public:
    // Template text: never marked.
    void append_template(const std::string& text) { text_ += text; }
    // What `{{ v }}` prints: a string with its marks; anything else as
    // str(), marked whole when it holds the caller's data.
    void append(const Value& v);
    // Bytes [pos, pos + len) of the string `v`, with their marks.
    void append_part(const Value& v, size_t pos, size_t len);

    const std::string& text() const { return text_; }
    const TextSpans& input() const { return input_; }
    size_t size() const { return text_.size(); }
    Value value() const { return Value::marked(text_, input_); }

private:
    void mark(size_t begin, size_t end);

    std::string text_;
    TextSpans input_;
};

// a + b of two strings (or `~` of any two values), marks kept.
Value concat(const Value& a, const Value& b);
// The string `v` from byte `pos` on, `len` bytes, marks kept.
Value substring(const Value& v, size_t pos, size_t len);
// `result`, a string computed from `sources` by a transformation that moves
// bytes (upper, replace, tojson, ...): marked whole when any source holds
// the caller's data, so no control token can come out of it.
Value derived(Value result, std::initializer_list<const Value*> sources);

}  // namespace tessera::jinja
