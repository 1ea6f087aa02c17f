// Every JSON message a node parses from a peer: the first byte picks the
// message, the rest is its payload, read exactly as the worker and the roots
// read it (size and depth checks, then each field).
#include "cluster/session/json_messages.h"
#include "cluster/session/session_messages.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera;
    if (size < 1) return 0;
    Frame frame;
    frame.payload.assign(data + 1, data + size);
    static const SessionMessage kinds[] = {SessionMessage::kHello, SessionMessage::kAssign, SessionMessage::kHelloReply,
                                      SessionMessage::kReady, SessionMessage::kSliceBegin, SessionMessage::kSliceEnd,
                                      SessionMessage::kStageHello, SessionMessage::kError};
    const SessionMessage kind = kinds[data[0] % (sizeof kinds / sizeof kinds[0])];
    frame.type = static_cast<uint16_t>(kind);
    try {
        const json j = parse_json_message(frame, kind == SessionMessage::kError ? SessionMessage::kReady : kind, "fuzz");
        const JsonFields f(j, "fuzz", "fuzz");
        switch (kind) {
            case SessionMessage::kHello: (void)parse_hello(j, "fuzz"); break;
            case SessionMessage::kAssign: (void)parse_assign(j, "fuzz"); break;
            case SessionMessage::kHelloReply: (void)parse_hello_reply(j, "fuzz"); break;
            case SessionMessage::kReady:
                (void)f.boolean("ok", false);
                (void)f.boolean("need_slice", false);
                (void)f.string("error", 4096, "?");
                break;
            case SessionMessage::kSliceBegin: (void)f.integer("bytes", 1, int64_t{1} << 40); break;
            case SessionMessage::kSliceEnd:
                (void)f.integer("bytes", 0, INT64_MAX);
                (void)f.string("checksum", 16);
                break;
            case SessionMessage::kStageHello: (void)f.string("fingerprint", 64); break;
            default: break;
        }
    } catch (const Error&) {
    }
    return 0;
}
