#include "chat/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera::jinja {

const Value* ValueDict::find(const std::string& key) const {
    for (const auto& [k, v] : items_) {
        if (k == key) return &v;
    }
    return nullptr;
}

void ValueDict::set(const std::string& key, Value value) {
    for (auto& [k, v] : items_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    items_.emplace_back(key, std::move(value));
}

Value Value::undefined(std::string name) {
    Value v;
    v.s_ = std::move(name);
    return v;
}

Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}

Value::Value(bool b) : kind_(Kind::Bool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::Int), i_(i) {}
Value::Value(double f) : kind_(Kind::Float), f_(f) {}
Value::Value(std::string s) : kind_(Kind::String), s_(std::move(s)) {}

Value Value::list(ValueList items) {
    Value v;
    v.kind_ = Kind::List;
    v.list_ = std::make_shared<ValueList>(std::move(items));
    return v;
}

Value Value::dict() { return dict(ValueDict{}); }

Value Value::dict(ValueDict d) {
    Value v;
    v.kind_ = Kind::Dict;
    v.dict_ = std::make_shared<ValueDict>(std::move(d));
    return v;
}

Value Value::name_space(ValueDict attrs) {
    Value v = dict(std::move(attrs));
    v.kind_ = Kind::Namespace;
    return v;
}

Value Value::callable(std::string name, Function fn) {
    Value v;
    v.kind_ = Kind::Callable;
    v.s_ = std::move(name);
    v.fn_ = std::make_shared<Function>(std::move(fn));
    return v;
}

namespace {

template <typename Json>
Value value_from_json(const Json& j, bool as_input) {
    switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return Value(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
        return as_input ? Value::input_text(j.template get<std::string>()) : Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
        ValueList items;
        items.reserve(j.size());
        for (const auto& e : j) items.push_back(value_from_json(e, as_input));
        return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
        ValueDict d;
        for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), value_from_json(it.value(), as_input));
        if (as_input) d.mark_keys_as_input();
        return Value::dict(std::move(d));
    }
    case nlohmann::json::value_t::binary: break;
    }
    return Value::none();
}

}  // namespace

Value Value::from_json(const nlohmann::json& j, bool as_input) { return value_from_json(j, as_input); }
Value Value::from_json(const nlohmann::ordered_json& j, bool as_input) { return value_from_json(j, as_input); }

Value Value::marked(std::string s, TextSpans input) {
    Value v(std::move(s));
    if (!input.empty()) v.input_ = std::make_shared<const TextSpans>(std::move(input));
    return v;
}

Value Value::input_text(std::string s) {
    const size_t n = s.size();
    return n == 0 ? Value(std::move(s)) : marked(std::move(s), TextSpans{{0, n}});
}

const TextSpans& Value::input_spans() const {
    static const TextSpans kNone;
    return input_ ? *input_ : kNone;
}

namespace {

bool holds_input(const Value& v, int depth) {
    // Deeper than any real message: treat it as the caller's.
    if (depth > 64) return true;
    switch (v.kind()) {
    case Value::Kind::String: return !v.input_spans().empty();
    case Value::Kind::List:
        for (const Value& item : v.as_list()) {
            if (holds_input(item, depth + 1)) return true;
        }
        return false;
    case Value::Kind::Dict:
    case Value::Kind::Namespace:
        if (v.as_dict().keys_are_input() && v.as_dict().size() != 0) return true;
        for (const auto& item : v.as_dict().items()) {
            if (holds_input(item.second, depth + 1)) return true;
        }
        return false;
    default: return false;
    }
}

}  // namespace

bool Value::has_input() const { return holds_input(*this, 0); }

Value Value::as_input() const {
    if (is_string()) return input_text(s_);
    if (is_list()) {
        ValueList items;
        items.reserve(list_->size());
        for (const Value& item : *list_) items.push_back(item.as_input());
        return list(std::move(items));
    }
    return *this;
}

