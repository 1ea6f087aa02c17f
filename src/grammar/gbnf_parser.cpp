#include "grammar/gbnf_parser.h"

#include <unordered_map>
#include <unordered_set>

namespace tessera {

namespace {

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
public:
    GbnfParser(std::string_view text, const GrammarLimits& limits) : text_(text), limits_(limits) {}

    Grammar parse() {
        if (text_.size() > limits_.max_text_bytes) {
            throw GrammarError("the grammar is " + std::to_string(text_.size()) + " bytes; at most " +
                               std::to_string(limits_.max_text_bytes) + " are accepted");
        }
        reserve_defined_names();
        skip_space(true);
        while (pos_ < text_.size()) {
            parse_rule();
            skip_space(true);
        }
        const auto root = names_.find("root");
        if (root == names_.end() || grammar_.rules[root->second].alternatives.empty()) {
            throw GrammarError("the grammar has no 'root' rule");
        }
        grammar_.root = root->second;
        for (const GrammarRule& rule : grammar_.rules) {
            if (rule.alternatives.empty()) throw GrammarError("rule '" + rule.name + "' is used but never defined");
        }
        check_grammar(grammar_);
        return std::move(grammar_);
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        size_t line = 1;
        for (size_t i = 0; i < pos_ && i < text_.size(); ++i) line += text_[i] == '\n' ? 1 : 0;
        throw GrammarError("grammar line " + std::to_string(line) + ": " + what);
    }

    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return at_end() ? '\0' : text_[pos_]; }

