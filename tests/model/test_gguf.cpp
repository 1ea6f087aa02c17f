#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/hparams.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace tessera {

namespace {

}  // namespace

TEST(GgufFile, ReadsStories260K) {
    const GgufFile f(test::stories260k());
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.tensors().size(), 48u);
    EXPECT_EQ(f.metadata().size(), 19u);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
    const GgufValue* tokens = f.find_array("tokenizer.ggml.tokens", GgufValueType::String);
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->count, 512u);
    EXPECT_EQ(tokens->strings[1], "<s>");
    const GgufTensorInfo* q = f.find_tensor("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->ne[0], 64);
    EXPECT_EQ(q->ne[1], 64);
    EXPECT_EQ(q->n_bytes, 64u * 64u * 4u);
    EXPECT_THROW(f.get_int("general.architecture"), Error);  // a string, not an integer
    EXPECT_THROW(f.get_string("no.such.key"), Error);

    const ModelHParams hp = read_hparams(f);
    EXPECT_EQ(hp.n_layer, 5);
    EXPECT_EQ(hp.n_head, 8);
    EXPECT_EQ(hp.n_head_kv, 4);
    EXPECT_EQ(hp.n_ff, 172);
    EXPECT_EQ(hp.n_vocab, 512);
    EXPECT_EQ(hp.head_dim, 8);
    EXPECT_EQ(hp.n_rot, 8);
    // The fingerprint is a pure function of the file's description.
    EXPECT_EQ(f.fingerprint(), GgufFile(test::stories260k()).fingerprint());
    EXPECT_EQ(f.fingerprint_hex().size(), 16u);
}

// Every metadata type, nested arrays and tensors of several types survive a
// write and a read; the same input gives the same bytes.
TEST(GgufWriter, RoundTripsEveryValueType) {
    const std::string dir = test::scratch_dir("gguf_writer");
    GgufWriter w;
    w.set_u32("a.u32", 4000000000u);
    w.set_i32("a.i32", -5);
    w.set_u64("a.u64", 1ull << 40);
    w.set_f32("a.f32", 0.25f);
    w.set_bool("a.bool", true);
    w.set_string("a.str", "h\xc3\xa9llo");
    w.set_string_array("a.strs", {"x", "", "yz"});
    w.set_f32_array("a.f32s", {1.0f, -2.0f});
    w.set_i32_array("a.i32s", {7, 8, 9});
    w.set_u32("general.alignment", 64);
    w.add_tensor("t.f32", QuantType::F32, {3, 2}, [](uint8_t* d, uint64_t n) {
        for (uint64_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i);
    });
    w.add_tensor("t.q4", QuantType::Q4_0, {64}, [](uint8_t* d, uint64_t n) { std::memset(d, 0x11, n); });
    w.write(dir + "/a.gguf");
    w.write(dir + "/b.gguf");
    EXPECT_EQ(test::read_bytes(dir + "/a.gguf"), test::read_bytes(dir + "/b.gguf"));

    const GgufFile f(dir + "/a.gguf");
    EXPECT_EQ(f.alignment(), 64u);
    EXPECT_EQ(f.get_int("a.u32"), 4000000000LL);
    EXPECT_EQ(f.get_int("a.i32"), -5);
    EXPECT_EQ(f.get_int("a.u64"), 1LL << 40);
    EXPECT_EQ(f.find_float("a.f32"), 0.25);
    EXPECT_EQ(f.find_bool("a.bool"), true);
    EXPECT_EQ(f.get_string("a.str"), "h\xc3\xa9llo");
    const GgufValue* strs = f.find_array("a.strs", GgufValueType::String);
    ASSERT_NE(strs, nullptr);
    ASSERT_EQ(strs->count, 3u);
    EXPECT_EQ(strs->strings[2], "yz");
    const GgufValue* f32s = f.find_array("a.f32s", GgufValueType::Float32);
    ASSERT_NE(f32s, nullptr);
    EXPECT_EQ(f32s->array_number(1), -2.0);
    EXPECT_EQ(f.find_array("a.i32s", GgufValueType::Int32)->array_integer(2), 9);
    EXPECT_THROW(f.find_array("a.i32s", GgufValueType::Float32), Error);
    const GgufTensorInfo* t = f.find_tensor("t.f32");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->n_bytes, 24u);
    EXPECT_EQ(t->data[5], 5);
    EXPECT_EQ((f.data_offset() + f.find_tensor("t.q4")->offset) % 64, 0u);
    EXPECT_EQ(f.find_tensor("t.q4")->n_bytes, 36u);

    // Copying every value through set_value reproduces the metadata exactly.
    GgufWriter copy;
    for (const auto& kv : f.metadata()) copy.set_value(kv.key, kv.value);
    copy.add_tensor("t.f32", QuantType::F32, {3, 2}, [](uint8_t* d, uint64_t n) {
        for (uint64_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i);
    });
    copy.add_tensor("t.q4", QuantType::Q4_0, {64}, [](uint8_t* d, uint64_t n) { std::memset(d, 0x11, n); });
    copy.write(dir + "/c.gguf");
    EXPECT_EQ(test::read_bytes(dir + "/a.gguf"), test::read_bytes(dir + "/c.gguf"));

    // Version 2 has the same little-endian layout as version 3 and loads the same.
    std::vector<uint8_t> v2 = test::read_bytes(dir + "/a.gguf");
    v2[4] = 2;
    std::ofstream(dir + "/v2.gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(v2.data()), static_cast<std::streamsize>(v2.size()));
    const GgufFile f2(dir + "/v2.gguf");
    EXPECT_EQ(f2.version(), 2u);
    EXPECT_EQ(f2.get_string("a.str"), "h\xc3\xa9llo");
    EXPECT_EQ(f2.find_tensor("t.f32")->data[5], 5);

    GgufWriter other = w;
    other.set_i32("a.i32", -6);
    other.write(dir + "/d.gguf");
    EXPECT_NE(GgufFile(dir + "/d.gguf").fingerprint(), f.fingerprint());
}

