// The syntax tree of a Jinja2 template and the parser that builds it from
// tokens, with jinja2's operator precedence: `a if c else b` < or < and <
// not < comparisons/in < + - < ~ < * / // % < ** < unary - < postfix
// (.attr, [index], (call)) with filters and `is` tests binding to it.
// Constructs outside the subset (extends, include, import, blocks) fail
// here with an error naming them and their line, before anything renders.
#pragma once

#include "chat/jinja_lexer.h"
#include "chat/jinja_value.h"

#include <memory>
#include <string>
#include <vector>

namespace tessera::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    enum class Kind {
        Literal,    // value
        Name,       // name
        List,       // items
        Tuple,      // items (a list at run time)
        Dict,       // items as key, value pairs
        Attr,       // items[0].name
        Index,      // items[0][items[1]]
        Slice,      // items[0][items[1]:items[2]:items[3]], null parts absent
        Call,       // items[0](args)
        Filter,     // items[0] | name(args)
        Test,       // items[0] is [not] name(args)
        Unary,      // op items[0]: "not", "-", "+"
        Binary,     // items[0] op items[1]
        Conditional // items[0] if items[1] else items[2] (may be null)
    };
    Kind kind;
    int line = 0;
    Value value;
    std::string name;  // variable, attribute, filter, test, operator
    bool negated = false;  // `is not`
    std::vector<ExprPtr> items;
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
    enum class Kind {
        Text,      // text
        Output,    // {{ expr }}
        If,        // branches: conditions[i] -> bodies[i]; else_body
        For,       // targets in expr [if condition]; body; else_body
        Set,       // targets (or attribute target) = expr, or block set
        Macro,     // name(params with defaults) body
        CallBlock, // {% call macro(args) %} body {% endcall %}
        FilterBlock, // {% filter name %} body
        Break,
        Continue
    };
    Kind kind;
    int line = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr condition;
    std::vector<ExprPtr> conditions;
    std::vector<StmtList> bodies;
    StmtList body;
    StmtList else_body;
    std::vector<std::string> targets;   // for/set names; set ns.attr: {ns, attr} with attr_target
    bool attr_target = false;
    std::string name;                    // macro name
    std::vector<std::pair<std::string, ExprPtr>> params;  // macro params and defaults (null: none)
};

struct Template {
    StmtList body;
};

Template parse_template(const std::vector<Token>& tokens);

}  // namespace tessera::jinja
