#include "chat/jinja_parser.h"

#include "util/error.h"

#include <initializer_list>

namespace tessera::jinja {
namespace {

// Nesting deeper than this is refused: a template is not a place for
// thousand-level nesting, and the recursive descent must not overflow the
// stack on hostile input.
constexpr int kMaxNesting = 200;

class Parser {
public:
    explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

    Template run() {
        Template tmpl;
        std::string end = parse_body(tmpl.body, {});
        (void)end;
        return tmpl;
    }

private:
    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxNesting) {
                throw make_error("chat template line {}: nesting deeper than {} levels", parser.cur().line, kMaxNesting);
            }
        }
        ~DepthGuard() { --p.depth_; }
    };

    const Token& cur() const { return t_[pos_]; }
    const Token& peek(size_t n = 1) const { return t_[std::min(pos_ + n, t_.size() - 1)]; }
    bool is_op(const char* op) const { return cur().kind == Token::Kind::Op && cur().text == op; }
    bool is_name(const char* name) const { return cur().kind == Token::Kind::Name && cur().text == name; }

    [[noreturn]] void fail(const std::string& what) const {
        throw make_error("chat template line {}: {}", cur().line, what);
    }

    std::string describe(const Token& t) const {
        switch (t.kind) {
        case Token::Kind::Eof: return "end of template";
        case Token::Kind::BlockEnd: return "'%}'";
        case Token::Kind::VarEnd: return "'}}'";
        case Token::Kind::String: return "string '" + t.text + "'";
        default: return "'" + t.text + "'";
        }
    }

    void expect_op(const char* op) {
        if (!is_op(op)) fail(std::string("expected '") + op + "', found " + describe(cur()));
        ++pos_;
    }

    std::string expect_name() {
        if (cur().kind != Token::Kind::Name) fail("expected a name, found " + describe(cur()));
        return t_[pos_++].text;
    }

    void expect_block_end() {
        if (cur().kind != Token::Kind::BlockEnd) fail("expected '%}', found " + describe(cur()));
        ++pos_;
    }

    // Parses statements until a `{% name %}` with name in `ends`; returns that
    // name, leaving the position after it (its arguments are the caller's).
    std::string parse_body(StmtList& out, std::initializer_list<const char*> ends) {
        DepthGuard guard(*this);
        while (true) {
            const Token& tok = cur();
            switch (tok.kind) {
            case Token::Kind::Eof:
                if (ends.size() != 0) fail(std::string("missing {% ") + *(ends.end() - 1) + " %}");
                return {};
            case Token::Kind::Text: {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Text;
                s->line = tok.line;
                s->text = tok.text;
                out.push_back(std::move(s));
                ++pos_;
                break;
            }
            case Token::Kind::VarBegin: {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Output;
                s->line = tok.line;
                ++pos_;
                s->expr = parse_tuple();
                if (cur().kind != Token::Kind::VarEnd) fail("expected '}}', found " + describe(cur()));
                ++pos_;
                out.push_back(std::move(s));
                break;
            }
            case Token::Kind::BlockBegin: {
                ++pos_;
                std::string keyword = expect_name();
                for (const char* end : ends) {
                    if (keyword == end) return keyword;
                }
                parse_statement(keyword, out);
                break;
            }
            default: fail("unexpected " + describe(tok));
            }
        }
    }

    void parse_statement(const std::string& keyword, StmtList& out) {
        int line = t_[pos_ - 1].line;
        auto s = std::make_unique<Stmt>();
        s->line = line;
        if (keyword == "if") {
            s->kind = Stmt::Kind::If;
            s->conditions.push_back(parse_tuple());
            expect_block_end();
            while (true) {
                s->bodies.emplace_back();
                std::string end = parse_body(s->bodies.back(), {"elif", "else", "endif"});
                if (end == "elif") {
                    s->conditions.push_back(parse_tuple());
                    expect_block_end();
                } else if (end == "else") {
                    expect_block_end();
                    parse_body(s->else_body, {"endif"});
                    expect_block_end();
                    break;
                } else {
                    expect_block_end();
                    break;
                }
            }
        } else if (keyword == "for") {
            s->kind = Stmt::Kind::For;
            s->targets.push_back(expect_name());
            while (is_op(",")) {
                ++pos_;
                s->targets.push_back(expect_name());
            }
            if (!is_name("in")) fail("expected 'in' in for loop, found " + describe(cur()));
            ++pos_;
            s->expr = parse_tuple(/*allow_conditional=*/false);
            if (is_name("if")) {
                ++pos_;
                s->condition = parse_expression();
            }
            if (is_name("recursive")) fail("recursive for loops are not supported");
            expect_block_end();
            std::string end = parse_body(s->body, {"else", "endfor"});
            expect_block_end();
            if (end == "else") {
                parse_body(s->else_body, {"endfor"});
                expect_block_end();
            }
        } else if (keyword == "set") {
            s->kind = Stmt::Kind::Set;
            s->targets.push_back(expect_name());
            if (is_op(".")) {
                ++pos_;
                s->attr_target = true;
                s->targets.push_back(expect_name());
            } else {
                while (is_op(",")) {
                    ++pos_;
                    s->targets.push_back(expect_name());
                }
            }
            if (is_op("=")) {
                ++pos_;
                s->expr = parse_tuple();
                expect_block_end();
            } else {
                if (s->targets.size() != 1 || s->attr_target) fail("a block {% set %} takes one plain name");
                if (is_op("|")) fail("filters on a block {% set %} are not supported");
                expect_block_end();
                parse_body(s->body, {"endset"});
                expect_block_end();
            }
        } else if (keyword == "macro") {
            s->kind = Stmt::Kind::Macro;
            s->name = expect_name();
            parse_params(s->params);
            expect_block_end();
            parse_body(s->body, {"endmacro"});
            if (cur().kind == Token::Kind::Name) ++pos_;  // {% endmacro name %}
            expect_block_end();
        } else if (keyword == "call") {
            s->kind = Stmt::Kind::CallBlock;
            if (is_op("(")) parse_params(s->params);
            s->expr = parse_expression();
            if (s->expr->kind != Expr::Kind::Call) fail("{% call %} needs a macro call");
            expect_block_end();
            parse_body(s->body, {"endcall"});
            expect_block_end();
        } else if (keyword == "break" || keyword == "continue") {
            s->kind = keyword == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
            expect_block_end();
        } else if (keyword == "generation") {
            // Hugging Face's AssistantTracker marks assistant text for
            // training masks; for rendering it is a plain block.
            expect_block_end();
            parse_body(out, {"endgeneration"});
            expect_block_end();
            return;
        } else if (keyword.rfind("end", 0) == 0 || keyword == "else" || keyword == "elif") {
            throw make_error("chat template line {}: unexpected {{% {} %}}", line, keyword);
        } else {
            throw make_error("chat template line {}: unsupported tag {{% {} %}}", line, keyword);
        }
        out.push_back(std::move(s));
    }

    void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
        expect_op("(");
        while (!is_op(")")) {
            std::string name = expect_name();
            ExprPtr def;
            if (is_op("=")) {
                ++pos_;
                def = parse_expression();
            }
            params.emplace_back(std::move(name), std::move(def));
            if (!is_op(",")) break;
            ++pos_;
        }
        expect_op(")");
    }

    ExprPtr make(Expr::Kind kind, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = line;
        return e;
    }

    // `a, b` without brackets makes a tuple where jinja2 allows one.
    ExprPtr parse_tuple(bool allow_conditional = true) {
        int line = cur().line;
        ExprPtr first = allow_conditional ? parse_expression() : parse_or();
        if (!is_op(",")) return first;
        auto tuple = make(Expr::Kind::Tuple, line);
        tuple->items.push_back(std::move(first));
        while (is_op(",")) {
            ++pos_;
            if (cur().kind == Token::Kind::BlockEnd || cur().kind == Token::Kind::VarEnd) break;
            tuple->items.push_back(allow_conditional ? parse_expression() : parse_or());
        }
        return tuple;
    }

    ExprPtr parse_expression() {
        DepthGuard guard(*this);
        ExprPtr expr = parse_or();
        while (is_name("if")) {
            int line = cur().line;
            ++pos_;
            auto cond = make(Expr::Kind::Conditional, line);
            ExprPtr test = parse_or();
            ExprPtr otherwise;
            if (is_name("else")) {
                ++pos_;
                otherwise = parse_expression();
            }
            cond->items.push_back(std::move(expr));
            cond->items.push_back(std::move(test));
            cond->items.push_back(std::move(otherwise));
            expr = std::move(cond);
        }
        return expr;
    }

    ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, int line) {
        auto e = make(Expr::Kind::Binary, line);
        e->name = op;
        e->items.push_back(std::move(left));
        e->items.push_back(std::move(right));
        return e;
    }

    // One left-associative level: operands from `next`, joined by any of
    // `ops` (operator tokens, or keywords such as and/or for Token::Kind::Name).
    ExprPtr left_assoc(ExprPtr (Parser::*next)(), std::initializer_list<const char*> ops,
                       Token::Kind kind = Token::Kind::Op) {
        const auto matches = [&] {
            if (cur().kind != kind) return false;
            for (const char* op : ops) {
                if (cur().text == op) return true;
            }
            return false;
        };
        ExprPtr left = (this->*next)();
        while (matches()) {
            const std::string op = cur().text;
            const int line = cur().line;
            ++pos_;
            left = binary(op, std::move(left), (this->*next)(), line);
        }
        return left;
    }

    ExprPtr parse_or() { return left_assoc(&Parser::parse_and, {"or"}, Token::Kind::Name); }
    ExprPtr parse_and() { return left_assoc(&Parser::parse_not, {"and"}, Token::Kind::Name); }

    ExprPtr parse_not() {
        DepthGuard guard(*this);
        if (is_name("not")) {
            auto e = make(Expr::Kind::Unary, cur().line);
            ++pos_;
            e->name = "not";
            e->items.push_back(parse_not());
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        int line = cur().line;
        ExprPtr left = parse_math1();
        while (true) {
            std::string op;
            if (cur().kind == Token::Kind::Op &&
                (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" ||
                 cur().text == ">=")) {
                op = cur().text;
                ++pos_;
            } else if (is_name("in")) {
                op = "in";
                ++pos_;
            } else if (is_name("not") && peek().kind == Token::Kind::Name && peek().text == "in") {
                op = "not in";
                pos_ += 2;
            } else {
                return left;
            }
            left = binary(op, std::move(left), parse_math1(), line);
        }
    }

    ExprPtr parse_math1() { return left_assoc(&Parser::parse_concat, {"+", "-"}); }
    ExprPtr parse_concat() { return left_assoc(&Parser::parse_math2, {"~"}); }
    ExprPtr parse_math2() { return left_assoc(&Parser::parse_pow, {"*", "/", "//", "%"}); }
    ExprPtr parse_pow() { return left_assoc(&Parser::parse_filtered, {"**"}); }
    ExprPtr parse_filtered() { return parse_unary(true); }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        ExprPtr node;
        if (is_op("-") || is_op("+")) {
            node = make(Expr::Kind::Unary, cur().line);
            node->name = cur().text;
            ++pos_;
            node->items.push_back(parse_unary(false));
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filters(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        const Token& tok = cur();
        int line = tok.line;
        switch (tok.kind) {
        case Token::Kind::Name: {
            ++pos_;
            auto e = make(Expr::Kind::Literal, line);
            if (tok.text == "true" || tok.text == "True") {
                e->value = Value(true);
            } else if (tok.text == "false" || tok.text == "False") {
                e->value = Value(false);
            } else if (tok.text == "none" || tok.text == "None") {
                e->value = Value::none();
            } else {
                e->kind = Expr::Kind::Name;
                e->name = tok.text;
            }
            return e;
        }
        case Token::Kind::String: {
            std::string s;
            while (cur().kind == Token::Kind::String) s += t_[pos_++].text;  // adjacent literals join
            auto e = make(Expr::Kind::Literal, line);
            e->value = Value(std::move(s));
            return e;
        }
        case Token::Kind::Int:
        case Token::Kind::Float: {
            ++pos_;
            auto e = make(Expr::Kind::Literal, line);
            e->value = tok.kind == Token::Kind::Int ? Value(tok.int_value) : Value(tok.float_value);
            return e;
        }
        case Token::Kind::Op:
            if (tok.text == "(") {
                ++pos_;
                if (is_op(")")) {
                    ++pos_;
                    return make(Expr::Kind::Tuple, line);
                }
                ExprPtr inner = parse_tuple();
                expect_op(")");
                return inner;
            }
            if (tok.text == "[") {
                ++pos_;
                auto e = make(Expr::Kind::List, line);
                while (!is_op("]")) {
                    e->items.push_back(parse_expression());
                    if (!is_op(",")) break;
                    ++pos_;
                }
                expect_op("]");
                return e;
            }
            if (tok.text == "{") {
                ++pos_;
                auto e = make(Expr::Kind::Dict, line);
                while (!is_op("}")) {
                    e->items.push_back(parse_expression());
                    expect_op(":");
                    e->items.push_back(parse_expression());
                    if (!is_op(",")) break;
                    ++pos_;
                }
                expect_op("}");
                return e;
            }
            break;
        default: break;
        }
        fail("unexpected " + describe(tok) + " in expression");
    }

    void parse_call_args(Expr& call) {
        expect_op("(");
        while (!is_op(")")) {
            if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
            if (cur().kind == Token::Kind::Name && peek().kind == Token::Kind::Op && peek().text == "=") {
                std::string key = t_[pos_].text;
                pos_ += 2;
                call.kwargs.emplace_back(std::move(key), parse_expression());
            } else {
                if (!call.kwargs.empty()) fail("positional argument after keyword argument");
                call.args.push_back(parse_expression());
            }
            if (!is_op(",")) break;
            ++pos_;
        }
        expect_op(")");
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            int line = cur().line;
            if (is_op(".")) {
                ++pos_;
                if (cur().kind == Token::Kind::Int) {
                    auto e = make(Expr::Kind::Index, line);
                    auto index = make(Expr::Kind::Literal, line);
                    index->value = Value(t_[pos_++].int_value);
                    e->items.push_back(std::move(node));
                    e->items.push_back(std::move(index));
                    node = std::move(e);
                    continue;
                }
                auto e = make(Expr::Kind::Attr, line);
                e->name = expect_name();
                e->items.push_back(std::move(node));
                node = std::move(e);
            } else if (is_op("[")) {
                ++pos_;
                node = parse_subscript(std::move(node), line);
            } else if (is_op("(")) {
                auto e = make(Expr::Kind::Call, line);
                e->items.push_back(std::move(node));
                parse_call_args(*e);
                node = std::move(e);
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr node, int line) {
        ExprPtr parts[3];
        int part = 0;
        bool is_slice = false;
        while (true) {
            if (is_op("]")) break;
            if (is_op(":")) {
                is_slice = true;
                if (++part > 2) fail("too many ':' in slice");
                ++pos_;
                continue;
            }
            if (parts[part]) fail("expected ':' or ']' in subscript");
            parts[part] = parse_expression();
        }
        expect_op("]");
        if (!is_slice) {
            if (!parts[0]) fail("empty subscript");
            auto e = make(Expr::Kind::Index, line);
            e->items.push_back(std::move(node));
            e->items.push_back(std::move(parts[0]));
            return e;
        }
        auto e = make(Expr::Kind::Slice, line);
        e->items.push_back(std::move(node));
        for (auto& p : parts) e->items.push_back(std::move(p));
        return e;
    }

    ExprPtr parse_filters(ExprPtr node) {
        while (true) {
            int line = cur().line;
            if (is_op("|")) {
                ++pos_;
                auto e = make(Expr::Kind::Filter, line);
                e->name = expect_name();
                while (is_op(".")) {
                    ++pos_;
                    e->name += "." + expect_name();
                }
                e->items.push_back(std::move(node));
                if (is_op("(")) parse_call_args(*e);
                node = std::move(e);
            } else if (is_name("is")) {
                ++pos_;
                auto e = make(Expr::Kind::Test, line);
                if (is_name("not")) {
                    e->negated = true;
                    ++pos_;
                }
                e->name = expect_name();
                e->items.push_back(std::move(node));
                if (is_op("(")) {
                    parse_call_args(*e);
                } else if ((cur().kind == Token::Kind::Name || cur().kind == Token::Kind::String ||
                            cur().kind == Token::Kind::Int || cur().kind == Token::Kind::Float || is_op("[") || is_op("{")) &&
                           !is_name("else") && !is_name("or") && !is_name("and")) {
                    if (is_name("is")) fail("tests cannot be chained with 'is'");
                    e->args.push_back(parse_postfix(parse_primary()));
                }
                node = std::move(e);
            } else if (is_op("(")) {
                auto e = make(Expr::Kind::Call, line);
                e->items.push_back(std::move(node));
                parse_call_args(*e);
                node = std::move(e);
            } else {
                return node;
            }
        }
    }

    const std::vector<Token>& t_;
    size_t pos_ = 0;
    int depth_ = 0;
};

}  // namespace

Template parse_template(const std::vector<Token>& tokens) {
    return Parser(tokens).run();
}

}  // namespace tessera::jinja
