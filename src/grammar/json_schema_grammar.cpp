#include "grammar/json_schema_grammar.h"

#include <map>
#include <set>

namespace tessera {

namespace {

using ordered_json = nlohmann::ordered_json;

// The JSON building blocks, as llama.cpp's converter defines them: numbers
// and whitespace have bounded length, so every value can be closed within a
// known number of characters.
const std::map<std::string, std::string>& primitive_rules() {
    static const std::map<std::string, std::string> rules = {
        {"space", R"(| " " | "\n" [ \t]{0,20})"},
        {"boolean", R"(("true" | "false") space)"},
        {"null", R"("null" space)"},
        {"integral-part", R"([0] | [1-9] [0-9]{0,15})"},
        {"decimal-part", R"([0-9]{1,16})"},
        {"integer", R"(("-"? integral-part) space)"},
        {"number", R"(("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space)"},
        // \u escapes of lone surrogates (D800-DFFF) are left out: JSON's
        // grammar allows them but parsers refuse them.
        {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt/] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))"},
        {"string", R"("\"" char* "\"" space)"},
        {"value", R"(object | array | string | number | boolean | null)"},
        {"object", R"("{" space (string ":" space value ("," space string ":" space value)*)? "}" space)"},
        {"array", R"("[" space (value ("," space value)*)? "]" space)"},
    };
    return rules;
}

// What each primitive rule refers to, so only the rules used are written.
const std::map<std::string, std::vector<std::string>>& primitive_uses() {
    static const std::map<std::string, std::vector<std::string>> uses = {
        {"boolean", {"space"}},
        {"null", {"space"}},
        {"integer", {"integral-part", "space"}},
        {"number", {"integral-part", "decimal-part", "space"}},
        {"string", {"char", "space"}},
        {"value", {"object", "array", "string", "number", "boolean", "null"}},
        {"object", {"space", "string", "value"}},
        {"array", {"space", "value"}},
    };
    return uses;
}

std::string gbnf_literal(const std::string& text) {
    std::string out = "\"";
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += ch;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else {
            out += ch;  // UTF-8 passes through: the parser reads it
        }
    }
    return out + "\"";
}

