// The bundled GGUF truncated at many offsets and with bytes of its header,
// metadata and tensor table flipped: every case ends, within a second, in a
// tessera::Error or (when the flip left a valid file, e.g. inside a token
// string or a weight) in a normal short generation. Never a crash, a hang or
// another exception type. Run under ASan/UBSan too (scripts/test --sanitize).
#include "engine/generation.h"
#include "model/gguf_file.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/vocab.h"
#include "test_paths.h"
#include "util/error.h"
#include "util/timer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace tessera {

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, size_t n) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
}

// One byte of the file at PATH replaced in place: the flips below rewrite a
// byte of the model, not the whole megabyte (copying and writing it for each
// of ~2,400 flips was half of this test's time, and more under ASan).
void write_byte_at(const std::string& path, size_t at, uint8_t value) {
    std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
    file.seekp(static_cast<std::streamoff>(at));
    file.put(static_cast<char>(value));
    if (!file) throw std::runtime_error("cannot write a byte of " + path);
}

enum class Outcome { Error, Ran };

// Loads the model the way `tessera run` does and generates a few tokens.
Outcome load_and_run(const std::string& path) {
    try {
        const LlamaModel model(path);
        const auto tokenizer = make_tokenizer(load_vocab(model.file()));
        if (tokenizer->vocab().size() != model.hparams().n_vocab) return Outcome::Error;
        ForwardConfig config;
        config.n_ctx = 32;
        LocalDecoder decoder(model, config, 1);
        GenerationParams params;
        params.n_predict = 3;
        params.sampler.temperature = 0.0f;
        generate(decoder, *tokenizer, tokenize_prompt(*tokenizer, "Once upon", config.n_ctx), params);
        return Outcome::Ran;
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_FALSE(message.empty());
        return Outcome::Error;
    }
}

}  // namespace

TEST(CorruptInput, TruncatedFilesAreRefused) {
    const std::vector<uint8_t> bytes = read_bytes(test::stories260k());
    const GgufFile original(test::stories260k());
    const std::string path = test::scratch_dir("corrupt_truncated") + "/t.gguf";
    std::vector<size_t> cuts;
    for (size_t n = 0; n < 64; ++n) cuts.push_back(n);
    for (size_t n = 64; n < original.data_offset() + 64; n += 97) cuts.push_back(n);
    for (size_t n = original.data_offset(); n < bytes.size(); n += 50021) cuts.push_back(n);
    cuts.push_back(bytes.size() - 1);
    for (size_t n : cuts) {
        write_bytes(path, bytes, n);
        const double t0 = now_seconds();
        try {
            GgufFile f(path);
            ADD_FAILURE() << "truncated at " << n << " but loaded";
        } catch (const Error& e) {
            const std::string message = e.what();
            EXPECT_NE(message.find(path), std::string::npos) << message;
            EXPECT_NE(message.find("offset"), std::string::npos) << message;
        }
        EXPECT_EQ(load_and_run(path), Outcome::Error) << "truncated at " << n;
        EXPECT_LT(now_seconds() - t0, 1.0) << "truncated at " << n;
    }
}

TEST(CorruptInput, FlippedBytesEndInAnErrorOrAValidRun) {
    const std::vector<uint8_t> bytes = read_bytes(test::stories260k());
    const GgufFile original(test::stories260k());
    const std::string path = test::scratch_dir("corrupt_flipped") + "/f.gguf";
    int errors = 0, runs = 0;
    // Every byte of the fixed header, then a stride through metadata and the
    // tensor table (offset 7 mod 13 hits every field kind over the file).
    std::vector<size_t> offsets;
    for (size_t i = 0; i < 24; ++i) offsets.push_back(i);
    for (size_t i = 24; i < original.data_offset(); i += 13) offsets.push_back(i);
    write_bytes(path, bytes, bytes.size());
    for (size_t at : offsets) {
        for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x01}}) {
            write_byte_at(path, at, static_cast<uint8_t>(bytes[at] ^ mask));
            const double t0 = now_seconds();
            (load_and_run(path) == Outcome::Error ? errors : runs)++;
            EXPECT_LT(now_seconds() - t0, 1.0) << "flip at " << at;
        }
        write_byte_at(path, at, bytes[at]);
    }
    // The file is the original again: each flip was undone before the next.
    EXPECT_EQ(read_bytes(path), bytes);
    // Both outcomes occur: header flips must be refused, string flips may run.
    EXPECT_GT(errors, 50);
    EXPECT_GT(runs, 0);
}

}  // namespace tessera