    // Spaces and comments; newlines too where a rule may go on (inside
    // groups, after '|' or '::=').
    void skip_space(bool newlines) {
        while (!at_end()) {
            const char c = text_[pos_];
            if (c == '#') {
                while (!at_end() && text_[pos_] != '\n') ++pos_;
            } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    std::string parse_name() {
        const size_t start = pos_;
        while (!at_end() && is_name_char(text_[pos_])) ++pos_;
        if (pos_ == start) fail("expected a rule name");
        return std::string(text_.substr(start, pos_ - start));
    }

    uint32_t rule_id(const std::string& name) {
        const auto it = names_.find(name);
        if (it != names_.end()) return it->second;
        if (grammar_.rules.size() >= limits_.max_rules) {
            fail("more than " + std::to_string(limits_.max_rules) + " rules");
        }
        const auto id = static_cast<uint32_t>(grammar_.rules.size());
        grammar_.rules.push_back({name, {}});
        names_.emplace(name, id);
        return id;
    }

    // The names the text defines (a name, then '::=', at a line's start),
    // so a helper rule made for a group or repetition never takes a name a
    // later line defines.
    void reserve_defined_names() {
        for (size_t line = 0; line < text_.size();) {
            size_t p = line;
            while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
            const size_t start = p;
            while (p < text_.size() && is_name_char(text_[p])) ++p;
            const size_t end = p;
            while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
            if (end > start && text_.substr(p, 3) == "::=") reserved_.emplace(text_.substr(start, end - start));
            const size_t next = text_.find('\n', line);
            line = next == std::string_view::npos ? text_.size() : next + 1;
        }
    }

    uint32_t new_helper_rule(const std::string& base) {
        std::string name;
        do {
            name = base + "-" + std::to_string(++helper_count_);
        } while (names_.count(name) != 0 || reserved_.count(name) != 0);
        return rule_id(name);
    }

    void count_elements(size_t n) {
        elements_ += n;
        if (elements_ > limits_.max_elements) {
            fail("the grammar expands to more than " + std::to_string(limits_.max_elements) + " elements");
        }
    }

    void parse_rule() {
        const std::string name = parse_name();
        skip_space(false);
        if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
        pos_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(name);
        if (!grammar_.rules[id].alternatives.empty()) fail("rule '" + name + "' is defined twice");
        auto alternatives = parse_alternatives(name, 0);
        grammar_.rules[id].alternatives = std::move(alternatives);
        if (!at_end() && peek() != '\n' && peek() != '\r') fail("expected the end of the line after rule '" + name + "'");
    }

    std::vector<GrammarSequence> parse_alternatives(const std::string& rule_name, int depth) {
        if (depth > limits_.max_nesting) fail("groups nested more than " + std::to_string(limits_.max_nesting) + " deep");
        std::vector<GrammarSequence> alternatives;
        alternatives.push_back(parse_sequence(rule_name, depth));
        while (peek() == '|') {
            ++pos_;
            skip_space(true);
            alternatives.push_back(parse_sequence(rule_name, depth));
        }
        return alternatives;
    }

    uint32_t parse_escape() {
        ++pos_;  // the backslash
        if (at_end()) fail("a backslash ends the grammar");
        const char c = text_[pos_++];
        int digits = 0;
        switch (c) {
            case 'x': digits = 2; break;
            case 'u': digits = 4; break;
            case 'U': digits = 8; break;
            case 't': return '\t';
            case 'r': return '\r';
            case 'n': return '\n';
            case '\\': case '"': case '[': case ']': case '-': case '^': case '.': case '/': return static_cast<uint8_t>(c);
            default: fail(std::string("unknown escape '\\") + c + "'");
        }
        uint32_t value = 0;
        for (int i = 0; i < digits; ++i) {
            const char h = peek();
            int v = -1;
            if (h >= '0' && h <= '9') v = h - '0';
            if (h >= 'a' && h <= 'f') v = h - 'a' + 10;
            if (h >= 'A' && h <= 'F') v = h - 'A' + 10;
            if (v < 0) fail("expected " + std::to_string(digits) + " hex digits after '\\" + c + "'");
            value = value * 16 + static_cast<uint32_t>(v);
            ++pos_;
        }
        if (value > 0x10ffff) fail("code point out of range");
        return value;
    }

    // One code point of a literal or class: an escape or a UTF-8 character.
    uint32_t parse_char() {
        if (peek() == '\\') return parse_escape();
        const auto b = static_cast<uint8_t>(text_[pos_]);
        const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
        if (len == 0 || pos_ + static_cast<size_t>(len) > text_.size()) fail("invalid UTF-8 in the grammar");
        uint32_t cp = len == 1 ? b : b & (0x7fu >> len);
        for (int i = 1; i < len; ++i) {
            const auto cont = static_cast<uint8_t>(text_[pos_ + static_cast<size_t>(i)]);
            if ((cont & 0xc0) != 0x80) fail("invalid UTF-8 in the grammar");
            cp = (cp << 6) | (cont & 0x3f);
        }
        pos_ += static_cast<size_t>(len);
        return cp;
    }

    GrammarSequence parse_sequence(const std::string& rule_name, int depth) {
        GrammarSequence seq;
        size_t last_symbol = 0;  // where the symbol a repetition applies to begins
        bool have_symbol = false;
        while (!at_end()) {
            const char c = peek();
            if (c == '"') {
                ++pos_;
                last_symbol = seq.size();
                while (peek() != '"') {
                    if (at_end() || peek() == '\n') fail("a string literal is not closed");
                    const uint32_t cp = parse_char();
                    GrammarElement e;
                    e.ranges.push_back({cp, cp});
                    seq.push_back(std::move(e));
                    count_elements(1);
                }
                ++pos_;
                have_symbol = true;  // "" repeats as nothing
            } else if (c == '[') {
                ++pos_;
                last_symbol = seq.size();
                GrammarElement e;
                if (peek() == '^') {
                    e.negated = true;
                    ++pos_;
                }
                while (peek() != ']') {
                    if (at_end() || peek() == '\n') fail("a character class is not closed");
                    const uint32_t first = parse_char();
                    uint32_t last = first;
                    if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
                        ++pos_;
                        last = parse_char();
                        if (last < first) fail("a character range ends before it starts");
                    }
                    e.ranges.push_back({first, last});
                }
                ++pos_;
                if (!e.negated && e.ranges.empty()) fail("an empty character class matches nothing");
                seq.push_back(std::move(e));
                count_elements(1);
                have_symbol = true;
            } else if (c == '.') {
                ++pos_;
                last_symbol = seq.size();
                GrammarElement any;
                any.negated = true;
                seq.push_back(std::move(any));
                count_elements(1);
                have_symbol = true;
            } else if (is_name_char(c)) {
                last_symbol = seq.size();
                const std::string name = parse_name();
                GrammarElement e;
                e.kind = GrammarElement::Kind::kRule;
                e.rule = rule_id(name);
                seq.push_back(std::move(e));
                count_elements(1);
                have_symbol = true;
            } else if (c == '(') {
                ++pos_;
                skip_space(true);
                last_symbol = seq.size();
                auto alternatives = parse_alternatives(rule_name, depth + 1);
                if (peek() != ')') fail("expected ')'");
                ++pos_;
                const uint32_t group = new_helper_rule(rule_name);
                grammar_.rules[group].alternatives = std::move(alternatives);
                GrammarElement e;
                e.kind = GrammarElement::Kind::kRule;
                e.rule = group;
                seq.push_back(std::move(e));
                count_elements(1);
                have_symbol = true;
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (!have_symbol) fail(std::string("'") + c + "' follows nothing it could repeat");
                int min = 0;
                int max = -1;  // -1: no upper bound
                ++pos_;
                if (c == '+') min = 1;
                if (c == '?') max = 1;
                if (c == '{') {
                    skip_space(false);
                    min = parse_count();
                    skip_space(false);
                    max = min;
                    if (peek() == ',') {
                        ++pos_;
                        skip_space(false);
                        max = peek() == '}' ? -1 : parse_count();
                        skip_space(false);
                    }
                    if (peek() != '}') fail("expected '}'");
                    ++pos_;
                    if (max >= 0 && max < min) fail("a repetition's maximum is below its minimum");
                }
                repeat(seq, last_symbol, min, max, rule_name);
                have_symbol = false;
            } else {
                break;
            }
            skip_space(depth > 0);
        }
        return seq;
    }

    int parse_count() {
        const size_t start = pos_;
        long value = 0;
        while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            value = value * 10 + (text_[pos_] - '0');
            if (value > limits_.max_repetition) fail("a repetition count above " + std::to_string(limits_.max_repetition));
            ++pos_;
        }
        if (pos_ == start) fail("expected a number in '{...}'");
        return static_cast<int>(value);
    }

