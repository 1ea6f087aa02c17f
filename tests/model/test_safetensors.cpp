// Hugging Face checkpoints read as hostile input (issue: convert-hf, item 2):
// a .safetensors file whose header, offsets, shapes or dtypes lie, or that
// is cut short, is an Error naming the file and the tensor, never a crash or
// an out-of-file read; a sharded checkpoint with a missing shard, a shard
// holding what the index maps elsewhere, or a shard name that leaves the
// folder is refused naming the file.
#include "model/hf_checkpoint.h"
#include "model/safetensors_file.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/rng.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

namespace tessera {
namespace {

struct Entry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

// A safetensors file as HF writes one (header padded to 8 bytes with
// spaces); `edit` may change the header before it is written.
std::vector<uint8_t> write_safetensors(const std::vector<Entry>& entries,
                                       const std::function<void(nlohmann::json&)>& edit = nullptr) {
    nlohmann::json header = nlohmann::json::object();
    header["__metadata__"] = {{"format", "pt"}};
    uint64_t at = 0;
    std::vector<uint8_t> data;
    for (const Entry& e : entries) {
        header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + e.bytes.size()}}};
        data.insert(data.end(), e.bytes.begin(), e.bytes.end());
        at += e.bytes.size();
    }
    if (edit) edit(header);
    std::string text = header.dump();
    while (text.size() % 8 != 0) text += ' ';
    std::vector<uint8_t> out;
    out.reserve(8 + text.size() + data.size());
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i)));
    for (const char c : text) out.push_back(static_cast<uint8_t>(c));
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

std::vector<uint8_t> bytes_of(size_t n, uint8_t seed) {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
    return b;
}

std::vector<Entry> three() {
    return {{"model.embed_tokens.weight", "BF16", {4, 3}, bytes_of(24, 1)},
            {"model.norm.weight", "F32", {3}, bytes_of(12, 2)},
            {"lm_head.weight", "F16", {4, 3}, bytes_of(24, 3)}};
}

std::string safetensors_error_of(const std::vector<uint8_t>& file) {
    try {
        SafetensorsFile f(file, "model.safetensors");
        return "";
    } catch (const Error& e) {
        return e.what();
    }
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
    const auto file = write_safetensors(three());
    const SafetensorsFile f(file, "model.safetensors");
    ASSERT_EQ(f.tensors().size(), 3u);
    const SafetensorsTensor* norm = f.find("model.norm.weight");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->dtype, SafetensorsDtype::F32);
    EXPECT_EQ(norm->shape, std::vector<int64_t>{3});
    const auto d = f.data(*norm);
    EXPECT_EQ(std::vector<uint8_t>(d.begin(), d.end()), bytes_of(12, 2));
    EXPECT_EQ(f.find("lm_head.weight")->elements(), 12u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    EXPECT_EQ(f.find("nothing"), nullptr);
}

TEST(Safetensors, LiesAndTruncationsAreErrorsNamingTheFileAndTensor) {
    const auto good = write_safetensors(three());
    // Cut at every length: an Error each time, naming the file.
    for (size_t n = 0; n < good.size(); ++n) {
        const std::string e =
            safetensors_error_of(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<long>(n)));
        ASSERT_NE(e.find("model.safetensors"), std::string::npos) << n << ": " << e;
    }
    struct Case {
        std::function<void(nlohmann::json&)> edit;
        std::string want;
    };
    const std::vector<Case> cases = {
        {[](nlohmann::json& h) { h["lm_head.weight"]["data_offsets"] = {48, 4000}; }, "past the end of the file"},
        {[](nlohmann::json& h) { h["lm_head.weight"]["data_offsets"] = {20, 44}; }, "overlaps"},
        {[](nlohmann::json& h) { h["model.norm.weight"]["shape"] = {4}; }, "data_offsets span 12"},
        {[](nlohmann::json& h) { h["model.norm.weight"]["dtype"] = "F4"; }, "dtype 'F4'"},
        {[](nlohmann::json& h) { h["model.norm.weight"]["shape"] = {-3}; }, "non-negative integer"},
        {[](nlohmann::json& h) { h["model.norm.weight"]["shape"] = {1.5}; }, "non-negative integer"},
        {[](nlohmann::json& h) { h["model.norm.weight"]["shape"] = {uint64_t{1} << 62, 4}; }, "dimension"},
        {[](nlohmann::json& h) { h["model.norm.weight"]["data_offsets"] = {24}; }, "data_offsets"},
        {[](nlohmann::json& h) { h["model.norm.weight"].erase("dtype"); }, "no dtype"},
        {[](nlohmann::json& h) { h["model.norm.weight"] = 5; }, "not an object"},
        {[](nlohmann::json& h) { h["__metadata__"] = {{"format", 1}}; }, "not a string"},
        {[](nlohmann::json& h) { h.erase("model.norm.weight"); }, "belong to no tensor"},
    };
    for (const Case& c : cases) {
        const std::string e = safetensors_error_of(write_safetensors(three(), c.edit));
        EXPECT_NE(e.find(c.want), std::string::npos) << c.want << ": " << e;
        EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
    }
    // A header length past the file, or beyond any real header.
    auto claim = good;
    claim[0] = 0xff;
    claim[1] = 0xff;
    EXPECT_NE(safetensors_error_of(claim).find("truncated"), std::string::npos) << safetensors_error_of(claim);
    claim[6] = 0x01;
    EXPECT_NE(safetensors_error_of(claim).find("not a safetensors file"), std::string::npos)
        << safetensors_error_of(claim);
    // Deep nesting is refused before the parser recurses.
    std::string deep = std::string(100000, '[') + std::string(100000, ']');
    std::vector<uint8_t> nested(8);
    nested[0] = static_cast<uint8_t>(deep.size());
    nested[1] = static_cast<uint8_t>(deep.size() >> 8);
    nested[2] = static_cast<uint8_t>(deep.size() >> 16);
    nested.insert(nested.end(), deep.begin(), deep.end());
    EXPECT_NE(safetensors_error_of(nested).find("deeper"), std::string::npos) << safetensors_error_of(nested);
    // Random damage: only Errors.
    Rng rng(3);
    for (int t = 0; t < 3000; ++t) {
        auto bad = good;
        for (int k = 0; k < 1 + t % 4; ++k) bad[rng.next_u64() % bad.size()] ^= static_cast<uint8_t>(1 + rng.next_u64() % 255);
        try {
            SafetensorsFile f(bad, "model.safetensors");
            for (const auto& tensor : f.tensors()) ASSERT_LE(tensor.end, bad.size());
        } catch (const Error&) {
        }
    }
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string checkpoint_error(const std::string& dir) {
    try {
        HfCheckpoint c(dir);
        return "";
    } catch (const Error& e) {
        return e.what();
    }
}

