// A request body is whatever a client sends: any bytes, parsed as a chat and
// as a completions request, end in a CompletionRequest or an ApiError with a
// status and the field it names; never a crash, a hang or another exception.
// What a parsed request holds serializes back (usage, a response, a chunk).
// The same bytes as an Ollama or Anthropic request: translated and parsed,
// an ApiError or a request, never anything else.
#include "serve/anthropic_api.h"
#include "serve/ollama_api.h"
#include "serve/openai_api.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string body(reinterpret_cast<const char*>(data), size);
    for (const bool chat : {true, false}) {
        try {
            const tessera::CompletionRequest r = tessera::parse_completion_request(body, chat);
            tessera::CompletionResult result;
            result.text = r.chat ? tessera::dump_json(r.messages) : r.prompt;
            result.finish_reason = "stop";
            (void)tessera::dump_json(tessera::completion_json(r, result, "id", "model", 0));
            (void)tessera::dump_json(tessera::chunk_json(r, "id", "model", 0, result.text, "", true));
        } catch (const tessera::ApiError& e) {
            if (e.status < 400 || e.status > 599) __builtin_trap();
            (void)tessera::dump_json(e.body());  // as serve writes it: broken UTF-8 in an echoed field becomes U+FFFD
        }
    }
    const auto translated = [&](auto translate, bool chat) {
        try {
            bool stream = false;
            const std::string openai = translate(&stream);
            (void)tessera::parse_completion_request(openai, chat, tessera::ToolCallFormat::kHarmony);
        } catch (const tessera::ApiError& e) {
            if (e.status < 400 || e.status > 599) __builtin_trap();
        }
    };
    translated([&](bool* s) { return tessera::ollama_to_openai(body, true, s); }, true);
    translated([&](bool* s) { return tessera::ollama_to_openai(body, false, s); }, body.find("\"raw\"") == std::string::npos);
    translated([&](bool* s) { return tessera::anthropic_to_openai(body, s); }, true);
    return 0;
}
