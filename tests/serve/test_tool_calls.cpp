// Tool calls through the OpenAI request: a round trip (the call, the tool's
// result, an answer to come) sent as OpenAI clients send it renders through
// every real template in tests/data exactly as Python's jinja2 renders the
// same conversation; each family's call syntax is read back; the grammar of
// a required call only lets through calls that parse, to a named function,
// with arguments of its schema; and the stream holds back only what may be
// a call.
#include "chat/chat_template.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"
#include "serve/openai_api.h"
#include "serve/tool_calls.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

namespace tessera {
namespace {

using ordered_json = nlohmann::ordered_json;

// The tool_call_round conversation of render_reference.py, as a client
// sends it: arguments as JSON text, content null, no name on the result.
const char* const kRoundTrip = R"({"messages": [
  {"role": "user", "content": "  Hello! What is 2 + 2?  "},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
  {"role": "tool", "tool_call_id": "call12345", "content": "22 degrees"}],
 "tools": [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   "required": ["city"]}}}]})";

TEST(ToolCalls, ARoundTripRendersThroughEveryRealTemplateAsPythonDoes) {
    const std::string dir = test::source_dir() + "/tests/data/templates/";
    const ordered_json cases = ordered_json::parse(test::read_text(dir + "cases.json"));
    const CompletionRequest r = parse_completion_request(kRoundTrip, true);
    ordered_json extra = ordered_json::object();
    extra["tools"] = r.tools;
    int compared = 0;
    for (const auto& entry : cases["renders"]) {
        if (entry["case"] != "tool_call_round") continue;
        const std::string name = entry["template"];
        ChatTemplate t(test::read_text(dir + name));
        t.set_now([] {
            std::tm tm{};
            tm.tm_year = 2025 - 1900;
            tm.tm_mon = 2;
            tm.tm_mday = 14;
            tm.tm_hour = 10;
            tm.tm_min = 30;
            return tm;
        });
        const auto& tokens = cases["tokens"][name];
        if (entry.contains("error")) {
            EXPECT_ANY_THROW(t.render(r.messages, true, tokens["bos"], tokens["eos"], extra)) << name;
            continue;
        }
        const std::string expected = test::read_text(dir + entry["expected"].get<std::string>());
        EXPECT_EQ(t.render(r.messages, true, tokens["bos"], tokens["eos"], extra), expected) << name;
        ++compared;
    }
    EXPECT_GE(compared, 8);
}

