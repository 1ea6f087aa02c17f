#include "model/gguf_file.h"
#include "model/llama2c_import.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>

namespace tessera {

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// stories260K's legacy layout, read independently of the importer: the
// named arrays of floats in file order.
struct Legacy {
    int32_t cfg[7];
    std::vector<std::pair<std::string, std::vector<float>>> arrays;
    const std::vector<float>& get(const std::string& name) const {
        for (const auto& [n, v] : arrays) {
            if (n == name) return v;
        }
        throw std::runtime_error("no array " + name);
    }
};

Legacy read_legacy(const std::string& path) {
    const std::vector<uint8_t> b = test::read_bytes(path);
    Legacy l;
    std::memcpy(l.cfg, b.data(), 28);
    const size_t dim = l.cfg[0], hidden = l.cfg[1], layers = l.cfg[2], heads = l.cfg[3], kv_heads = l.cfg[4];
    const size_t vocab = std::abs(l.cfg[5]), seq = l.cfg[6], hd = dim / heads, kv = hd * kv_heads;
    const std::pair<const char*, size_t> order[] = {
        {"emb", vocab * dim}, {"rms_att", layers * dim}, {"wq", layers * dim * dim}, {"wk", layers * dim * kv},
        {"wv", layers * dim * kv}, {"wo", layers * dim * dim}, {"rms_ffn", layers * dim}, {"w1", layers * hidden * dim},
        {"w2", layers * dim * hidden}, {"w3", layers * hidden * dim}, {"rms_final", dim}, {"freq", seq * hd}};
    size_t at = 28;
    for (const auto& [name, n] : order) {
        std::vector<float> v(n);
        std::memcpy(v.data(), b.data() + at, n * 4);
        at += n * 4;
        l.arrays.emplace_back(name, std::move(v));
    }
    return l;
}

void append(std::vector<uint8_t>& out, const std::vector<float>& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), p, p + v.size() * 4);
}

// Every tensor of `a` is in `b` with the same bytes; output.weight may be
// absent from one side when the other's equals its token_embd.
void expect_same_tensors(const GgufFile& converted, const GgufFile& reference) {
    for (const auto& t : reference.tensors()) {
        const GgufTensorInfo* c = converted.find_tensor(t.name);
        if (c == nullptr && t.name == "output.weight") c = converted.find_tensor("token_embd.weight");
        ASSERT_NE(c, nullptr) << t.name;
        ASSERT_EQ(c->n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(c->data, t.data, t.n_bytes), 0) << t.name;
    }
}

}  // namespace

// The converted stories260K.bin holds exactly the reference GGUF's tensors
// and vocabulary (token strings, scores and types).
TEST(Llama2cImport, LegacyCheckpointMatchesReferenceGguf) {
    const std::string dir = test::scratch_dir("llama2c_legacy");
    const std::string models = test::data_dir() + "/models";
    import_llama2c({models + "/stories260K.bin", models + "/tok512.bin"}, dir + "/s.gguf");
    const GgufFile converted(dir + "/s.gguf");
    const GgufFile reference(test::stories260k());
    expect_same_tensors(converted, reference);
    EXPECT_EQ(converted.find_tensor("output.weight"), nullptr);  // shared classifier -> tied
    for (const char* key : {"llama.embedding_length", "llama.block_count", "llama.attention.head_count",
                            "llama.attention.head_count_kv", "llama.feed_forward_length", "llama.rope.dimension_count"}) {
        EXPECT_EQ(converted.get_int(key), reference.get_int(key)) << key;
    }
    const GgufValue* ct = converted.find_array("tokenizer.ggml.tokens", GgufValueType::String);
    const GgufValue* rt = reference.find_array("tokenizer.ggml.tokens", GgufValueType::String);
    ASSERT_EQ(ct->count, rt->count);
    for (uint64_t i = 0; i < rt->count; ++i) EXPECT_EQ(ct->strings[i], rt->strings[i]) << "token " << i;
    const GgufValue* cs = converted.find_array("tokenizer.ggml.scores", GgufValueType::Float32);
    const GgufValue* rs = reference.find_array("tokenizer.ggml.scores", GgufValueType::Float32);
    const GgufValue* cy = converted.find_array("tokenizer.ggml.token_type", GgufValueType::Int32);
    const GgufValue* ry = reference.find_array("tokenizer.ggml.token_type", GgufValueType::Int32);
    for (uint64_t i = 0; i < rt->count; ++i) {
        EXPECT_EQ(cs->array_number(i), rs->array_number(i)) << "score " << i;
        EXPECT_EQ(cy->array_integer(i), ry->array_integer(i)) << "type " << i;
    }
}

