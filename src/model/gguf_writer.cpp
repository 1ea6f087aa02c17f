#include "model/gguf_writer.h"

#include "model/gguf_file.h"
#include "util/checked.h"
#include "util/error.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <unistd.h>

namespace tessera {

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
    const size_t at = out.size();
    out.resize(at + sizeof value);
    std::memcpy(out.data() + at, &value, sizeof value);
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

void put_type(std::vector<uint8_t>& out, GgufValueType type) { put<uint32_t>(out, static_cast<uint32_t>(type)); }

void put_value_body(std::vector<uint8_t>& out, const GgufValue& v);

void put_array_body(std::vector<uint8_t>& out, const GgufValue& v) {
    put_type(out, v.elem_type);
    put<uint64_t>(out, v.count);
    const uint64_t elem_size = gguf_scalar_size(v.elem_type);
    if (elem_size != 0) {
        out.insert(out.end(), v.raw, v.raw + v.count * elem_size);
    } else if (v.elem_type == GgufValueType::String) {
        for (const auto& s : v.strings) put_string(out, s);
    } else {
        for (const auto& item : v.items) put_array_body(out, item);
    }
}

void put_value_body(std::vector<uint8_t>& out, const GgufValue& v) {
    switch (v.type) {
        case GgufValueType::UInt8: put<uint8_t>(out, static_cast<uint8_t>(v.i)); break;
        case GgufValueType::Int8: put<int8_t>(out, static_cast<int8_t>(v.i)); break;
        case GgufValueType::UInt16: put<uint16_t>(out, static_cast<uint16_t>(v.i)); break;
        case GgufValueType::Int16: put<int16_t>(out, static_cast<int16_t>(v.i)); break;
        case GgufValueType::UInt32: put<uint32_t>(out, static_cast<uint32_t>(v.i)); break;
        case GgufValueType::Int32: put<int32_t>(out, static_cast<int32_t>(v.i)); break;
        case GgufValueType::Bool: put<uint8_t>(out, v.i != 0 ? 1 : 0); break;
        case GgufValueType::UInt64: put<uint64_t>(out, v.u); break;
        case GgufValueType::Int64: put<int64_t>(out, v.i); break;
        case GgufValueType::Float32: put<float>(out, static_cast<float>(v.f)); break;
        case GgufValueType::Float64: put<double>(out, v.f); break;
        case GgufValueType::String: put_string(out, v.str); break;
        case GgufValueType::Array: put_array_body(out, v); break;
    }
}

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

void GgufWriter::set_entry(const std::string& key, std::vector<uint8_t> bytes) {
    if (key == "general.alignment") {
        uint32_t a = 0;
        if (bytes.size() == 8) std::memcpy(&a, bytes.data() + 4, 4);
        if (a == 0 || (a & (a - 1)) != 0) throw make_error("general.alignment must be a power of two (got {})", a);
        alignment_ = a;
    }
    for (auto& entry : metadata_) {
        if (entry.key == key) {
            entry.bytes = std::move(bytes);
            return;
        }
    }
    metadata_.push_back({key, std::move(bytes)});
}

void GgufWriter::set_u32(const std::string& key, uint32_t value) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::UInt32);
    put(b, value);
    set_entry(key, std::move(b));
}

void GgufWriter::set_i32(const std::string& key, int32_t value) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::Int32);
    put(b, value);
    set_entry(key, std::move(b));
}

void GgufWriter::set_u64(const std::string& key, uint64_t value) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::UInt64);
    put(b, value);
    set_entry(key, std::move(b));
}

void GgufWriter::set_f32(const std::string& key, float value) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::Float32);
    put(b, value);
    set_entry(key, std::move(b));
}

void GgufWriter::set_bool(const std::string& key, bool value) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::Bool);
    put<uint8_t>(b, value ? 1 : 0);
    set_entry(key, std::move(b));
}

void GgufWriter::set_string(const std::string& key, const std::string& value) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::String);
    put_string(b, value);
    set_entry(key, std::move(b));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& values) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::Array);
    put_type(b, GgufValueType::String);
    put<uint64_t>(b, values.size());
    for (const auto& s : values) put_string(b, s);
    set_entry(key, std::move(b));
}

void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& values) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::Array);
    put_type(b, GgufValueType::Float32);
    put<uint64_t>(b, values.size());
    for (float f : values) put(b, f);
    set_entry(key, std::move(b));
}

void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& values) {
    std::vector<uint8_t> b;
    put_type(b, GgufValueType::Array);
    put_type(b, GgufValueType::Int32);
    put<uint64_t>(b, values.size());
    for (int32_t v : values) put(b, v);
    set_entry(key, std::move(b));
}

