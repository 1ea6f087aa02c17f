#include "chat/jinja_marked.h"

#include <algorithm>

namespace tessera::jinja {

void MarkedText::mark(size_t begin, size_t end) {
    if (begin >= end) return;
    if (!input_.empty() && input_.back().end == begin) {
        input_.back().end = end;  // adjacent parts of one message stay one span
    } else {
        input_.push_back({begin, end});
    }
}

void MarkedText::append(const Value& v) {
    if (v.is_string()) {
        append_part(v, 0, v.as_string().size());
        return;
    }
    const size_t begin = text_.size();
    text_ += v.str();
    if (v.has_input()) mark(begin, text_.size());
}

void MarkedText::append_part(const Value& v, size_t pos, size_t len) {
    const std::string& s = v.as_string();
    pos = std::min(pos, s.size());
    len = std::min(len, s.size() - pos);
    const size_t base = text_.size();
    text_.append(s, pos, len);
    for (const TextSpan& span : v.input_spans()) {
        const size_t b = std::max(span.begin, pos), e = std::min(span.end, pos + len);
        if (b < e) mark(base + (b - pos), base + (e - pos));
    }
}

Value concat(const Value& a, const Value& b) {
    MarkedText out;
    out.append(a);
    out.append(b);
    return out.value();
}

Value substring(const Value& v, size_t pos, size_t len) {
    if (v.input_spans().empty()) return Value(v.as_string().substr(std::min(pos, v.as_string().size()), len));
    MarkedText out;
    out.append_part(v, pos, len);
    return out.value();
}

Value derived(Value result, std::initializer_list<const Value*> sources) {
    for (const Value* s : sources) {
        if (s != nullptr && s->has_input()) return result.as_input();
    }
    return result;
}

}  // namespace tessera::jinja
