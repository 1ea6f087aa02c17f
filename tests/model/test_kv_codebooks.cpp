// Codebooks of K/V rows: the tiled nearest-codeword search equals the scalar
// one on random rows and codewords; indices of any width pack and unpack to
// the codewords they name; files round-trip with their digest; codebooks of
// another model or shape are refused, and corrupt files are clear errors.
#include "model/kv_codebooks.h"
#include "test_errors.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

namespace tessera {

namespace {

KvCodebooks random_books(int layers, int kv_dim, int groups, int codes, uint32_t seed) {
    KvCodebooks b(layers, kv_dim, groups, codes, "00112233aabbccdd");
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (int l = 0; l < layers; ++l) {
        for (int kind = 0; kind < 2; ++kind) {
            for (int g = 0; g < groups; ++g) {
                float* w = b.codewords(l, static_cast<KvCodebooks::Kind>(kind), g);
                for (int i = 0; i < codes * b.group_dim(); ++i) w[i] = normal(rng);
            }
        }
    }
    b.refresh_norms();
    return b;
}

}  // namespace

TEST(KvCodebooks, TiledSearchEqualsTheScalarReference) {
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (const int kv_dim : {8, 32, 96}) {
        for (const int groups : {1, 4, 8}) {
            for (const int codes : {2, 37, 256}) {
                const KvCodebooks b = random_books(2, kv_dim, groups, codes, 11);
                const int n = 45;  // more than one tile of rows, and a partial one
                std::vector<float> rows(static_cast<size_t>(n) * kv_dim);
                for (float& x : rows) x = normal(rng);
                for (int kind = 0; kind < 2; ++kind) {
                    for (int g = 0; g < groups; ++g) {
                        std::vector<int> got(static_cast<size_t>(n));
                        b.nearest_rows(1, static_cast<KvCodebooks::Kind>(kind), g, rows.data() + g * b.group_dim(), kv_dim,
                                       n, got.data());
                        for (int t = 0; t < n; ++t) {
                            const int want = b.nearest(1, static_cast<KvCodebooks::Kind>(kind), g,
                                                       rows.data() + static_cast<size_t>(t) * kv_dim + g * b.group_dim());
                            EXPECT_EQ(got[static_cast<size_t>(t)], want) << kv_dim << " " << groups << " " << codes;
                        }
                    }
                }
            }
        }
    }
}

TEST(KvCodebooks, IndicesOfAnyWidthDecodeToTheirCodewords) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    for (const int codes : {2, 3, 1000, 1024, 1025, 5000}) {
        const KvCodebooks b = random_books(1, 16, 4, codes, 17);
        const int n = 13;
        std::vector<float> k(static_cast<size_t>(n) * 16), v(k.size());
        for (float& x : k) x = normal(rng);
        for (float& x : v) x = normal(rng);
        std::vector<uint8_t> packed;
        b.encode(0, n, k.data(), v.data(), packed);
        EXPECT_EQ(packed.size(), b.packed_bytes(n));
        EXPECT_EQ(b.bits_per_position(), 2 * 4 * b.index_bits());
        std::vector<float> dk(k.size()), dv(v.size());
        b.decode(0, n, packed, dk.data(), dv.data());
        for (int t = 0; t < n; ++t) {
            for (int g = 0; g < 4; ++g) {
                const size_t at = static_cast<size_t>(t) * 16 + g * 4;
                const int ik = b.nearest(0, KvCodebooks::kKeys, g, k.data() + at);
                const int iv = b.nearest(0, KvCodebooks::kValues, g, v.data() + at);
                EXPECT_EQ(std::memcmp(dk.data() + at, b.codewords(0, KvCodebooks::kKeys, g) + ik * 4, 16), 0) << codes;
                EXPECT_EQ(std::memcmp(dv.data() + at, b.codewords(0, KvCodebooks::kValues, g) + iv * 4, 16), 0) << codes;
            }
        }
        // A truncated body, and (where the bits allow) an index past the codes.
        EXPECT_THROW(b.decode(0, n, std::span<const uint8_t>(packed.data(), packed.size() - 1), dk.data(), dv.data()), Error);
        if ((1 << b.index_bits()) > codes) {
            std::vector<uint8_t> high(packed.size(), 0xff);
            EXPECT_THROW(b.decode(0, n, high, dk.data(), dv.data()), Error);
        }
    }
}

TEST(KvCodebooks, FilesRoundTripAndAnotherModelIsRefused) {
    const std::string dir = test::scratch_dir("kv_codebooks");
    const KvCodebooks b = random_books(3, 32, 4, 64, 23);
    b.save(dir + "/books.gguf");
    const KvCodebooks back = KvCodebooks::load(dir + "/books.gguf");
    EXPECT_EQ(back.digest(), b.digest());
    EXPECT_EQ(back.groups(), 4);
    EXPECT_EQ(back.codes(), 64);
    EXPECT_NE(random_books(3, 32, 4, 64, 24).digest(), b.digest()) << "other codewords, another digest";
    EXPECT_NO_THROW(back.require_model("00112233aabbccdd", 3, 32));
    const std::string other = test::error_of([&] { back.require_model("ffffffffffffffff", 3, 32); });
    EXPECT_NE(other.find("fitted on another model"), std::string::npos) << other;
    EXPECT_THROW(back.require_model("00112233aabbccdd", 4, 32), Error);
    EXPECT_THROW(KvCodebooks(3, 30, 4, 64, "x"), Error) << "groups must divide the row";
    // A truncated file is an error naming it, and so is a model file.
    std::ifstream in(dir + "/books.gguf", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir + "/cut.gguf", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    EXPECT_NE(test::error_of([&] { KvCodebooks::load(dir + "/cut.gguf"); }).find("cut.gguf"), std::string::npos);
    {
        const std::string model = test::stories260k();
        EXPECT_NE(test::error_of([&] { KvCodebooks::load(model); }).find("not a codebook file"), std::string::npos);
    }
}

}  // namespace tessera
