// A model's chat template: the Jinja2 text (from a GGUF's
// tokenizer.chat_template or a Hugging Face tokenizer_config.json) that turns
// a conversation into the prompt the model was trained on. Rendered the way
// transformers' apply_chat_template renders it (trim_blocks, lstrip_blocks,
// tojson without key sorting, raise_exception, strftime_now), so a prompt
// built here is byte for byte the one Python would build.
#pragma once

#include "chat/jinja_parser.h"
#include "chat/jinja_render.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

// A prompt a chat template rendered: its text, and the byte ranges of it
// that came from the conversation (message contents, names, tool schemas)
// rather than from the template. Only the template's own words may become
// control tokens; the rest is tokenized as the text it is.
struct RenderedPrompt {
    std::string text;
    TextSpans input;
};

class ChatTemplate {
public:
    // Parses now, so a template outside the supported subset fails here
    // (tessera::Error naming the construct and line), not mid-conversation.
    explicit ChatTemplate(std::string source);

    // `messages` is a JSON array of {"role", "content", ...} objects (extra
    // fields such as tool_calls or reasoning_content pass through). `extra`
    // holds further template variables (tools, enable_thinking, ...).
    // Throws jinja::TemplateRaised when the template refuses the
    // conversation, tessera::Error for anything else.
    // Pass ordered_json where key order matters: tojson prints tool schemas
    // in insertion order, and plain nlohmann::json has sorted their keys.
    std::string render(const nlohmann::json& messages, bool add_generation_prompt, const std::string& bos_token,
                       const std::string& eos_token, const nlohmann::json& extra = nlohmann::json::object()) const;
    std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt, const std::string& bos_token,
                       const std::string& eos_token, const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

    // The same, with what came from `messages` and `extra` marked as input.
    RenderedPrompt render_prompt(const nlohmann::json& messages, bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::json& extra = nlohmann::json::object()) const;
    RenderedPrompt render_prompt(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

    // Fixes the clock strftime_now() reads (tests, reproducible prompts).
    void set_now(std::function<std::tm()> now) { options_.now = std::move(now); }
    const std::string& source() const { return source_; }

private:
    template <typename Json>
    jinja::MarkedText render_json(const Json& messages, bool add_generation_prompt, const std::string& bos_token,
                                  const std::string& eos_token, const Json& extra) const;

    std::string source_;
    std::shared_ptr<const jinja::Template> parsed_;
    jinja::RenderOptions options_;
};

// ChatML (<|im_start|>role\ncontent<|im_end|>\n), the fallback for a model
// that ships no template.
const std::string& chatml_template();

// Built-in templates by name, for --chat-template NAME: "chatml", "llama3",
// "gemma", "phi3", "mistral". nullopt for others.
std::optional<std::string> builtin_chat_template(const std::string& name);
std::vector<std::string> builtin_chat_template_names();

// The template a command uses: --chat-template's built-in NAME or FILE when
// given, else the model's own (tokenizer.chat_template), else ChatML (then
// *fallback is set). An option that is neither is an Error listing the names.
std::string chat_template_source(const std::string& option, const std::optional<std::string>& model_template,
                                 bool* fallback = nullptr);

}  // namespace tessera