TEST(ToolCalls, EachFamilysSyntaxIsReadBack) {
    const std::vector<std::string> names = {"get_weather", "add"};
    {
        const ParsedAnswer a = parse_tool_calls(
            ToolCallFormat::kHermes,
            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
            "<tool_call>{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>",
            names, 1);
        ASSERT_EQ(a.calls.size(), 2u);
        EXPECT_EQ(a.content, "Let me check.");
        EXPECT_EQ(a.calls[0].name, "get_weather");
        EXPECT_EQ(a.calls[0].arguments, R"({"city":"Paris"})");
        EXPECT_EQ(a.calls[1].arguments, R"({"a":1})");
        EXPECT_EQ(a.calls[0].id.size(), 9u);
        EXPECT_NE(a.calls[0].id, a.calls[1].id);
    }
    {
        const ParsedAnswer a = parse_tool_calls(ToolCallFormat::kLlama3,
                                                R"({"name": "add", "parameters": {"a": 1, "b": 2}}; {"name": "get_weather", "parameters": {}})",
                                                names, 1);
        ASSERT_EQ(a.calls.size(), 2u);
        EXPECT_EQ(a.calls[0].arguments, R"({"a":1,"b":2})");
        EXPECT_EQ(a.content, "");
    }
    {
        const ParsedAnswer a = parse_tool_calls(ToolCallFormat::kMistral,
                                                R"([TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}, {"name": "add", "arguments": {"a": 2}}])",
                                                names, 1);
        ASSERT_EQ(a.calls.size(), 2u);
        EXPECT_EQ(a.calls[1].arguments, R"({"a":2})");
    }
    {
        // Harmony: the analysis channel is reasoning, the final one the
        // answer; a call is a message to functions.NAME, in either header form.
        const ParsedAnswer a = parse_tool_calls(
            ToolCallFormat::kHarmony,
            "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Answer.<|return|>",
            names, 1);
        EXPECT_EQ(a.reasoning, "Think.");
        EXPECT_EQ(a.content, "Answer.");
        EXPECT_TRUE(a.calls.empty());
        const ParsedAnswer b = parse_tool_calls(
            ToolCallFormat::kHarmony,
            "<|channel|>analysis<|message|>Need a sum.<|end|><|start|>assistant to=functions.add<|channel|>commentary "
            "json<|message|>{\"a\": 1}<|call|>",
            names, 1);
        ASSERT_EQ(b.calls.size(), 1u);
        EXPECT_EQ(b.calls[0].name, "add");
        EXPECT_EQ(b.calls[0].arguments, R"({"a":1})");
        EXPECT_EQ(b.reasoning, "Need a sum.");
        const ParsedAnswer c = parse_tool_calls(
            ToolCallFormat::kHarmony, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}",
            names, 1);
        ASSERT_EQ(c.calls.size(), 1u);
        EXPECT_EQ(c.calls[0].name, "get_weather");
        // No channel at all (a constrained JSON answer): all of it is content.
        EXPECT_EQ(parse_tool_calls(ToolCallFormat::kHarmony, "{\"x\": 1}", names, 1).content, "{\"x\": 1}");
    }
    // Not calls: stays text.
    for (const auto& [format, text] : std::vector<std::pair<ToolCallFormat, std::string>>{
             {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>"},
             {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"add\", \"arguments\": {</tool_call>"},
             {ToolCallFormat::kHermes, "<tool_call>{\"name\": \"add\"}"},
             {ToolCallFormat::kLlama3, "{\"name\": \"add\", \"parameters\": [1]}"},
             {ToolCallFormat::kLlama3, "The answer is {\"name\": \"add\"}"},
             {ToolCallFormat::kMistral, "[1, 2]"}}) {
        const ParsedAnswer a = parse_tool_calls(format, text, names, 1);
        EXPECT_TRUE(a.calls.empty()) << text;
        EXPECT_EQ(a.content, text);
    }
}

TEST(ToolCalls, TheStreamHoldsBackOnlyWhatMayBeACall) {
    ToolCallStream hermes(ToolCallFormat::kHermes);
    EXPECT_EQ(hermes.push("Sure, <to"), "Sure, ");
    EXPECT_EQ(hermes.push("day> it is"), "<today> it is");
    EXPECT_EQ(hermes.push(" <tool_"), " ");
    EXPECT_EQ(hermes.push("call>{...}"), "");
    EXPECT_TRUE(hermes.in_call());
    EXPECT_EQ(hermes.finish(), "<tool_call>{...}");
    ToolCallStream llama(ToolCallFormat::kLlama3);
    EXPECT_EQ(llama.push("  "), "");
    EXPECT_EQ(llama.push("{\"na"), "");
    EXPECT_TRUE(llama.in_call());
    ToolCallStream harmony(ToolCallFormat::kHarmony);
    std::string shown;
    for (const std::string piece : {"<|channel|>", "analysis", "<|message|>", "hidden", "<|end|>", "<|start|>", "assistant",
                                    "<|channel|>", "final", "<|message|>", "Hel", "lo <", "|", "x"}) {
        shown += harmony.push(piece);
    }
    EXPECT_EQ(shown, "Hello <");  // "<|x" may still become a marker
    EXPECT_EQ(harmony.finish(), "|x");
    ToolCallStream text(ToolCallFormat::kLlama3);
    EXPECT_EQ(text.push(" Hello"), " Hello");
    EXPECT_EQ(text.push(" {json}"), " {json}");
}

