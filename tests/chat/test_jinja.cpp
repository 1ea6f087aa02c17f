// The Jinja2 interpreter, construct by construct. Expected outputs of the
// table below were produced by Python's jinja2 3.1.6 in Hugging Face's
// configuration (trim_blocks, lstrip_blocks, loopcontrols, json.dumps tojson).
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"
#include "chat/jinja_render.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace tessera::jinja {
namespace {

std::string render_text(const std::string& source, const nlohmann::ordered_json& vars = nlohmann::ordered_json::object(),
                        const RenderOptions& options = {}) {
    Template t = parse_template(tokenize(source));
    ValueDict d;
    for (auto it = vars.begin(); it != vars.end(); ++it) d.set(it.key(), Value::from_json(it.value()));
    return render(t, d, options);
}

// Renders and returns the error message ("" when it rendered).
std::string error_of(const std::string& source, const RenderOptions& options = {}) {
    try {
        render_text(source, nlohmann::ordered_json::object(), options);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

struct Case {
    const char* source;
    const char* vars;
    const char* expected;
};

// Expressions, filters, tests, methods, loops, scoping, macros, whitespace.
const Case kCases[] = {
    {R"J({{ 1 + 2 * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 / 2 }}|{{ 2 ** 10 }}|{{ 1.5 + 1 }}|{{ 0.1 + 0.2 }}|{{ 1e20 }}|{{ 1e-5 }})J",
     R"J({})J",
     R"J(7|3|-4|2|3.5|1024|2.5|0.30000000000000004|1e+20|1e-05)J"},
    {R"J({{ 'a' ~ 1 ~ none }}|{{ 'ab' * 3 }}|{{ [1, 'x', none, true, 2.0] }}|{{ {'k': 'v\'s'} }})J",
     R"J({})J",
     R"J(a1None|ababab|[1, 'x', None, True, 2.0]|{'k': "v's"})J"},
    {R"J({{ 'héllo'[1] }}|{{ 'héllo'[1:3] }}|{{ 'abc'[::-1] }}|{{ [1,2,3,4][1:] }}|{{ [1,2,3,4][-2:] }}|{{ [1,2,3,4][::2] }}|{{ 'héllo'|length }})J",
     R"J({})J",
     R"J(é|él|cba|[2, 3, 4]|[3, 4]|[1, 3]|5)J"},
    {R"J({{ x is defined }}|{{ x is undefined }}|{{ none is none }}|{{ 1 is number }}|{{ true is number }}|{{ 1 is integer }}|{{ 1.0 is float }}|{{ 'a' is string }}|{{ {} is mapping }}|{{ [] is iterable }}|{{ 3 is odd }}|{{ 4 is even }}|{{ 'a' is in 'abc' }}|{{ 2 is eq 2 }}|{{ true is true }}|{{ 0 is false }})J",
     R"J({})J",
     R"J(False|True|True|True|True|True|True|True|True|True|True|True|True|True|True|False)J"},
    {R"J({{ '  x  '|trim }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ 'hello world'|capitalize }}|{{ 'hello wORLD-x'|title }}|{{ x|default('d') }}|{{ ''|default('d', true) }}|{{ [1,2,3]|join('-') }}|{{ 'aXbX'|replace('X','y') }}|{{ 3.7|int }}|{{ '42'|int }}|{{ 2|float }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ -3|abs }}|{{ [3,1,2]|sort }}|{{ [3,1,2]|reverse|list }}|{{ [1,1,2]|unique|list }}|{{ [1,2]|first }}|{{ [1,2]|last }}|{% for k, v in {'a':1}|items %}{{ k }}{{ v }}{% endfor %}|{{ 'ab'|list }}|{{ 5|string }})J",
     R"J({})J",
     R"J(x|ABC|abc|Hello world|Hello World-X|d|d|1-2-3|ayby|3|42|2.0|2.0|3.14|3|[1, 2, 3]|[2, 1, 3]|[1, 2]|1|2|a1|['a', 'b']|5)J"},
    {R"J({{ users|map(attribute='name')|join(',') }}|{{ users|selectattr('admin')|map(attribute='name')|list }}|{{ users|rejectattr('admin')|list|length }}|{{ [1,2,3,4]|select('even')|list }}|{{ [1,2,3,4]|reject('odd')|list }}|{{ users|selectattr('name','equalto','b')|list|count }})J",
     R"J({"users": [{"name": "a", "admin": true}, {"name": "b", "admin": false}]})J",
     R"J(a,b|['a']|1|[2, 4]|[2, 4]|1)J"},
    {R"J({{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ 'é"\n'|tojson }}|{{ [] | tojson(indent=2) }})J",
     R"J({"d": {"z": 1, "a": [1.5, null, true, "x"], "e": {}}})J",
     R"J({"z": 1, "a": [1.5, null, true, "x"], "e": {}}|{
  "z": 1,
  "a": [
    1.5,
    null,
    true,
    "x"
  ],
  "e": {}
}|"é\"\n"|[])J"},
    {R"J({{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\nab\n'.lstrip('\n') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x','c')) }}|{{ 'ab'.upper() }}|{{ 'AB'.lower() }}|{{ 'aa'.replace('a','b') }}|{{ 'hi there'.title() }}|{{ d.get('k') }}|{{ d.get('z', 5) }}|{{ d.keys()|list }}|{{ d.values()|list }})J",
     R"J({"d": {"k": "v"}})J",
     R"J(a b|a|ab
|['a', 'b', '', 'c']|['a', 'b']|True|True|AB|ab|bb|Hi There|v|5|['k']|['v'])J"},
    {R"J({% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }};{% endfor %})J",
     R"J({"xs": ["a", "b"]})J",
     R"J(10TrueFalse22;21FalseTrue21;)J"},
    {R"J({% for x in [] %}a{% else %}empty{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}|{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %})J",
     R"J({"d": {"a": 1, "b": 2}})J",
     R"J(empty|a=1,b=2,|2242|1)J"},
    {R"J({% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{% endfor %}{{ x }}|{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }})J",
     R"J({})J",
     R"J(1|4)J"},
    {R"J({% macro greet(name, greeting='Hi') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Bob') }} {{ greet('Al', greeting='Yo') }} {{ greet(name='Z') }})J",
     R"J({})J",
     R"J(Hi, Bob! Yo, Al! Hi, Z!)J"},
    {R"J({% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inner{% endcall %})J",
     R"J({})J",
     R"J([inner])J"},
    {R"J({% raw %}{{ not rendered }}{% endraw %}|{# comment #}x)J",
     R"J({})J",
     R"J({{ not rendered }}|x)J"},
    {R"J(a
  {% if true %}
    b
  {% endif %}
c)J",
     R"J({})J",
     R"J(a
    b
c)J"},
    {R"J(a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e)J",
     R"J({})J",
     R"J(abc d e)J"},
    {R"J(  {{ 'v' }}
  {%+ if true %}x{% endif %}
{% if true +%}
y{% endif %})J",
     R"J({})J",
     R"J(  v
  x
y)J"},
    {R"J({{ 1 if false }}|{{ 'a' if true else 'b' }}|{{ not none }}|{{ 1 and 2 }}|{{ 0 or 'x' }}|{{ 'b' in ['a','b'] }}|{{ 'z' not in 'abc' }}|{{ 1 < 2 }}|{{ 'a' < 'b' }}|{{ 1 == 1.0 }}|{{ x }}|{{ x|length }})J",
     R"J({})J",
     R"J(|a|True|2|x|True|True|True|True|True||0)J"},
    {R"J({{ 'line1\nline2\n\nline4'|indent(2) }}|{{ 'a b  c'|wordcount }}|{{ range(3)|list }}|{{ range(1, 7, 2)|list }}|{{ dict(a=1) }}|{{ (1, 2)|list }}|{{ 'x%sy' }})J",
     R"J({})J",
     R"J(line1
  line2

  line4|3|[0, 1, 2]|[1, 3, 5]|{'a': 1}|[1, 2]|x%sy)J"},
    {R"J({% set t %}block {{ 1 }}{% endset %}{{ t }}|{% set a, b = [1, 2] %}{{ a }}{{ b }})J",
     R"J({})J",
     R"J(block 1|12)J"},
};

TEST(Jinja, MatchesJinja2Semantics) {
    for (const Case& c : kCases) {
        SCOPED_TRACE(c.source);
        EXPECT_EQ(render_text(c.source, nlohmann::ordered_json::parse(c.vars)), c.expected);
    }
}

TEST(Jinja, FloatsPrintLikePython) {
    EXPECT_EQ(format_python_float(1.0), "1.0");
    EXPECT_EQ(format_python_float(0.1), "0.1");
    EXPECT_EQ(format_python_float(1e16), "1e+16");
    EXPECT_EQ(format_python_float(1234567890123456.0), "1234567890123456.0");
    EXPECT_EQ(format_python_float(0.0001), "0.0001");
    EXPECT_EQ(format_python_float(-2.5e-7), "-2.5e-07");
}

TEST(Jinja, UndefinedIsEmptyFalsyAndIterableButNotInspectable) {
    EXPECT_EQ(render_text("[{{ nothing }}]{% if nothing %}x{% endif %}{% for i in nothing %}y{% endfor %}"), "[]");
    EXPECT_EQ(render_text("{{ d.missing is defined }}", {{"d", nlohmann::ordered_json::object()}}), "False");
    // Looking inside an undefined value is jinja2's UndefinedError.
    EXPECT_NE(error_of("{{ nothing.field }}").find("'nothing' is undefined"), std::string::npos);
    EXPECT_NE(error_of("{{ nothing + 1 }}").find("line 1"), std::string::npos);
}

TEST(Jinja, RaiseExceptionCarriesTheTemplatesMessage) {
    try {
        render_text("{{ raise_exception('Roles must alternate') }}");
        FAIL() << "no exception";
    } catch (const TemplateRaised& e) {
        EXPECT_STREQ(e.what(), "Roles must alternate");
    }
}

TEST(Jinja, UnsupportedSyntaxNamesConstructAndLine) {
    EXPECT_EQ(error_of("ok\n{% include 'x.jinja' %}"), "chat template line 2: unsupported tag {% include %}");
    EXPECT_EQ(error_of("{% extends 'base' %}"), "chat template line 1: unsupported tag {% extends %}");
    EXPECT_EQ(error_of("\n\n{{ x | frobnicate }}"), "chat template line 3: unknown filter 'frobnicate'");
    EXPECT_EQ(error_of("{{ 1 is frobnicated }}"), "chat template line 1: unknown test 'frobnicated'");
    EXPECT_EQ(error_of("{{ 'a'.zap() }}"), "chat template line 1: unknown method 'zap' of a string");
    EXPECT_EQ(error_of("{{ [].append(1) }}"), "chat template line 1: unknown method 'append' of a list");
    EXPECT_EQ(error_of("{{ nope(1) }}"), "chat template line 1: unknown function 'nope'");
    EXPECT_EQ(error_of("{% for x in y %}"), "chat template line 1: missing {% endfor %}");
    EXPECT_EQ(error_of("{% endif %}"), "chat template line 1: unexpected {% endif %}");
    EXPECT_EQ(error_of("{{ 'unterminated }}"), "chat template line 1: unterminated string literal");
    EXPECT_EQ(error_of("{{ 1 +* 2 }}"), "chat template line 1: unexpected '*' in expression");
    EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "chat template line 1: unsupported operand types for +: 'string' and 'int'");
    EXPECT_EQ(error_of("{% set x = 1 %}{% set x.y = 2 %}"), "chat template line 1: cannot set attribute 'y' of 'x': not a namespace()");
    EXPECT_EQ(error_of("{{ 1 // 0 }}"), "chat template line 1: division by zero");
}

