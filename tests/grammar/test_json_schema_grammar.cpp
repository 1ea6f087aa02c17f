// JSON schemas turned into grammars: texts drawn at random from the grammar
// always parse and validate (against a plain validator of the same keywords,
// written here as the reference), hand-picked texts are accepted or refused
// as the schema says, and hostile schemas are refused by name.
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <random>

namespace tessera {
namespace {

using ordered_json = nlohmann::ordered_json;

size_t code_points(const std::string& s) {
    size_t n = 0;
    for (const char c : s) n += (static_cast<uint8_t>(c) & 0xc0) != 0x80 ? 1 : 0;
    return n;
}

// The reference: does `v` satisfy `s`, for the keywords the converter knows?
bool valid(const ordered_json& v, const ordered_json& s, const ordered_json& root) {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) {
        const std::string ref = s["$ref"];
        const std::string key = ref.substr(ref.rfind('/') + 1);
        return valid(v, ref.find("$defs") != std::string::npos ? root["$defs"][key] : root["definitions"][key], root);
    }
    if (s.contains("const") && v != s["const"]) return false;
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
    for (const char* key : {"anyOf", "oneOf"}) {
        if (s.contains(key) &&
            std::none_of(s[key].begin(), s[key].end(), [&](const ordered_json& o) { return valid(v, o, root); })) {
            return false;
        }
    }
    if (s.contains("allOf")) {
        // The parts' keys together: each part alone would count the others'
        // keys as additional (absent additionalProperties counts as false).
        ordered_json merged = {{"type", "object"}, {"properties", ordered_json::object()}, {"required", ordered_json::array()}};
        for (const auto& part : s["allOf"]) {
            for (const auto& [key, value] : part["properties"].items()) merged["properties"][key] = value;
            for (const auto& k : part.value("required", ordered_json::array())) merged["required"].push_back(k);
        }
        return valid(v, merged, root);
    }
    if (s.contains("type")) {
        std::vector<std::string> types;
        if (s["type"].is_array()) {
            for (const auto& t : s["type"]) types.push_back(t);
        } else {
            types.push_back(s["type"]);
        }
        if (s.value("nullable", false)) types.push_back("null");
        const bool ok = std::any_of(types.begin(), types.end(), [&](const std::string& t) {
            return (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
                   (t == "integer" && v.is_number_integer()) || (t == "number" && v.is_number()) ||
                   (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
        });
        if (!ok) return false;
    }
    if (v.is_object()) {
        for (const auto& [key, value] : v.items()) {
            if (s.contains("properties") && s["properties"].contains(key)) {
                if (!valid(value, s["properties"][key], root)) return false;
            } else if (s.contains("additionalProperties")) {
                if (!valid(value, s["additionalProperties"], root)) return false;
            } else if (s.contains("properties")) {
                return false;  // absent additionalProperties counts as false (strict mode)
            }
        }
        if (s.contains("required")) {
            for (const auto& k : s["required"]) {
                if (!v.contains(k.get<std::string>())) return false;
            }
        }
    }
    if (v.is_array()) {
        if (s.contains("prefixItems")) {
            if (v.size() != s["prefixItems"].size()) return false;
            for (size_t i = 0; i < v.size(); ++i) {
                if (!valid(v[i], s["prefixItems"][i], root)) return false;
            }
        }
        if (s.contains("items")) {
            for (const auto& item : v) {
                if (!valid(item, s["items"], root)) return false;
            }
        }
        if (v.size() < s.value("minItems", size_t{0}) || v.size() > s.value("maxItems", SIZE_MAX)) return false;
    }
    if (v.is_string()) {
        const size_t n = code_points(v.get<std::string>());
        if (n < s.value("minLength", size_t{0}) || n > s.value("maxLength", SIZE_MAX)) return false;
    }
    return true;
}

// A text drawn from the grammar: random bytes among those it allows, ending
// with some chance wherever the text is complete; past `soft_limit` bytes
// only bytes that bring the end nearer.
std::string draw(GrammarMatcher& m, std::mt19937& rng, size_t soft_limit) {
    GrammarState s = m.start();
    std::string text;
    for (int guard = 0; guard < 100000; ++guard) {
        if (GrammarMatcher::accepting(s) && (GrammarMatcher::finished(s) || text.size() > soft_limit || rng() % 4 == 0)) {
            return text;
        }
        const uint64_t now = uint64_t{m.distance(s)} * 4 + s.pending;
        std::vector<std::pair<uint8_t, GrammarState>> options;
        // Printable ASCII, and a few bytes of multi-byte characters.
        for (int b = 0; b < 256; ++b) {
            if (b >= 0x80 && b != 0xc3 && b != 0xa9 && b != 0xe2 && b != 0x82 && b != 0xac) continue;
            GrammarState next = m.advance_byte(s, static_cast<uint8_t>(b));
            if (next.dead()) continue;
            if (text.size() > soft_limit && uint64_t{m.distance(next)} * 4 + next.pending >= now) continue;
            options.emplace_back(static_cast<uint8_t>(b), std::move(next));
        }
        if (options.empty()) {
            ADD_FAILURE() << "no byte continues '" << text << "'";
            return text;
        }
        auto& [byte, next] = options[rng() % options.size()];
        text += static_cast<char>(byte);
        s = std::move(next);
    }
    ADD_FAILURE() << "the text never ended";
    return text;
}

std::shared_ptr<const Grammar> schema_grammar(const ordered_json& schema) {
    return std::make_shared<const Grammar>(parse_gbnf(json_schema_to_gbnf(schema)));
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
    GrammarMatcher m(g);
    GrammarState s = m.start();
    for (const char c : text) {
        s = m.advance_byte(s, static_cast<uint8_t>(c));
        if (s.dead()) return false;
    }
    return GrammarMatcher::accepting(s);
}

const ordered_json kNested = ordered_json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer"},
    "score": {"type": "number"},
    "member": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    "address": {"$ref": "#/$defs/address"},
    "nickname": {"type": ["string", "null"]},
    "kind": {"const": "person"},
    "pets": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/pet"}, {"type": "null"}]}},
    "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}]}
  },
  "required": ["name", "age", "color", "tags", "address", "kind"],
  "additionalProperties": false,
  "$defs": {
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "maxLength": 5}},
                "required": ["city"]},
    "pet": {"type": "object", "properties": {"species": {"enum": ["cat", "dog"]}, "legs": {"type": "integer"}},
            "required": ["species", "legs"]}
  }
})");

