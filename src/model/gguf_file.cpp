#include "model/gguf_file.h"

#include "util/error.h"

#include <xxhash.h>

#include <cmath>
#include <cstring>

namespace tessera {

namespace {

// Deeply nested arrays are legal GGUF but never useful; a cap keeps a forged
// file from recursing the stack away.
constexpr int kMaxArrayDepth = 8;
// Names and keys are short in every real file; a cap bounds what a forged length can make us copy.
constexpr uint64_t kMaxNameLength = 1u << 16;

// A bounds-checked reader over the mapped bytes. Every read checks the
// remaining length first and reports the offset where the file went wrong.
class Cursor {
public:
    Cursor(const uint8_t* data, uint64_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    [[noreturn]] void fail(const std::string& what, uint64_t at) const {
        throw make_error("{}: {} at offset {}", path_, what, at);
    }

    const uint8_t* take(uint64_t n, const char* what) {
        if (n > remaining()) {
            fail(fmt::format("truncated file: {} needs {} bytes but only {} remain", what, n, remaining()), pos_);
        }
        const uint8_t* p = data_ + pos_;
        pos_ += n;
        return p;
    }

    // a * b, or an error at offset `at` if it overflows.
    uint64_t mul(uint64_t a, uint64_t b, const char* what, uint64_t at) const {
        uint64_t r = 0;
        if (__builtin_mul_overflow(a, b, &r)) fail(fmt::format("{} overflows ({} x {})", what, a, b), at);
        return r;
    }

    template <typename T>
    T read(const char* what) {
        T v;
        std::memcpy(&v, take(sizeof v, what), sizeof v);
        return v;
    }

    std::string_view read_string(const char* what, uint64_t max_length = UINT64_MAX) {
        const uint64_t at = pos_;
        const auto length = read<uint64_t>(what);
        if (length > max_length) fail(fmt::format("{} length {} exceeds the limit of {}", what, length, max_length), at);
        const uint8_t* p = take(length, what);
        return {reinterpret_cast<const char*>(p), length};
    }

private:
    const uint8_t* data_;
    uint64_t size_;
    uint64_t pos_ = 0;
    const std::string& path_;
};

void read_value(Cursor& cursor, GgufValueType type, GgufValue& out, int depth);

GgufValueType read_value_type(Cursor& cursor, const char* what) {
    const uint64_t at = cursor.pos();
    const auto raw = cursor.read<uint32_t>(what);
    if (raw > static_cast<uint32_t>(GgufValueType::Float64)) cursor.fail(fmt::format("unknown value type {}", raw), at);
    return static_cast<GgufValueType>(raw);
}

void read_array(Cursor& cursor, GgufValue& out, int depth) {
    const uint64_t at = cursor.pos();
    if (depth >= kMaxArrayDepth) cursor.fail("arrays nested too deeply", at);
    out.elem_type = read_value_type(cursor, "array element type");
    out.count = cursor.read<uint64_t>("array length");
    const uint64_t elem_size = gguf_scalar_size(out.elem_type);
    if (elem_size != 0) {
        const uint64_t bytes = cursor.mul(out.count, elem_size, "array size", at);
        out.raw = cursor.take(bytes, "array data");
        return;
    }
    // Strings take at least their 8-byte length and arrays at least 12 bytes,
    // so a count larger than that allows is a lie: refuse it before reserving.
    const uint64_t min_size = out.elem_type == GgufValueType::String ? 8 : 12;
    if (out.count > cursor.remaining() / min_size) {
        cursor.fail(fmt::format("array of {} {} elements cannot fit in the {} bytes left", out.count,
                                gguf_value_type_name(out.elem_type), cursor.remaining()),
                    at);
    }
    if (out.elem_type == GgufValueType::String) {
        out.strings.reserve(out.count);
        for (uint64_t i = 0; i < out.count; ++i) out.strings.push_back(cursor.read_string("array string"));
    } else {
        out.items.resize(out.count);
        for (uint64_t i = 0; i < out.count; ++i) {
            out.items[i].type = GgufValueType::Array;
            read_array(cursor, out.items[i], depth + 1);
        }
    }
}

void read_value(Cursor& cursor, GgufValueType type, GgufValue& out, int depth) {
    out.type = type;
    switch (type) {
        case GgufValueType::UInt8: out.i = cursor.read<uint8_t>("uint8 value"); break;
        case GgufValueType::Int8: out.i = cursor.read<int8_t>("int8 value"); break;
        case GgufValueType::UInt16: out.i = cursor.read<uint16_t>("uint16 value"); break;
        case GgufValueType::Int16: out.i = cursor.read<int16_t>("int16 value"); break;
        case GgufValueType::UInt32: out.i = cursor.read<uint32_t>("uint32 value"); break;
        case GgufValueType::Int32: out.i = cursor.read<int32_t>("int32 value"); break;
        case GgufValueType::Bool: out.i = cursor.read<uint8_t>("bool value") != 0 ? 1 : 0; break;
        case GgufValueType::UInt64:
            out.u = cursor.read<uint64_t>("uint64 value");
            out.i = static_cast<int64_t>(out.u);
            break;
        case GgufValueType::Int64: out.i = cursor.read<int64_t>("int64 value"); break;
        case GgufValueType::Float32: out.f = cursor.read<float>("float32 value"); break;
        case GgufValueType::Float64: out.f = cursor.read<double>("float64 value"); break;
        case GgufValueType::String: out.str = cursor.read_string("string value"); break;
        case GgufValueType::Array: read_array(cursor, out, depth); break;
    }
    if (type != GgufValueType::UInt64 && out.is_integer()) out.u = static_cast<uint64_t>(out.i);
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : file_(path) { parse(); }

void GgufFile::parse() {
    const std::string& path = file_.path();
    Cursor cursor(file_.data(), file_.size(), path);

    const auto magic = cursor.read<uint32_t>("magic");
    if (magic != kGgufMagic) cursor.fail(fmt::format("not a GGUF file (magic 0x{:08x}, expected \"GGUF\")", magic), 0);
    version_ = cursor.read<uint32_t>("version");
    if (version_ == 1) cursor.fail("GGUF version 1 is not supported (only 2 and 3)", 4);
    if (version_ != 2 && version_ != 3) {
        // A byte-swapped small version number means a big-endian file.
        if ((version_ & 0xffffu) == 0 && (version_ >> 24) <= 3) cursor.fail("big-endian GGUF files are not supported", 4);
        cursor.fail(fmt::format("unsupported GGUF version {} (supported: 2 and 3)", version_), 4);
    }
    const uint64_t n_tensors_at = cursor.pos();
    const auto n_tensors = cursor.read<uint64_t>("tensor count");
    const uint64_t n_kv_at = cursor.pos();
    const auto n_kv = cursor.read<uint64_t>("metadata count");
    // Each metadata entry takes at least 13 bytes and each tensor entry 28:
    // counts beyond that cannot be real and must not size an allocation.
    if (n_kv > cursor.remaining() / 13) {
        cursor.fail(fmt::format("metadata count {} cannot fit in a {}-byte file", n_kv, file_.size()), n_kv_at);
    }
    if (n_tensors > cursor.remaining() / 28) {
        cursor.fail(fmt::format("tensor count {} cannot fit in a {}-byte file", n_tensors, file_.size()), n_tensors_at);
    }

    metadata_.reserve(n_kv);
    for (uint64_t k = 0; k < n_kv; ++k) {
        const uint64_t at = cursor.pos();
        GgufKv kv;
        kv.key = std::string(cursor.read_string("metadata key", kMaxNameLength));
        kv.value.type = read_value_type(cursor, "metadata value type");
        read_value(cursor, kv.value.type, kv.value, 0);
        if (!metadata_index_.emplace(kv.key, metadata_.size()).second) {
            cursor.fail(fmt::format("duplicate metadata key '{}'", kv.key), at);
        }
        metadata_.push_back(std::move(kv));
    }

    if (const GgufValue* a = find("general.alignment")) {
        const bool valid = a->is_integer() && a->i > 0 && a->i <= (1 << 30) && (a->i & (a->i - 1)) == 0;
        if (!valid) cursor.fail(fmt::format("general.alignment must be a power of two (got {})", a->i), 0);
        alignment_ = static_cast<uint32_t>(a->i);
    }

    tensors_.reserve(n_tensors);
    for (uint64_t t = 0; t < n_tensors; ++t) {
        const uint64_t at = cursor.pos();
        GgufTensorInfo info;
        info.name = std::string(cursor.read_string("tensor name", kMaxNameLength));
        const auto n_dims = cursor.read<uint32_t>("tensor dimension count");
        if (n_dims == 0 || n_dims > kGgufMaxDims) {
            cursor.fail(fmt::format("tensor '{}' has {} dimensions (1 to {} allowed)", info.name, n_dims, kGgufMaxDims), at);
        }
        info.n_dims = static_cast<int>(n_dims);
        uint64_t n_elements = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            const auto ne = cursor.read<uint64_t>("tensor dimension");
            if (ne > static_cast<uint64_t>(INT64_MAX)) {
                cursor.fail(fmt::format("tensor '{}' dimension {} is {}", info.name, d, ne), at);
            }
            info.ne[d] = static_cast<int64_t>(ne);
            n_elements = cursor.mul(n_elements, ne, "tensor element count", at);
        }
        const uint64_t type_at = cursor.pos();
        const auto type_id = cursor.read<uint32_t>("tensor type");
        const auto layout = quant_layout(type_id);
        if (!layout) cursor.fail(fmt::format("tensor '{}' has unknown type id {}", info.name, type_id), type_at);
        info.type = layout->type;
        if (info.ne[0] % layout->block_size != 0) {
            cursor.fail(fmt::format("tensor '{}' row of {} elements is not a whole number of {} blocks", info.name,
                                    info.ne[0], layout->name),
                        at);
        }
        info.n_bytes = cursor.mul(n_elements / static_cast<uint64_t>(layout->block_size), layout->block_bytes,
                                  "tensor size", at);
        const uint64_t offset_at = cursor.pos();
        info.offset = cursor.read<uint64_t>("tensor offset");
        if (info.offset % alignment_ != 0) {
            cursor.fail(fmt::format("tensor '{}' offset {} is not aligned to {}", info.name, info.offset, alignment_),
                        offset_at);
        }
        if (!tensor_index_.emplace(info.name, tensors_.size()).second) {
            cursor.fail(fmt::format("duplicate tensor '{}'", info.name), at);
        }
        tensors_.push_back(std::move(info));
    }

    fingerprint_ = XXH3_64bits(file_.data(), cursor.pos());
    data_offset_ = (cursor.pos() + alignment_ - 1) / alignment_ * alignment_;  // pos < file size: no overflow
    if (data_offset_ > file_.size() && !tensors_.empty()) {
        cursor.fail(fmt::format("truncated file: tensor data would start at {} but the file has {} bytes", data_offset_,
                                file_.size()),
                    cursor.pos());
    }
    const uint64_t data_size = data_offset_ <= file_.size() ? file_.size() - data_offset_ : 0;
    for (auto& info : tensors_) {
        // Compared without forming offset + size, which a forged offset could overflow.
        if (info.n_bytes > data_size || info.offset > data_size - info.n_bytes) {
            const uint64_t end = info.offset + info.n_bytes;
            throw make_error("{}: truncated file: tensor '{}' needs data bytes {}..{} (file offsets {}..{}) but the "
                             "file ends at offset {}",
                             path, info.name, info.offset, end, data_offset_ + info.offset, data_offset_ + end,
                             file_.size());
        }
        info.data = file_.data() + data_offset_ + info.offset;
    }
}

std::string GgufFile::fingerprint_hex() const { return fmt::format("{:016x}", fingerprint_); }

const GgufValue* GgufFile::find(const std::string& key) const {
    const auto it = metadata_index_.find(key);
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::optional<std::string> GgufFile::find_string(const std::string& key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->type != GgufValueType::String) {
        throw make_error("{}: metadata '{}' should be a string but is {}", path(), key, gguf_value_type_name(v->type));
    }
    return std::string(v->str);
}

std::string GgufFile::get_string(const std::string& key) const {
    auto v = find_string(key);
    if (!v) throw make_error("{}: required metadata '{}' is missing", path(), key);
    return *v;
}

std::optional<int64_t> GgufFile::find_int(const std::string& key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_integer()) {
        throw make_error("{}: metadata '{}' should be an integer but is {}", path(), key, gguf_value_type_name(v->type));
    }
    if (v->type == GgufValueType::UInt64 && v->u > static_cast<uint64_t>(INT64_MAX)) {
        throw make_error("{}: metadata '{}' value {} is out of range", path(), key, v->u);
    }
    return v->i;
}

int64_t GgufFile::get_int(const std::string& key) const {
    auto v = find_int(key);
    if (!v) throw make_error("{}: required metadata '{}' is missing", path(), key);
    return *v;
}

std::optional<double> GgufFile::find_float(const std::string& key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_float()) return v->f;
    if (v->is_integer()) return static_cast<double>(v->i);
    throw make_error("{}: metadata '{}' should be a number but is {}", path(), key, gguf_value_type_name(v->type));
}

std::optional<bool> GgufFile::find_bool(const std::string& key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->type != GgufValueType::Bool) {
        throw make_error("{}: metadata '{}' should be a bool but is {}", path(), key, gguf_value_type_name(v->type));
    }
    return v->i != 0;
}

const GgufValue* GgufFile::find_array(const std::string& key, GgufValueType elem_type) const {
    const GgufValue* v = find(key);
    if (v == nullptr) return nullptr;
    if (v->type != GgufValueType::Array || v->elem_type != elem_type) {
        throw make_error("{}: metadata '{}' should be an array of {} but is {}{}", path(), key,
                         gguf_value_type_name(elem_type), gguf_value_type_name(v->type),
                         v->type == GgufValueType::Array
                             ? fmt::format(" of {}", gguf_value_type_name(v->elem_type))
                             : std::string());
    }
    return v;
}

}  // namespace tessera
