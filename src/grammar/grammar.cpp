#include "grammar/grammar.h"

#include <algorithm>

namespace tessera {

bool GrammarElement::matches(uint32_t cp) const {
    bool in = false;
    for (const CodePointRange& r : ranges) {
        if (cp >= r.first && cp <= r.last) {
            in = true;
            break;
        }
    }
    return in != negated;
}

bool GrammarElement::may_match(uint32_t first, uint32_t last) const {
    if (!negated) {
        for (const CodePointRange& r : ranges) {
            if (r.first <= last && first <= r.last) return true;
        }
        return false;
    }
    // Negated: some code point of [first, last] lies outside every range.
    // Walk the span from its start, jumping past each range that covers it.
    uint32_t cp = first;
    for (bool moved = true; moved;) {
        moved = false;
        for (const CodePointRange& r : ranges) {
            if (cp >= r.first && cp <= r.last) {
                if (r.last >= last) return false;
                cp = r.last + 1;
                moved = true;
            }
        }
    }
    return true;
}

size_t Grammar::element_count() const {
    size_t n = 0;
    for (const GrammarRule& rule : rules) {
        for (const GrammarSequence& alt : rule.alternatives) n += alt.size() + 1;
    }
    return n;
}

namespace {

// A text no context could hold; lengths stop growing there, so sums of
// them cannot overflow and a text that is merely very long is not taken
// for one that never ends.
constexpr uint32_t kLongestText = 1u << 30;

uint32_t saturating_add(uint32_t a, uint32_t b) {
    if (a == kNeverEnds || b == kNeverEnds) return kNeverEnds;
    return std::min(a + b, kLongestText);
}

uint32_t element_min(const Grammar& g, const GrammarElement& e) {
    return e.kind == GrammarElement::Kind::kChars ? 1u : g.min_length[e.rule];
}

// A rule reaching itself through the first elements of its alternatives
// (past only rules that can match nothing) would make the matcher expand it
// forever: found by a depth-first walk over those edges.
void refuse_left_recursion(const Grammar& g) {
    const size_t n = g.rules.size();
    std::vector<std::vector<uint32_t>> first_rules(n);
    for (size_t r = 0; r < n; ++r) {
        for (const GrammarSequence& alt : g.rules[r].alternatives) {
            for (const GrammarElement& e : alt) {
                if (e.kind == GrammarElement::Kind::kChars) break;
                first_rules[r].push_back(e.rule);
                if (g.min_length[e.rule] != 0) break;
            }
        }
    }
    enum : uint8_t { kNew, kOnPath, kDone };
    std::vector<uint8_t> mark(n, kNew);
    // Iterative, so a long chain of rules cannot overflow the stack.
    for (size_t start = 0; start < n; ++start) {
        if (mark[start] != kNew) continue;
        std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(start), 0}};
        mark[start] = kOnPath;
        while (!path.empty()) {
            auto& [rule, next] = path.back();
            if (next == first_rules[rule].size()) {
                mark[rule] = kDone;
                path.pop_back();
                continue;
            }
            const uint32_t to = first_rules[rule][next++];
            if (mark[to] == kOnPath) {
                throw GrammarError("the grammar is left-recursive: rule '" + g.rules[to].name +
                                   "' can reach itself before matching any character");
            }
            if (mark[to] == kNew) {
                mark[to] = kOnPath;
                path.emplace_back(to, 0);
            }
        }
    }
}

}  // namespace

void check_grammar(Grammar& g) {
    const size_t n = g.rules.size();
    if (g.root >= n) throw GrammarError("the grammar has no 'root' rule");
    for (const GrammarRule& rule : g.rules) {
        if (rule.alternatives.empty()) throw GrammarError("rule '" + rule.name + "' is used but never defined");
        for (const GrammarSequence& alt : rule.alternatives) {
            for (const GrammarElement& e : alt) {
                if (e.kind == GrammarElement::Kind::kRule && e.rule >= n) {
                    throw GrammarError("rule '" + rule.name + "' refers to a rule that does not exist");
                }
            }
        }
    }
    // The fewest code points per rule: a fixed point reached from "never",
    // each pass lowering what an alternative's elements now allow; it
    // settles within one pass per rule.
    g.min_length.assign(n, kNeverEnds);
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t r = 0; r < n; ++r) {
            for (const GrammarSequence& alt : g.rules[r].alternatives) {
                uint32_t total = 0;
                for (const GrammarElement& e : alt) total = saturating_add(total, element_min(g, e));
                if (total < g.min_length[r]) {
                    g.min_length[r] = total;
                    changed = true;
                }
            }
        }
    }
    if (g.min_length[g.root] == kNeverEnds) {
        throw GrammarError("the grammar matches no text: rule '" + g.rules[g.root].name +
                           "' cannot be completed by any finite text");
    }
    if (g.min_length[g.root] >= kLongestText) {
        throw GrammarError("the grammar's shortest text is at least " + std::to_string(kLongestText) +
                           " characters: longer than any generation");
    }
    g.suffix.assign(n, {});
    for (size_t r = 0; r < n; ++r) {
        for (const GrammarSequence& alt : g.rules[r].alternatives) {
            std::vector<uint32_t> s(alt.size() + 1, 0);
            for (size_t i = alt.size(); i-- > 0;) s[i] = saturating_add(s[i + 1], element_min(g, alt[i]));
            g.suffix[r].push_back(std::move(s));
        }
    }
    refuse_left_recursion(g);
}

namespace {

std::string escape_code_point(uint32_t cp, bool in_class) {
    switch (cp) {
        case '\n': return "\\n";
        case '\r': return "\\r";
        case '\t': return "\\t";
        case '\\': return "\\\\";
        default: break;
    }
    if ((in_class && (cp == ']' || cp == '-' || cp == '^')) || (!in_class && cp == '"')) {
        std::string escaped(2, '\\');
        escaped[1] = static_cast<char>(cp);
        return escaped;
    }
    if (cp >= 0x20 && cp < 0x7f) return std::string(1, static_cast<char>(cp));
    char buf[16];
    if (cp <= 0xff) {
        snprintf(buf, sizeof buf, "\\x%02X", cp);
    } else if (cp <= 0xffff) {
        snprintf(buf, sizeof buf, "\\u%04X", cp);
    } else {
        snprintf(buf, sizeof buf, "\\U%08X", cp);
    }
    return buf;
}

}  // namespace

std::string grammar_to_gbnf(const Grammar& g) {
    std::string out;
    for (const GrammarRule& rule : g.rules) {
        out += rule.name + " ::=";
        for (size_t a = 0; a < rule.alternatives.size(); ++a) {
            if (a > 0) out += " |";
            if (rule.alternatives[a].empty()) out += " \"\"";
            for (const GrammarElement& e : rule.alternatives[a]) {
                if (e.kind == GrammarElement::Kind::kRule) {
                    out += " " + g.rules[e.rule].name;
                } else if (!e.negated && e.ranges.size() == 1 && e.ranges[0].first == e.ranges[0].last) {
                    out += " \"";
                    out += escape_code_point(e.ranges[0].first, false);
                    out += '"';
                } else {
                    out += e.negated ? " [^" : " [";
                    for (const CodePointRange& r : e.ranges) {
                        out += escape_code_point(r.first, true);
                        if (r.last != r.first) {
                            out += '-';
                            out += escape_code_point(r.last, true);
                        }
                    }
                    out += "]";
                }
            }
        }
        out += "\n";
    }
    return out;
}

}  // namespace tessera