void GgufWriter::set_value(const std::string& key, const GgufValue& value) {
    std::vector<uint8_t> b;
    put_type(b, value.type);
    put_value_body(b, value);
    set_entry(key, std::move(b));
}

void GgufWriter::add_tensor(const std::string& name, QuantType type, const std::vector<int64_t>& ne, Fill fill) {
    if (ne.empty() || ne.size() > static_cast<size_t>(kGgufMaxDims)) {
        throw make_error("tensor '{}' must have 1 to {} dimensions", name, kGgufMaxDims);
    }
    uint64_t n_elements = 1;
    for (int64_t d : ne) {
        if (d < 0) throw make_error("tensor '{}' has a negative dimension", name);
        n_elements = checked_mul(n_elements, static_cast<uint64_t>(d), "tensor elements");
    }
    const QuantLayout& layout = layout_of(type);
    if (ne[0] % layout.block_size != 0) {
        throw make_error("tensor '{}': rows of {} elements cannot be stored as {} (blocks of {})", name, ne[0],
                         layout.name, layout.block_size);
    }
    const uint64_t n_bytes =
        checked_mul(n_elements / static_cast<uint64_t>(layout.block_size), layout.block_bytes, "tensor bytes");
    for (const auto& t : tensors_) {
        if (t.name == name) throw make_error("duplicate tensor '{}'", name);
    }
    tensors_.push_back({name, type, ne, n_bytes, std::move(fill), {}});
}

void GgufWriter::add_tensor_rows(const std::string& name, QuantType type, const std::vector<int64_t>& ne, FillRows fill) {
    add_tensor(name, type, ne, {});
    tensors_.back().fill_rows = std::move(fill);
}

void GgufWriter::write(const std::string& path, const std::function<void(size_t, size_t)>& progress) const {
    std::vector<uint8_t> head;
    put<uint32_t>(head, kGgufMagic);
    put<uint32_t>(head, 3);
    put<uint64_t>(head, tensors_.size());
    put<uint64_t>(head, metadata_.size());
    for (const auto& entry : metadata_) {
        put_string(head, entry.key);
        head.insert(head.end(), entry.bytes.begin(), entry.bytes.end());
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
        put_string(head, t.name);
        put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
        put<uint32_t>(head, static_cast<uint32_t>(t.type));
        put<uint64_t>(head, offset);
        offset = checked_align_up(checked_add(offset, t.n_bytes, "data size"), alignment_, "data size");
    }
    head.resize(checked_align_up(head.size(), alignment_, "header size"), 0);

    std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
    if (!file) throw make_error("{}: cannot create: {}", path, std::strerror(errno));
    auto write_bytes = [&](const void* p, size_t n) {
        if (n != 0 && std::fwrite(p, 1, n, file.get()) != n) {
            throw make_error("{}: write failed: {}", path, std::strerror(errno));
        }
    };
    write_bytes(head.data(), head.size());
    if (zero_data_) {
        // The header, then a hole to the end of the data: reads as zeros.
        if (std::fflush(file.get()) != 0 || ::ftruncate(::fileno(file.get()), static_cast<off_t>(head.size() + offset)) != 0) {
            throw make_error("{}: write failed: {}", path, std::strerror(errno));
        }
        if (progress) progress(tensors_.size(), tensors_.size());
        return;
    }
    std::vector<uint8_t> buffer;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const auto& t = tensors_[i];
        const uint64_t padded = checked_align_up(t.n_bytes, alignment_, "tensor size");
        if (t.fill_rows) {
            int64_t rows = 1;
            for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
            const uint64_t row_bytes = rows > 0 ? t.n_bytes / static_cast<uint64_t>(rows) : 0;
            const int64_t per_chunk = static_cast<int64_t>(std::max<uint64_t>(1, row_chunk_bytes_ / std::max<uint64_t>(1, row_bytes)));
            for (int64_t first = 0; first < rows; first += per_chunk) {
                const int64_t n = std::min(per_chunk, rows - first);
                buffer.assign(static_cast<size_t>(n) * row_bytes, 0);
                t.fill_rows(buffer.data(), first, n);
                write_bytes(buffer.data(), buffer.size());
            }
            buffer.assign(padded - t.n_bytes, 0);
            write_bytes(buffer.data(), buffer.size());
        } else {
            buffer.assign(padded, 0);
            t.fill(buffer.data(), t.n_bytes);
            write_bytes(buffer.data(), buffer.size());
        }
        if (progress) progress(i + 1, tensors_.size());
    }
    if (std::fflush(file.get()) != 0) throw make_error("{}: write failed: {}", path, std::strerror(errno));
}

}  // namespace tessera
