#include "chat/jinja_render.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_marked.h"
#include "chat/jinja_text.h"

#include <chrono>
#include <cmath>
#include <memory>

namespace tessera::jinja {
namespace {

constexpr int64_t kMaxSequence = 1'000'000;  // range() and repetition results

// A frame of variables: the template's top level, a for loop, a macro call.
struct Scope {
    ValueDict vars;
    std::shared_ptr<Scope> parent;

    const Value* lookup(const std::string& name) const {
        for (const Scope* s = this; s; s = s->parent.get()) {
            if (const Value* v = s->vars.find(name)) return v;
        }
        return nullptr;
    }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { Normal, Break, Continue };

[[noreturn]] void fail_at(int line, const std::string& what) { throw make_error("chat template line {}: {}", line, what); }

// The mapping dict(...) and namespace(...) build: positional mappings, then
// keyword arguments, later keys winning.
ValueDict mapping_of(const CallArgs& a, const char* fn) {
    ValueDict d;
    for (const auto& v : a.positional) {
        if (!v.is_dict()) throw make_error("{}() takes a mapping or keyword arguments", fn);
        for (const auto& [k, x] : v.as_dict().items()) d.set(k, x);
        // Keys copied from the caller's data stay the caller's.
        if (v.as_dict().keys_are_input()) d.mark_keys_as_input();
    }
    for (const auto& [k, v] : a.keywords) d.set(k, v);
    return d;
}

class Renderer {
public:
    explicit Renderer(const RenderOptions& options) : opt_(options) {}

    MarkedText run(const Template& tmpl, const ValueDict& variables) {
        auto globals = std::make_shared<Scope>();
        install_globals(globals->vars);
        auto root = std::make_shared<Scope>();
        root->parent = globals;
        for (const auto& [k, v] : variables.items()) root->vars.set(k, v);
        MarkedText out;
        Flow flow = exec(tmpl.body, root, out);
        (void)flow;
        return out;
    }

private:
    void step(int line) {
        if (++steps_ > opt_.max_steps) fail_at(line, "template exceeded its evaluation budget (runaway loop?)");
    }

    void emit_template(MarkedText& out, const std::string& text, int line) {
        if (out.size() + text.size() > opt_.max_output_bytes) fail_at(line, "template output exceeds its size limit");
        out.append_template(text);
    }

    void emit(MarkedText& out, const Value& v, int line) {
        out.append(v);
        if (out.size() > opt_.max_output_bytes) fail_at(line, "template output exceeds its size limit");
    }

    void install_globals(ValueDict& g) {
        g.set("range", Value::callable("range", [](const CallArgs& a) {
            if (a.positional.empty() || a.positional.size() > 3) throw make_error("range takes 1 to 3 integers");
            for (const auto& v : a.positional) {
                if (!v.is_int()) throw make_error("range needs integers, got {}", v.type_name());
            }
            int64_t start = 0, stop, stride = 1;
            if (a.positional.size() == 1) {
                stop = a.positional[0].as_int();
            } else {
                start = a.positional[0].as_int();
                stop = a.positional[1].as_int();
                if (a.positional.size() == 3) stride = a.positional[2].as_int();
            }
            if (stride == 0) throw make_error("range() step must not be zero");
            ValueList items;
            for (int64_t i = start; stride > 0 ? i < stop : i > stop; i += stride) {
                if (static_cast<int64_t>(items.size()) >= kMaxSequence) throw make_error("range() longer than {} items", kMaxSequence);
                items.emplace_back(i);
            }
            return Value::list(std::move(items));
        }));
        g.set("namespace", Value::callable("namespace", [](const CallArgs& a) {
            return Value::name_space(mapping_of(a, "namespace"));
        }));
        g.set("dict", Value::callable("dict", [](const CallArgs& a) { return Value::dict(mapping_of(a, "dict")); }));
        g.set("raise_exception", Value::callable("raise_exception", [](const CallArgs& a) -> Value {
            throw TemplateRaised(a.positional.empty() ? std::string("raise_exception() called") : a.positional[0].str());
        }));
        g.set("strftime_now", Value::callable("strftime_now", [this](const CallArgs& a) {
            if (a.positional.size() != 1 || !a.positional[0].is_string()) throw make_error("strftime_now takes one format string");
            std::tm tm{};
            if (opt_.now) {
                tm = opt_.now();
            } else {
                std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
                localtime_r(&t, &tm);
            }
            char buf[256];
            size_t n = std::strftime(buf, sizeof buf, a.positional[0].as_string().c_str(), &tm);
            return Value(std::string(buf, n));
        }));
    }

