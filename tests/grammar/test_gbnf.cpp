// GBNF text read into a grammar, and the matcher run over texts: what it
// accepts, what it refuses, and every malformed grammar refused by name.
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

namespace tessera {
namespace {

// kFull: a complete match; kPrefix: a prefix of one; kNo: neither.
enum class Match { kNo, kPrefix, kFull };

Match match(const std::shared_ptr<const Grammar>& g, const std::string& text) {
    GrammarMatcher m(g);
    GrammarState s = m.start();
    for (const char c : text) {
        s = m.advance_byte(s, static_cast<uint8_t>(c));
        if (s.dead()) return Match::kNo;
    }
    return GrammarMatcher::accepting(s) ? Match::kFull : Match::kPrefix;
}

std::shared_ptr<const Grammar> grammar(const std::string& text) {
    return std::make_shared<const Grammar>(parse_gbnf(text));
}

std::string error_of(const std::string& text, const GrammarLimits& limits = {}) {
    try {
        parse_gbnf(text, limits);
    } catch (const GrammarError& e) {
        return e.what();
    }
    return "";
}

TEST(Gbnf, LiteralsClassesAndAlternatives) {
    const auto g = grammar(R"(root ::= "yes" | "no" | [0-9] [a-fA-F]
)");
    EXPECT_EQ(match(g, "yes"), Match::kFull);
    EXPECT_EQ(match(g, "no"), Match::kFull);
    EXPECT_EQ(match(g, "7f"), Match::kFull);
    EXPECT_EQ(match(g, "7F"), Match::kFull);
    EXPECT_EQ(match(g, "ye"), Match::kPrefix);
    EXPECT_EQ(match(g, "7g"), Match::kNo);
    EXPECT_EQ(match(g, "yess"), Match::kNo);
    EXPECT_EQ(match(g, "maybe"), Match::kNo);
}

TEST(Gbnf, RepetitionsGroupsAndComments) {
    const auto g = grammar(R"(# a comment line
root ::= item ("," item)* end   # trailing comment
item ::= [a-z]+ [0-9]?
end ::= "!"{2,3}
)");
    EXPECT_EQ(match(g, "ab!!"), Match::kFull);
    EXPECT_EQ(match(g, "ab1,c,de2!!!"), Match::kFull);
    EXPECT_EQ(match(g, "ab!!!!"), Match::kNo);
    EXPECT_EQ(match(g, "ab!"), Match::kPrefix);
    EXPECT_EQ(match(g, ",ab!!"), Match::kNo);
    EXPECT_EQ(match(g, "a12!!"), Match::kNo);
    const auto exact = grammar("root ::= \"ab\"{3}\n");
    EXPECT_EQ(match(exact, "ababab"), Match::kFull);
    EXPECT_EQ(match(exact, "abab"), Match::kPrefix);
    const auto optional = grammar("root ::= \"x\"? \"y\"{0,2} ( \"a\" |\n  \"b\" )\n");
    EXPECT_EQ(match(optional, "a"), Match::kFull);
    EXPECT_EQ(match(optional, "xyyb"), Match::kFull);
    EXPECT_EQ(match(optional, "yyya"), Match::kNo);
}

TEST(Gbnf, NegatedClassesDotEscapesAndUtf8) {
    const auto g = grammar(R"(root ::= "\"" [^"\\\n]* "\"" . [\u00e0-\u00ff] "\x41" "é"
)");
    EXPECT_EQ(match(g, "\"héllo\"?\xC3\xA9" "Aé"), Match::kFull);
    EXPECT_EQ(match(g, "\"a\nb\"?éAé"), Match::kNo);
    EXPECT_EQ(match(g, "\"\"xzAé"), Match::kNo);  // z is below à
    // A character begun may still complete (é starts with C3) or may not
    // (E2 begins characters of U+2000..U+2FFF, all above the class).
    EXPECT_EQ(match(g, "\"\"x\xC3"), Match::kPrefix);
    EXPECT_EQ(match(g, "\"\"x\xE2"), Match::kNo);
    // Bytes that are not UTF-8 never match, not even ".": overlong forms,
    // surrogates and code points past U+10FFFF included.
    const auto any = grammar("root ::= .\n");
    EXPECT_EQ(match(any, "\xE2\x82\xAC"), Match::kFull);
    EXPECT_EQ(match(any, "\xF0\x9F\x98\x80"), Match::kFull);
    for (const std::string bad : {"\xC0\x80", "\xE0\x80\xA0", "\xE0\x9F", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF0\x80"}) {
        EXPECT_EQ(match(any, bad), Match::kNo) << testing::PrintToString(bad);
    }
    EXPECT_EQ(match(g, "\"\"\xFF"), Match::kNo);
    EXPECT_EQ(match(g, "\"\"\x80"), Match::kNo);
}

TEST(Gbnf, RecursionAndDistanceToTheEnd) {
    const auto g = grammar(R"g(root ::= "(" root ")" | "x"
)g");
    EXPECT_EQ(match(g, "((x))"), Match::kFull);
    EXPECT_EQ(match(g, "((x)"), Match::kPrefix);
    EXPECT_EQ(match(g, "(x))"), Match::kNo);
    GrammarMatcher m(g);
    GrammarState s = m.start();
    EXPECT_EQ(m.distance(s), 1u);  // "x"
    for (const char c : std::string("(((")) s = m.advance_byte(s, static_cast<uint8_t>(c));
    EXPECT_EQ(m.distance(s), 4u);  // "x)))"
    s = m.advance_byte(s, 'x');
    EXPECT_EQ(m.distance(s), 3u);
    for (int i = 0; i < 3; ++i) s = m.advance_byte(s, ')');
    EXPECT_TRUE(GrammarMatcher::finished(s));
}

TEST(Gbnf, PrintedGrammarReadsBackTheSame) {
    const auto g = grammar(R"(root ::= ("a" | [^b-d\]] | "\"")+ tail
tail ::= "" | [\u0100-\U0001F600]
)");
    const std::string printed = grammar_to_gbnf(*g);
    const auto again = grammar(printed);
    EXPECT_EQ(grammar_to_gbnf(*again), printed);
    for (const std::string text : {"a", "x\"", "b", "a\xC4\x80", "\xF0\x9F\x98\x80", "a]"}) {
        EXPECT_EQ(match(g, text), match(again, text)) << text;
    }
}

TEST(Gbnf, MalformedGrammarsAreRefusedByName) {
    const std::pair<std::string, std::string> cases[] = {
        {"", "no 'root'"},
        {"item ::= \"a\"\n", "no 'root'"},
        {"root ::= item\n", "'item' is used but never defined"},
        {"root ::= root \"a\" | \"b\"\n", "left-recursive: rule 'root'"},
        {"root ::= a\na ::= \"x\"? b\nb ::= a \"x\" | \"y\"\n", "left-recursive"},
        {"root ::= \"a\" root\n", "matches no text"},
        {"root ::= \"abc\n", "line 1: a string literal is not closed"},
        {"root ::= [a-z\n", "character class is not closed"},
        {"root ::= []\n", "empty character class"},
        {"root ::= [z-a]\n", "ends before it starts"},
        {"root ::= \"\\q\"\n", "unknown escape"},
        {"root ::= \"\\x4\"\n", "hex digits"},
        {"root ::= \"a\"{2000}\n", "repetition count above 1000"},
        {"root ::= \"a\"{3,2}\n", "maximum is below its minimum"},
        {"root ::= * \"a\"\n", "follows nothing"},
        {"root ::= (\"a\"\n", "expected ')'"},
        {"root ::= \"a\"\nroot ::= \"b\"\n", "defined twice"},
        {"\n\nroot = \"a\"\n", "line 3: expected '::='"},
        {"root ::= \"a\" )\n", "end of the line"},
    };
    for (const auto& [text, expected] : cases) {
        const std::string error = error_of(text);
        EXPECT_NE(error.find(expected), std::string::npos) << text << " gave: " << error;
    }
}

TEST(Gbnf, AmbiguousGrammarsAreRefusedRatherThanSlow) {
    // Each "a" may end any of 200 runs: the parses multiply.
    std::string text = "root ::=";
    for (int i = 0; i < 200; ++i) text += " [a]*";
    text += "\n";
    const auto g = grammar(text);
    GrammarMatcher m(g, 1 << 22, 100);
    EXPECT_THROW(
        {
            GrammarState s = m.start();
            for (int i = 0; i < 10; ++i) s = m.advance_byte(s, 'a');
        },
        GrammarError);
}

TEST(Gbnf, SizeLimitsRefuseHugeGrammarsQuickly) {
    GrammarLimits limits;
    EXPECT_NE(error_of("root ::= \"" + std::string(1100000, 'a') + "\"\n").find("bytes; at most"), std::string::npos);
    // Nested repetitions stay small (each refers to the one inside), but
    // their texts are 10^12 characters: refused as beyond any budget.
    EXPECT_NE(error_of("root ::= ((((\"a\"{1000}){1000}){1000}){1000})\n").find("at least"), std::string::npos);
    EXPECT_NE(error_of("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')') + "\n").find("nested more than"),
              std::string::npos);
    limits.max_rules = 10;
    std::string many = "root ::= r0\n";
    for (int i = 0; i < 20; ++i) many += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + " | \"b\"\n";
    EXPECT_NE(error_of(many, limits).find("more than 10 rules"), std::string::npos);
}

}  // namespace
}  // namespace tessera
