// Renders a parsed template: walks the statements, evaluates expressions
// with jinja2's semantics (scoping: a `set` inside a for loop or macro stays
// there, which is why templates use namespace(); default Undefined: prints
// as nothing, is falsy, iterates as empty, but any attribute of it is an
// error), and provides the globals chat templates call: range, namespace,
// dict, raise_exception, strftime_now. Hostile templates are bounded: total
// evaluation steps, output size, and macro recursion depth.
#pragma once

#include "chat/jinja_marked.h"
#include "chat/jinja_parser.h"
#include "chat/jinja_value.h"
#include "util/error.h"

#include <ctime>
#include <functional>
#include <string>

namespace tessera::jinja {

// What a template's raise_exception(message) throws: the message alone, so
// an application can show it as the template's own refusal.
class TemplateRaised : public Error {
public:
    explicit TemplateRaised(const std::string& message) : Error(message) {}
};

struct RenderOptions {
    // The local time strftime_now() formats; unset means the wall clock.
    std::function<std::tm()> now;
    size_t max_output_bytes = size_t{64} << 20;
    // Expression evaluations and loop iterations: real templates take a few
    // per message, so 2M is ample and bounds a hostile one to about a second.
    uint64_t max_steps = 2'000'000;
    int max_call_depth = 100;         // nested macro calls
};

std::string render(const Template& tmpl, const ValueDict& variables, const RenderOptions& options = {});
// The same with the bytes that came from the caller's data marked (strings
// from Value::from_json(..., true) and whatever the template made of them).
MarkedText render_marked(const Template& tmpl, const ValueDict& variables, const RenderOptions& options = {});

}  // namespace tessera::jinja
