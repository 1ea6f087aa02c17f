#include "chat/jinja_builtins.h"

#include "chat/jinja_marked.h"
#include "chat/jinja_text.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace tessera::jinja {
namespace {

// The argument at `index` or called `name`, as Python binds parameters.
const Value* arg(const CallArgs& args, size_t index, const char* name) {
    for (const auto& [k, v] : args.keywords) {
        if (k == name) return &v;
    }
    return index < args.positional.size() ? &args.positional[index] : nullptr;
}

std::optional<std::string> opt_string(const Value* v) {
    if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
    if (!v->is_string()) throw make_error("expected a string argument, got {}", v->type_name());
    return v->as_string();
}

int64_t int_arg(const Value* v, int64_t fallback) {
    if (!v || v->is_none() || v->is_undefined()) return fallback;
    if (!v->is_int() && !v->is_bool()) throw make_error("expected an integer argument, got {}", v->type_name());
    return v->is_bool() ? v->as_bool() : v->as_int();
}

bool bool_arg(const Value* v, bool fallback) { return v ? v->truthy() : fallback; }

// A key of `d` as a value: the caller's data when the dict came from it.
Value key_value(const ValueDict& d, const std::string& key) {
    return d.keys_are_input() ? Value::input_text(key) : Value(key);
}

// Python's strip, lstrip, rstrip: the kept bytes keep their marks.
Value strip_value(const Value& v, const std::optional<std::string>& chars, bool left, bool right) {
    const std::string& s = v.as_string();
    if (v.input_spans().empty()) return Value(py_strip(s, chars, left, right));
    const size_t begin = left ? s.size() - py_strip(s, chars, true, false).size() : 0;
    const size_t kept = py_strip(s.substr(begin), chars, false, right).size();
    return substring(v, begin, kept);
}

// Python's split: each part keeps its marks. The parts lie in order in `s`,
// each found from where the previous one ended.
Value split_value(const Value& v, const std::optional<std::string>& sep, int64_t maxsplit) {
    ValueList out;
    const std::string& s = v.as_string();
    size_t at = 0;
    for (auto& part : py_split(s, sep, maxsplit)) {
        if (v.input_spans().empty()) {
            out.emplace_back(std::move(part));
            continue;
        }
        const size_t found = s.find(part, at);
        if (found == std::string::npos) {
            // Not a piece of `s` as it stands (py_split never makes one): the caller's, whole.
            out.push_back(Value::input_text(std::move(part)));
            continue;
        }
        out.push_back(substring(v, found, part.size()));
        at = found + part.size();
    }
    return Value::list(std::move(out));
}


const std::string& string_input(const Value& v, const char* what) {
    if (!v.is_string()) throw make_error("{} needs a string, got {}", what, v.type_name());
    return v.as_string();
}

// Looks up "a.b.c" attribute paths, as map/selectattr/sort accept them.
Value attribute_path(const Value& v, const std::string& path) {
    Value cur = v;
    size_t start = 0;
    while (true) {
        size_t dot = path.find('.', start);
        std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        cur = numeric ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part)))) : get_attribute(cur, part);
        if (dot == std::string::npos) return cur;
        start = dot + 1;
    }
}

// Items joined by `sep`, marks kept.
Value join_values(const Value& sep, const ValueList& items, const std::optional<std::string>& attribute, bool strings_only) {
    MarkedText out;
    bool first = true;
    for (const Value& item : items) {
        if (!first) out.append(sep);
        first = false;
        const Value v = attribute ? attribute_path(item, *attribute) : item;
        if (strings_only && !v.is_string()) throw make_error("str.join needs a string, got {}", v.type_name());
        out.append(v);
    }
    return out.value();
}

CallArgs rest_args(const CallArgs& args, size_t from) {
    CallArgs rest;
    for (size_t i = from; i < args.positional.size(); ++i) rest.positional.push_back(args.positional[i]);
    rest.keywords = args.keywords;
    return rest;
}