    // ---- statements ----

    Flow exec(const StmtList& body, const ScopePtr& scope, MarkedText& out) {
        for (const auto& s : body) {
            Flow f = exec_one(*s, scope, out);
            if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
    }

    Flow exec_one(const Stmt& s, const ScopePtr& scope, MarkedText& out) {
        step(s.line);
        switch (s.kind) {
        case Stmt::Kind::Text: emit_template(out, s.text, s.line); return Flow::Normal;
        case Stmt::Kind::Output: emit(out, eval(*s.expr, scope), s.line); return Flow::Normal;
        case Stmt::Kind::If:
            for (size_t i = 0; i < s.conditions.size(); ++i) {
                if (eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
            }
            return exec(s.else_body, scope, out);
        case Stmt::Kind::For: return exec_for(s, scope, out);
        case Stmt::Kind::Set: exec_set(s, scope); return Flow::Normal;
        case Stmt::Kind::Macro: scope->vars.set(s.name, make_macro(s, scope)); return Flow::Normal;
        case Stmt::Kind::CallBlock: {
            const Expr& call = *s.expr;
            Value callee = eval(*call.items[0], scope);
            if (!callee.is_callable()) fail_at(s.line, "{% call %} needs a macro");
            CallArgs args = eval_args(call, scope);
            const Stmt* stmt = &s;
            args.keywords.emplace_back("caller", Value::callable("caller", [this, stmt, scope](const CallArgs& a) {
                auto local = std::make_shared<Scope>();
                local->parent = scope;
                bind_params(stmt->params, a, local, stmt->line);
                MarkedText text;
                exec(stmt->body, local, text);
                return text.value();
            }));
            emit(out, call_value(callee, args, s.line), s.line);
            return Flow::Normal;
        }
        case Stmt::Kind::FilterBlock: fail_at(s.line, "{% filter %} blocks are not supported");
        case Stmt::Kind::Break: return Flow::Break;
        case Stmt::Kind::Continue: return Flow::Continue;
        }
        return Flow::Normal;
    }

    void bind_targets(const std::vector<std::string>& targets, const Value& item, Scope& scope, int line) {
        if (targets.size() == 1) {
            scope.vars.set(targets[0], item);
            return;
        }
        ValueList parts = item.is_list() ? item.as_list() : iterate(item);
        if (parts.size() != targets.size()) {
            fail_at(line, "cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) + " names");
        }
        for (size_t i = 0; i < targets.size(); ++i) scope.vars.set(targets[i], parts[i]);
    }

    Flow exec_for(const Stmt& s, const ScopePtr& scope, MarkedText& out) {
        Value iterable = eval(*s.expr, scope);
        ValueList items;
        try {
            items = iterate(iterable);
        } catch (const Error& e) {
            fail_at(s.line, e.what());
        }
        auto local = std::make_shared<Scope>();
        local->parent = scope;
        if (s.condition) {
            ValueList kept;
            for (const Value& item : items) {
                step(s.line);
                bind_targets(s.targets, item, *local, s.line);
                if (eval(*s.condition, local).truthy()) kept.push_back(item);
            }
            items = std::move(kept);
        }
        if (items.empty()) return exec(s.else_body, scope, out);
        const int64_t n = static_cast<int64_t>(items.size());
        for (int64_t i = 0; i < n; ++i) {
            step(s.line);
            bind_targets(s.targets, items[static_cast<size_t>(i)], *local, s.line);
            ValueDict loop;
            loop.set("index", Value(i + 1));
            loop.set("index0", Value(i));
            loop.set("revindex", Value(n - i));
            loop.set("revindex0", Value(n - i - 1));
            loop.set("first", Value(i == 0));
            loop.set("last", Value(i == n - 1));
            loop.set("length", Value(n));
            loop.set("depth", Value(static_cast<int64_t>(1)));
            loop.set("depth0", Value(static_cast<int64_t>(0)));
            loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
            loop.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
            loop.set("cycle", Value::callable("loop.cycle", [i](const CallArgs& a) {
                if (a.positional.empty()) throw make_error("loop.cycle needs at least one value");
                return a.positional[static_cast<size_t>(i) % a.positional.size()];
            }));
            local->vars.set("loop", Value::dict(std::move(loop)));
            Flow f = exec(s.body, local, out);
            if (f == Flow::Break) break;
        }
        return Flow::Normal;
    }

    // Whether `v` is, or holds, the dictionary `d` (values are shallow here:
    // only a namespace's attributes can be set, so a deep one is treated as
    // holding it).
    static bool holds(const Value& v, const ValueDict* d, int depth) {
        if (depth > 64) return true;
        if (v.is_dict() || v.is_namespace()) {
            if (&v.as_dict() == d) return true;
            for (const auto& item : v.as_dict().items()) {
                if (holds(item.second, d, depth + 1)) return true;
            }
        } else if (v.is_list()) {
            for (const Value& item : v.as_list()) {
                if (holds(item, d, depth + 1)) return true;
            }
        }
        return false;
    }

    void exec_set(const Stmt& s, const ScopePtr& scope) {
        Value value;
        if (s.expr) {
            value = eval(*s.expr, scope);
        } else {
            MarkedText text;
            exec(s.body, scope, text);
            value = text.value();
        }
        if (s.attr_target) {
            const Value* target = scope->lookup(s.targets[0]);
            if (!target || !target->is_namespace()) {
                fail_at(s.line, "cannot set attribute '" + s.targets[1] + "' of '" + s.targets[0] + "': not a namespace()");
            }
            // A namespace holding itself (directly or through what it holds)
            // would be a cycle of shared pointers, never freed.
            if (holds(value, &target->as_dict(), 0)) {
                fail_at(s.line, "cannot set attribute '" + s.targets[1] + "' of '" + s.targets[0] +
                                    "' to a value that holds the namespace itself");
            }
            target->as_dict().set(s.targets[1], std::move(value));
            return;
        }
        bind_targets(s.targets, value, *scope, s.line);
    }

    void bind_params(const std::vector<std::pair<std::string, ExprPtr>>& params, const CallArgs& args, const ScopePtr& local, int line) {
        for (size_t i = 0; i < params.size(); ++i) {
            const auto& [name, def] = params[i];
            const Value* given = nullptr;
            for (const auto& [k, v] : args.keywords) {
                if (k == name) given = &v;
            }
            if (!given && i < args.positional.size()) given = &args.positional[i];
            if (given) {
                local->vars.set(name, *given);
            } else if (def) {
                local->vars.set(name, eval(*def, local));
            } else {
                local->vars.set(name, Value::undefined("'" + name + "' is undefined"));
            }
        }
        if (args.positional.size() > params.size()) fail_at(line, "macro called with too many arguments");
    }

    Value make_macro(const Stmt& s, const ScopePtr& scope) {
        const Stmt* stmt = &s;
        std::weak_ptr<Scope> defining = scope;  // the scope holds the macro: no ownership cycle
        return Value::callable(s.name, [this, stmt, defining](const CallArgs& args) {
            if (++call_depth_ > opt_.max_call_depth) {
                --call_depth_;
                fail_at(stmt->line, "macro '" + stmt->name + "' nested deeper than " + std::to_string(opt_.max_call_depth) + " calls");
            }
            struct Unwind {
                int& d;
                ~Unwind() { --d; }
            } unwind{call_depth_};
            auto local = std::make_shared<Scope>();
            local->parent = defining.lock();
            bind_params(stmt->params, args, local, stmt->line);
            for (const auto& [k, v] : args.keywords) {
                if (k == "caller") local->vars.set("caller", v);
            }
            MarkedText text;
            exec(stmt->body, local, text);
            return text.value();
        });
    }

    // ---- expressions ----

    CallArgs eval_args(const Expr& e, const ScopePtr& scope) {
        CallArgs args;
        for (const auto& a : e.args) args.positional.push_back(eval(*a, scope));
        for (const auto& [k, v] : e.kwargs) args.keywords.emplace_back(k, eval(*v, scope));
        return args;
    }

    Value call_value(const Value& callee, const CallArgs& args, int line) {
        try {
            return callee.as_function()(args);
        } catch (const TemplateRaised&) {
            throw;
        } catch (const Error& e) {
            std::string what = e.what();
            if (what.rfind("chat template line", 0) == 0) throw;
            fail_at(line, what);
        }
    }

    // Undefined values stop here when something looks inside them.
    const Value& defined(const Value& v, int line) {
        if (v.is_undefined()) fail_at(line, v.name().empty() ? std::string("value is undefined") : v.name());
        return v;
    }

    template <typename F>
    auto with_line(int line, F&& f) -> decltype(f()) {
        try {
            return f();
        } catch (const TemplateRaised&) {
            throw;
        } catch (const Error& e) {
            std::string what = e.what();
            if (what.rfind("chat template line", 0) == 0) throw;
            fail_at(line, what);
        }
    }

    Value eval(const Expr& e, const ScopePtr& scope) {
        step(e.line);
        switch (e.kind) {
        case Expr::Kind::Literal: return e.value;
        case Expr::Kind::Name: {
            const Value* v = scope->lookup(e.name);
            return v ? *v : Value::undefined("'" + e.name + "' is undefined");
        }
        case Expr::Kind::List:
        case Expr::Kind::Tuple: {
            ValueList items;
            for (const auto& i : e.items) items.push_back(eval(*i, scope));
            return Value::list(std::move(items));
        }
        case Expr::Kind::Dict: {
            ValueDict d;
            for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
                Value key = eval(*e.items[i], scope);
                if (!key.is_string()) fail_at(e.line, std::string("dict keys must be strings, got ") + key.type_name());
                d.set(key.as_string(), eval(*e.items[i + 1], scope));
            }
            return Value::dict(std::move(d));
        }
        case Expr::Kind::Attr: {
            Value obj = eval(*e.items[0], scope);
            return get_attribute(defined(obj, e.line), e.name);
        }
        case Expr::Kind::Index: {
            Value obj = eval(*e.items[0], scope);
            Value key = eval(*e.items[1], scope);
            return get_item(defined(obj, e.line), key);
        }
        case Expr::Kind::Slice: return eval_slice(e, scope);
        case Expr::Kind::Call: return eval_call(e, scope);
        case Expr::Kind::Filter: {
            Value input = eval(*e.items[0], scope);
            CallArgs args = eval_args(e, scope);
            return with_line(e.line, [&] { return apply_filter(e.name, input, args); });
        }
        case Expr::Kind::Test: {
            Value input = eval(*e.items[0], scope);
            CallArgs args = eval_args(e, scope);
            bool r = with_line(e.line, [&] { return apply_test(e.name, input, args); });
            return Value(e.negated ? !r : r);
        }
        case Expr::Kind::Unary: {
            Value v = eval(*e.items[0], scope);
            if (e.name == "not") return Value(!v.truthy());
            defined(v, e.line);
            if (v.is_int() || v.is_bool()) {
                int64_t i = v.is_bool() ? v.as_bool() : v.as_int();
                return e.name == "-" ? Value(-i) : Value(i);
            }
            if (v.is_float()) return e.name == "-" ? Value(-v.as_number()) : v;
            fail_at(e.line, std::string("bad operand type for unary ") + e.name + ": " + v.type_name());
        }
        case Expr::Kind::Binary: return eval_binary(e, scope);
        case Expr::Kind::Conditional:
            if (eval(*e.items[1], scope).truthy()) return eval(*e.items[0], scope);
            return e.items[2] ? eval(*e.items[2], scope) : Value::undefined("conditional expression had no else branch");
        }
        return Value();
    }

    Value eval_call(const Expr& e, const ScopePtr& scope) {
        const Expr& callee_expr = *e.items[0];
        if (callee_expr.kind == Expr::Kind::Attr) {
            Value obj = eval(*callee_expr.items[0], scope);
            defined(obj, e.line);
            if (has_method(obj, callee_expr.name)) {
                CallArgs args = eval_args(e, scope);
                return with_line(e.line, [&] { return call_method(obj, callee_expr.name, args); });
            }
            Value fn = get_attribute(obj, callee_expr.name);
            if (!fn.is_callable()) {
                fail_at(e.line, "unknown method '" + callee_expr.name + "' of a " + obj.type_name());
            }
            return call_value(fn, eval_args(e, scope), e.line);
        }
        Value fn = eval(callee_expr, scope);
        if (fn.is_undefined() && callee_expr.kind == Expr::Kind::Name) {
            fail_at(e.line, "unknown function '" + callee_expr.name + "'");
        }
        if (!fn.is_callable()) fail_at(e.line, std::string("a ") + fn.type_name() + " is not callable");
        return call_value(fn, eval_args(e, scope), e.line);
    }

    Value eval_slice(const Expr& e, const ScopePtr& scope) {
        Value obj = eval(*e.items[0], scope);
        defined(obj, e.line);
        std::optional<int64_t> part[3];
        for (int i = 0; i < 3; ++i) {
            if (!e.items[static_cast<size_t>(i) + 1]) continue;
            Value v = eval(*e.items[static_cast<size_t>(i) + 1], scope);
            if (v.is_none()) continue;
            if (!v.is_int()) fail_at(e.line, std::string("slice indices must be integers, got ") + v.type_name());
            part[i] = v.as_int();
        }
        int64_t stride = part[2].value_or(1);
        if (stride == 0) fail_at(e.line, "slice step cannot be zero");
        std::vector<size_t> offsets;
        int64_t n;
        if (obj.is_list()) {
            n = static_cast<int64_t>(obj.as_list().size());
        } else if (obj.is_string()) {
            offsets = utf8_offsets(obj.as_string());
            n = static_cast<int64_t>(offsets.size()) - 1;
        } else {
            fail_at(e.line, std::string("cannot slice a ") + obj.type_name());
        }
        // Python's slice.indices(): clamp, with defaults depending on the step's sign.
        auto clamp = [&](std::optional<int64_t> v, int64_t def) {
            if (!v) return def;
            int64_t x = *v;
            if (x < 0) x += n;
            if (stride > 0) return std::clamp<int64_t>(x, 0, n);
            return std::clamp<int64_t>(x, -1, n - 1);
        };
        int64_t start = clamp(part[0], stride > 0 ? 0 : n - 1);
        int64_t stop = clamp(part[1], stride > 0 ? n : -1);
        ValueList items;
        MarkedText text;
        for (int64_t i = start; stride > 0 ? i < stop : i > stop; i += stride) {
            if (obj.is_list()) {
                items.push_back(obj.as_list()[static_cast<size_t>(i)]);
            } else {
                size_t b = offsets[static_cast<size_t>(i)];
                text.append_part(obj, b, offsets[static_cast<size_t>(i) + 1] - b);
            }
        }
        return obj.is_list() ? Value::list(std::move(items)) : text.value();
    }

    Value eval_binary(const Expr& e, const ScopePtr& scope) {
        const std::string& op = e.name;
        if (op == "and") {
            Value l = eval(*e.items[0], scope);
            return l.truthy() ? eval(*e.items[1], scope) : l;
        }
        if (op == "or") {
            Value l = eval(*e.items[0], scope);
            return l.truthy() ? l : eval(*e.items[1], scope);
        }
        Value l = eval(*e.items[0], scope);
        Value r = eval(*e.items[1], scope);
        if (op == "~") return concat(l, r);
        if (op == "==") return Value(l.equals(r));
        if (op == "!=") return Value(!l.equals(r));
        if (op == "in" || op == "not in") {
            bool found = with_line(e.line, [&] { return contains(r, l); });
            return Value(op == "in" ? found : !found);
        }
        defined(l, e.line);
        defined(r, e.line);
        if (op == "<" || op == "<=" || op == ">" || op == ">=") {
            int c = with_line(e.line, [&] { return compare_values(l, r); });
            return Value(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
        }
        if (op == "+") {
            if (l.is_string() && r.is_string()) return concat(l, r);
            if (l.is_list() && r.is_list()) {
                ValueList items = l.as_list();
                items.insert(items.end(), r.as_list().begin(), r.as_list().end());
                return Value::list(std::move(items));
            }
        }
        if (op == "*" && (l.is_string() || l.is_list()) && r.is_int()) return repeat(l, r.as_int(), e.line);
        if (op == "*" && (r.is_string() || r.is_list()) && l.is_int()) return repeat(r, l.as_int(), e.line);
        bool numeric = (l.is_number() || l.is_bool()) && (r.is_number() || r.is_bool());
        if (!numeric) {
            fail_at(e.line, "unsupported operand types for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
        }
        bool ints = !l.is_float() && !r.is_float();
        double x = l.as_number(), y = r.as_number();
        int64_t a = static_cast<int64_t>(x), b = static_cast<int64_t>(y);
        if (ints) {
            a = l.is_bool() ? l.as_bool() : l.as_int();
            b = r.is_bool() ? r.as_bool() : r.as_int();
        }
        int64_t res = 0;
        if (op == "+" || op == "-" || op == "*") {
            if (!ints) return Value(op == "+" ? x + y : op == "-" ? x - y : x * y);
            bool overflow = op == "+" ? __builtin_add_overflow(a, b, &res)
                          : op == "-" ? __builtin_sub_overflow(a, b, &res)
                                      : __builtin_mul_overflow(a, b, &res);
            if (overflow) fail_at(e.line, "integer overflow in '" + op + "'");
            return Value(res);
        }
        if ((op == "/" || op == "//" || op == "%") && y == 0) fail_at(e.line, "division by zero");
        if (op == "/") return Value(x / y);
        if (op == "//") {
            if (!ints) return Value(std::floor(x / y));
            int64_t q = a / b;
            if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
            return Value(q);
        }
        if (op == "%") {
            if (!ints) {
                double m = std::fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0))) m += y;
                return Value(m);
            }
            int64_t m = a % b;
            if (m != 0 && ((m < 0) != (b < 0))) m += b;
            return Value(m);
        }
        if (op == "**") {
            if (ints && b >= 0) {
                int64_t acc = 1;
                for (int64_t i = 0; i < b; ++i) {
                    if (__builtin_mul_overflow(acc, a, &acc)) fail_at(e.line, "integer overflow in '**'");
                    if (acc == 0 || acc == 1) break;
                }
                return Value(acc);
            }
            return Value(std::pow(x, y));
        }
        fail_at(e.line, "unsupported operator '" + op + "'");
    }

    Value repeat(const Value& v, int64_t times, int line) {
        int64_t unit = v.is_string() ? static_cast<int64_t>(v.as_string().size()) : static_cast<int64_t>(v.as_list().size());
        if (times > 0 && unit > 0 && times > kMaxSequence * 16 / unit) fail_at(line, "repetition result too large");
        if (v.is_string()) {
            MarkedText out;
            for (int64_t i = 0; i < times; ++i) out.append(v);
            return out.value();
        }
        ValueList items;
        for (int64_t i = 0; i < times; ++i) items.insert(items.end(), v.as_list().begin(), v.as_list().end());
        return Value::list(std::move(items));
    }

    const RenderOptions& opt_;
    uint64_t steps_ = 0;
    int call_depth_ = 0;
};

}  // namespace

std::string render(const Template& tmpl, const ValueDict& variables, const RenderOptions& options) {
    return Renderer(options).run(tmpl, variables).text();
}

MarkedText render_marked(const Template& tmpl, const ValueDict& variables, const RenderOptions& options) {
    return Renderer(options).run(tmpl, variables);
}

}  // namespace tessera::jinja
