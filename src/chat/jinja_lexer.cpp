#include "chat/jinja_lexer.h"

#include "util/error.h"
#include "util/utf8.h"

#include <cctype>
#include <cstring>
#include <string_view>

namespace tessera::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

int count_lines(std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

// jinja2 joins the template's lines with "\n" (any newline convention) and
// drops one trailing newline unless keep_trailing_newline is set; HF leaves
// it unset.
std::string normalize_newlines(const std::string& source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            out += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
        } else {
            out += source[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}


class Lexer {
public:
    Lexer(const std::string& source, const LexOptions& options) : src_(normalize_newlines(source)), opt_(options) {}

    std::vector<Token> run() {
        bool line_starting = true;  // jinja2 lstrips a tag on the template's first line too
        while (pos_ < src_.size()) {
            size_t start = find_tag_start(pos_);
            std::string text = src_.substr(pos_, start - pos_);
            if (start == src_.size()) {
                emit_text(text);
                pos_ = start;
                break;
            }
            char kind = src_[start + 1];
            char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
            if (sign == '-') {
                size_t end = text.size();
                while (end > 0 && is_space(text[end - 1])) --end;
                text.resize(end);
            } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
                // Strip the indentation before a block or comment tag that
                // starts its line.
                size_t line_pos = text.rfind('\n');
                line_pos = line_pos == std::string::npos ? 0 : line_pos + 1;
                if (line_pos > 0 || line_starting) {
                    bool blank = true;
                    for (size_t i = line_pos; i < text.size(); ++i) blank = blank && (text[i] == ' ' || text[i] == '\t');
                    if (blank) text.resize(line_pos);
                }
            }
            emit_text(text);
            line_ += count_lines(src_.substr(pos_, start - pos_));
            pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
            if (kind == '#') {
                lex_comment();
            } else if (kind == '%' && lex_raw(start)) {
            } else {
                lex_tag(kind == '{' ? Token::Kind::VarBegin : Token::Kind::BlockBegin);
            }
            line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
        }
        tokens_.push_back({Token::Kind::Eof, "", 0, 0, line_});
        return std::move(tokens_);
    }

private:
    size_t find_tag_start(size_t from) const {
        for (size_t i = from; i + 1 < src_.size(); ++i) {
            if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        }
        return src_.size();
    }

    void emit_text(const std::string& text) {
        if (!text.empty()) tokens_.push_back({Token::Kind::Text, text, 0, 0, line_});
    }

    // After a closing delimiter: `-` strips all following whitespace;
    // trim_blocks eats one newline after a block or comment unless `+`.
    void after_close(char sign, bool is_block) {
        if (sign == '-') {
            while (pos_ < src_.size() && is_space(src_[pos_])) {
                line_ += src_[pos_] == '\n';
                ++pos_;
            }
        } else if (sign != '+' && is_block && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
            ++line_;
            ++pos_;
        }
    }

    void lex_comment() {
        size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) throw make_error("chat template line {}: unterminated comment", line_);
        char sign = end > pos_ ? src_[end - 1] : '\0';
        line_ += count_lines(std::string_view(src_).substr(pos_, end - pos_));
        pos_ = end + 2;
        after_close(sign == '-' || sign == '+' ? sign : '\0', true);
    }

    // Matches `\s*name\s*[-+]?%}` at `at`; returns the position after it and
    // the sign before `%}`.
    bool match_keyword_tag(size_t at, const char* name, size_t& after, char& sign) const {
        while (at < src_.size() && is_space(src_[at])) ++at;
        size_t len = std::strlen(name);
        if (src_.compare(at, len, name) != 0) return false;
        at += len;
        if (at < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[at])) || src_[at] == '_')) return false;
        while (at < src_.size() && is_space(src_[at])) ++at;
        sign = '\0';
        if (at < src_.size() && (src_[at] == '-' || src_[at] == '+')) sign = src_[at++];
        if (src_.compare(at, 2, "%}") != 0) return false;
        after = at + 2;
        return true;
    }

    bool lex_raw(size_t tag_start) {
        size_t after = 0;
        char sign = '\0';
        if (!match_keyword_tag(pos_, "raw", after, sign)) return false;
        int start_line = line_;
        pos_ = after;
        if (sign == '-') after_close('-', true);
        for (size_t i = pos_; i + 1 < src_.size(); ++i) {
            if (src_[i] != '{' || src_[i + 1] != '%') continue;
            size_t inner = i + 2;
            char open_sign = '\0';
            if (inner < src_.size() && (src_[inner] == '-' || src_[inner] == '+')) open_sign = src_[inner++];
            size_t end_after = 0;
            char end_sign = '\0';
            if (!match_keyword_tag(inner, "endraw", end_after, end_sign)) continue;
            std::string body = src_.substr(pos_, i - pos_);
            if (open_sign == '-') {
                while (!body.empty() && is_space(body.back())) body.pop_back();
            }
            emit_text(body);
            line_ += count_lines(std::string_view(src_).substr(pos_, end_after - pos_));
            pos_ = end_after;
            after_close(end_sign, true);
            return true;
        }
        (void)tag_start;
        throw make_error("chat template line {}: {{% raw %}} without {{% endraw %}}", start_line);
    }

    void lex_tag(Token::Kind begin) {
        const bool is_var = begin == Token::Kind::VarBegin;
        const char* close = is_var ? "}}" : "%}";
        int open_line = line_;
        tokens_.push_back({begin, "", 0, 0, line_});
        int depth = 0;  // brackets open: a `}}` inside `{{ {'a': {}} }}` closes a dict
        while (true) {
            while (pos_ < src_.size() && is_space(src_[pos_])) {
                line_ += src_[pos_] == '\n';
                ++pos_;
            }
            if (pos_ >= src_.size()) {
                throw make_error("chat template line {}: unterminated {}", open_line, is_var ? "{{ ... }}" : "{% ... %}");
            }
            if (depth == 0) {
                char sign = '\0';
                size_t at = pos_;
                if (src_[at] == '-' || src_[at] == '+') sign = src_[at++];
                if (src_.compare(at, 2, close) == 0 && (sign != '+' || !is_var)) {
                    tokens_.push_back({is_var ? Token::Kind::VarEnd : Token::Kind::BlockEnd, "", 0, 0, line_});
                    pos_ = at + 2;
                    after_close(sign, !is_var);
                    return;
                }
            }
            char c = src_[pos_];
            if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
                size_t start = pos_;
                while (pos_ < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
                tokens_.push_back({Token::Kind::Name, src_.substr(start, pos_ - start), 0, 0, line_});
            } else if (std::isdigit(static_cast<unsigned char>(c))) {
                lex_number();
            } else if (c == '\'' || c == '"') {
                lex_string(c);
            } else {
                lex_operator(depth);
            }
        }
    }

    void lex_number() {
        size_t start = pos_;
        std::string digits;
        auto take_digits = [&] {
            while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
                if (src_[pos_] != '_') digits += src_[pos_];
                ++pos_;
            }
        };
        take_digits();
        bool is_float = false;
        if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
            is_float = true;
            digits += src_[pos_++];
            take_digits();
        }
        if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
            size_t at = pos_ + 1;
            if (at < src_.size() && (src_[at] == '+' || src_[at] == '-')) ++at;
            if (at < src_.size() && std::isdigit(static_cast<unsigned char>(src_[at]))) {
                is_float = true;
                digits += 'e';
                digits.append(src_, pos_ + 1, at - pos_ - 1);
                pos_ = at;
                take_digits();
            }
        }
        Token t{is_float ? Token::Kind::Float : Token::Kind::Int, src_.substr(start, pos_ - start), 0, 0, line_};
        try {
            if (is_float) {
                t.float_value = std::stod(digits);
            } else {
                t.int_value = std::stoll(digits);
            }
        } catch (const std::exception&) {
            throw make_error("chat template line {}: number {} out of range", line_, t.text);
        }
        tokens_.push_back(std::move(t));
    }

    // Python string escapes, as jinja2 decodes literals.
    void lex_string(char quote) {
        int start_line = line_;
        ++pos_;
        std::string out;
        while (true) {
            if (pos_ >= src_.size()) throw make_error("chat template line {}: unterminated string literal", start_line);
            char c = src_[pos_++];
            if (c == quote) break;
            if (c == '\n') ++line_;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= src_.size()) throw make_error("chat template line {}: unterminated string literal", start_line);
            char e = src_[pos_++];
            auto hex = [&](int n) -> uint32_t {
                if (pos_ + n > src_.size()) throw make_error("chat template line {}: truncated \\x/\\u escape", line_);
                uint32_t v = 0;
                for (int i = 0; i < n; ++i) {
                    char h = src_[pos_++];
                    if (!std::isxdigit(static_cast<unsigned char>(h))) throw make_error("chat template line {}: bad escape digit '{}'", line_, h);
                    v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
                }
                return v;
            };
            switch (e) {
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case 'r': out += '\r'; break;
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'v': out += '\v'; break;
            case '\n': ++line_; break;  // line continuation
            case 'x': append_utf8(out, hex(2)); break;
            case 'u': append_utf8(out, hex(4)); break;
            case 'U': append_utf8(out, hex(8)); break;
            default:
                if (e >= '0' && e <= '7') {
                    uint32_t v = static_cast<uint32_t>(e - '0');
                    for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i) v = v * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
                    append_utf8(out, v);
                } else {
                    out += '\\';  // Python keeps unknown escapes as written
                    out += e;
                }
            }
        }
        tokens_.push_back({Token::Kind::String, std::move(out), 0, 0, start_line});
    }

    void lex_operator(int& depth) {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                                           "(", ")", "[", "]", "{", "}", ".", ",", ":", "|"};
        for (const char* op : kOps) {
            size_t len = std::strlen(op);
            if (src_.compare(pos_, len, op) != 0) continue;
            if (len == 1 && (op[0] == '(' || op[0] == '[' || op[0] == '{')) ++depth;
            if (len == 1 && (op[0] == ')' || op[0] == ']' || op[0] == '}')) {
                if (depth == 0) throw make_error("chat template line {}: unexpected '{}'", line_, op);
                --depth;
            }
            tokens_.push_back({Token::Kind::Op, op, 0, 0, line_});
            pos_ += len;
            return;
        }
        throw make_error("chat template line {}: unexpected character '{}'", line_, src_[pos_]);
    }

    std::string src_;
    LexOptions opt_;
    size_t pos_ = 0;
    int line_ = 1;
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const LexOptions& options) {
    return Lexer(source, options).run();
}

}  // namespace tessera::jinja
