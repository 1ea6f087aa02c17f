// Every JSON message a node parses from a peer: the first byte picks the
// message, the rest is its payload, read exactly as the worker and the roots
// read it (size and depth checks, then each field).
#include "cluster/json_messages.h"
#include "cluster/session_messages.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera;
    if (size < 1) return 0;
    Frame frame;
    frame.payload.assign(data + 1, data + size);
    static const TpMessage kinds[] = {TpMessage::kHello, TpMessage::kAssign, TpMessage::kHelloReply,
                                      TpMessage::kReady, TpMessage::kSliceBegin, TpMessage::kSliceEnd,
                                      TpMessage::kStageHello, TpMessage::kError};
    const TpMessage kind = kinds[data[0] % (sizeof kinds / sizeof kinds[0])];
    frame.type = static_cast<uint16_t>(kind);
    try {
        const json j = parse_json_message(frame, kind == TpMessage::kError ? TpMessage::kReady : kind, "fuzz");
        const JsonFields f(j, "fuzz", "fuzz");
        switch (kind) {
            case TpMessage::kHello: (void)parse_hello(j, "fuzz"); break;
            case TpMessage::kAssign: (void)parse_assign(j, "fuzz"); break;
            case TpMessage::kHelloReply: (void)parse_hello_reply(j, "fuzz"); break;
            case TpMessage::kReady:
                (void)f.boolean("ok", false);
                (void)f.boolean("need_slice", false);
                (void)f.string("error", 4096, "?");
                break;
            case TpMessage::kSliceBegin: (void)f.integer("bytes", 1, int64_t{1} << 40); break;
            case TpMessage::kSliceEnd:
                (void)f.integer("bytes", 0, INT64_MAX);
                (void)f.string("checksum", 16);
                break;
            case TpMessage::kStageHello: (void)f.string("fingerprint", 64); break;
            default: break;
        }
    } catch (const Error&) {
    }
    return 0;
}
