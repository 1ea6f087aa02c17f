// Reading llama.cpp's importance matrices (importance_matrix.h).
#include "model/importance_matrix.h"

#include "model/gguf_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessera {

namespace {

constexpr const char* kSums = ".in_sum2";
constexpr const char* kCounts = ".counts";

bool strip_suffix(std::string& s, const std::string& suffix) {
    if (s.size() < suffix.size() || s.compare(s.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
    s.resize(s.size() - suffix.size());
    return true;
}

void check_finite(const ImportanceMatrix& m, const std::string& name, const std::vector<float>& values) {
    for (float v : values) {
        if (!std::isfinite(v)) throw make_error("{}: importance of '{}' holds a value that is not finite", m.path, name);
    }
}

std::vector<float> f32_values(const GgufFile& file, const GgufTensorInfo& t) {
    if (t.type != QuantType::F32) {
        throw make_error("{}: tensor '{}' is {}, an importance matrix holds F32", file.path(), t.name,
                         quant_type_name(t.type));
    }
    std::vector<float> v(static_cast<size_t>(t.n_elements()));
    // (A tensor of no elements has no data to copy: memcpy from null is undefined.)
    if (!v.empty()) std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return v;
}

// The GGUF form (llama-imatrix since 2025): per matrix the sums of squared
// activations of each column (per expert) and the number of tokens summed.
ImportanceMatrix read_gguf(const std::string& path) {
    const GgufFile file(path);
    ImportanceMatrix m;
    m.path = path;
    const GgufValue* datasets = file.find_array("imatrix.datasets", GgufValueType::String);
    const auto chunk_count = file.find_int("imatrix.chunk_count");
    if (datasets == nullptr || !chunk_count || !file.find_int("imatrix.chunk_size")) {
        throw make_error("{}: a GGUF importance matrix needs imatrix.datasets, imatrix.chunk_count and "
                         "imatrix.chunk_size (is this llama-imatrix's output?)",
                         path);
    }
    for (const auto& s : datasets->strings) m.datasets.emplace_back(s);
    m.chunk_count = static_cast<int>(*chunk_count);
    std::map<std::string, std::pair<const GgufTensorInfo*, const GgufTensorInfo*>> pairs;
    for (const GgufTensorInfo& t : file.tensors()) {
        std::string name = t.name;
        if (strip_suffix(name, kSums)) pairs[name].first = &t;
        else if (strip_suffix(name, kCounts)) pairs[name].second = &t;
    }
    for (const auto& [name, pair] : pairs) {
        if (pair.first == nullptr || pair.second == nullptr) {
            throw make_error("{}: '{}' has {} but no {}", path, name, pair.first ? kSums : kCounts,
                             pair.first ? kCounts : kSums);
        }
        const std::vector<float> sums = f32_values(file, *pair.first);
        const std::vector<float> counts = f32_values(file, *pair.second);
        if (counts.empty() || sums.size() % counts.size() != 0) {
            throw make_error("{}: '{}' has {} sums for {} counts", path, name, sums.size(), counts.size());
        }
        const size_t per = sums.size() / counts.size();
        std::vector<float>& values = m.entries[name];
        values.resize(sums.size());
        for (size_t j = 0; j < counts.size(); ++j) {
            // llama.cpp rounds each count to an integer; a matrix (or expert)
            // never seen weighs every column 1.
            const auto count = static_cast<float>(std::lround(counts[j]));
            for (size_t i = 0; i < per; ++i) values[j * per + i] = count > 0.0f ? sums[j * per + i] / count : 1.0f;
        }
        check_finite(m, name, values);
    }
    if (m.entries.empty()) throw make_error("{}: an importance matrix without entries", path);
    return m;
}

// The legacy .dat form: int32 entry count; per entry an int32 name length,
// the name, int32 ncall, int32 nval and nval floats (the mean squares times
// ncall); then optionally int32 chunk count, int32 length and a dataset name.
class LegacyReader {
public:
    explicit LegacyReader(const MappedFile& file) : file_(file) {}

    int32_t i32(const char* what) {
        int32_t v;
        read(&v, sizeof v, what);
        return v;
    }
    void read(void* out, uint64_t n, const char* what) {
        if (n > file_.size() - pos_) {
            throw make_error("{}: truncated importance matrix: {} at offset {} needs {} bytes, {} left", file_.path(),
                             what, pos_, n, file_.size() - pos_);
        }
        std::memcpy(out, file_.data() + pos_, n);
        pos_ += n;
    }
    bool at_end() const { return pos_ == file_.size(); }
    uint64_t left() const { return file_.size() - pos_; }

private:
    const MappedFile& file_;
    uint64_t pos_ = 0;
};

ImportanceMatrix read_legacy(const MappedFile& file) {
    ImportanceMatrix m;
    m.path = file.path();
    LegacyReader in(file);
    const int32_t n_entries = in.i32("the entry count");
    if (n_entries < 1) throw make_error("{}: no entries in the importance matrix ({})", m.path, n_entries);
    for (int32_t e = 0; e < n_entries; ++e) {
        const int32_t len = in.i32("a name length");
        if (len < 1 || len > 4096) throw make_error("{}: entry {} has a name of {} bytes", m.path, e, len);
        std::string name(static_cast<size_t>(len), '\0');
        in.read(name.data(), static_cast<uint64_t>(len), "a name");
        const int32_t ncall = in.i32("a call count");
        const int32_t nval = in.i32("a value count");
        if (nval < 1 || static_cast<uint64_t>(nval) * 4 > in.left()) {
            throw make_error("{}: entry '{}' announces {} values, {} bytes are left", m.path, name, nval, in.left());
        }
        std::vector<float> values(static_cast<size_t>(nval));
        in.read(values.data(), values.size() * sizeof(float), "values");
        // (llama-quantize: the file holds the mean squares times ncall.)
        if (ncall > 0) {
            for (float& v : values) v /= static_cast<float>(ncall);
        }
        check_finite(m, name, values);
        m.entries[name] = std::move(values);
    }
    if (!in.at_end()) {
        m.chunk_count = in.i32("the chunk count");
        if (!in.at_end()) {
            const int32_t len = in.i32("the dataset name length");
            if (len > 0 && static_cast<uint64_t>(len) <= in.left()) {
                std::string dataset(static_cast<size_t>(len), '\0');
                in.read(dataset.data(), static_cast<uint64_t>(len), "the dataset name");
                m.datasets.push_back(dataset);
            }
        }
    }
    return m;
}

}  // namespace

ImportanceMatrix read_importance_matrix(const std::string& path) {
    const MappedFile file(path);
    uint32_t magic = 0;
    if (file.size() >= 4) std::memcpy(&magic, file.data(), 4);
    if (magic == kGgufMagic) return read_gguf(path);
    return read_legacy(file);
}

}  // namespace tessera
