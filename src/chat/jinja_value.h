// The values a Jinja2 chat template computes with. JSON alone cannot hold
// them: templates tell `undefined` from `none`, keep ints apart from floats
// (Python prints 1 and 1.0 differently), mutate namespace() objects, and call
// macros. Lists and dicts are shared by reference, as in Python, so
// `ns.x = ...` inside a loop is seen after it.
#pragma once

#include "util/text_spans.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::jinja {

class Value;

// Positional and keyword arguments of a call, as Python passes them.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keywords;
};

using ValueList = std::vector<Value>;

// Insertion-ordered string-keyed mapping (Python dicts keep insertion order,
// and templates print them in that order). Chat messages have a handful of
// keys, so a linear search beats hashing.
class ValueDict {
public:
    const Value* find(const std::string& key) const;
    void set(const std::string& key, Value value);
    const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
    size_t size() const;  // defined below Value: clang needs it complete here
    // Keys that came from the caller's data (a message or a tool schema):
    // iterating them gives strings marked as input.
    bool keys_are_input() const { return keys_are_input_; }
    void mark_keys_as_input() { keys_are_input_ = true; }

private:
    std::vector<std::pair<std::string, Value>> items_;
    bool keys_are_input_ = false;
};

using Function = std::function<Value(const CallArgs&)>;

class Value {
public:
    enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

    Value() = default;  // undefined
    static Value undefined(std::string name = {});
    static Value none();
    Value(bool b);
    Value(int i) : Value(static_cast<int64_t>(i)) {}
    Value(int64_t i);
    Value(double f);
    Value(std::string s);
    Value(const char* s) : Value(std::string(s)) {}
    static Value list(ValueList items = {});
    static Value dict();
    static Value dict(ValueDict d);
    static Value name_space(ValueDict attrs);
    static Value callable(std::string name, Function fn);
    // A string whose bytes in `input` came from the caller's data, not from
    // the template (see input_spans()).
    static Value marked(std::string s, TextSpans input);
    // A string that came whole from the caller's data.
    static Value input_text(std::string s);
    // JSON objects keep their key order: ordered_json keeps the source's,
    // plain json has sorted it already. as_input: every string in it (keys
    // too) is the caller's data: a conversation's messages, its tools.
    static Value from_json(const nlohmann::json& j, bool as_input = false);
    static Value from_json(const nlohmann::ordered_json& j, bool as_input = false);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::List; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_namespace() const { return kind_ == Kind::Namespace; }
    bool is_callable() const { return kind_ == Kind::Callable; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return i_; }
    double as_number() const { return kind_ == Kind::Float ? f_ : static_cast<double>(kind_ == Kind::Bool ? b_ : i_); }
    const std::string& as_string() const { return s_; }
    // The name an undefined value was looked up by, or a callable's name.
    const std::string& name() const { return s_; }
    ValueList& as_list() const { return *list_; }
    ValueDict& as_dict() const { return *dict_; }  // dicts and namespaces
    const Function& as_function() const { return *fn_; }

    // The byte ranges of a string that came from the caller's data: what a
    // rendered prompt must tokenize as plain text. Empty for template text
    // and for every kind but strings.
    const TextSpans& input_spans() const;
    // Whether this value is, or holds, anything from the caller's data.
    bool has_input() const;
    // This value with every string in it (in lists too) marked as input
    // whole: the result of a filter that transforms the caller's text, whose
    // bytes no longer line up with the spans it had.
    Value as_input() const;

    bool truthy() const;
    // Python's str(): what `{{ x }}` prints (undefined prints nothing).
    std::string str() const;
    // Python's repr(): how values print inside lists and dicts.
    std::string repr() const;
    // Python's ==, with 1 == 1.0 and deep comparison of lists and dicts.
    bool equals(const Value& other) const;
    // A short name for error messages ("string", "list", ...).
    const char* type_name() const;

private:
    Kind kind_ = Kind::Undefined;
    bool b_ = false;
    int64_t i_ = 0;
    double f_ = 0;
    std::string s_;
    std::shared_ptr<ValueList> list_;
    std::shared_ptr<ValueDict> dict_;
    std::shared_ptr<Function> fn_;
    std::shared_ptr<const TextSpans> input_;  // strings only; null: none
};

inline size_t ValueDict::size() const { return items_.size(); }

// Python's repr() of a float: shortest round-trip digits, "1.0" not "1",
// "1e-05" for small exponents, "inf"/"nan".
std::string format_python_float(double f);

}  // namespace tessera::jinja
