// The sealed wire end to end, with real `tessera worker` and `tessera run`
// processes: a wrong key is refused on both sides within a second; a relay
// recording a sealed session finds no model fingerprint and no run of the
// prompt's embedding rows in the bytes, and replaying the recording on a new
// connection is refused; without a key a worker serves loopback only unless
// told --insecure, and then warns on every session.
#include "hostile_peer.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_errors.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace tessera {

namespace {

using test::run_root;
using test::WorkerProcess;

std::string sealed_wire_dir() { return test::test_dir("sealed_wire"); }

bool contains(const std::vector<uint8_t>& haystack, const uint8_t* needle, size_t n) {
    return std::search(haystack.begin(), haystack.end(), needle, needle + n) != haystack.end();
}

// Every byte a relay recorded for all its connections, both directions.
std::vector<uint8_t> recorded_bytes(const std::string& record_dir) {
    std::vector<uint8_t> all;
    for (const auto& e : std::filesystem::directory_iterator(record_dir)) {
        const std::vector<uint8_t> b = test::read_bytes(e.path().string());
        all.insert(all.end(), b.begin(), b.end());
    }
    return all;
}

// A relay in front of `target` recording into record_dir.
std::unique_ptr<test::BackgroundProcess> start_recording_relay(const std::string& target, const std::string& record_dir,
                                                               std::string& address) {
    std::filesystem::create_directories(record_dir);
    auto relay = std::make_unique<test::BackgroundProcess>(
        std::vector<std::string>{test::relay_binary(), "--target", target, "--record", record_dir});
    const std::string line = relay->read_line(30);
    address = "127.0.0.1:" + line.substr(std::string("listening on port ").size());
    return relay;
}

}  // namespace

