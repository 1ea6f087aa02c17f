#include "cluster/session/json_messages.h"

#include "util/error.h"

#include <cmath>

namespace tessera {

namespace {

// The deepest nesting of arrays and objects in a JSON text (brackets inside
// strings skipped), so a message of a million '[' is refused before parsing.
int json_depth(const std::vector<uint8_t>& text) {
    int depth = 0, deepest = 0;
    bool in_string = false, escaped = false;
    for (uint8_t c : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
        else if (c == ']' || c == '}') --depth;
    }
    return deepest;
}

}  // namespace

void send_json(FrameChannel& channel, SessionMessage type, const json& j) {
    const std::string text = j.dump();
    channel.send(static_cast<uint16_t>(type),
                 std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

json parse_json_message(const Frame& frame, SessionMessage expected, const std::string& peer) {
    const char* name = tp_message_name(frame.type);
    if (frame.payload.size() > kMaxJsonMessageBytes) {
        throw make_error("{}: {} message of {} bytes exceeds the limit of {}", peer, name, frame.payload.size(),
                         kMaxJsonMessageBytes);
    }
    if (json_depth(frame.payload) > kMaxJsonDepth) {
        throw make_error("{}: {} message nested deeper than {} levels", peer, name, kMaxJsonDepth);
    }
    json j = json::parse(frame.payload.begin(), frame.payload.end(), nullptr, false);
    if (frame.type == static_cast<uint16_t>(SessionMessage::kError)) {
        std::string message = "?";
        if (j.is_object() && j.contains("error") && j["error"].is_string()) message = j["error"].get<std::string>();
        throw make_error("{} failed: {}", peer, message.substr(0, 2000));
    }
    if (frame.type != static_cast<uint16_t>(expected)) {
        throw make_error("{}: expected a {} message, got {}", peer, tp_message_name(static_cast<uint16_t>(expected)),
                         name);
    }
    if (j.is_discarded() || !j.is_object()) throw make_error("{}: malformed {} message", peer, name);
    return j;
}

json recv_json(FrameChannel& channel, SessionMessage expected, const std::string& peer, int timeout_ms) {
    Frame frame;
    channel.recv(frame, timeout_ms);
    return parse_json_message(frame, expected, peer);
}

void JsonFields::fail(const char* key, const char* what) const {
    throw make_error("{}: field '{}' of the {} message {}", peer_, key, message_, what);
}

const json& JsonFields::at(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) fail(key, "is missing");
    return *it;
}

int64_t JsonFields::integer(const char* key, int64_t lo, int64_t hi) const {
    const json& v = at(key);
    if (!v.is_number_integer()) fail(key, "is not an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) fail(key, "is out of range");
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
        throw make_error("{}: field '{}' of the {} message is {}, outside [{}, {}]", peer_, key, message_, x, lo, hi);
    }
    return x;
}

int64_t JsonFields::integer(const char* key, int64_t lo, int64_t hi, int64_t fallback) const {
    return j_.contains(key) ? integer(key, lo, hi) : fallback;
}

double JsonFields::number(const char* key, double lo, double hi, double fallback) const {
    if (!j_.contains(key)) return fallback;
    const json& v = at(key);
    if (!v.is_number()) fail(key, "is not a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi) fail(key, "is out of range");
    return x;
}

bool JsonFields::boolean(const char* key, bool fallback) const {
    if (!j_.contains(key)) return fallback;
    const json& v = at(key);
    if (!v.is_boolean()) fail(key, "is not true or false");
    return v.get<bool>();
}

std::string JsonFields::string(const char* key, size_t max_bytes) const {
    const json& v = at(key);
    if (!v.is_string()) fail(key, "is not a string");
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > max_bytes) fail(key, "is too long");
    return s;
}

std::string JsonFields::string(const char* key, size_t max_bytes, const std::string& fallback) const {
    return j_.contains(key) ? string(key, max_bytes) : fallback;
}

std::pair<int64_t, int64_t> JsonFields::range(const char* key, int64_t lo, int64_t hi) const {
    const json& v = at(key);
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer()) {
        fail(key, "is not a pair of integers");
    }
    const json pair = {{"begin", v[0]}, {"end", v[1]}};
    const JsonFields f(pair, peer_, message_);
    const int64_t b = f.integer("begin", lo, hi), e = f.integer("end", lo, hi);
    if (b > e) fail(key, "ends before it begins");
    return {b, e};
}

JsonFields JsonFields::object(const char* key) const {
    const json& v = at(key);
    if (!v.is_object()) fail(key, "is not an object");
    return JsonFields(v, peer_, message_);
}

std::vector<std::string> JsonFields::strings(const char* key, size_t max_items, size_t max_bytes) const {
    const json& v = at(key);
    if (!v.is_array() || v.size() > max_items) fail(key, "is not a short array");
    std::vector<std::string> out;
    for (const json& item : v) {
        if (!item.is_string() || item.get_ref<const std::string&>().size() > max_bytes) {
            fail(key, "holds an item that is not a short string");
        }
        out.push_back(item.get<std::string>());
    }
    return out;
}

std::vector<double> JsonFields::numbers(const char* key, size_t max_items, double lo, double hi) const {
    const json& v = at(key);
    if (!v.is_array() || v.size() > max_items) fail(key, "is not a short array");
    std::vector<double> out;
    for (const json& item : v) {
        if (!item.is_number() || !std::isfinite(item.get<double>()) || item.get<double>() < lo ||
            item.get<double>() > hi) {
            fail(key, "holds an item that is not a number in range");
        }
        out.push_back(item.get<double>());
    }
    return out;
}

std::vector<std::vector<int64_t>> JsonFields::integer_rows(const char* key, size_t max_rows, size_t width, int64_t lo,
                                                           int64_t hi) const {
    const json& v = at(key);
    if (!v.is_array() || v.size() > max_rows) fail(key, "is not a short array");
    std::vector<std::vector<int64_t>> out;
    for (const json& row : v) {
        if (!row.is_array() || row.size() != width) fail(key, "holds an item that is not an array of the right length");
        std::vector<int64_t> values;
        for (const json& item : row) {
            if (!item.is_number_integer() || item.get<int64_t>() < lo || item.get<int64_t>() > hi) {
                fail(key, "holds an item that is not an integer in range");
            }
            values.push_back(item.get<int64_t>());
        }
        out.push_back(std::move(values));
    }
    return out;
}

}  // namespace tessera