Value select_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep) {
    ValueList out;
    size_t test_at = by_attribute ? 1 : 0;
    std::string attribute;
    if (by_attribute) {
        auto a = opt_string(arg(args, 0, "attribute"));
        if (!a) throw make_error("selectattr/rejectattr need an attribute name");
        attribute = *a;
    }
    std::optional<std::string> test;
    if (args.positional.size() > test_at) test = opt_string(&args.positional[test_at]);
    CallArgs test_args = rest_args(args, test_at + 1);
    test_args.keywords.clear();
    for (const Value& item : iterate(input)) {
        Value subject = by_attribute ? attribute_path(item, attribute) : item;
        bool pass = test ? apply_test(*test, subject, test_args) : subject.truthy();
        if (pass == keep) out.push_back(item);
    }
    return Value::list(std::move(out));
}

// jinja2's sort key: strings compare case-insensitively unless asked.
Value sort_key(const Value& v, bool case_sensitive) {
    if (v.is_string() && !case_sensitive) return Value(ascii_lower(v.as_string()));
    return v;
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
        }
    }
    return out;
}

std::string indent_text(const std::string& s, const Value* width, bool first, bool blank) {
    std::string pad = width && width->is_string() ? width->as_string() : std::string(static_cast<size_t>(int_arg(width, 4)), ' ');
    std::vector<std::string> lines = py_split(s + "\n", std::string("\n"), -1);
    lines.pop_back();  // splitlines() of s + "\n" drops the final empty piece
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i) {
            out += "\n";
            if (blank || !lines[i].empty()) out += pad;
        }
        out += lines[i];
    }
    if (first) out = pad + out;
    return out;
}

std::string jinja_title(const std::string& s) {
    // Words begin after runs of '-', whitespace, and opening brackets.
    auto is_sep = [](char c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
        size_t j = i;
        bool sep = is_sep(s[i]);
        while (j < s.size() && is_sep(s[j]) == sep) ++j;
        std::string chunk = s.substr(i, j - i);
        if (!sep) chunk = ascii_upper(chunk.substr(0, 1)) + ascii_lower(chunk.substr(1));
        out += chunk;
        i = j;
    }
    return out;
}

Value to_int(const Value& v, const Value* fallback) {
    Value def = fallback ? *fallback : Value(static_cast<int64_t>(0));
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
    if (v.is_float()) return std::isfinite(v.as_number()) ? Value(static_cast<int64_t>(v.as_number())) : def;
    if (v.is_string()) {
        std::string s = py_strip(v.as_string(), std::nullopt, true, true);
        try {
            size_t used = 0;
            int64_t i = std::stoll(s, &used, 10);
            if (used == s.size()) return Value(i);
            double f = std::stod(s, &used);
            if (used == s.size()) return Value(static_cast<int64_t>(f));
        } catch (const std::exception&) {
        }
    }
    return def;
}

Value to_float(const Value& v, const Value* fallback) {
    Value def = fallback ? *fallback : Value(0.0);
    if (v.is_number() || v.is_bool()) return Value(v.as_number());
    if (v.is_string()) {
        std::string s = py_strip(v.as_string(), std::nullopt, true, true);
        try {
            size_t used = 0;
            double f = std::stod(s, &used);
            if (used == s.size()) return Value(f);
        } catch (const std::exception&) {
        }
    }
    return def;
}

Value round_value(const Value& v, int64_t precision, const std::string& method) {
    if (!v.is_number()) throw make_error("round needs a number, got {}", v.type_name());
    if (v.is_int() && method == "common") return v;  // Python's round(int, n) stays an int
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = v.as_number() * scale;
    double r;
    if (method == "common") {
        r = std::nearbyint(x);  // Python's round(): half to even
    } else if (method == "floor") {
        r = std::floor(x);
    } else if (method == "ceil") {
        r = std::ceil(x);
    } else {
        throw make_error("round: method must be common, floor or ceil");
    }
    return Value(r / scale);
}

Value sum_min_max(const std::string& name, const Value& input, const CallArgs& args) {
    ValueList items = iterate(input);
    auto attribute = opt_string(arg(args, name == "sum" ? 0 : 1, "attribute"));
    if (attribute) {
        for (auto& item : items) item = attribute_path(item, *attribute);
    }
    if (name == "sum") {
        const Value* start = arg(args, 1, "start");
        Value total = start ? *start : Value(static_cast<int64_t>(0));
        for (const auto& item : items) {
            if (!total.is_number() || !item.is_number()) throw make_error("sum needs numbers");
            total = (total.is_int() && item.is_int()) ? Value(total.as_int() + item.as_int()) : Value(total.as_number() + item.as_number());
        }
        return total;
    }
    if (items.empty()) return Value::undefined("min/max of an empty sequence");
    bool case_sensitive = bool_arg(arg(args, 0, "case_sensitive"), false);
    const Value* best = &items[0];
    for (const auto& item : items) {
        int c = compare_values(sort_key(item, case_sensitive), sort_key(*best, case_sensitive));
        if (name == "min" ? c < 0 : c > 0) best = &item;
    }
    return *best;
}

}  // namespace

