#include "chat/jinja_text.h"

#include "util/error.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace tessera::jinja {

namespace {

bool is_py_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '\x1c' || c == '\x1d' ||
           c == '\x1e' || c == '\x1f';
}

}  // namespace

std::string py_strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
    // Strip sets in templates are ASCII ("\n", " "); byte-wise matching is
    // exact for them and never splits a multi-byte character.
    auto strip_it = [&](char c) { return chars ? chars->find(c) != std::string::npos : is_py_space(c); };
    size_t begin = 0, end = s.size();
    if (left) {
        while (begin < end && strip_it(s[begin])) ++begin;
    }
    if (right) {
        while (end > begin && strip_it(s[end - 1])) --end;
    }
    return s.substr(begin, end - begin);
}

std::vector<std::string> py_split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
    std::vector<std::string> parts;
    if (!sep) {
        size_t i = 0;
        while (true) {
            while (i < s.size() && is_py_space(s[i])) ++i;
            if (i >= s.size()) break;
            if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
                size_t end = s.size();
                while (end > i && is_py_space(s[end - 1])) --end;
                parts.push_back(s.substr(i, end - i));
                break;
            }
            size_t j = i;
            while (j < s.size() && !is_py_space(s[j])) ++j;
            parts.push_back(s.substr(i, j - i));
            i = j;
        }
        return parts;
    }
    if (sep->empty()) throw make_error("split(): empty separator");
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t at = s.find(*sep, start);
        if (at == std::string::npos) break;
        parts.push_back(s.substr(start, at - start));
        start = at + sep->size();
    }
    parts.push_back(s.substr(start));
    return parts;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
    std::string out;
    if (from.empty()) {
        // Python inserts `to` between every character (and at both ends).
        auto offsets = utf8_offsets(s);
        int64_t done = 0;
        for (size_t i = 0; i + 1 < offsets.size(); ++i) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
        }
        if (count < 0 || done < count) out += to;
        return out;
    }
    size_t start = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
        size_t at = s.find(from, start);
        if (at == std::string::npos) break;
        out.append(s, start, at - start);
        out += to;
        start = at + from.size();
        ++done;
    }
    out.append(s, start, std::string::npos);
    return out;
}

std::string ascii_upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

std::string ascii_lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string py_capitalize(const std::string& s) {
    std::string out = ascii_lower(s);
    if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
    return out;
}

std::string py_title(const std::string& s) {
    std::string out = s;
    bool prev_cased = false;
    for (char& c : out) {
        unsigned char u = static_cast<unsigned char>(c);
        bool cased = std::isalpha(u) != 0;
        if (cased) c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
        prev_cased = cased;
    }
    return out;
}

namespace {

void json_string(std::string& out, const std::string& s) {
    out += '"';
    for (unsigned char c : s) {
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
            if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    out += '"';
}

void json_value(std::string& out, const Value& v, int indent, int level, const std::string& item_sep,
                const std::string& key_sep, bool sort_keys) {
    if (level > 100) throw make_error("tojson: value nested deeper than 100 levels");
    auto newline = [&](int lvl) {
        if (indent < 0) return;
        out += '\n';
        out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
    };
    switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
        double f = v.as_number();
        if (f != f) {
            out += "NaN";
        } else if (f == 1.0 / 0.0) {
            out += "Infinity";
        } else if (f == -1.0 / 0.0) {
            out += "-Infinity";
        } else {
            out += format_python_float(f);
        }
        return;
    }
    case Value::Kind::String: json_string(out, v.as_string()); return;
    case Value::Kind::List: {
        const auto& items = v.as_list();
        if (items.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += item_sep;
            newline(level + 1);
            json_value(out, items[i], indent, level + 1, item_sep, key_sep, sort_keys);
        }
        newline(level);
        out += ']';
        return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : v.as_dict().items()) items.push_back(&kv);
        if (items.empty()) {
            out += "{}";
            return;
        }
        if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        for (size_t i = 0; i < items.size(); ++i) {
            if (i) out += item_sep;
            newline(level + 1);
            json_string(out, items[i]->first);
            out += key_sep;
            json_value(out, items[i]->second, indent, level + 1, item_sep, key_sep, sort_keys);
        }
        newline(level);
        out += '}';
        return;
    }
    case Value::Kind::Undefined: throw make_error("tojson: value is undefined");
    case Value::Kind::Callable: throw make_error("tojson: a {} is not JSON serializable", v.type_name());
    }
}

}  // namespace

std::string to_json(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys) {
    std::string out;
    json_value(out, v, indent, 0, item_sep, key_sep, sort_keys);
    return out;
}

}  // namespace tessera::jinja
