// A JSON schema (OpenAI's response_format json_schema, a tool's parameters)
// turned into GBNF whose every complete text is JSON that validates against
// it. The schema is hostile input: its size and nesting are bounded, a
// recursive $ref, an empty enum, min above max or a required property an
// object may not have is refused, and a keyword that would constrain values
// in a way the grammar cannot express is refused by name rather than
// ignored. Annotations (title, description, default, examples, format,
// $schema, $id, $comment) are accepted and have no effect.
//
// Objects: properties in the schema's order, the required ones always,
// the others optional; keys beyond `properties` only where
// additionalProperties says so (absent counts as false, as OpenAI's strict
// mode requires). Strings: minLength/maxLength. Arrays: items, prefixItems,
// minItems/maxItems. Also enum, const, anyOf/oneOf, allOf of objects,
// $ref into $defs/definitions, type lists ("type": ["string", "null"]).
#pragma once

#include "grammar/grammar.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct JsonSchemaLimits {
    size_t max_schema_bytes = 128 * 1024;  // the schema's JSON text
    int max_depth = 32;                     // nested schemas
    size_t max_properties = 4000;           // over the whole schema
};

// GBNF text whose root matches the schema's JSON values (with optional
// whitespace between tokens, none before the value). Throws GrammarError.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaLimits& limits = {});

// Several schemas in one grammar: rule NAME matches the values of its
// schema (each schema is its own root for $ref); the JSON building blocks
// are written once; there is no root rule (the caller writes one). The
// names must be GBNF rule names. Throws GrammarError.
std::string json_schemas_to_gbnf_rules(const std::vector<std::pair<std::string, nlohmann::ordered_json>>& named,
                                       const JsonSchemaLimits& limits = {});

// Any JSON object: response_format {"type": "json_object"}.
std::string json_object_gbnf();

}  // namespace tessera