int compare_values(const Value& a, const Value& b) {
    if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
        double x = a.as_number(), y = b.as_number();
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string()) < 0 ? -1 : (a.as_string() == b.as_string() ? 0 : 1);
    if (a.is_list() && b.is_list()) {
        const auto& x = a.as_list();
        const auto& y = b.as_list();
        for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
            int c = compare_values(x[i], y[i]);
            if (c) return c;
        }
        return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
    }
    throw make_error("cannot compare {} with {}", a.type_name(), b.type_name());
}

bool contains(const Value& container, const Value& item) {
    if (container.is_string()) {
        if (!item.is_string()) throw make_error("'in <string>' needs a string on the left, got {}", item.type_name());
        return container.as_string().find(item.as_string()) != std::string::npos;
    }
    if (container.is_list()) {
        for (const auto& v : container.as_list()) {
            if (v.equals(item)) return true;
        }
        return false;
    }
    if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    if (container.is_undefined()) return false;
    throw make_error("'in' needs a string, list or dict on the right, got {}", container.type_name());
}

ValueList iterate(const Value& v) {
    switch (v.kind()) {
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
        ValueList keys;
        for (const auto& [k, _] : v.as_dict().items()) keys.push_back(key_value(v.as_dict(), k));
        return keys;
    }
    case Value::Kind::String: {
        ValueList chars;
        auto offsets = utf8_offsets(v.as_string());
        for (size_t i = 0; i + 1 < offsets.size(); ++i) chars.push_back(substring(v, offsets[i], offsets[i + 1] - offsets[i]));
        return chars;
    }
    case Value::Kind::Undefined: return {};
    default: throw make_error("'{}' object is not iterable", v.type_name());
    }
}