// A tensor written a run of rows at a time (convert-hf's way through an
// embedding larger than memory) gives the same file as one written whole;
// the runs come in order, cover every row once, and hold at most the chunk.
TEST(GgufWriter, RowsWrittenInRunsGiveTheSameFile) {
    const std::string dir = test::test_dir("gguf_writer_rows");
    const auto value = [](int64_t row, int64_t col) { return static_cast<float>(row * 1000 + col) * 0.5f; };
    GgufWriter whole, runs;
    for (GgufWriter* w : {&whole, &runs}) w->set_string("general.architecture", "llama");
    whole.add_tensor("a", QuantType::F32, {96, 5, 11}, [&](uint8_t* dst, uint64_t n) {
        ASSERT_EQ(n, 96u * 55 * 4);
        for (int64_t r = 0; r < 55; ++r) {
            for (int64_t c = 0; c < 96; ++c) {
                const float v = value(r, c);
                std::memcpy(dst + (r * 96 + c) * 4, &v, 4);
            }
        }
    });
    whole.add_tensor("b", QuantType::Q8_0, {64, 3}, [](uint8_t* dst, uint64_t n) { std::memset(dst, 7, n); });
    runs.set_row_chunk_bytes(96 * 4 * 7 + 100);  // 7 rows a run
    int64_t next = 0;
    runs.add_tensor_rows("a", QuantType::F32, {96, 5, 11}, [&](uint8_t* dst, int64_t first, int64_t n) {
        EXPECT_EQ(first, next);
        EXPECT_GE(n, 1);
        EXPECT_LE(n, 7);
        next = first + n;
        for (int64_t r = first; r < first + n; ++r) {
            for (int64_t c = 0; c < 96; ++c) {
                const float v = value(r, c);
                std::memcpy(dst + ((r - first) * 96 + c) * 4, &v, 4);
            }
        }
    });
    runs.add_tensor_rows("b", QuantType::Q8_0, {64, 3}, [](uint8_t* dst, int64_t, int64_t n) {
        std::memset(dst, 7, static_cast<size_t>(n) * 68);
    });
    whole.write(dir + "/whole.gguf");
    runs.write(dir + "/runs.gguf");
    EXPECT_EQ(next, 55);
    EXPECT_EQ(test::read_bytes(dir + "/whole.gguf"), test::read_bytes(dir + "/runs.gguf"));
}

