// Chat templates come from model files, so a template is hostile input: any
// bytes, parsed and rendered over a fixed conversation, end in text or a
// tessera::Error (a raise_exception included), within the interpreter's
// step and output bounds; never a crash or a hang.
#include "chat/chat_template.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello <b>there</b>"},
        {"role": "assistant", "content": "<think>hm</think>Hi!", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
        {"role": "user", "content": "And now?"}])");
    const std::string source(reinterpret_cast<const char*>(data), size);
    try {
        const tessera::ChatTemplate t(source);
        (void)t.render(messages, (size & 1) != 0, "<s>", "</s>");
    } catch (const tessera::Error&) {
    }
    return 0;
}
