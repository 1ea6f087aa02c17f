// jinja2's filters (`x | trim`), tests (`x is defined`) and the Python
// methods templates call on strings, dicts and lists (`s.strip()`,
// `d.items()`). Errors thrown here carry no template line; the renderer adds
// the line of the expression that called them.
#pragma once

#include "chat/jinja_value.h"

#include <string>

namespace tessera::jinja {

// Throws tessera::Error("unknown filter 'name'") for filters outside the
// supported set.
Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);
bool apply_test(const std::string& name, const Value& input, const CallArgs& args);
// Whether `obj.name(...)` is a method this interpreter knows.
bool has_method(const Value& obj, const std::string& name);
Value call_method(const Value& obj, const std::string& name, const CallArgs& args);

// Python ordering for sort/min/max and `<`: numbers with numbers, strings
// with strings; throws for other pairs.
int compare_values(const Value& a, const Value& b);
// `a in b`: substring, list membership, or dict key.
bool contains(const Value& container, const Value& item);
// What `for x in v` walks: list items, dict keys, string characters.
ValueList iterate(const Value& v);
// obj.name / obj[key] as jinja2 resolves them; undefined when absent.
Value get_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);

}  // namespace tessera::jinja