Value get_attribute(const Value& obj, const std::string& name) {
    if (obj.is_dict() || obj.is_namespace()) {
        if (const Value* v = obj.as_dict().find(name)) return *v;
    }
    return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        int64_t i = key.is_bool() ? key.as_bool() : key.as_int();
        if (obj.is_list()) {
            int64_t n = static_cast<int64_t>(obj.as_list().size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return obj.as_list()[static_cast<size_t>(i)];
        } else {
            auto offsets = utf8_offsets(obj.as_string());
            int64_t n = static_cast<int64_t>(offsets.size()) - 1;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t b = offsets[static_cast<size_t>(i)];
                return substring(obj, b, offsets[static_cast<size_t>(i) + 1] - b);
            }
        }
        return Value::undefined(std::string(obj.type_name()) + " index out of range");
    }
    if ((obj.is_dict() || obj.is_namespace()) && key.is_string()) {
        if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
        return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + key.as_string() + "'");
    }
    return Value::undefined(std::string("'") + obj.type_name() + " object' has no item " + key.repr());
}

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
    if (name == "safe" || (name == "string" && input.is_string())) return input;
    if (name == "string") return derived(Value(input.str()), {&input});
    if (name == "trim") {
        const Value text = input.is_string() ? input : derived(Value(input.str()), {&input});
        return strip_value(text, opt_string(arg(args, 0, "chars")), true, true);
    }
    if (name == "tojson") {
        // Hugging Face replaces jinja2's tojson with json.dumps(x,
        // ensure_ascii=False, indent, separators, sort_keys): keys stay in
        // insertion order and nothing is HTML-escaped.
        const Value* indent = arg(args, 0, "indent");
        int ind = indent && !indent->is_none() ? static_cast<int>(int_arg(indent, 0)) : -1;
        std::string item_sep = ind >= 0 ? "," : ", ";
        std::string key_sep = ": ";
        if (const Value* seps = arg(args, 1, "separators"); seps && seps->is_list() && seps->as_list().size() == 2) {
            item_sep = seps->as_list()[0].str();
            key_sep = seps->as_list()[1].str();
        }
        return derived(Value(to_json(input, ind, item_sep, key_sep, bool_arg(arg(args, 2, "sort_keys"), false))), {&input});
    }
    if (name == "length" || name == "count") {
        if (input.is_string()) return Value(static_cast<int64_t>(utf8_length(input.as_string())));
        if (input.is_list()) return Value(static_cast<int64_t>(input.as_list().size()));
        if (input.is_dict() || input.is_namespace()) return Value(static_cast<int64_t>(input.as_dict().size()));
        if (input.is_undefined()) return Value(static_cast<int64_t>(0));
        throw make_error("object of type '{}' has no length", input.type_name());
    }
    if (name == "items") {
        if (input.is_undefined()) return Value::list();
        if (!input.is_dict()) throw make_error("items needs a mapping, got {}", input.type_name());
        return call_method(input, "items", {});
    }
    if (name == "list") return Value::list(iterate(input));
    if (name == "first" || name == "last") {
        ValueList items = iterate(input);
        if (items.empty()) return Value::undefined(std::string("no ") + name + " item of an empty sequence");
        return name == "first" ? items.front() : items.back();
    }
    if (name == "upper") return derived(Value(ascii_upper(input.str())), {&input});
    if (name == "lower") return derived(Value(ascii_lower(input.str())), {&input});
    if (name == "capitalize") return derived(Value(py_capitalize(input.str())), {&input});
    if (name == "title") return derived(Value(jinja_title(input.str())), {&input});
    if (name == "default" || name == "d") {
        const Value* fallback = arg(args, 0, "default_value");
        bool boolean = bool_arg(arg(args, 1, "boolean"), false);
        if (input.is_undefined() || (boolean && !input.truthy())) return fallback ? *fallback : Value("");
        return input;
    }
    if (name == "join") {
        const Value* sep = arg(args, 0, "d");
        if (sep != nullptr && !sep->is_none() && !sep->is_undefined() && !sep->is_string()) {
            throw make_error("expected a string argument, got {}", sep->type_name());
        }
        const Value separator = sep != nullptr && sep->is_string() ? *sep : Value("");
        return join_values(separator, iterate(input), opt_string(arg(args, 1, "attribute")), false);
    }
    if (name == "replace") {
        auto from = opt_string(arg(args, 0, "old"));
        auto to = opt_string(arg(args, 1, "new"));
        if (!from || !to) throw make_error("replace needs two strings");
        return derived(Value(py_replace(input.str(), *from, *to, int_arg(arg(args, 2, "count"), -1))),
                       {&input, arg(args, 0, "old"), arg(args, 1, "new")});
    }
    if (name == "int") return to_int(input, arg(args, 0, "default"));
    if (name == "float") return to_float(input, arg(args, 0, "default"));
    if (name == "round") {
        return round_value(input, int_arg(arg(args, 0, "precision"), 0), opt_string(arg(args, 1, "method")).value_or("common"));
    }
    if (name == "abs") {
        if (input.is_int()) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
        if (input.is_float()) return Value(std::fabs(input.as_number()));
        throw make_error("abs needs a number, got {}", input.type_name());
    }
    if (name == "reverse") {
        if (input.is_string()) {
            ValueList chars = iterate(input);
            MarkedText out;
            for (auto it = chars.rbegin(); it != chars.rend(); ++it) out.append(*it);
            return out.value();
        }
        ValueList items = iterate(input);
        std::reverse(items.begin(), items.end());
        return Value::list(std::move(items));
    }
    if (name == "sort") {
        ValueList items = iterate(input);
        bool reverse = bool_arg(arg(args, 0, "reverse"), false);
        bool case_sensitive = bool_arg(arg(args, 1, "case_sensitive"), false);
        auto attribute = opt_string(arg(args, 2, "attribute"));
        auto key = [&](const Value& v) { return sort_key(attribute ? attribute_path(v, *attribute) : v, case_sensitive); };
        std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
            return reverse ? compare_values(key(b), key(a)) < 0 : compare_values(key(a), key(b)) < 0;
        });
        return Value::list(std::move(items));
    }
    if (name == "unique") {
        bool case_sensitive = bool_arg(arg(args, 0, "case_sensitive"), false);
        auto attribute = opt_string(arg(args, 1, "attribute"));
        ValueList out, seen;
        for (const Value& item : iterate(input)) {
            Value key = sort_key(attribute ? attribute_path(item, *attribute) : item, case_sensitive);
            if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); })) {
                seen.push_back(key);
                out.push_back(item);
            }
        }
        return Value::list(std::move(out));
    }
    if (name == "map") {
        ValueList out;
        if (auto attribute = opt_string(arg(args, 99, "attribute"))) {
            const Value* fallback = arg(args, 99, "default");
            for (const Value& item : iterate(input)) {
                Value v = attribute_path(item, *attribute);
                out.push_back(v.is_undefined() && fallback ? *fallback : v);
            }
        } else {
            if (args.positional.empty() || !args.positional[0].is_string()) throw make_error("map needs a filter name or attribute=");
            CallArgs filter_args = rest_args(args, 1);
            for (const Value& item : iterate(input)) out.push_back(apply_filter(args.positional[0].as_string(), item, filter_args));
        }
        return Value::list(std::move(out));
    }
    if (name == "select") return select_items(input, args, false, true);
    if (name == "reject") return select_items(input, args, false, false);
    if (name == "selectattr") return select_items(input, args, true, true);
    if (name == "rejectattr") return select_items(input, args, true, false);
    if (name == "indent") {
        return derived(Value(indent_text(input.str(), arg(args, 0, "width"), bool_arg(arg(args, 1, "first"), false),
                                         bool_arg(arg(args, 2, "blank"), false))),
                       {&input, arg(args, 0, "width")});
    }
    if (name == "wordcount") return Value(static_cast<int64_t>(py_split(input.str(), std::nullopt, -1).size()));
    if (name == "escape" || name == "e") return derived(Value(html_escape(input.str())), {&input});
    if (name == "sum" || name == "min" || name == "max") return sum_min_max(name, input, args);
    if (name == "attr") {
        auto attribute = opt_string(arg(args, 0, "name"));
        if (!attribute) throw make_error("attr needs a name");
        return get_attribute(input, *attribute);
    }
    throw make_error("unknown filter '{}'", name);
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
    const Value* other = arg(args, 0, "other");
    auto need_other = [&]() -> const Value& {
        if (!other) throw make_error("test '{}' needs an argument", name);
        return *other;
    };
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "number") return v.is_number() || v.is_bool();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.is_dict();
    if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
    if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
    if (name == "callable") return v.is_callable();
    if (name == "odd" || name == "even") {
        if (!v.is_int()) throw make_error("test '{}' needs an integer, got {}", name, v.type_name());
        int64_t r = v.as_int() % 2;
        return name == "odd" ? r != 0 : r == 0;
    }
    if (name == "divisibleby") {
        int64_t d = int_arg(&need_other(), 1);
        if (!v.is_int() || d == 0) throw make_error("divisibleby needs integers and a non-zero divisor");
        return v.as_int() % d == 0;
    }
    if (name == "eq" || name == "equalto" || name == "==") return v.equals(need_other());
    if (name == "ne" || name == "!=") return !v.equals(need_other());
    if (name == "lt" || name == "lessthan" || name == "<") return compare_values(v, need_other()) < 0;
    if (name == "le" || name == "<=") return compare_values(v, need_other()) <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return compare_values(v, need_other()) > 0;
    if (name == "ge" || name == ">=") return compare_values(v, need_other()) >= 0;
    if (name == "in") {
        const Value* seq = arg(args, 0, "seq");
        if (!seq) throw make_error("test 'in' needs an argument");
        return contains(*seq, v);
    }
    if (name == "sameas") {
        const Value& o = need_other();
        return v.kind() == o.kind() && (v.is_none() || v.is_undefined() || v.equals(o));
    }
    if (name == "lower") return v.is_string() && ascii_lower(v.as_string()) == v.as_string();
    if (name == "upper") return v.is_string() && ascii_upper(v.as_string()) == v.as_string();
    if (name == "escaped") return false;
    throw make_error("unknown test '{}'", name);
}

