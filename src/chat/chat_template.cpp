#include "chat/chat_template.h"

#include "chat/jinja_lexer.h"
#include "util/error.h"

#include <fstream>
#include <map>
#include <sstream>

namespace tessera {

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)),
      parsed_(std::make_shared<const jinja::Template>(jinja::parse_template(jinja::tokenize(source_)))) {}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token, const nlohmann::json& extra) const {
    return render_json(messages, add_generation_prompt, bos_token, eos_token, extra).text();
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra) const {
    return render_json(messages, add_generation_prompt, bos_token, eos_token, extra).text();
}

RenderedPrompt ChatTemplate::render_prompt(const nlohmann::json& messages, bool add_generation_prompt,
                                           const std::string& bos_token, const std::string& eos_token,
                                           const nlohmann::json& extra) const {
    jinja::MarkedText out = render_json(messages, add_generation_prompt, bos_token, eos_token, extra);
    return {out.text(), out.input()};
}

RenderedPrompt ChatTemplate::render_prompt(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                           const std::string& bos_token, const std::string& eos_token,
                                           const nlohmann::ordered_json& extra) const {
    jinja::MarkedText out = render_json(messages, add_generation_prompt, bos_token, eos_token, extra);
    return {out.text(), out.input()};
}

template <typename Json>
jinja::MarkedText ChatTemplate::render_json(const Json& messages, bool add_generation_prompt, const std::string& bos_token,
                                      const std::string& eos_token, const Json& extra) const {
    if (!messages.is_array()) throw make_error("chat template: messages must be a JSON array");
    if (!extra.is_null() && !extra.is_object()) throw make_error("chat template: extra variables must be a JSON object");
    jinja::ValueDict vars;
    // Everything the caller passes is its data: only the template's own
    // words (and the vocabulary's BOS/EOS) may render as control tokens.
    vars.set("messages", jinja::Value::from_json(messages, true));
    vars.set("add_generation_prompt", jinja::Value(add_generation_prompt));
    vars.set("bos_token", jinja::Value(bos_token));
    vars.set("eos_token", jinja::Value(eos_token));
    if (extra.is_object()) {
        for (auto it = extra.begin(); it != extra.end(); ++it) vars.set(it.key(), jinja::Value::from_json(it.value(), true));
    }
    return jinja::render_marked(*parsed_, vars, options_);
}

namespace {

// The templates the models' own tokenizer_config.json files ship, verbatim.
const std::map<std::string, std::string>& builtins() {
    static const std::map<std::string, std::string> table = {
        {"chatml",
         R"TMPL({%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %})TMPL"},
        {"llama3",
         R"TMPL({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})TMPL"},
        {"mistral",
         R"TMPL({{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %})TMPL"},
        {"gemma",
         R"TMPL({{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %})TMPL"},
        {"phi3",
         R"TMPL({% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %})TMPL"},
    };
    return table;
}

}  // namespace

const std::string& chatml_template() { return builtins().at("chatml"); }

std::optional<std::string> builtin_chat_template(const std::string& name) {
    auto it = builtins().find(name);
    if (it == builtins().end()) return std::nullopt;
    return it->second;
}

std::vector<std::string> builtin_chat_template_names() {
    std::vector<std::string> names;
    for (const auto& [name, _] : builtins()) names.push_back(name);
    return names;
}

}  // namespace tessera

namespace tessera {

std::string chat_template_source(const std::string& option, const std::optional<std::string>& model_template,
                                 bool* fallback) {
    if (fallback != nullptr) *fallback = false;
    if (!option.empty()) {
        if (std::optional<std::string> builtin = builtin_chat_template(option)) return *builtin;
        std::ifstream in(option, std::ios::binary);
        if (!in) {
            std::string names;
            for (const std::string& n : builtin_chat_template_names()) names += (names.empty() ? "" : ", ") + n;
            throw make_error("--chat-template '{}' is neither a built-in template ({}) nor a readable file", option,
                             names);
        }
        std::ostringstream text;
        text << in.rdbuf();
        return text.str();
    }
    if (model_template) return *model_template;
    if (fallback != nullptr) *fallback = true;
    return chatml_template();
}

}  // namespace tessera