    // Replaces seq[from..] (one symbol) by min copies and then up to max - min
    // optional ones (or any number, max < 0), through helper rules:
    // X* is R ::= X R | "", X{0,n} nests R_n ::= X R_{n-1} | "".
    void repeat(GrammarSequence& seq, size_t from, int min, int max, const std::string& rule_name) {
        GrammarSequence item(seq.begin() + static_cast<std::ptrdiff_t>(from), seq.end());
        seq.resize(from);
        if (item.empty()) return;
        if (item.size() > 1) {  // a literal of several characters repeats as a whole
            const uint32_t wrapped = new_helper_rule(rule_name);
            grammar_.rules[wrapped].alternatives = {item};
            GrammarElement ref;
            ref.kind = GrammarElement::Kind::kRule;
            ref.rule = wrapped;
            item = {ref};
        }
        count_elements(static_cast<size_t>(min) + 2 * static_cast<size_t>(max < 0 ? 1 : max - min + 1));
        for (int i = 0; i < min; ++i) seq.push_back(item[0]);
        if (max == min) return;
        GrammarElement tail;
        tail.kind = GrammarElement::Kind::kRule;
        if (max < 0) {
            tail.rule = new_helper_rule(rule_name);
            GrammarElement self = tail;
            grammar_.rules[tail.rule].alternatives = {{item[0], self}, {}};
        } else {
            bool have_inner = false;
            GrammarElement inner;
            inner.kind = GrammarElement::Kind::kRule;
            for (int i = 0; i < max - min; ++i) {
                const uint32_t r = new_helper_rule(rule_name);
                GrammarSequence once{item[0]};
                if (have_inner) once.push_back(inner);
                grammar_.rules[r].alternatives = {once, {}};
                inner.rule = r;
                have_inner = true;
            }
            tail = inner;
        }
        seq.push_back(tail);
    }

    std::string_view text_;
    GrammarLimits limits_;
    size_t pos_ = 0;
    Grammar grammar_;
    std::unordered_map<std::string, uint32_t> names_;
    std::unordered_set<std::string> reserved_;
    int helper_count_ = 0;
    size_t elements_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, const GrammarLimits& limits) { return GbnfParser(text, limits).parse(); }

}  // namespace tessera
