#include "cluster/session/slice_cache.h"

#include "cluster/session/json_messages.h"
#include "model/slice_file.h"
#include "util/error.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr uint64_t kMaxSliceBytes = 1ull << 40;
constexpr uint64_t kDiskMargin = 64ull << 20;  // left free on the disk after a transfer
// A .partial file nobody has written to for this long is left from an
// interrupted transfer (a live transfer writes every few milliseconds).
constexpr auto kStalePartial = std::chrono::minutes(10);

bool is_hex16(const std::string& text) {
    return text.size() == 16 &&
           std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string read_sidecar(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text)) return "";
    return text;
}

void remove_entry(const std::string& path) {
    std::error_code ignored;
    fs::remove(path, ignored);
    fs::remove(path + ".xxh3", ignored);
}

// Removes the file unless released: an interrupted transfer leaves nothing.
class PartialFile {
public:
    explicit PartialFile(std::string path) : path_(std::move(path)) {}
    ~PartialFile() {
        if (!path_.empty()) {
            std::error_code ignored;
            fs::remove(path_, ignored);
        }
    }
    void release() { path_.clear(); }

private:
    std::string path_;
};

}  // namespace

bool is_fingerprint(const std::string& text) { return is_hex16(text); }

SliceCache::SliceCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::string SliceCache::path_of(const std::string& fingerprint, const Slice& slice) const {
    // Only validated hex and integers reach the name: no separator, no "..".
    if (!is_fingerprint(fingerprint)) throw make_error("'{}' is not a model fingerprint", fingerprint.substr(0, 64));
    return dir_ + "/" + slice_file_name(fingerprint, slice);
}

std::vector<CachedSlice> SliceCache::entries() const {
    std::vector<CachedSlice> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        std::error_code size_ec;
        const uint64_t bytes = it->file_size(size_ec);
        if (size_ec || !name.ends_with(".gguf")) continue;
        const std::string fingerprint = name.substr(0, std::min<size_t>(16, name.size()));
        out.push_back({name, is_fingerprint(fingerprint) ? fingerprint : "", bytes});
    }
    std::sort(out.begin(), out.end(), [](const CachedSlice& a, const CachedSlice& b) { return a.name < b.name; });
    return out;
}

std::unique_ptr<LlamaModel> SliceCache::open(const std::string& fingerprint, const Slice& slice) const {
    const std::string path = path_of(fingerprint, slice);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return nullptr;
    try {
        const std::string stored = read_sidecar(path + ".xxh3");
        if (stored.empty() || stored != fmt::format("{:016x}", file_checksum(path))) {
            throw make_error("{}: its hash does not match", path);
        }
        auto model = std::make_unique<LlamaModel>(path);
        const std::optional<Slice> held = stored_slice(model->file());
        if (held && slice_source_fingerprint(model->file()) == fingerprint && describe_slice(*held) == describe_slice(slice)) {
            return model;
        }
    } catch (const Error&) {
        // A damaged entry is replaced by a fresh transfer.
    }
    remove_entry(path);
    return nullptr;
}

void SliceCache::make_room(uint64_t bytes, const std::string& peer) const {
    if (bytes > max_bytes_) {
        throw make_error("{}: a slice of {} bytes exceeds the cache's limit of {} bytes (--cache-max)", peer, bytes,
                         max_bytes_);
    }
    struct Entry {
        fs::path path;
        uint64_t bytes;
        fs::file_time_type time;
    };
    std::vector<Entry> entries;
    uint64_t used = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
        if (!e.is_regular_file()) continue;
        const std::string name = e.path().filename().string();
        if (name.ends_with(".partial")) {
            // Left by an interrupted transfer, unless another worker process
            // sharing this directory is writing it now: only a file nobody
            // has written to for a while is stale.
            std::error_code ec;
            const auto written = e.last_write_time(ec);
            if (!ec && fs::file_time_type::clock::now() - written > kStalePartial) fs::remove(e.path(), ec);
            continue;
        }
        if (!name.ends_with(".gguf")) continue;
        entries.push_back({e.path(), e.file_size(), e.last_write_time()});
        used += e.file_size();
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.time < b.time; });
    for (const Entry& e : entries) {
        if (used + bytes <= max_bytes_) break;
        remove_entry(e.path.string());
        used -= e.bytes;
    }
    struct statvfs disk {};
    if (::statvfs(dir_.c_str(), &disk) == 0) {
        const uint64_t free = static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize;
        if (bytes + kDiskMargin > free) {
            throw make_error("{}: a slice of {} bytes does not fit on the cache's disk ({} bytes free in {})", peer,
                             bytes, free, dir_);
        }
    }
}

std::unique_ptr<LlamaModel> SliceCache::receive(FrameChannel& channel, const std::string& fingerprint,
                                                const Slice& slice, int timeout_ms) {
    const std::string peer = channel.peer();
    const std::string path = path_of(fingerprint, slice);
    fs::create_directories(dir_);
    const json begin = recv_json(channel, SessionMessage::kSliceBegin, peer, timeout_ms);
    const uint64_t announced = static_cast<uint64_t>(
        JsonFields(begin, peer, "slice-begin").integer("bytes", 1, static_cast<int64_t>(kMaxSliceBytes)));
    make_room(announced, peer);
    const std::string partial = path + ".partial";
    PartialFile guard(partial);
    {
        std::ofstream out(partial, std::ios::binary | std::ios::trunc);
        if (!out) throw make_error("cannot write the slice cache file {}", partial);
        Frame frame;
        uint64_t bytes = 0;
        for (;;) {
            channel.recv(frame, timeout_ms);
            if (frame.type == static_cast<uint16_t>(SessionMessage::kSliceData)) {
                bytes += frame.payload.size();
                if (bytes > announced) {
                    throw make_error("{}: slice transfer longer than the {} bytes announced", peer, announced);
                }
                out.write(reinterpret_cast<const char*>(frame.payload.data()),
                          static_cast<std::streamsize>(frame.payload.size()));
                if (!out) throw make_error("cannot write the slice cache file {} (disk full?)", partial);
                continue;
            }
            const json end = parse_json_message(frame, SessionMessage::kSliceEnd, peer);
            const JsonFields f(end, peer, "slice-end");
            out.close();
            if (!out || bytes != announced || static_cast<uint64_t>(f.integer("bytes", 0, INT64_MAX)) != bytes) {
                throw make_error("{}: slice transfer incomplete ({} bytes received, {} announced)", peer, bytes,
                                 announced);
            }
            const std::string checksum = fmt::format("{:016x}", file_checksum(partial));
            if (checksum != f.string("checksum", 16)) {
                throw make_error("{}: slice transfer corrupted (checksum {} != {})", peer, checksum,
                                 f.string("checksum", 16));
            }
            {
                std::ofstream sidecar(path + ".xxh3", std::ios::trunc);
                sidecar << checksum << "\n";
                if (!sidecar) throw make_error("cannot write {}.xxh3", path);
            }
            break;
        }
    }
    fs::rename(partial, path);
    guard.release();
    return open(fingerprint, slice);
}

}  // namespace tessera