TEST(SealedWire, WrongKeyIsRefusedOnBothSidesWithinASecond) {
    const std::string a = test::make_key_file(sealed_wire_dir(), "a.key"),
                      b = test::make_key_file(sealed_wire_dir(), "b.key");
    WorkerProcess worker({"-m", test::default_model(), "--key", a}, sealed_wire_dir() + "/worker.log");
    const auto start = std::chrono::steady_clock::now();
    const test::ProcessResult r = run_root(worker.address_text(), b);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("holds a different key"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(worker.address_text()), std::string::npos) << r.err;
    EXPECT_LT(seconds, 1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_NE(worker.log().find("refused our proof of the key: the two nodes hold different keys"), std::string::npos)
        << worker.log();
    // A root without a key, and a keyed root meeting a keyless worker.
    const test::ProcessResult plain = run_root(worker.address_text(), "");
    EXPECT_EQ(plain.exit_code, 1);
    EXPECT_NE(plain.err.find("requires a key"), std::string::npos) << plain.err;
    WorkerProcess keyless({"-m", test::default_model()}, sealed_wire_dir() + "/keyless.log");
    const test::ProcessResult keyed = run_root(keyless.address_text(), a);
    EXPECT_EQ(keyed.exit_code, 1);
    EXPECT_NE(keyed.err.find("runs without a key"), std::string::npos) << keyed.err;
    // The same key: served, sealed.
    const test::ProcessResult ok = run_root(worker.address_text(), a);
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(SealedWire, RecordedSessionHoldsNoPlaintextAndCannotBeReplayed) {
    const std::string key = test::make_key_file(sealed_wire_dir(), "cluster.key");
    const LlamaModel model(test::default_model());
    const std::string fingerprint_hex = model.file().fingerprint_hex();
    uint8_t fingerprint_le[8];
    const uint64_t fp = model.file().fingerprint();
    std::memcpy(fingerprint_le, &fp, 8);
    // The prompt's embedding rows as F32, cut into 16-byte runs.
    const std::string prompt = "Once upon a time";
    const GgufTensorInfo* embd = model.file().find_tensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    ASSERT_EQ(embd->type, QuantType::F32) << "the test reads F32 rows";
    const std::vector<int32_t> tokens = make_tokenizer(load_vocab(model.file()))->encode(prompt, true);
    const int64_t n_embd = embd->ne[0];

    const auto scan = [&](const std::vector<uint8_t>& bytes, int& fingerprints, int& runs) {
        fingerprints = contains(bytes, reinterpret_cast<const uint8_t*>(fingerprint_hex.data()), fingerprint_hex.size()) +
                       contains(bytes, fingerprint_le, 8);
        runs = 0;
        for (int32_t t : tokens) {
            const uint8_t* row = embd->data + static_cast<size_t>(t) * n_embd * 4;
            for (int64_t off = 0; off + 16 <= n_embd * 4; off += 16) runs += contains(bytes, row + off, 16);
        }
    };

    // Sealed: nothing to find.
    WorkerProcess worker({"-m", test::default_model(), "--key", key}, sealed_wire_dir() + "/worker.log");
    std::string through;
    const std::string sealed_dir = sealed_wire_dir() + "/sealed";
    {
        auto relay = start_recording_relay(worker.address_text(), sealed_dir, through);
        const test::ProcessResult r = run_root(through, key, {"--tcp"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    const std::vector<uint8_t> sealed = recorded_bytes(sealed_dir);
    EXPECT_GT(sealed.size(), 10000u);
    int fingerprints = 0, runs = 0;
    scan(sealed, fingerprints, runs);
    EXPECT_EQ(fingerprints, 0);
    EXPECT_EQ(runs, 0);

    // The same scan finds the fingerprint in a plain session (so it can fail).
    WorkerProcess plain_worker({"-m", test::default_model()}, sealed_wire_dir() + "/plain.log");
    const std::string plain_dir = sealed_wire_dir() + "/plain";
    {
        auto relay = start_recording_relay(plain_worker.address_text(), plain_dir, through);
        const test::ProcessResult r = run_root(through, "", {"--tcp"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    scan(recorded_bytes(plain_dir), fingerprints, runs);
    EXPECT_GT(fingerprints, 0);

    // Replaying the root's recorded bytes on a new connection, byte for byte:
    // the worker's fresh nonce makes the recorded proof wrong.
    const std::vector<uint8_t> up = test::read_bytes(sealed_dir + "/0.up");
    ASSERT_FALSE(up.empty());
    TcpStream replay = TcpStream::connect(worker.address(), 2000);
    replay.write_all(up.data(), up.size(), 2000);
    std::vector<uint8_t> answer;
    uint8_t buf[4096];
    try {
        while (replay.wait_readable(2000)) {
            const size_t n = replay.read_some(buf, sizeof buf);
            if (n == 0) break;
            answer.insert(answer.end(), buf, buf + n);
        }
    } catch (const Error&) {
    }
    // Challenge (plain) and refusal only: two frame headers and the challenge's 65 bytes.
    EXPECT_EQ(answer.size(), 2 * kFrameHeaderBytes + 65) << "the worker answered a replayed session";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_NE(worker.log().find("holds a different key (its proof of the key does not match ours)"), std::string::npos)
        << worker.log();
}

TEST(SealedWire, KeylessWorkerServesLoopbackOnlyUnlessInsecure) {
    const test::ProcessResult refused = test::run_process(
        test::tessera_cmd({"worker", "-m", test::default_model(), "--listen", "0.0.0.0:0", "--once"}), 30);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_NE(refused.err.find("without a key would let anyone who reaches it use this worker"), std::string::npos)
        << refused.err;
    WorkerProcess insecure({"-m", test::default_model(), "--listen", "0.0.0.0:0", "--insecure"},
                           sealed_wire_dir() + "/insecure.log");
    for (int session = 0; session < 2; ++session) {
        const test::ProcessResult r = run_root("127.0.0.1:" + std::to_string(insecure.address().port), "");
        EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    const std::string log = insecure.log();
    size_t warnings = 0;
    for (size_t at = log.find("warning: serving"); at != std::string::npos; at = log.find("warning: serving", at + 1)) {
        ++warnings;
    }
    EXPECT_EQ(warnings, 2u) << log;
    EXPECT_NE(log.find("--insecure: frames on 0.0.0.0:0 are neither encrypted nor authenticated"), std::string::npos)
        << log;
}

}  // namespace tessera