bool Value::truthy() const {
    switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b_;
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0.0;
    case Kind::String: return !s_.empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return dict_->size() != 0;
    case Kind::Namespace:
    case Kind::Callable: return true;
    }
    return false;
}

std::string format_python_float(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
    if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
    // Shortest round-trip digits in scientific form, then laid out as
    // Python's repr does: fixed notation for exponents -4..15.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    std::string sci(buf, res.ptr);
    bool negative = sci[0] == '-';
    if (negative) sci.erase(0, 1);
    size_t e_pos = sci.find('e');
    int exponent = std::atoi(sci.c_str() + e_pos + 1);
    std::string digits;
    for (size_t i = 0; i < e_pos; ++i) {
        if (sci[i] != '.') digits += sci[i];
    }
    std::string out;
    if (exponent < -4 || exponent >= 16) {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char exp_buf[16];
        std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        out += exp_buf;
    } else if (exponent < 0) {
        out.assign("0.");
        out.append(static_cast<size_t>(-exponent - 1), '0');
        out += digits;
    } else {
        size_t int_len = static_cast<size_t>(exponent) + 1;
        if (digits.size() <= int_len) {
            out = digits + std::string(int_len - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, int_len) + "." + digits.substr(int_len);
        }
    }
    return negative ? "-" + out : out;
}

namespace {

// Python's repr of a str: single quotes unless the text holds a single quote
// and no double quote.
std::string repr_string(const std::string& s) {
    char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
    std::string out(1, quote);
    for (unsigned char c : s) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (c == static_cast<unsigned char>(quote)) {
                out += '\\';
                out += static_cast<char>(c);
            } else if (c < 0x20 || c == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02x", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
    }
    out += quote;
    return out;
}

}  // namespace

std::string Value::str() const {
    switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::String: return s_;
    default: return repr();
    }
}

std::string Value::repr() const {
    switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return b_ ? "True" : "False";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return format_python_float(f_);
    case Kind::String: return repr_string(s_);
    case Kind::List: {
        std::string out = "[";
        for (size_t i = 0; i < list_->size(); ++i) {
            if (i) out += ", ";
            out += (*list_)[i].repr();
        }
        return out + "]";
    }
    case Kind::Dict: {
        std::string out = "{";
        bool first = true;
        for (const auto& [k, v] : dict_->items()) {
            if (!first) out += ", ";
            first = false;
            out += repr_string(k) + ": " + v.repr();
        }
        return out + "}";
    }
    case Kind::Namespace: return "<Namespace>";
    case Kind::Callable: return "<function " + s_ + ">";
    }
    return "";
}

bool Value::equals(const Value& other) const {
    if (is_number() || is_bool()) {
        if (!(other.is_number() || other.is_bool())) return false;
        if (is_float() || other.is_float()) return as_number() == other.as_number();
        int64_t a = is_bool() ? b_ : i_;
        int64_t b = other.is_bool() ? other.b_ : other.i_;
        return a == b;
    }
    if (kind_ != other.kind_) return false;
    switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return s_ == other.s_;
    case Kind::List: {
        if (list_->size() != other.list_->size()) return false;
        for (size_t i = 0; i < list_->size(); ++i) {
            if (!(*list_)[i].equals((*other.list_)[i])) return false;
        }
        return true;
    }
    case Kind::Dict: {
        if (dict_->size() != other.dict_->size()) return false;
        for (const auto& [k, v] : dict_->items()) {
            const Value* o = other.dict_->find(k);
            if (!o || !v.equals(*o)) return false;
        }
        return true;
    }
    case Kind::Namespace: return dict_ == other.dict_;
    case Kind::Callable: return fn_ == other.fn_;
    default: return false;
    }
}

const char* Value::type_name() const {
    switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "namespace";
    case Kind::Callable: return "callable";
    }
    return "value";
}

}  // namespace tessera::jinja
