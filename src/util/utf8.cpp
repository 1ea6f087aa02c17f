#include "util/utf8.h"

#include <algorithm>

namespace tessera {

Utf8Step next_utf8(std::string_view s) {
    const auto lead = static_cast<uint8_t>(s[0]);
    if (lead < 0x80) return {Utf8Step::Complete, 1};
    size_t need = 0;
    // The second byte's range is narrower after some leads: that is what
    // rules out overlong forms, surrogates and code points above U+10FFFF.
    uint8_t lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        need = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        need = 3;
        if (lead == 0xE0) lo = 0xA0;
        if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        need = 4;
        if (lead == 0xF0) lo = 0x90;
        if (lead == 0xF4) hi = 0x8F;
    } else {
        return {Utf8Step::Invalid, 1};
    }
    for (size_t k = 1; k < need; ++k) {
        if (k >= s.size()) return {Utf8Step::Incomplete, k};
        const auto c = static_cast<uint8_t>(s[k]);
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return {Utf8Step::Invalid, k};
    }
    return {Utf8Step::Complete, need};
}

size_t utf8_char_bytes(std::string_view s, size_t at) {
    const auto lead = static_cast<uint8_t>(s[at]);
    const size_t n = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    return std::min(n, s.size() - at);
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::vector<size_t> utf8_offsets(std::string_view s) {
    std::vector<size_t> offsets;
    offsets.reserve(s.size() + 1);
    for (size_t i = 0; i < s.size(); ++i) {
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
    }
    offsets.push_back(s.size());
    return offsets;
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

}  // namespace tessera