TEST(Jinja, HostileTemplatesFailCleanly) {
    std::string deep;
    for (int i = 0; i < 5000; ++i) deep += "(";
    std::string closing(5000, ')');
    EXPECT_NE(error_of("{{ " + deep + "1" + closing + " }}").find("nesting deeper"), std::string::npos);
    EXPECT_NE(error_of("{{ " + deep + " }}").find("unterminated"), std::string::npos);
    std::string ifs;
    for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
    EXPECT_NE(error_of(ifs).find("nesting deeper"), std::string::npos);
    EXPECT_NE(error_of("{% for i in range(100000000) %}{% endfor %}").find("range() longer"), std::string::npos);
    EXPECT_NE(error_of("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}")
                  .find("evaluation budget"),
              std::string::npos);
    EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nested deeper than"), std::string::npos);
    RenderOptions small;
    small.max_output_bytes = 1000;
    EXPECT_NE(error_of("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", small).find("size limit"), std::string::npos);
    EXPECT_NE(error_of("{{ 'x' * 100000000000 }}").find("too large"), std::string::npos);
    EXPECT_NE(error_of("{{ 2 ** 100 }}").find("overflow"), std::string::npos);
    // A namespace set to hold itself (a cycle that would never be freed; fuzz finding).
    EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.index = ns %}").find("holds the namespace itself"),
              std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.a = [1, {'b': ns}] %}").find("holds the namespace itself"),
              std::string::npos);
    EXPECT_EQ(render_text("{% set a = namespace(x=1) %}{% set b = namespace() %}{% set b.y = a %}{{ b.y.x }}"), "1");
}

TEST(Jinja, StrftimeNowUsesTheInjectedClock) {
    RenderOptions options;
    options.now = [] {
        std::tm tm{};
        tm.tm_year = 124;
        tm.tm_mon = 6;
        tm.tm_mday = 26;
        return tm;
    };
    EXPECT_EQ(render_text("{{ strftime_now('%d %b %Y') }}", nlohmann::ordered_json::object(), options), "26 Jul 2024");
}

TEST(Jinja, CrlfNewlinesAndTrailingNewline) {
    EXPECT_EQ(render_text("a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n"), "a\nb\n");
}

}  // namespace
}  // namespace tessera::jinja
