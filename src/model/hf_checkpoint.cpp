#include "model/hf_checkpoint.h"

#include "util/error.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace tessera {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxConfigBytes = 4u << 20;
constexpr uint64_t kMaxIndexBytes = 64u << 20;
constexpr size_t kMaxShards = 10000;

// A shard's name from the index: a plain file name in the folder, never a
// path that leaves it.
bool plain_file_name(const std::string& name) {
    return !name.empty() && name.size() < 256 && name.find('/') == std::string::npos && name != "." && name != ".." &&
           name.find('\0') == std::string::npos;
}

}  // namespace

nlohmann::json read_checkpoint_json(const std::string& path, uint64_t max_bytes) {
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) throw make_error("{}: cannot read: {}", path, ec.message());
    if (size > max_bytes) throw make_error("{}: {} bytes, more than the {} a checkpoint's JSON may have", path, size, max_bytes);
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return parse_checkpoint_json(text.str(), path);
}

nlohmann::json parse_checkpoint_json(std::string_view text, const std::string& path) {
    try {
        // What reads the value walks it level by level: a callback refuses
        // deep nesting while parsing.
        return nlohmann::json::parse(text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
            if (depth > 64) throw make_error("nested deeper than 64 levels");
            return true;
        });
    } catch (const nlohmann::json::exception& e) {
        throw make_error("{}: not valid JSON: {}", path, e.what());
    } catch (const Error& e) {
        throw make_error("{}: {}", path, e.what());
    }
}

HfCheckpoint::HfCheckpoint(const std::string& dir) : dir_(dir) {
    if (!fs::is_directory(dir)) throw make_error("{}: not a folder (a Hugging Face checkpoint is a folder)", dir);
    const std::string config_path = dir + "/config.json";
    if (!fs::exists(config_path)) throw make_error("{}: no config.json: not a Hugging Face checkpoint", dir);
    config_ = read_checkpoint_json(config_path, kMaxConfigBytes);
    if (!config_.is_object()) throw make_error("{}: not a JSON object", config_path);

    const std::string index_path = dir + "/model.safetensors.index.json";
    std::vector<std::string> files;
    std::map<std::string, std::string> weight_map;  // tensor -> file
    if (fs::exists(index_path)) {
        const nlohmann::json index = read_checkpoint_json(index_path, kMaxIndexBytes);
        const auto map = index.is_object() ? index.find("weight_map") : index.end();
        if (map == index.end() || !map->is_object()) throw make_error("{}: no weight_map object", index_path);
        std::set<std::string> seen;
        for (const auto& [tensor, file] : map->items()) {
            if (!file.is_string() || !plain_file_name(file.get<std::string>())) {
                throw make_error("{}: tensor '{}' is mapped to {}, not a file name in the checkpoint's folder",
                                 index_path, tensor.substr(0, 200), file.dump().substr(0, 100));
            }
            weight_map[tensor] = file.get<std::string>();
            if (seen.insert(file.get<std::string>()).second) files.push_back(file.get<std::string>());
        }
        if (files.size() > kMaxShards) throw make_error("{}: {} shards", index_path, files.size());
        std::sort(files.begin(), files.end());
    } else if (fs::exists(dir + "/model.safetensors")) {
        files.push_back("model.safetensors");
    } else {
        throw make_error("{}: no model.safetensors nor model.safetensors.index.json (only .safetensors weights are "
                         "read; convert .bin checkpoints to safetensors first)", dir);
    }
    for (size_t s = 0; s < files.size(); ++s) {
        const std::string path = dir + "/" + files[s];
        if (!fs::exists(path)) {
            throw make_error("{}: shard {} named by {} is missing", path, files[s], fs::path(index_path).filename().string());
        }
        shards_.push_back(std::make_unique<SafetensorsFile>(path));
        for (const SafetensorsTensor& t : shards_.back()->tensors()) {
            if (!weight_map.empty()) {
                const auto mapped = weight_map.find(t.name);
                if (mapped == weight_map.end() || mapped->second != files[s]) {
                    throw make_error("{}: holds tensor '{}', which the index maps to {}", path, t.name.substr(0, 200),
                                     mapped == weight_map.end() ? std::string("no shard") : mapped->second);
                }
            }
            if (!where_.emplace(t.name, s).second) {
                throw make_error("{}: tensor '{}' is also in {}", path, t.name.substr(0, 200),
                                 shards_[where_[t.name]]->path());
            }
            names_.push_back(t.name);
        }
    }
    for (const auto& [tensor, file] : weight_map) {
        if (where_.count(tensor) == 0) {
            throw make_error("{}/{}: the index names tensor '{}' here, but the shard does not hold it", dir, file,
                             tensor.substr(0, 200));
        }
    }
}

const SafetensorsFile& HfCheckpoint::shard_of(const std::string& name) const {
    const auto it = where_.find(name);
    if (it == where_.end()) throw make_error("{}: the checkpoint has no tensor '{}'", dir_, name);
    return *shards_[it->second];
}

const SafetensorsTensor& HfCheckpoint::tensor(const std::string& name) const {
    return *shard_of(name).find(name);
}

std::span<const uint8_t> HfCheckpoint::data(const std::string& name) const {
    return shard_of(name).data(tensor(name));
}

}  // namespace tessera