TEST(HfCheckpoint, ShardsFollowTheirIndexAndEveryLieNamesTheFile) {
    const std::string dir = test::scratch_dir("hf_checkpoint");
    write_text(dir + "/config.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 3})");
    const auto all = three();
    write_file(dir + "/model-00001-of-00002.safetensors", write_safetensors({all[0], all[1]}));
    write_file(dir + "/model-00002-of-00002.safetensors", write_safetensors({all[2]}));
    nlohmann::json index = {{"metadata", {{"total_size", 60}}},
                            {"weight_map",
                             {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                              {"model.norm.weight", "model-00001-of-00002.safetensors"},
                              {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
    write_text(dir + "/model.safetensors.index.json", index.dump());
    {
        const HfCheckpoint c(dir);
        EXPECT_EQ(c.shard_count(), 2u);
        EXPECT_EQ(c.names().size(), 3u);
        EXPECT_EQ(c.config()["hidden_size"], 3);
        const auto head = c.data("lm_head.weight");
        EXPECT_EQ(std::vector<uint8_t>(head.begin(), head.end()), bytes_of(24, 3));
        EXPECT_NE(checkpoint_error(dir + "/nothing").find("not a folder"), std::string::npos);
    }
    // A tensor the index maps to the other shard.
    auto moved = index;
    moved["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
    write_text(dir + "/model.safetensors.index.json", moved.dump());
    EXPECT_NE(checkpoint_error(dir).find("model-00001-of-00002.safetensors: holds tensor 'model.norm.weight', which the "
                                         "index maps to model-00002-of-00002.safetensors"), std::string::npos)
        << checkpoint_error(dir);
    // A tensor the index names that no shard holds.
    auto extra = index;
    extra["weight_map"]["model.layers.0.mlp.up_proj.weight"] = "model-00002-of-00002.safetensors";
    write_text(dir + "/model.safetensors.index.json", extra.dump());
    EXPECT_NE(checkpoint_error(dir).find("does not hold it"), std::string::npos) << checkpoint_error(dir);
    // A name that leaves the folder.
    auto escape = index;
    escape["weight_map"]["lm_head.weight"] = "../model-00002-of-00002.safetensors";
    write_text(dir + "/model.safetensors.index.json", escape.dump());
    EXPECT_NE(checkpoint_error(dir).find("not a file name in the checkpoint's folder"), std::string::npos);
    // A missing shard, and a truncated one, each named.
    write_text(dir + "/model.safetensors.index.json", index.dump());
    std::filesystem::rename(dir + "/model-00002-of-00002.safetensors", dir + "/elsewhere");
    EXPECT_NE(checkpoint_error(dir).find("model-00002-of-00002.safetensors named by model.safetensors.index.json is "
                                         "missing"), std::string::npos) << checkpoint_error(dir);
    auto cut = write_safetensors({all[2]});
    cut.resize(cut.size() - 5);
    write_file(dir + "/model-00002-of-00002.safetensors", cut);
    EXPECT_NE(checkpoint_error(dir).find("model-00002-of-00002.safetensors: tensor 'lm_head.weight' claims"),
              std::string::npos) << checkpoint_error(dir);
    // No config, no weights.
    std::filesystem::remove(dir + "/config.json");
    EXPECT_NE(checkpoint_error(dir).find("no config.json"), std::string::npos);
}

}  // namespace
}  // namespace tessera