TEST(JsonSchemaGrammar, RandomTextsOfTheGrammarParseAndValidate) {
    const std::vector<ordered_json> schemas = {
        kNested,
        ordered_json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"},
                                "c": {"type": "null"}}})"),
        ordered_json::parse(R"({"type": "array", "items": {"type": "object", "additionalProperties": {"type": "number"}}})"),
        ordered_json::parse(R"({"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}, {"enum": [1.5, "x", null, true]}]})"),
        ordered_json::parse(R"({"allOf": [{"properties": {"x": {"type": "number"}}, "required": ["x"]},
                                          {"properties": {"y": {"type": "string"}}}]})"),
        ordered_json::parse(R"({})"),
        ordered_json::parse(R"({"type": "object", "additionalProperties": true})"),
    };
    std::mt19937 rng(7);
    for (const ordered_json& schema : schemas) {
        const auto g = schema_grammar(schema);
        GrammarMatcher m(g);
        for (int i = 0; i < 150; ++i) {
            const std::string text = draw(m, rng, 40 + rng() % 200);
            ordered_json value;
            ASSERT_NO_THROW(value = ordered_json::parse(text)) << schema.dump() << "\n" << text;
            EXPECT_TRUE(valid(value, schema, schema)) << schema.dump() << "\n" << text;
        }
    }
}