std::string json_text(const ordered_json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

class SchemaConverter {
public:
    explicit SchemaConverter(const JsonSchemaLimits& limits) : limits_(limits) {}

    // Rule `name` for each schema (each its own root for $ref), then the
    // building blocks they use, once.
    std::string convert(const std::vector<std::pair<std::string, const ordered_json*>>& named) {
        for (const auto& entry : named) names_.insert(entry.first);
        for (const auto& [name, schema] : named) {
            root_ = schema;
            ref_rules_.clear();
            const std::string top = visit(*schema, name + "-value", 0, "the schema");
            add_rule_named(name, top);
        }
        std::string out;
        for (const auto& line : lines_) out += line + "\n";
        std::set<std::string> written;
        std::vector<std::string> todo(used_primitives_.begin(), used_primitives_.end());
        while (!todo.empty()) {
            const std::string name = todo.back();
            todo.pop_back();
            if (!written.insert(name).second) continue;
            out += name + " ::= " + primitive_rules().at(name) + "\n";
            const auto uses = primitive_uses().find(name);
            if (uses != primitive_uses().end()) todo.insert(todo.end(), uses->second.begin(), uses->second.end());
        }
        return out;
    }

private:
    [[noreturn]] static void refuse(const std::string& where, const std::string& what) {
        throw GrammarError("json schema: " + where + ": " + what);
    }

    std::string primitive(const std::string& name) {
        used_primitives_.insert(name);
        return name;
    }

    std::string unique_name(const std::string& hint) {
        std::string base;
        for (const char c : hint) {
            const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
            base += ok ? c : '-';
        }
        if (base.empty() || base.size() > 40) base = "r";
        // Numbering resumes where this base's last name stopped: restarting
        // from 1 made a schema with n properties cost n^2 set lookups (its
        // n "-first" and "-tail" rules share a base).
        std::string name = base;
        int& next = next_suffix_[base];
        while (names_.count(name) != 0 || primitive_rules().count(name) != 0 || name == "root") {
            name = base + "-" + std::to_string(++next);
        }
        names_.insert(name);
        return name;
    }

    std::string add_rule(const std::string& hint, const std::string& body) {
        const std::string name = unique_name(hint);
        lines_.push_back(name + " ::= " + body);
        return name;
    }
    void add_rule_named(const std::string& name, const std::string& body) { lines_.push_back(name + " ::= " + body); }

    const ordered_json& resolve_ref(const std::string& ref, const std::string& where) {
        const ordered_json& root = *root_;
        for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
            const std::string p = prefix;
            if (ref.rfind(p, 0) != 0) continue;
            const std::string key = ref.substr(p.size());
            const std::string container = p.substr(2, p.size() - 3);
            if (root.is_object() && root.contains(container) && root[container].is_object() &&
                root[container].contains(key)) {
                return root[container][key];
            }
            refuse(where, "'$ref' " + ref + " names no definition");
        }
        if (ref == "#") return root;
        refuse(where, "'$ref' " + ref + " is not supported (only #, #/$defs/NAME and #/definitions/NAME)");
    }

    std::string visit(const ordered_json& s, const std::string& hint, int depth, const std::string& where) {
        if (depth > limits_.max_depth) refuse(where, "nested deeper than " + std::to_string(limits_.max_depth));
        if (s.is_boolean()) {
            if (!s.get<bool>()) refuse(where, "'false' matches nothing");
            return primitive("value");
        }
        if (!s.is_object()) refuse(where, "a schema must be an object or a boolean");
        static const std::set<std::string> known = {
            "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
            "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions",
            "title", "description", "default", "examples", "format", "$schema", "$id", "$comment", "strict", "nullable"};
        for (const auto& [key, value] : s.items()) {
            if (known.count(key) == 0) {
                refuse(where, "the keyword '" + key + "' is not supported (the output could not be held to it)");
            }
        }
        if (s.contains("$ref")) {
            if (!s["$ref"].is_string()) refuse(where, "'$ref' must be a string");
            const std::string ref = s["$ref"].get<std::string>();
            const auto done = ref_rules_.find(ref);
            if (done != ref_rules_.end()) return done->second;
            if (!visiting_.insert(ref).second) {
                refuse(where, "'$ref' " + ref + " refers to itself: recursive schemas are not supported");
            }
            const std::string rule = visit(resolve_ref(ref, where), ref.substr(ref.rfind('/') + 1), depth + 1, ref);
            visiting_.erase(ref);
            ref_rules_.emplace(ref, rule);
            return rule;
        }
        if (s.contains("const")) {
            primitive("space");
            return add_rule(hint, gbnf_literal(json_text(s["const"])) + " space");
        }
        if (s.contains("enum")) {
            const ordered_json& values = s["enum"];
            if (!values.is_array() || values.empty()) refuse(where, "'enum' must be a non-empty array");
            std::string body;
            for (const auto& v : values) body += (body.empty() ? "" : " | ") + gbnf_literal(json_text(v));
            primitive("space");
            return add_rule(hint, "(" + body + ") space");
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            const ordered_json& options = s[key];
            if (!options.is_array() || options.empty()) refuse(where, std::string("'") + key + "' must be a non-empty array");
            std::string body;
            for (size_t i = 0; i < options.size(); ++i) {
                const std::string rule = visit(options[i], hint + "-" + std::to_string(i), depth + 1,
                                               where + "." + key + "[" + std::to_string(i) + "]");
                body += (body.empty() ? "" : " | ") + rule;
            }
            return add_rule(hint, body);
        }
        if (s.contains("allOf")) return visit(merge_all_of(s, where), hint, depth + 1, where);
        if (s.contains("type")) {
            const ordered_json& type = s["type"];
            if (type.is_array()) {
                if (type.empty()) refuse(where, "'type' is an empty list");
                std::string body;
                for (const auto& t : type) {
                    ordered_json one = s;
                    one["type"] = t;
                    body += (body.empty() ? "" : " | ") + visit(one, hint, depth + 1, where);
                }
                return add_rule(hint, body);
            }
            if (!type.is_string()) refuse(where, "'type' must be a string or a list of strings");
            const std::string t = type.get<std::string>();
            if (s.contains("nullable") && s["nullable"] == true) {
                ordered_json one = s;
                one.erase("nullable");
                return add_rule(hint, visit(one, hint, depth + 1, where) + " | " + primitive("null"));
            }
            if (t == "object") return object_rule(s, hint, depth, where);
            if (t == "array") return array_rule(s, hint, depth, where);
            if (t == "string") return string_rule(s, hint, where);
            if (t == "number" || t == "integer" || t == "boolean" || t == "null") return primitive(t);
            refuse(where, "unknown type '" + t + "'");
        }
        if (s.contains("properties")) return object_rule(s, hint, depth, where);
        if (s.contains("items") || s.contains("prefixItems")) return array_rule(s, hint, depth, where);
        return primitive("value");  // {}: any JSON value
    }

    static int count_of(const ordered_json& s, const char* key, int fallback, const std::string& where) {
        if (!s.contains(key)) return fallback;
        const ordered_json& v = s[key];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 1000) {
            refuse(where, std::string("'") + key + "' must be an integer from 0 to 1000");
        }
        return static_cast<int>(v.get<int64_t>());
    }

    std::string string_rule(const ordered_json& s, const std::string& hint, const std::string& where) {
        const int min = count_of(s, "minLength", 0, where);
        const int max = count_of(s, "maxLength", -1, where);
        if (min == 0 && max < 0) return primitive("string");
        if (max >= 0 && max < min) refuse(where, "'maxLength' is below 'minLength'");
        primitive("char");
        primitive("space");
        const std::string repeat = "{" + std::to_string(min) + "," + (max < 0 ? "" : std::to_string(max)) + "}";
        return add_rule(hint, "\"\\\"\" char" + repeat + " \"\\\"\" space");
    }

    std::string array_rule(const ordered_json& s, const std::string& hint, int depth, const std::string& where) {
        const std::string open = "\"[\" " + primitive("space");
        const std::string close = "\"]\" space";
        if (s.contains("prefixItems")) {
            const ordered_json& items = s["prefixItems"];
            if (!items.is_array() || items.empty()) refuse(where, "'prefixItems' must be a non-empty array");
            std::string body = open;
            for (size_t i = 0; i < items.size(); ++i) {
                if (i > 0) body += " \",\" space";
                body += " " + visit(items[i], hint + "-" + std::to_string(i), depth + 1,
                                    where + ".prefixItems[" + std::to_string(i) + "]");
            }
            return add_rule(hint, body + " " + close);
        }
        const std::string item = s.contains("items")
                                     ? visit(s["items"], hint + "-item", depth + 1, where + ".items")
                                     : primitive("value");
        const int min = count_of(s, "minItems", 0, where);
        const int max = count_of(s, "maxItems", -1, where);
        if (max >= 0 && max < min) refuse(where, "'maxItems' is below 'minItems'");
        if (max == 0) return add_rule(hint, open + " " + close);
        // item ("," item){min-1, max-1}, optional as a whole when min is 0.
        const std::string more = "(\",\" space " + item + "){" + std::to_string(std::max(min - 1, 0)) + "," +
                                 (max < 0 ? "" : std::to_string(max - 1)) + "}";
        const std::string list = item + " " + more;
        return add_rule(hint, open + " " + (min == 0 ? "(" + list + ")?" : list) + " " + close);
    }

    std::string object_rule(const ordered_json& s, const std::string& hint, int depth, const std::string& where) {
        std::vector<std::pair<std::string, std::string>> required, optional;  // key, rule of "key": value
        std::set<std::string> required_keys;
        if (s.contains("required")) {
            if (!s["required"].is_array()) refuse(where, "'required' must be an array of strings");
            for (const auto& k : s["required"]) {
                if (!k.is_string()) refuse(where, "'required' must be an array of strings");
                required_keys.insert(k.get<std::string>());
            }
        }
        const std::string colon = "space \":\" space";
        std::set<std::string> defined;
        if (s.contains("properties")) {
            const ordered_json& props = s["properties"];
            if (!props.is_object()) refuse(where, "'properties' must be an object");
            for (const auto& [key, schema] : props.items()) {
                if (++properties_ > limits_.max_properties) {
                    refuse(where, "more than " + std::to_string(limits_.max_properties) + " properties in all");
                }
                defined.insert(key);
                const std::string value = visit(schema, hint + "-" + key, depth + 1, where + ".properties." + key);
                const std::string kv =
                    add_rule(hint + "-" + key + "-kv", gbnf_literal(json_text(ordered_json(key))) + " " + colon + " " + value);
                (required_keys.count(key) != 0 ? required : optional).emplace_back(key, kv);
            }
        }
        std::string additional;  // rule of one extra "key": value, when allowed
        if (s.contains("additionalProperties")) {
            const ordered_json& extra = s["additionalProperties"];
            if (!(extra.is_boolean() && !extra.get<bool>())) {
                const std::string value = visit(extra, hint + "-extra", depth + 1, where + ".additionalProperties");
                additional = add_rule(hint + "-extra-kv", primitive("string") + " \":\" space " + value);
            }
        }
        for (const std::string& key : required_keys) {
            if (defined.count(key) == 0 && additional.empty()) {
                refuse(where, "property '" + key + "' is required but not among 'properties' and no other keys are allowed");
            }
            if (defined.count(key) == 0) refuse(where, "required property '" + key + "' must be listed in 'properties'");
        }
        primitive("space");
        const std::string open = "\"{\" space";
        const std::string close = "\"}\" space";
        const std::string more_extra = additional.empty() ? "" : " (\",\" space " + additional + ")*";
        if (!required.empty()) {
            std::string body = open;
            for (size_t i = 0; i < required.size(); ++i) body += (i > 0 ? " \",\" space " : " ") + required[i].second;
            for (const auto& [key, kv] : optional) body += " (\",\" space " + kv + ")?";
            return add_rule(hint, body + more_extra + " " + close);
        }
        if (optional.empty() && additional.empty()) return add_rule(hint, open + " " + close);
        // No required key: the first key present may be any of them, and
        // only keys after it (in schema order) may follow, each once.
        std::string first_after = additional.empty() ? "" : add_rule(hint + "-rest", additional + more_extra);
        std::string tail_after;  // ("," kv)? for every later key, then the extra keys
        {
            std::string extra_tail = additional.empty() ? "" : "(\",\" space " + additional + ")*";
            tail_after = extra_tail.empty() ? "" : add_rule(hint + "-tail", extra_tail);
        }
        for (size_t i = optional.size(); i-- > 0;) {
            const std::string& kv = optional[i].second;
            const std::string first =
                add_rule(hint + "-first", kv + (tail_after.empty() ? "" : " " + tail_after) +
                                              (first_after.empty() ? "" : " | " + first_after));
            tail_after = add_rule(hint + "-tail", "(\",\" space " + kv + ")?" + (tail_after.empty() ? "" : " " + tail_after));
            first_after = first;
        }
        return add_rule(hint, open + " (" + first_after + ")? " + close);
    }

    // allOf: every part an object schema; their properties and required
    // keys together.
    ordered_json merge_all_of(const ordered_json& s, const std::string& where) {
        const ordered_json& parts = s["allOf"];
        if (!parts.is_array() || parts.empty()) refuse(where, "'allOf' must be a non-empty array");
        ordered_json merged = s;
        merged.erase("allOf");
        merged["type"] = "object";
        for (const auto& part0 : parts) {
            const ordered_json* part = &part0;
            if (part->is_object() && part->contains("$ref") && (*part)["$ref"].is_string()) {
                part = &resolve_ref((*part)["$ref"].get<std::string>(), where);
            }
            if (!part->is_object() || !part->contains("properties") ||
                (part->contains("type") && (*part)["type"] != "object")) {
                refuse(where, "'allOf' is supported only over object schemas with 'properties'");
            }
            for (const auto& [key, value] : (*part)["properties"].items()) merged["properties"][key] = value;
            if (part->contains("required") && (*part)["required"].is_array()) {
                for (const auto& k : (*part)["required"]) merged["required"].push_back(k);
            }
        }
        return merged;
    }

    const ordered_json* root_ = nullptr;
    JsonSchemaLimits limits_;
    std::vector<std::string> lines_;
    std::set<std::string> names_;
    std::map<std::string, int> next_suffix_;  // last number given to each base name
    std::set<std::string> used_primitives_;
    std::map<std::string, std::string> ref_rules_;
    std::set<std::string> visiting_;
    size_t properties_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(const ordered_json& schema, const JsonSchemaLimits& limits) {
    const std::string text = schema.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() > limits.max_schema_bytes) {
        throw GrammarError("json schema: " + std::to_string(text.size()) + " bytes; at most " +
                           std::to_string(limits.max_schema_bytes) + " are accepted");
    }
    return SchemaConverter(limits).convert({{"root", &schema}});
}

std::string json_schemas_to_gbnf_rules(const std::vector<std::pair<std::string, nlohmann::ordered_json>>& named,
                                       const JsonSchemaLimits& limits) {
    std::vector<std::pair<std::string, const ordered_json*>> pointers;
    size_t bytes = 0;
    for (const auto& [name, schema] : named) {
        bytes += schema.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
        pointers.emplace_back(name, &schema);
    }
    if (bytes > limits.max_schema_bytes) {
        throw GrammarError("json schemas: " + std::to_string(bytes) + " bytes in all; at most " +
                           std::to_string(limits.max_schema_bytes) + " are accepted");
    }
    return SchemaConverter(limits).convert(pointers);
}

std::string json_object_gbnf() { return json_schema_to_gbnf(ordered_json{{"type", "object"}, {"additionalProperties", true}}); }

}  // namespace tessera
