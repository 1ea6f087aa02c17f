// The JSON messages of the handshakes (hello, assign, ready, stage hello,
// error), read as hostile input: a message's size and nesting are bounded
// before it is parsed, and every field is checked for presence, type and
// range when it is read, so a malformed message is an Error naming the peer,
// the message and the field, never an escaped library exception.
#pragma once

#include "cluster/session/messages.h"
#include "net/channel.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <utility>

namespace tessera {

using json = nlohmann::json;

// JSON messages larger or deeper than this are refused before parsing.
constexpr size_t kMaxJsonMessageBytes = 64u << 10;
constexpr int kMaxJsonDepth = 8;

void send_json(FrameChannel& channel, SessionMessage type, const json& j);

// Parses a frame that must be an `expected` JSON object. A kError frame from
// the peer becomes an Error "PEER failed: MESSAGE".
json parse_json_message(const Frame& frame, SessionMessage expected, const std::string& peer);

// Receives the next frame within timeout_ms and parses it as above.
json recv_json(FrameChannel& channel, SessionMessage expected, const std::string& peer, int timeout_ms);

// Field readers: each throws an Error naming the peer and the field when the
// field is missing (unless a fallback is given), of another type, or out of
// [lo, hi].
class JsonFields {
public:
    JsonFields(const json& object, std::string peer, const char* message)
        : j_(object), peer_(std::move(peer)), message_(message) {}

    int64_t integer(const char* key, int64_t lo, int64_t hi) const;
    int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) const;
    double number(const char* key, double lo, double hi, double fallback) const;
    bool boolean(const char* key, bool fallback) const;
    std::string string(const char* key, size_t max_bytes) const;
    std::string string(const char* key, size_t max_bytes, const std::string& fallback) const;
    // [begin, end) with lo <= begin <= end <= hi.
    std::pair<int64_t, int64_t> range(const char* key, int64_t lo, int64_t hi) const;
    bool has(const char* key) const { return j_.contains(key); }
    // A nested object's fields.
    JsonFields object(const char* key) const;
    // An array of at most max_items strings of at most max_bytes each.
    std::vector<std::string> strings(const char* key, size_t max_items, size_t max_bytes) const;
    std::vector<double> numbers(const char* key, size_t max_items, double lo, double hi) const;
    // An array of at most max_rows arrays of `width` integers in [lo, hi].
    std::vector<std::vector<int64_t>> integer_rows(const char* key, size_t max_rows, size_t width, int64_t lo,
                                                   int64_t hi) const;
    // Fails naming the field.
    [[noreturn]] void refuse(const char* key, const char* what) const { fail(key, what); }

private:
    const json& at(const char* key) const;
    [[noreturn]] void fail(const char* key, const char* what) const;

    const json& j_;
    std::string peer_;
    const char* message_;
};

}  // namespace tessera
