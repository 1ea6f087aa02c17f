// A Hugging Face checkpoint folder as convert-hf reads it: config.json, and
// the weights in model.safetensors or in the shards that
// model.safetensors.index.json's weight_map names. Every shard is opened and
// checked (safetensors_file.h); the map must name only shards that exist, and
// each tensor it names must be in its shard (and nowhere else): errors name the
// file. Shards are mapped, not read: a tensor's pages are touched only when
// its bytes are used.
#pragma once

#include "model/safetensors_file.h"

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class HfCheckpoint {
public:
    explicit HfCheckpoint(const std::string& dir);

    const std::string& dir() const { return dir_; }
    // config.json, parsed (an object).
    const nlohmann::json& config() const { return config_; }
    // Every tensor's name, in shard order and within a shard in file order.
    const std::vector<std::string>& names() const { return names_; }
    // The tensor of that name (an Error naming the checkpoint if absent).
    const SafetensorsTensor& tensor(const std::string& name) const;
    bool has(const std::string& name) const { return where_.count(name) != 0; }
    std::span<const uint8_t> data(const std::string& name) const;
    // The shard that holds it.
    const SafetensorsFile& shard_of(const std::string& name) const;
    size_t shard_count() const { return shards_.size(); }

private:
    std::string dir_;
    nlohmann::json config_;
    std::vector<std::unique_ptr<SafetensorsFile>> shards_;
    std::map<std::string, size_t> where_;  // tensor -> shard
    std::vector<std::string> names_;
};

// A JSON file of a checkpoint (config.json, the index), size- and
// depth-bounded before parsing; an Error naming the file otherwise.
nlohmann::json read_checkpoint_json(const std::string& path, uint64_t max_bytes);
// The same for text already read; `path` names it in errors.
nlohmann::json parse_checkpoint_json(std::string_view text, const std::string& path);

}  // namespace tessera