// Random texts of a required call's grammar: each parses back into calls
// of the named functions with arguments that have the schema's keys.
TEST(ToolCalls, TheGrammarOfARequiredCallOnlyAllowsCallsThatParse) {
    const CompletionRequest r = parse_completion_request(kRoundTrip, true);
    ordered_json tools = r.tools;
    tools.push_back(ordered_json::parse(R"({"type": "function", "function": {"name": "add",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"}},
                       "required": ["a", "b"], "additionalProperties": false}}})"));
    std::mt19937 rng(5);
    for (const ToolCallFormat format :
         {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral, ToolCallFormat::kHarmony}) {
        for (const bool parallel : {false, true}) {
            auto g = std::make_shared<const Grammar>(parse_gbnf(tool_call_grammar(format, tools, "", parallel)));
            GrammarMatcher m(g);
            for (int i = 0; i < 40; ++i) {
                GrammarState s = m.start();
                std::string text;
                while (!GrammarMatcher::finished(s) && !(GrammarMatcher::accepting(s) && (text.size() > 200 || rng() % 3 == 0))) {
                    std::vector<std::pair<char, GrammarState>> next;
                    const uint64_t now = uint64_t{m.distance(s)} * 4 + s.pending;
                    for (int b = 1; b < 128; ++b) {
                        GrammarState n = m.advance_byte(s, static_cast<uint8_t>(b));
                        if (n.dead() || (text.size() > 200 && uint64_t{m.distance(n)} * 4 + n.pending >= now)) continue;
                        next.emplace_back(static_cast<char>(b), std::move(n));
                    }
                    ASSERT_FALSE(next.empty()) << text;
                    auto& pick = next[rng() % next.size()];
                    text += pick.first;
                    s = std::move(pick.second);
                }
                const ParsedAnswer a = parse_tool_calls(format, text, {"get_weather", "add"}, 1);
                ASSERT_FALSE(a.calls.empty()) << tool_call_format_name(format) << ": " << text;
                if (!parallel || format == ToolCallFormat::kHarmony) {
                    EXPECT_EQ(a.calls.size(), 1u) << text;
                }
                for (const ToolCall& c : a.calls) {
                    const auto args = nlohmann::json::parse(c.arguments);
                    if (c.name == "add") {
                        EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number() && args.size() == 2) << text;
                    } else {
                        EXPECT_TRUE(args["city"].is_string()) << text;
                    }
                }
            }
        }
    }
    // A named function: only it.
    auto named = std::make_shared<const Grammar>(parse_gbnf(tool_call_grammar(ToolCallFormat::kHermes, tools, "add", false)));
    GrammarMatcher m(named);
    GrammarState s = m.start();
    for (const char c : std::string("<tool_call>\n{\"name\": \"get")) s = m.advance_byte(s, static_cast<uint8_t>(c));
    EXPECT_TRUE(s.dead());
}

TEST(ToolCalls, ToolRequestsAreCheckedAndThousandsOfFunctionsRefused) {
    const auto error_of = [](const std::string& body) {
        try {
            parse_completion_request(body, true);
        } catch (const ApiError& e) {
            return e.param + ": " + e.message;
        }
        return std::string();
    };
    const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
    const std::string f = R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})";
    std::string many = "[";
    for (int i = 0; i < 3000; ++i) {
        many += std::string(i > 0 ? "," : "") + R"({"type": "function", "function": {"name": "f)" + std::to_string(i) + R"("}})";
    }
    many += "]";
    const std::pair<std::string, std::string> cases[] = {
        {"{" + user + R"(, "tools": )" + many + "}", "tools: 'tools' lists 3000 functions; at most 128"},
        {"{" + user + R"(, "tools": [)" + f + "," + f + "]}", "a second function named 'f'"},
        {"{" + user + R"(, "tools": [{"type": "function", "function": {"name": "a b"}}]})", "1 to 64 letters"},
        {"{" + user + R"(, "tool_choice": "required"})", "tool_choice: 'tool_choice' needs 'tools'"},
        {"{" + user + R"(, "tools": [)" + f + R"(], "tool_choice": {"type": "function", "function": {"name": "g"}}})",
         "names 'g', which is not among the tools"},
        {"{" + user + R"(, "tools": [)" + f + R"(], "tool_choice": "sometimes"})", "must be none, auto, required"},
        {"{" + user + R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
            "properties": {"x": {"$ref": "#"}}}}}], "tool_choice": "required"})", "tools: json schema"},
        {"{" + user + R"(, "tools": [)" + f + R"(], "tool_choice": "required", "response_format": {"type": "json_object"}})",
         "exclude each other"},
        {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", "only an assistant message"},
        {R"({"messages": [{"role": "tool", "content": "x"}]})", "needs a string 'tool_call_id'"},
        {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{oops"}}]}]})",
         "'arguments' must be a JSON object"},
        {"{" + user + R"(, "functions": []})", "functions: 'functions' is OpenAI's deprecated form"},
    };
    for (const auto& [body, expected] : cases) {
        const std::string error = error_of(body);
        EXPECT_NE(error.find(expected), std::string::npos) << body.substr(0, 200) << "\ngave: " << error;
    }
}

}  // namespace
}  // namespace tessera