TEST(JsonSchemaGrammar, HandPickedTextsAreAcceptedOrRefusedAsTheSchemaSays) {
    const auto g = schema_grammar(kNested);
    const std::string base = R"({"name": "Ann", "age": 41, "color": "red", "tags": ["a"], "address": {"city": "Oslo"}, "kind": "person")";
    EXPECT_TRUE(accepts(g, base + "}"));
    EXPECT_TRUE(accepts(g, base + R"(, "score": -1.5e3, "member": true, "nickname": null, "point": [1, 2]})"));
    EXPECT_FALSE(accepts(g, base + R"(, "extra": 1})"));            // no other keys
    EXPECT_FALSE(accepts(g, base + R"(, "point": [1, 2, 3]})"));      // a pair
    EXPECT_FALSE(accepts(g, R"({"name": "", "age": 1})"));            // minLength
    EXPECT_FALSE(accepts(g, R"({"name": "Ann", "age": 1.5})"));       // an integer
    EXPECT_FALSE(accepts(g, R"({"age": 1, "name": "Ann"})"));         // the schema's order
    const auto optional = schema_grammar(ordered_json::parse(
        R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})"));
    for (const std::string ok : {"{}", R"({"a": 1})", R"({"b": 2})", R"({"a": 1, "b": 2})"}) {
        EXPECT_TRUE(accepts(optional, ok)) << ok;
    }
    for (const std::string no : {R"({"b": 2, "a": 1})", R"({"a": 1, "a": 1})", R"({, "a": 1})", R"({"a": 1,})"}) {
        EXPECT_FALSE(accepts(optional, no)) << no;
    }
    const auto object = std::make_shared<const Grammar>(parse_gbnf(json_object_gbnf()));
    EXPECT_TRUE(accepts(object, R"({"x": [1, {"y": null}], "z": "\u00e9\n"})"));
    EXPECT_FALSE(accepts(object, R"([1])"));
    EXPECT_FALSE(accepts(object, R"({"x": 01})"));
}

std::string schema_error(const ordered_json& schema) {
    try {
        parse_gbnf(json_schema_to_gbnf(schema));
    } catch (const GrammarError& e) {
        return e.what();
    }
    return "";
}

TEST(JsonSchemaGrammar, HostileSchemasAreRefusedByName) {
    const std::pair<std::string, std::string> cases[] = {
        {R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}})",
         "refers to itself"},
        {R"({"$ref": "#/$defs/missing"})", "names no definition"},
        {R"({"$ref": "http://example.com/schema"})", "is not supported"},
        {R"({"enum": []})", "'enum' must be a non-empty array"},
        {R"({"type": "array", "minItems": 3, "maxItems": 2})", "'maxItems' is below 'minItems'"},
        {R"({"type": "string", "minLength": 5, "maxLength": 2})", "'maxLength' is below 'minLength'"},
        {R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})", "property 'b' is required"},
        {R"({"type": "string", "pattern": "^a+$"})", "the keyword 'pattern' is not supported"},
        {R"({"type": "integer", "minimum": 3})", "the keyword 'minimum' is not supported"},
        {R"({"type": "uuid"})", "unknown type 'uuid'"},
        {R"(false)", "matches nothing"},
        {R"({"anyOf": []})", "non-empty array"},
        {R"({"type": "string", "maxLength": 100000})", "from 0 to 1000"},
    };
    for (const auto& [schema, expected] : cases) {
        const std::string error = schema_error(ordered_json::parse(schema));
        EXPECT_NE(error.find(expected), std::string::npos) << schema << " gave: " << error;
    }
}

TEST(JsonSchemaGrammar, HugeAndDeepSchemasAreRefusedQuickly) {
    // Only the conversion is timed: the schemas are parsed before (test code,
    // built at -O0 under the sanitizers, and quadratic in ordered_json's keys).
    const auto properties = [](int n, const char* type) {
        std::string text = R"({"type": "object", "properties": {)";
        for (int i = 0; i < n; ++i) {
            text += (i ? ", " : "") + std::string("\"p") + std::to_string(i) + "\": {\"type\": \"" + type + "\"}";
        }
        return ordered_json::parse(text + "}}");
    };
    const ordered_json big = properties(6000, "string");  // about 170 KB
    ordered_json deep = {{"type", "string"}};
    for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
    // Many properties under the byte limit: within the property limit, and
    // the grammar is built (each property is a rule or two).
    const ordered_json wide = properties(3000, "integer");
    const auto start = std::chrono::steady_clock::now();
    EXPECT_NE(schema_error(big).find("bytes; at most"), std::string::npos);
    EXPECT_NE(schema_error(deep).find("nested deeper than"), std::string::npos);
    EXPECT_EQ(schema_error(wide), "");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

}  // namespace
}  // namespace tessera