bool has_method(const Value& obj, const std::string& name) {
    static const char* const kString[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper", "lower",
                                          "replace", "title", "capitalize", "find", "count", "join", "isdigit", "isalpha",
                                          "isspace"};
    static const char* const kDict[] = {"items", "keys", "values", "get"};
    if (obj.is_string()) return std::find(std::begin(kString), std::end(kString), name) != std::end(kString);
    if (obj.is_dict()) return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
    return false;
}

Value call_method(const Value& obj, const std::string& name, const CallArgs& args) {
    if (obj.is_dict()) {
        const auto& items = obj.as_dict().items();
        if (name == "items") {
            ValueList out;
            for (const auto& [k, v] : items) out.push_back(Value::list({key_value(obj.as_dict(), k), v}));
            return Value::list(std::move(out));
        }
        if (name == "keys" || name == "values") {
            ValueList out;
            for (const auto& [k, v] : items) out.push_back(name == "keys" ? key_value(obj.as_dict(), k) : v);
            return Value::list(std::move(out));
        }
        if (name == "get") {
            const Value* key = arg(args, 0, "key");
            if (!key) throw make_error("dict.get needs a key");
            const Value* fallback = arg(args, 1, "default");
            const Value* found = key->is_string() ? obj.as_dict().find(key->as_string()) : nullptr;
            return found ? *found : (fallback ? *fallback : Value::none());
        }
    }
    if (obj.is_string()) {
        const std::string& s = obj.as_string();
        if (name == "strip" || name == "lstrip" || name == "rstrip") {
            return strip_value(obj, opt_string(arg(args, 0, "chars")), name != "rstrip", name != "lstrip");
        }
        if (name == "split") {
            return split_value(obj, opt_string(arg(args, 0, "sep")), int_arg(arg(args, 1, "maxsplit"), -1));
        }
        if (name == "startswith" || name == "endswith") {
            const Value* p = arg(args, 0, "prefix");
            if (!p) throw make_error("{} needs an argument", name);
            ValueList options = p->is_list() ? p->as_list() : ValueList{*p};
            for (const Value& o : options) {
                const std::string& x = string_input(o, name.c_str());
                bool hit = name == "startswith" ? s.compare(0, x.size(), x) == 0
                                                : (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0);
                if (hit) return Value(true);
            }
            return Value(false);
        }
        if (name == "upper") return derived(Value(ascii_upper(s)), {&obj});
        if (name == "lower") return derived(Value(ascii_lower(s)), {&obj});
        if (name == "title") return derived(Value(py_title(s)), {&obj});
        if (name == "capitalize") return derived(Value(py_capitalize(s)), {&obj});
        if (name == "replace") {
            auto from = opt_string(arg(args, 0, "old"));
            auto to = opt_string(arg(args, 1, "new"));
            if (!from || !to) throw make_error("str.replace needs two strings");
            return derived(Value(py_replace(s, *from, *to, int_arg(arg(args, 2, "count"), -1))),
                           {&obj, arg(args, 0, "old"), arg(args, 1, "new")});
        }
        if (name == "find" || name == "count") {
            auto sub = opt_string(arg(args, 0, "sub"));
            if (!sub) throw make_error("str.{} needs a string", name);
            if (name == "find") {
                size_t at = s.find(*sub);
                return Value(at == std::string::npos ? static_cast<int64_t>(-1) : static_cast<int64_t>(utf8_length(s.substr(0, at))));
            }
            if (sub->empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
            int64_t n = 0;
            for (size_t at = s.find(*sub); at != std::string::npos; at = s.find(*sub, at + sub->size())) ++n;
            return Value(n);
        }
        if (name == "join") {
            const Value* items = arg(args, 0, "iterable");
            if (!items) throw make_error("str.join needs a list");
            return join_values(obj, iterate(*items), std::nullopt, true);
        }
        if (name == "isdigit" || name == "isalpha" || name == "isspace") {
            if (s.empty()) return Value(false);
            for (unsigned char c : s) {
                bool ok = name == "isdigit" ? std::isdigit(c) : (name == "isalpha" ? std::isalpha(c) : std::isspace(c));
                if (!ok) return Value(false);
            }
            return Value(true);
        }
    }
    throw make_error("unknown method '{}' of a {}", name, obj.type_name());
}

}  // namespace tessera::jinja
