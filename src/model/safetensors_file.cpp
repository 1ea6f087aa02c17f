#include "model/safetensors_file.h"

#include "util/checked.h"
#include "util/error.h"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace tessera {

namespace {

struct DtypeInfo {
    SafetensorsDtype dtype;
    const char* name;
    uint64_t bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::F64, "F64", 8},       {SafetensorsDtype::F32, "F32", 4},
    {SafetensorsDtype::F16, "F16", 2},       {SafetensorsDtype::BF16, "BF16", 2},
    {SafetensorsDtype::I64, "I64", 8},       {SafetensorsDtype::I32, "I32", 4},
    {SafetensorsDtype::I16, "I16", 2},       {SafetensorsDtype::I8, "I8", 1},
    {SafetensorsDtype::U8, "U8", 1},         {SafetensorsDtype::BOOL, "BOOL", 1},
    {SafetensorsDtype::F8_E4M3, "F8_E4M3", 1}, {SafetensorsDtype::F8_E5M2, "F8_E5M2", 1},
};

const DtypeInfo& info_of(SafetensorsDtype d) {
    for (const DtypeInfo& i : kDtypes) {
        if (i.dtype == d) return i;
    }
    return kDtypes[0];
}

// Header JSON deeper than this is refused before it is parsed (a tensor
// entry is two levels; nesting is an attack on the parser's stack).
constexpr int kMaxDepth = 8;
constexpr size_t kMaxDims = 8;

bool depth_within(const std::string_view text, int limit) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') in_string = true;
        if (c == '{' || c == '[') {
            if (++depth > limit) return false;
        }
        if (c == '}' || c == ']') --depth;
    }
    return true;
}

}  // namespace

const char* safetensors_dtype_name(SafetensorsDtype d) { return info_of(d).name; }
uint64_t safetensors_dtype_bytes(SafetensorsDtype d) { return info_of(d).bytes; }

uint64_t SafetensorsTensor::elements() const {
    uint64_t n = 1;
    for (int64_t d : shape) n = checked_mul(n, static_cast<uint64_t>(d), "a tensor's element count");
    return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : name_(path), file_(path) {
    parse(std::span<const uint8_t>(file_.data(), file_.size()));
}

SafetensorsFile::SafetensorsFile(std::span<const uint8_t> bytes, std::string name) : name_(std::move(name)) {
    parse(bytes);
}

void SafetensorsFile::parse(std::span<const uint8_t> bytes) {
    if (bytes.size() < 8) {
        throw make_error("{}: {} bytes, shorter than a safetensors header's length (8 bytes): truncated or not a "
                         "safetensors file", name_, bytes.size());
    }
    uint64_t header_bytes = 0;
    for (int i = 0; i < 8; ++i) header_bytes |= static_cast<uint64_t>(bytes[i]) << (8 * i);
    if (header_bytes > kMaxSafetensorsHeader) {
        throw make_error("{}: a header of {} bytes claimed (at most {} accepted): not a safetensors file", name_,
                         header_bytes, kMaxSafetensorsHeader);
    }
    if (header_bytes > bytes.size() - 8) {
        throw make_error("{}: its header claims {} bytes, but only {} follow: the file is truncated", name_,
                         header_bytes, bytes.size() - 8);
    }
    const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_bytes);
    if (!depth_within(text, kMaxDepth)) throw make_error("{}: its header nests deeper than {} levels", name_, kMaxDepth);
    nlohmann::json header;
    try {
        header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw make_error("{}: its header is not JSON: {}", name_, e.what());
    }
    if (!header.is_object()) throw make_error("{}: its header is not a JSON object", name_);
    data_ = bytes.data() + 8 + header_bytes;
    data_bytes_ = bytes.size() - 8 - header_bytes;
    for (const auto& [key, value] : header.items()) {
        if (key == "__metadata__") {
            if (!value.is_object()) throw make_error("{}: __metadata__ is not an object", name_);
            for (const auto& [k, v] : value.items()) {
                if (!v.is_string()) throw make_error("{}: __metadata__ '{}' is not a string", name_, k.substr(0, 64));
                metadata_[k] = v.get<std::string>();
            }
            continue;
        }
        const std::string who = fmt::format("{}: tensor '{}'", name_, key.substr(0, 200));
        if (!value.is_object()) throw make_error("{} is not an object", who);
        SafetensorsTensor t;
        t.name = key;
        const auto dtype = value.find("dtype");
        if (dtype == value.end() || !dtype->is_string()) throw make_error("{} has no dtype", who);
        const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                        [&](const DtypeInfo& i) { return *dtype == i.name; });
        if (known == std::end(kDtypes)) {
            throw make_error("{} has dtype '{}', which safetensors does not define", who,
                             dtype->get<std::string>().substr(0, 32));
        }
        t.dtype = known->dtype;
        const auto shape = value.find("shape");
        if (shape == value.end() || !shape->is_array() || shape->size() > kMaxDims) {
            throw make_error("{} has no shape of at most {} dimensions", who, kMaxDims);
        }
        for (const auto& d : *shape) {
            if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0)) {
                throw make_error("{} has a shape entry that is not a non-negative integer: {}", who, d.dump().substr(0, 40));
            }
            const uint64_t v = d.get<uint64_t>();
            if (v > (1ull << 40)) throw make_error("{} has a dimension of {}", who, v);
            t.shape.push_back(static_cast<int64_t>(v));
        }
        const auto offsets = value.find("data_offsets");
        if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
            !(*offsets)[1].is_number_unsigned()) {
            throw make_error("{} has no data_offsets [begin, end] of non-negative integers", who);
        }
        t.begin = (*offsets)[0].get<uint64_t>();
        t.end = (*offsets)[1].get<uint64_t>();
        if (t.begin > t.end || t.end > data_bytes_) {
            throw make_error("{} claims bytes [{}, {}) of a data section of {} bytes: past the end of the file "
                             "(truncated?)", who, t.begin, t.end, data_bytes_);
        }
        const uint64_t want = checked_mul(t.elements(), known->bytes, "a tensor's byte size");
        if (want != t.end - t.begin) {
            throw make_error("{}: {} of shape [{}] is {} bytes, but its data_offsets span {}", who, known->name,
                             fmt::join(t.shape, ", "), want, t.end - t.begin);
        }
        tensors_.push_back(std::move(t));
    }
    // Ranges in order: no overlap, no hole, the data section covered.
    std::vector<const SafetensorsTensor*> by_offset;
    for (const auto& t : tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
        return std::make_pair(a->begin, a->end) < std::make_pair(b->begin, b->end);
    });
    uint64_t at = 0;
    for (const SafetensorsTensor* t : by_offset) {
        if (t->begin < at) {
            throw make_error("{}: tensor '{}' at bytes [{}, {}) overlaps the tensor before it (which ends at {})", name_,
                             t->name.substr(0, 200), t->begin, t->end, at);
        }
        if (t->begin > at) {
            throw make_error("{}: bytes [{}, {}) belong to no tensor, before '{}'", name_, at, t->begin,
                             t->name.substr(0, 200));
        }
        at = t->end;
    }
    if (at != data_bytes_) {
        throw make_error("{}: {} bytes after the last tensor belong to no tensor", name_, data_bytes_ - at);
    }
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::data(const SafetensorsTensor& t) const {
    return {data_ + t.begin, static_cast<size_t>(t.end - t.begin)};
}

}  // namespace tessera