// A version-1 ("ak42") checkpoint with a separate classifier, and a legacy one
// with a separate classifier (negative vocab size), both built here from
// stories260K's arrays, convert to the same tensors.
TEST(Llama2cImport, Version1AndSeparateClassifier) {
    const std::string dir = test::scratch_dir("llama2c_v1");
    const std::string models = test::data_dir() + "/models";
    const Legacy l = read_legacy(models + "/stories260K.bin");
    const size_t layers = l.cfg[2];
    const size_t dim = l.cfg[0];

    std::vector<uint8_t> v1(256, 0);
    const uint32_t magic = 0x616b3432;
    const int32_t version = 1;
    std::memcpy(v1.data(), &magic, 4);
    std::memcpy(v1.data() + 4, &version, 4);
    std::memcpy(v1.data() + 8, l.cfg, 28);
    v1[36] = 0;  // separate classifier
    append(v1, l.get("rms_att"));
    append(v1, l.get("rms_ffn"));
    append(v1, l.get("rms_final"));
    append(v1, l.get("emb"));
    for (const char* w : {"wq", "wk", "wv", "wo", "w1", "w2", "w3"}) append(v1, l.get(w));
    append(v1, l.get("emb"));  // the classifier, stored separately
    write_bytes(dir + "/v1.bin", v1);
    import_llama2c({dir + "/v1.bin", models + "/tok512.bin"}, dir + "/v1.gguf");
    const GgufFile reference(test::stories260k());
    const GgufFile from_v1(dir + "/v1.gguf");
    expect_same_tensors(from_v1, reference);
    EXPECT_NE(from_v1.find_tensor("output.weight"), nullptr);
    EXPECT_EQ(from_v1.find_tensor("blk.4.attn_norm.weight")->ne[0], static_cast<int64_t>(dim));
    EXPECT_EQ(layers, 5u);

    // Legacy with a separate classifier: negative vocab size, classifier appended.
    std::vector<uint8_t> legacy = test::read_bytes(models + "/stories260K.bin");
    int32_t neg_vocab = -l.cfg[5];
    std::memcpy(legacy.data() + 20, &neg_vocab, 4);
    append(legacy, l.get("emb"));
    write_bytes(dir + "/sep.bin", legacy);
    import_llama2c({dir + "/sep.bin", models + "/tok512.bin"}, dir + "/sep.gguf");
    const GgufFile from_sep(dir + "/sep.gguf");
    expect_same_tensors(from_sep, reference);
    EXPECT_NE(from_sep.find_tensor("output.weight"), nullptr);
}

TEST(Llama2cImport, RejectsBrokenInputs) {
    const std::string dir = test::scratch_dir("llama2c_bad");
    const std::string models = test::data_dir() + "/models";
    std::vector<uint8_t> bin = test::read_bytes(models + "/stories260K.bin");
    auto expect_error = [&](const std::string& checkpoint, const std::string& tokenizer, const std::string& fragment) {
        try {
            import_llama2c({.checkpoint = checkpoint, .tokenizer = tokenizer}, dir + "/out.gguf");
            ADD_FAILURE() << checkpoint << " converted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    std::vector<uint8_t> truncated(bin.begin(), bin.begin() + static_cast<long>(bin.size() / 2));
    write_bytes(dir + "/trunc.bin", truncated);
    expect_error(dir + "/trunc.bin", models + "/tok512.bin", "implies");
    std::vector<uint8_t> garbage(4096, 0xAB);
    write_bytes(dir + "/garbage.bin", garbage);
    expect_error(dir + "/garbage.bin", models + "/tok512.bin", "not a llama2.c checkpoint");
    std::vector<uint8_t> tok = test::read_bytes(models + "/tok512.bin");
    tok.resize(tok.size() - 10);
    write_bytes(dir + "/tok.bin", tok);
    expect_error(models + "/stories260K.bin", dir + "/tok.bin", "truncated tokenizer");
    write_bytes(dir + "/v2.bin", {0x32, 0x34, 0x6b, 0x61, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
                                  1, 0, 0, 0, 1, 0, 0, 0});
    expect_error(dir + "/v2.bin", models + "/tok512.bin", "version 2");
    // Fuzzing found: -vocab_size of INT32_MIN was undefined behaviour; vocab
    // sizes 1 and 2 converted into files that `run` then refused (BOS/EOS
    // ids 1 and 2 are written regardless).
    for (int32_t vocab : {INT32_MIN, 1, 2, -2}) {
        std::vector<uint8_t> header(bin.begin(), bin.begin() + 28);
        std::memcpy(header.data() + 20, &vocab, 4);
        write_bytes(dir + "/vocab.bin", header);
        expect_error(dir + "/vocab.bin", models + "/tok512.bin",
                     vocab == INT32_MIN ? "not a llama2.c checkpoint" : "cannot hold llama2.c's unknown, BOS and EOS");
    }
}

}  // namespace tessera