TEST(GgufWriter, RejectsImpossibleTensors) {
    GgufWriter w;
    auto fill = [](uint8_t*, uint64_t) {};
    EXPECT_THROW(w.add_tensor("x", QuantType::Q4_0, {33}, fill), Error);
    EXPECT_THROW(w.add_tensor("x", QuantType::F32, {}, fill), Error);
    w.add_tensor("x", QuantType::F32, {4}, fill);
    EXPECT_THROW(w.add_tensor("x", QuantType::F32, {4}, fill), Error);
    EXPECT_THROW(w.set_u32("general.alignment", 48), Error);
}

// Hand-made headers that lie about counts and lengths get an Error naming the
// problem and offset, never a huge allocation.
TEST(GgufFile, RejectsForgedHeaders) {
    const std::string dir = test::scratch_dir("gguf_forged");
    auto write = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
        std::ofstream(dir + "/" + name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                                 static_cast<std::streamsize>(bytes.size()));
        return dir + "/" + name;
    };
    auto header = [](uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        std::vector<uint8_t> b(24);
        const uint32_t magic = kGgufMagic;
        std::memcpy(b.data(), &magic, 4);
        std::memcpy(b.data() + 4, &version, 4);
        std::memcpy(b.data() + 8, &n_tensors, 8);
        std::memcpy(b.data() + 16, &n_kv, 8);
        return b;
    };
    auto expect_error = [&](const std::string& path, const std::string& fragment) {
        try {
            GgufFile f(path);
            ADD_FAILURE() << path << " loaded";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        }
    };
    expect_error(write("empty.gguf", {}), "truncated");
    expect_error(write("magic.gguf", {'G', 'G', 'M', 'L', 3, 0, 0, 0}), "not a GGUF file");
    expect_error(write("v1.gguf", header(1, 0, 0)), "version 1");
    expect_error(write("v9.gguf", header(9, 0, 0)), "unsupported GGUF version 9");
    expect_error(write("bigendian.gguf", header(0x03000000, 0, 0)), "big-endian");
    expect_error(write("kvcount.gguf", header(3, 0, 1ull << 60)), "metadata count");
    expect_error(write("tcount.gguf", header(3, 1ull << 60, 0)), "tensor count");
    // A key whose length runs past the end of the file.
    auto b = header(3, 0, 1);
    const uint64_t huge = 1ull << 62;
    b.insert(b.end(), reinterpret_cast<const uint8_t*>(&huge), reinterpret_cast<const uint8_t*>(&huge) + 8);
    b.resize(b.size() + 64, 0);
    expect_error(write("keylen.gguf", b), "metadata key");
    // An array that claims 2^61 uint64 elements (the byte size overflows).
    b = header(3, 0, 1);
    const uint64_t key_len = 1;
    b.insert(b.end(), reinterpret_cast<const uint8_t*>(&key_len), reinterpret_cast<const uint8_t*>(&key_len) + 8);
    b.push_back('k');
    const uint32_t array_type = 9, u64_type = 10;
    const uint64_t count = 1ull << 61;
    b.insert(b.end(), reinterpret_cast<const uint8_t*>(&array_type), reinterpret_cast<const uint8_t*>(&array_type) + 4);
    b.insert(b.end(), reinterpret_cast<const uint8_t*>(&u64_type), reinterpret_cast<const uint8_t*>(&u64_type) + 4);
    b.insert(b.end(), reinterpret_cast<const uint8_t*>(&count), reinterpret_cast<const uint8_t*>(&count) + 8);
    expect_error(write("arraylen.gguf", b), "array");
    EXPECT_THROW(GgufFile(dir + "/missing.gguf"), Error);
}

}  // namespace tessera
