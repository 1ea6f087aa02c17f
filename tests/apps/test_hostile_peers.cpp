// Hostile peers against the real binaries (issue: sealed wire and hostile
// peers). Each test reproduces one finding of a review that played a
// malicious or broken node on loopback, and checks that the process on the
// other end names the problem, drops that connection or session, and goes on
// serving: a real root run afterwards succeeds.
#include "cluster/session/head_candidates.h"
#include "hostile_peer.h"
#include "net/handshake.h"
#include "net/shm_link.h"
#include "subprocess.h"
#include "tessera_cli.h"
#include "test_errors.h"
#include "test_paths.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace tessera {

namespace {

using test::connect_as_root;
using test::FakeWorker;
using test::good_assign;
using test::good_hello;
using test::run_root;
using test::WorkerProcess;

std::string hostile_peers_dir() { return test::test_dir("hostile_peers"); }

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What the worker answers to one session of a fake root: the error of its
// hello-reply, of its ready, or of the connection, whichever ends it.
std::string session_error(const HostPort& address, const WireKey* key, const json& hello, const json& assign);

// The worker may still be winding down the previous session: a root retries
// on "busy", and so does this helper.
std::string session_error_once(const HostPort& address, const WireKey* key, const json& hello, const json& assign) {
    try {
        auto channel = connect_as_root(address, key);
        send_json(*channel, SessionMessage::kHello, hello);
        const json reply = recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
        if (!reply.value("ok", false)) return reply.dump();
        send_json(*channel, SessionMessage::kAssign, assign);
        const json ready = recv_json(*channel, SessionMessage::kReady, "worker", 5000);
        return ready.dump();
    } catch (const Error& e) {
        return e.what();
    }
}

std::string session_error(const HostPort& address, const WireKey* key, const json& hello, const json& assign) {
    std::string e;
    for (int attempt = 0; attempt < 50; ++attempt) {
        e = session_error_once(address, key, hello, assign);
        if (e.find("\"busy\":true") == std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return e;
}

// A root greeted by the worker (hello-reply ok), retrying while it winds
// down the previous session: a "busy" worker closes the connection, and an
// assign sent after that would meet a reset.
std::unique_ptr<FrameChannel> greet_when_free(const HostPort& address) {
    for (int attempt = 0;; ++attempt) {
        auto channel = connect_as_root(address, nullptr);
        send_json(*channel, SessionMessage::kHello, good_hello());
        const json reply = recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
        if (reply.value("ok", false)) return channel;
        if (!reply.value("busy", false) || attempt == 50) throw Error("hello refused: " + reply.dump());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

// The worker's log names `want` within 5 s (it logs a session's end as it
// winds down, after the peer already saw the connection close).
void expect_logged_soon(const WorkerProcess& worker, const std::string& want) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (worker.log().find(want) == std::string::npos && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_NE(worker.log().find(want), std::string::npos) << worker.log();
}

// What a stuck node looks like from outside: alive (a heartbeat every
// 300 ms, for 6 s), never answering.
void beat_without_answering(FrameChannel& channel, int beats = 20) {
    for (int i = 0; i < beats; ++i) {
        channel.send(static_cast<uint16_t>(SessionMessage::kHeartbeat), std::span<const uint8_t>());
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
}

void expect_root_succeeds(const WorkerProcess& worker, const std::string& key_file = "") {
    const test::ProcessResult r = run_root(worker.address_text(), key_file);
    EXPECT_EQ(r.exit_code, 0) << "the worker did not survive: " << r.err << "\n" << worker.log();
}

}  // namespace

// Finding: a handshake field of the wrong type ended the worker (a json
// type_error escaped). Now each is named and only that session ends.
TEST(HostilePeers, MistypedHandshakeFieldsEndTheSessionNotTheWorker) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/mistyped.log");
    struct Case {
        const char* field;
        json hello, assign;
    };
    std::vector<Case> cases;
    auto hello = good_hello();
    hello["fingerprint"] = 1;
    cases.push_back({"fingerprint", hello, good_assign()});
    hello = good_hello();
    hello["shm"] = "yes";
    cases.push_back({"shm", hello, good_assign()});
    auto assign = good_assign();
    assign["n_ctx"] = "x";
    cases.push_back({"n_ctx", good_hello(), assign});
    assign = good_assign();
    assign["slice"]["layers"] = {"a", 1};
    cases.push_back({"layers", good_hello(), assign});
    assign = good_assign();
    assign["role"] = 5;
    cases.push_back({"role", good_hello(), assign});
    assign = good_assign();
    assign["slice"] = "all";
    cases.push_back({"slice", good_hello(), assign});
    // The attention fields: KV cache types, sparse options, tracking.
    assign = good_assign();
    assign["kv_type_v"] = 3;
    cases.push_back({"kv_type_v", good_hello(), assign});
    assign = good_assign();
    assign.erase("kv_type_k");
    cases.push_back({"kv_type_k", good_hello(), assign});
    assign = good_assign();
    assign["sparse"] = "on";
    cases.push_back({"sparse", good_hello(), assign});
    assign = good_assign();
    assign["sparse"] = {{"window", 0}, {"block", 8}, {"globals", 1}, {"landmarks", "all"}};
    cases.push_back({"window", good_hello(), assign});
    assign = good_assign();
    assign["sparse"] = {{"window", 8}, {"block", int64_t{1} << 40}, {"globals", 1}, {"landmarks", "all"}};
    cases.push_back({"block", good_hello(), assign});
    assign = good_assign();
    assign["track_attention"] = "yes";
    cases.push_back({"track_attention", good_hello(), assign});
    // How the ranks sum their partials.
    assign = good_assign();
    assign["partial_bands"] = 0;
    cases.push_back({"partial_bands", good_hello(), assign});
    assign = good_assign();
    assign["exchange"] = 2;
    cases.push_back({"exchange", good_hello(), assign});
    for (const Case& c : cases) {
        const std::string e = session_error(worker.address(), nullptr, c.hello, c.assign);
        EXPECT_NE(e.find(std::string("field '") + c.field + "'"), std::string::npos) << c.field << ": " << e;
    }
    // Values of the right type that name nothing the worker runs.
    assign = good_assign();
    assign["kv_type_k"] = "q5_0";
    std::string e = session_error(worker.address(), nullptr, good_hello(), assign);
    EXPECT_NE(e.find("unknown KV cache type 'q5_0'"), std::string::npos) << e;
    assign = good_assign();
    assign["sparse"] = {{"window", 8}, {"block", 8}, {"globals", 1}, {"landmarks", "most"}};
    e = session_error(worker.address(), nullptr, good_hello(), assign);
    EXPECT_NE(e.find("unknown landmark mode 'most'"), std::string::npos) << e;
    assign = good_assign();
    assign["exchange"] = "ring";
    e = session_error(worker.address(), nullptr, good_hello(), assign);
    EXPECT_NE(e.find("unknown exchange 'ring'"), std::string::npos) << e;
    assign = good_assign();
    assign["exchange"] = "reduce-scatter";
    assign["partial_format"] = static_cast<int>(WireFormat::Q8_0);
    e = session_error(worker.address(), nullptr, good_hello(), assign);
    EXPECT_NE(e.find("reduce-scatter exchange of partials that are not exact"), std::string::npos) << e;
    EXPECT_NE(worker.log().find("field 'n_ctx' of the assign message is not an integer"), std::string::npos)
        << worker.log();
    expect_root_succeeds(worker);
}

// Finding: the root had the same flaw ("ok": "yes" gave an unnamed json error).
TEST(HostilePeers, RootNamesAMistypedReplyField) {
    FakeWorker fake(nullptr, [](FrameChannel&, const Frame&) {}, json{{"ok", "yes"}});
    const test::ProcessResult r = run_root(fake.address_text(), "");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("field 'ok' of the hello-reply message is not true or false"), std::string::npos) << r.err;
}

// Finding: width = n_tok = 2^31 wrapped the size check (4 * w * n), then
// resize threw and the worker exited.
TEST(HostilePeers, StepWhoseSizeWrapsIsRefusedAndTheWorkerGoesOn) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/wrap.log");
    {
        auto channel = connect_as_root(worker.address(), nullptr);
        send_json(*channel, SessionMessage::kHello, good_hello());
        recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
        send_json(*channel, SessionMessage::kAssign, good_assign());
        recv_json(*channel, SessionMessage::kReady, "worker", 5000);
        std::vector<uint8_t> step(kStepHeaderBytes, 0);
        const uint32_t big = 1u << 31;
        std::memcpy(step.data() + 8, &big, 4);   // n_tok
        std::memcpy(step.data() + 12, &big, 4);  // width
        channel->send(static_cast<uint16_t>(SessionMessage::kResidual), step);
        Frame reply;
        channel->recv(reply, 5000);
        const std::string e = test::error_of([&] { parse_json_message(reply, SessionMessage::kPartial, "worker"); });
        EXPECT_NE(e.find("impossibly large"), std::string::npos) << e;
    }
    expect_root_succeeds(worker);
}

// Continuous batching's run tables from a hostile root: a sequence the
// worker does not keep, a position past its context, a batch that does not
// match its runs, an attention step over runs never sent, a malformed table.
// Each is an error sent back; the worker serves the next root.
TEST(HostilePeers, ForgedSequenceRunsAreRefusedAndTheWorkerGoesOn) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/runs.log");
    const auto residual_rows = [](int n_tok) {
        StepHeader h{0, 0, static_cast<uint32_t>(n_tok), 64, WireFormat::F32};
        std::vector<float> rows(static_cast<size_t>(n_tok) * 64, 0.5f);
        std::vector<uint8_t> out;
        encode_step(h, rows.data(), out);
        return out;
    };
    struct Case {
        std::vector<SeqRun> runs;  // empty: no kSeqRuns sent
        int n_tok;
        const char* want;
    };
    const Case cases[] = {
        {{{5, 0, 1}}, 1, "not one of the 2"},
        {{{1, 300, 1}}, 1, "exceed the context"},
        {{{0, 0, 1}, {1, 0, 2}}, 2, "over runs of 3 rows"},
        {{{0, 0, 1}, {0, 4, 1}}, 2, "appears twice"},
        {{}, 1, "over runs of 0 rows"},
    };
    // A session with 2 sequences of 256 positions (retried while the worker
    // winds down the previous one and answers "busy").
    const auto open_session = [&]() {
        for (int attempt = 0;; ++attempt) {
            auto channel = connect_as_root(worker.address(), nullptr);
            send_json(*channel, SessionMessage::kHello, good_hello());
            const json reply = recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
            if (!reply.value("ok", false) && reply.value("busy", false) && attempt < 50) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                continue;
            }
            json assign = good_assign();
            assign["n_seq"] = 2;
            assign["n_ctx"] = 256;
            send_json(*channel, SessionMessage::kAssign, assign);
            recv_json(*channel, SessionMessage::kReady, "worker", 5000);
            return channel;
        }
    };
    for (const Case& c : cases) {
        auto channel = open_session();
        if (!c.runs.empty()) {
            std::vector<uint8_t> table;
            encode_seq_runs(c.runs, table);
            channel->send(static_cast<uint16_t>(SessionMessage::kSeqRuns), table);
        }
        channel->send(static_cast<uint16_t>(SessionMessage::kResidual), residual_rows(c.n_tok));
        Frame reply;
        do {
            channel->recv(reply, 5000);
        } while (reply.type == static_cast<uint16_t>(SessionMessage::kHeartbeat));
        const std::string e = test::error_of([&] { parse_json_message(reply, SessionMessage::kPartial, "worker"); });
        EXPECT_NE(e.find(c.want), std::string::npos) << e;
    }
    {
        // A table that is not one: refused as soon as it arrives.
        auto channel = open_session();
        const std::vector<uint8_t> junk = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
        channel->send(static_cast<uint16_t>(SessionMessage::kSeqRuns), junk);
        Frame reply;
        do {
            channel->recv(reply, 5000);
        } while (reply.type == static_cast<uint16_t>(SessionMessage::kHeartbeat));
        const std::string e = test::error_of([&] { parse_json_message(reply, SessionMessage::kPartial, "worker"); });
        EXPECT_NE(e.find("runs in one batch"), std::string::npos) << e;
    }
    // Too many sequences for the assign's bounds: refused before allocating.
    json assign = good_assign();
    assign["n_seq"] = 100000;
    EXPECT_NE(session_error(worker.address(), nullptr, good_hello(), assign).find("outside"), std::string::npos);
    assign["n_seq"] = 256;
    assign["n_ctx"] = 1 << 20;
    EXPECT_NE(session_error(worker.address(), nullptr, good_hello(), assign).find("positions in all"), std::string::npos);
    expect_root_succeeds(worker);
}

// Finding: n_ctx = n_batch = 2^21 on an empty slice was accepted (~3 GB
// held); 2^27 ended the worker with bad_alloc.
TEST(HostilePeers, HugeContextOrBatchIsRefusedBeforeAllocating) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/huge.log");
    for (int64_t n : {int64_t{1} << 21, int64_t{1} << 27}) {
        json assign = good_assign();
        assign["slice"] = {{"layers", {0, 0}}, {"kv_heads", {0, 0}}, {"ffn", {0, 0}}, {"vocab", {0, 0}}};
        assign["n_ctx"] = n;
        assign["n_batch"] = n;
        const std::string e = session_error(worker.address(), nullptr, good_hello(), assign);
        EXPECT_NE(e.find("outside"), std::string::npos) << e;
    }
    EXPECT_LT(test::peak_memory_of(worker.pid()), 256ull << 20);
    expect_root_succeeds(worker);
}

// Finding: a 32 MiB hello of nested '[' peaked at 2.5 GB.
TEST(HostilePeers, DeeplyNestedHelloIsRefusedCheaply) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/nested.log");
    {
        auto channel = connect_as_root(worker.address(), nullptr);
        const std::vector<uint8_t> nested(32u << 20, '[');
        channel->send(static_cast<uint16_t>(SessionMessage::kHello), nested);
        Frame reply;
        EXPECT_NE(test::error_of([&] { channel->recv(reply, 5000); }), test::kNoError);
    }
    std::vector<uint8_t> deep(1000, '[');
    {
        auto channel = connect_as_root(worker.address(), nullptr);
        channel->send(static_cast<uint16_t>(SessionMessage::kHello), deep);
        Frame reply;
        EXPECT_NE(test::error_of([&] { channel->recv(reply, 5000); }), test::kNoError);
    }
    EXPECT_NE(worker.log().find("exceeds the limit"), std::string::npos) << worker.log();
    EXPECT_NE(worker.log().find("nested deeper"), std::string::npos) << worker.log();
    EXPECT_LT(test::peak_memory_of(worker.pid()), 256ull << 20);
    expect_root_succeeds(worker);
}

// Finding: the writer took the peer's ring tail unchecked; tail = 2^62 gave
// SIGSEGV. Shared memory is also offered only to a peer that proved the key.
TEST(HostilePeers, ForgedSharedMemoryIndexIsAnErrorNotACrash) {
    const std::string key_file = test::make_key_file(hostile_peers_dir(), "shm.key");
    const WireKey key = read_key_file(key_file);
    WorkerProcess worker({"-m", test::default_model(), "--key", key_file}, hostile_peers_dir() + "/shm.log");
    {
        auto channel = connect_as_root(worker.address(), &key);
        json hello = good_hello();
        hello["shm"] = true;
        send_json(*channel, SessionMessage::kHello, hello);
        const json reply = recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
        ASSERT_TRUE(reply.contains("shm_name")) << reply.dump();
        // Map the worker's segment as the peer would, and forge the tail of
        // the ring the worker writes (ring 1 of the creator; control block
        // at offset 1024, tail on the second cache line).
        const int fd = ::shm_open(reply["shm_name"].get<std::string>().c_str(), O_RDWR, 0);
        ASSERT_GE(fd, 0);
        struct stat st {};
        ASSERT_EQ(::fstat(fd, &st), 0);
        void* base = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        ASSERT_NE(base, MAP_FAILED);
        auto* tail = reinterpret_cast<std::atomic<uint64_t>*>(static_cast<uint8_t*>(base) + 1024 + 64);
        tail->store(1ull << 62);
        json assign = good_assign();
        assign["shm"] = true;
        send_json(*channel, SessionMessage::kAssign, assign);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        ::munmap(base, static_cast<size_t>(st.st_size));
    }
    EXPECT_NE(worker.log().find("shared-memory ring corrupted"), std::string::npos) << worker.log();
    expect_root_succeeds(worker, key_file);
    // Without the key there is no shared memory to forge.
    WorkerProcess plain({"-m", test::default_model()}, hostile_peers_dir() + "/shm_plain.log");
    auto channel = connect_as_root(plain.address(), nullptr);
    json hello = good_hello();
    hello["shm"] = true;
    send_json(*channel, SessionMessage::kHello, hello);
    EXPECT_FALSE(recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000).contains("shm_name"));
}

// The root's side of the same finding: a fake worker forging the tail of the
// ring the root writes.
TEST(HostilePeers, RootSurvivesAForgedSharedMemoryIndex) {
    const WireKey key = random_key();
    std::unique_ptr<ShmLink> link = ShmLink::create(64u << 10);
    const int fd = ::shm_open(link->name().c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(::fstat(fd, &st), 0);
    void* base = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(base, MAP_FAILED);
    // The opener (the root) writes ring 0: its control block at offset 256.
    reinterpret_cast<std::atomic<uint64_t>*>(static_cast<uint8_t*>(base) + 256 + 64)->store(1ull << 62);
    json reply = {{"ok", true}, {"threads", 1}, {"free_memory", 1ull << 34}, {"has_model", true},
                  {"fingerprint", test::default_fingerprint()}, {"probe_seconds", 1e-5},
                  {"shm_name", link->name()}, {"shm_nonce", link->nonce_hex()}};
    const std::string key_file = hostile_peers_dir() + "/root_shm.key";
    std::remove(key_file.c_str());
    {
        const int kfd = ::open(key_file.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
        const std::string hex = key_to_hex(key) + "\n";
        ASSERT_EQ(::write(kfd, hex.data(), hex.size()), static_cast<ssize_t>(hex.size()));
        ::close(kfd);
    }
    test::ProcessResult r;
    {
        FakeWorker fake(&key, [](FrameChannel&, const Frame&) {}, reply, std::move(link));
        r = run_root(fake.address_text(), key_file, {"--recover-ms", "0"});
    }
    ::munmap(base, static_cast<size_t>(st.st_size));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("shared-memory ring corrupted"), std::string::npos) << r.err;
}

// Findings: without -m, the cache file's name came from the peer's
// fingerprint ("../" and NUL wrote outside the cache); uploads had no cap
// and left .partial files behind.
TEST(HostilePeers, CacheNamesComeOnlyFromValidatedFieldsAndUploadsAreCapped) {
    const std::string base = hostile_peers_dir() + "/cache_case";
    std::filesystem::remove_all(base);
    const std::string cache = base + "/cache";
    std::filesystem::create_directories(cache);
    WorkerProcess worker({"--cache-dir", cache, "--cache-max", "0.001"}, hostile_peers_dir() + "/cache.log");
    for (const std::string& fingerprint : {std::string("../../evil"), std::string("0123456789abcdef/../../x"),
                                          std::string("0123456789abcde\0", 16)}) {
        json hello = good_hello();
        hello["fingerprint"] = fingerprint;
        const std::string e = session_error(worker.address(), nullptr, hello, good_assign());
        EXPECT_NE(e.find("fingerprint"), std::string::npos) << e;
    }
    // A valid name, then an upload announced larger than --cache-max (1 MiB),
    // then one that stops half way: nothing is left behind.
    for (uint64_t announced : {uint64_t{64} << 20, uint64_t{4096}}) {
        auto channel = greet_when_free(worker.address());
        send_json(*channel, SessionMessage::kAssign, good_assign());
        const json ready = recv_json(*channel, SessionMessage::kReady, "worker", 5000);
        ASSERT_TRUE(ready.value("need_slice", false)) << ready.dump();
        send_json(*channel, SessionMessage::kSliceBegin, {{"bytes", announced}});
        if (announced < 1000000) {
            const std::vector<uint8_t> half(announced / 2, 7);
            channel->send(static_cast<uint16_t>(SessionMessage::kSliceData), half);
            channel->close();
        } else {
            const json refused = recv_json(*channel, SessionMessage::kReady, "worker", 5000);
            EXPECT_NE(refused.value("error", std::string()).find("--cache-max"), std::string::npos) << refused.dump();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    // The worker removes what an interrupted upload wrote as its session ends.
    const auto waited = std::chrono::steady_clock::now();
    while (!std::filesystem::is_empty(cache) && seconds_since(waited) < 10) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (const auto& e : std::filesystem::recursive_directory_iterator(cache)) ADD_FAILURE() << "left behind: " << e.path();
    // Nothing written where "../" would have led either.
    for (const std::string& d :
         {base, hostile_peers_dir(), std::filesystem::path(hostile_peers_dir()).parent_path().string()}) {
        for (const auto& e : std::filesystem::directory_iterator(d)) {
            const std::string name = e.path().filename().string();
            EXPECT_TRUE(name.find("evil") == std::string::npos && name.rfind("x-L", 0) != 0) << e.path();
        }
    }
    EXPECT_NE(worker.log().find("exceeds the cache's limit"), std::string::npos) << worker.log();
}

// Finding: a peer could make a worker connect to any address it named (the
// stage role) and learn from the error whether that port was open. Now only
// a root that proved the key assigns anything.
TEST(HostilePeers, UnauthenticatedPeerCannotMakeAWorkerConnectAnywhere) {
    const std::string key_file = test::make_key_file(hostile_peers_dir(), "stage.key");
    WorkerProcess worker({"-m", test::default_model(), "--key", key_file}, hostile_peers_dir() + "/stage.log");
    TcpListener target(HostPort{"127.0.0.1", 0});
    json assign = good_assign();
    assign["role"] = "stage";
    assign["next"] = "127.0.0.1:" + std::to_string(target.port());
    const std::string e = session_error(worker.address(), nullptr, good_hello(), assign);
    EXPECT_NE(e.find("requires a key"), std::string::npos) << e;
    EXPECT_NE(test::error_of([&] { target.accept(1000); }), test::kNoError) << "the worker connected where it was told";
}

// The mesh of a tensor-parallel group: an assign whose mesh fields are
// wrong is refused naming the field; a peer that connects as a mesh peer
// with another session's token, or claims a rank it cannot hold, fails the
// session with a clear error and the worker serves the next root.
TEST(HostilePeers, ForgedMeshFieldsAndPeersAreRefused) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/mesh.log");
    struct Case {
        const char* field;
        json value;
        const char* want;
    };
    const Case cases[] = {
        {"mesh_token", "zz", "no valid session token"},
        {"mesh_token", 5, "field 'mesh_token'"},
        {"rank", 5, "rank 5 of a group of 1 workers"},
        {"rank", 0, "field 'rank'"},
        {"mesh", "127.0.0.1:9", "field 'mesh'"},
        {"mesh", {"no port here"}, "no port here"},
    };
    for (const Case& c : cases) {
        json assign = good_assign();
        assign[c.field] = c.value;
        const std::string e = session_error(worker.address(), nullptr, good_hello(), assign);
        EXPECT_NE(e.find(c.want), std::string::npos) << c.field << ": " << e;
    }
    // Rank 2 of 2 waits for rank 1 to connect; an impostor connects instead.
    for (const json& impostor : {json{{"token", "ffffffffffffffffffffffffffffffff"}, {"rank", 1}},
                                 json{{"token", "0123456789abcdef0123456789abcdef"}, {"rank", 2}}}) {
        auto root = greet_when_free(worker.address());
        json assign = good_assign();
        assign["rank"] = 2;
        assign["mesh"] = {"127.0.0.1:9", worker.address_text()};
        send_json(*root, SessionMessage::kAssign, assign);
        auto peer = connect_as_root(worker.address(), nullptr);
        send_json(*peer, SessionMessage::kMeshHello, impostor);
        const json ready = recv_json(*root, SessionMessage::kReady, "worker", 5000);
        EXPECT_EQ(ready.value("ok", true), false);
        const std::string e = ready.value("error", "");
        EXPECT_TRUE(e.find("a mesh peer of another session") != std::string::npos ||
                    e.find("a mesh peer claiming rank 2") != std::string::npos)
            << e;
    }
    expect_root_succeeds(worker);
}

// Finding: a wrong fingerprint was answered with the real one, the model
// path, free memory and thread count. Now only the fingerprint (to name both
// in the root's error) and the release, and with a key only to a peer that
// proved it.
TEST(HostilePeers, WrongFingerprintRevealsOnlyTheFingerprint) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/fingerprint.log");
    auto channel = connect_as_root(worker.address(), nullptr);
    json hello = good_hello();
    hello["fingerprint"] = "0123456789abcdef";
    send_json(*channel, SessionMessage::kHello, hello);
    const json reply = recv_json(*channel, SessionMessage::kHelloReply, "worker", 5000);
    EXPECT_EQ(reply.value("ok", true), false);
    for (const auto& [key, value] : reply.items()) {
        // The protocol and release too: every reply names them, so that a
        // root of another release can say which end to upgrade.
        EXPECT_TRUE(key == "ok" || key == "error" || key == "fingerprint" || key == "protocol" || key == "version")
            << "revealed " << key << ": " << reply.dump();
    }
}

// Finding: one session at a time, and a peer trickling a byte every few
// seconds, an idle handshake, or 50 idle connections (the backlog was 16)
// kept real roots out. Now handshakes have a whole deadline and run beside
// the session; a second root is told the worker is busy.
TEST(HostilePeers, IdleTricklingAndBusyPeersDoNotHoldTheWorker) {
    const std::string key_file = test::make_key_file(hostile_peers_dir(), "idle.key");
    const WireKey key = read_key_file(key_file);
    WorkerProcess worker({"-m", test::default_model(), "--key", key_file, "--timeout-ms", "1500"},
                         hostile_peers_dir() + "/idle.log");
    std::vector<TcpStream> idle;
    for (int i = 0; i < 50; ++i) idle.push_back(TcpStream::connect(worker.address(), 3000));
    TcpStream trickle = TcpStream::connect(worker.address(), 3000);
    std::atomic<bool> stop{false};
    std::thread trickler([&] {
        const uint8_t byte = 0x54;
        try {
            while (!stop) {
                trickle.write_all(&byte, 1, 1000);
                std::this_thread::sleep_for(std::chrono::milliseconds(500));
            }
        } catch (const Error&) {
        }
    });
    const auto start = std::chrono::steady_clock::now();
    expect_root_succeeds(worker, key_file);
    EXPECT_LT(seconds_since(start), 10.0);
    // The idle and trickling connections were dropped at their deadline.
    std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    uint8_t b;
    for (TcpStream& s : idle) EXPECT_NE(test::error_of([&] { s.read_exact(&b, 1, 1000); }), test::kNoError);
    stop = true;
    trickler.join();
    EXPECT_NE(worker.log().find("no data for 1"), std::string::npos) << worker.log();  // idle, within the 1500 ms deadline
    EXPECT_NE(worker.log().find("bytes missing after 1"), std::string::npos) << worker.log();  // trickling
    // A root that holds the session idle: the next root hears "busy" at once
    // (and asks again for as long as --recover-ms allows, here 1 s).
    auto holder = connect_as_root(worker.address(), &key);
    send_json(*holder, SessionMessage::kHello, good_hello());
    recv_json(*holder, SessionMessage::kHelloReply, "worker", 5000);
    const auto busy_start = std::chrono::steady_clock::now();
    const test::ProcessResult busy = run_root(worker.address_text(), key_file, {"--recover-ms", "1000"});
    EXPECT_EQ(busy.exit_code, 1);
    EXPECT_NE(busy.err.find("is busy serving another root"), std::string::npos) << busy.err;
    EXPECT_LT(seconds_since(busy_start), 5.0);
}

// Findings: a fake worker that sent heartbeats forever, or a partial one
// byte every 2 s, hung the root; NaN partials gave exit 0 and every token 0.
// (--recover-ms 0: what is checked here is that the root notices, names the
// worker and stops; recovering from a lost node is HeavyNodeLoss's.)
TEST(HostilePeers, RootDropsAWorkerThatStallsTricklesOrSendsNaN) {
    {
        FakeWorker fake(nullptr, [](FrameChannel& channel, const Frame&) { beat_without_answering(channel); });
        const auto start = std::chrono::steady_clock::now();
        const test::ProcessResult r = run_root(fake.address_text(), "", {"--step-timeout-ms", "1500", "--recover-ms", "0"});
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("sends heartbeats but no result"), std::string::npos) << r.err;
        EXPECT_LT(seconds_since(start), 5.0);
    }
    {
        FakeWorker fake(nullptr, [](FrameChannel& channel, const Frame& step) {
            // A valid partial's header (frame 3 of a plain session: challenge,
            // hello-reply and ready came first), then its body one byte every
            // 2 s: the frame never completes within its budget.
            StepHeader h = test::step_header(step);
            h.format = WireFormat::Fixed;
            std::vector<double> partial(static_cast<size_t>(h.width) * h.n_tok, 0.0);
            std::vector<uint8_t> body;
            encode_exact_step(h, partial.data(), body);
            FrameHeader fh;
            fh.type = static_cast<uint16_t>(SessionMessage::kPartial);
            fh.sequence = 3;
            fh.length = static_cast<uint32_t>(body.size());
            const FrameHeaderBytes hb = encode_frame_header(fh);
            ::send(channel.fd(), hb.data(), hb.size(), MSG_NOSIGNAL);
            for (size_t i = 0; i < 5 && i < body.size(); ++i) {
                if (::send(channel.fd(), body.data() + i, 1, MSG_NOSIGNAL) != 1) return;
                std::this_thread::sleep_for(std::chrono::milliseconds(2000));
            }
        });
        const auto start = std::chrono::steady_clock::now();
        const test::ProcessResult r = run_root(fake.address_text(), "", {"--recover-ms", "0"});
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("bytes missing after"), std::string::npos) << r.err;
        EXPECT_LT(seconds_since(start), 6.0);
    }
    {
        // Exact partials are integers now (NaN cannot be said in them): the
        // layers get zeros, the head's logits NaN. A greedy run asks for the
        // argmax alone (a kHeadNeed of top 1): the fake sends a NaN as it.
        FakeWorker fake(nullptr, [](FrameChannel& channel, const Frame& step) {
            if (step.type != static_cast<uint16_t>(SessionMessage::kHead)) return test::answer_with_zeros(channel, step);
            const StepHeader h = test::step_header(step);
            const int width = 512 - 256;  // the fake's vocab rows: half of stories260K's 512 at weights 1,1
            std::vector<float> logits(static_cast<size_t>(width) * h.n_tok, std::nanf(""));
            LogitsNeed argmax;
            argmax.top_k = 1;
            std::vector<uint8_t> out;
            encode_candidates(logits.data(), static_cast<int>(h.n_tok), width, 256, argmax, out);
            channel.send(static_cast<uint16_t>(SessionMessage::kCandidates), out);
        });
        const test::ProcessResult r = run_root(fake.address_text(), "", {"--recover-ms", "0", "--weights", "1,1"});
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("sent a non-finite value"), std::string::npos) << r.err;
    }
    {
        // Whole rows where the root asked for candidates: refused by name.
        FakeWorker fake(nullptr, [](FrameChannel& channel, const Frame& step) {
            if (step.type != static_cast<uint16_t>(SessionMessage::kHead)) return test::answer_with_zeros(channel, step);
            StepHeader h = test::step_header(step);
            h.width = 512 - 256;
            std::vector<float> logits(static_cast<size_t>(h.width) * h.n_tok, 1.0f);
            std::vector<uint8_t> out;
            encode_step(h, logits.data(), out);
            channel.send(static_cast<uint16_t>(SessionMessage::kPartial), out);
        });
        const test::ProcessResult r = run_root(fake.address_text(), "", {"--recover-ms", "0", "--weights", "1,1"});
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find("unexpected partial message"), std::string::npos) << r.err;
    }
}

// Partials in bands (--partial-bands): a worker may send its partial of a
// step as several frames, each a band of columns [pos0, pos0 + width) in
// order. A tiling the root did not ask for is still a partial; a band that
// skips, repeats or overruns columns ends the run naming the worker.
TEST(HostilePeers, RootTakesAnyTilingOfBandsAndRefusesForgedOnes) {
    using Bands = std::vector<std::pair<uint32_t, uint32_t>>;  // (first column, width) of each band
    const auto answer_in = [](Bands bands) {
        return [bands](FrameChannel& channel, const Frame& step) {
            if (step.type == static_cast<uint16_t>(SessionMessage::kHead)) {
                // The fake's vocab rows: half of stories260K's 512 at weights
                // 1,1; the greedy run asks for their argmax alone.
                const StepHeader h = test::step_header(step);
                std::vector<float> logits(static_cast<size_t>(256) * h.n_tok, 0.0f);
                LogitsNeed argmax;
                argmax.top_k = 1;
                std::vector<uint8_t> out;
                encode_candidates(logits.data(), static_cast<int>(h.n_tok), 256, 256, argmax, out);
                return channel.send(static_cast<uint16_t>(SessionMessage::kCandidates), out);
            }
            const StepHeader whole = test::step_header(step);
            for (auto [c0, w] : bands) {
                StepHeader h = whole;
                h.format = WireFormat::Fixed;
                h.pos0 = c0;
                h.width = w == 0 ? whole.width - c0 : w;  // 0: the rest of the row
                std::vector<double> zeros(static_cast<size_t>(h.width) * h.n_tok, 0.0);
                std::vector<uint8_t> out;
                encode_exact_step(h, zeros.data(), out);
                channel.send(static_cast<uint16_t>(SessionMessage::kPartial), out);
            }
        };
    };
    {
        // stories260K's rows are 64 wide: three bands the root did not ask for.
        FakeWorker fake(nullptr, answer_in({{0, 32}, {32, 16}, {48, 0}}));
        const test::ProcessResult r = run_root(fake.address_text(), "", {"--recover-ms", "0", "--weights", "1,1"});
        EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    const struct {
        Bands bands;
        const char* want;
    } cases[] = {
        {{{32, 32}}, "columns from 0 to at most 64"},           // skips the first band
        {{{0, 32}, {0, 32}}, "columns from 32 to at most 64"},  // repeats one
        {{{0, 32}, {32, 64}}, "values were due"},             // runs past the row
    };
    for (const auto& c : cases) {
        FakeWorker fake(nullptr, answer_in(c.bands));
        const auto start = std::chrono::steady_clock::now();
        const test::ProcessResult r = run_root(fake.address_text(), "", {"--recover-ms", "0", "--weights", "1,1"});
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_NE(r.err.find(c.want), std::string::npos) << r.err;
        EXPECT_LT(seconds_since(start), 5.0);
    }
}

// The pipeline's side of the same finding: stages beat all session long, so
// a last stage that keeps beating but never sends logits held the root.
TEST(HostilePeers, RootDropsAPipelineStageThatOnlyBeats) {
    FakeWorker fake(nullptr, [](FrameChannel& channel, const Frame&) { beat_without_answering(channel); });
    const auto start = std::chrono::steady_clock::now();
    const test::ProcessResult r = test::run_process(
        test::tessera_cmd({"run", "--stages", "root/" + fake.address_text(), "-p", "Once upon a time", "-n", "8",
                           "--temp", "0", "-t", "1", "--step-timeout-ms", "1500", "--recover-ms", "0"}),
        60);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("sends heartbeats but no logits"), std::string::npos) << r.err;
    EXPECT_LT(seconds_since(start), 5.0);
}

// The flags this issue added, given wrong values: one clear error line and
// exit 1, before anything listens or connects.
TEST(HostilePeers, WrongValuesOfTheNewFlagsAreClearErrors) {
    const std::string key_file = test::make_key_file(hostile_peers_dir(), "flags.key");
    const std::string garbage = hostile_peers_dir() + "/garbage.key";
    {
        std::ofstream(garbage) << "not a key\n";
    }
    ::chmod(garbage.c_str(), 0600);
    struct Case {
        std::vector<std::string> args;
        const char* says;
    };
    const std::vector<Case> cases = {
        {{"run", "--workers", "127.0.0.1:1", "--spare", "nowhere", "-n", "1"}, "is not HOST:PORT"},
        {{"run", "--workers", "127.0.0.1:1", "--spare", "127.0.0.1:99999", "-n", "1"}, "port '99999'"},
        {{"run", "--local", "2", "--recover-ms", "-5", "-n", "1"}, "--recover-ms"},
        {{"run", "--local", "2", "--step-timeout-ms", "abc", "-n", "1"}, "--step-timeout-ms"},
        {{"run", "--local", "2", "--key", garbage, "-n", "1"}, "expected 64 hex digits"},
        {{"run", "--local", "2", "--key", hostile_peers_dir() + "/missing.key", "-n", "1"}, "No such file"},
        {{"worker", "--key", garbage, "--listen", "127.0.0.1:0"}, "expected 64 hex digits"},
        {{"worker", "--cache-max", "0", "--listen", "127.0.0.1:0"}, "--cache-max"},
        {{"worker", "--cache-max", "lots", "--listen", "127.0.0.1:0"}, "--cache-max"},
        {{"keygen", "-o", key_file}, "refusing to replace a key"},
        {{"keygen", "-o", hostile_peers_dir() + "/no/such/dir/k"}, "cannot create"},
        {{"serve", "--parallel", "0", "--port", "0"}, "--parallel"},
        {{"serve", "--parallel", "257", "--port", "0"}, "--parallel"},
        {{"serve", "--parallel", "two", "--port", "0"}, "--parallel"},
        {{"serve", "--prefill-chunk", "0", "--port", "0"}, "--prefill-chunk"},
        {{"serve", "--queue", "-1", "--port", "0"}, "--queue"},
    };
    for (const Case& c : cases) {
        std::vector<std::string> argv = {test::tessera_binary()};
        argv.insert(argv.end(), c.args.begin(), c.args.end());
        const test::ProcessResult r = test::run_process(argv, 30);
        EXPECT_NE(r.exit_code, 0) << c.args[1];
        EXPECT_FALSE(r.timed_out) << c.args[1];
        EXPECT_NE((r.err + r.out).find(c.says), std::string::npos) << c.args[1] << " " << c.args[2] << ": " << r.err;
    }
    // --key-fd with something else than a key on the descriptor.
    const test::ProcessResult fd = test::run_process(
        {"/bin/sh", "-c", "echo nonsense | exec " + test::tessera_binary() + " worker --key-fd 0 --listen 127.0.0.1:0"}, 30);
    EXPECT_EQ(fd.exit_code, 1);
    EXPECT_NE(fd.err.find("--key-fd: not a tessera key"), std::string::npos) << fd.err;
}

}  // namespace tessera

namespace tessera {

// Link probes from a fake root (they come between hello-reply and assign):
// a ping too large to echo, a bulk frame over 1 MiB, a probe of an unknown
// kind and the 65th probe of a session each end that session with an error
// naming the peer, never making the worker send more than it got; the worker
// serves the next root.
TEST(HostilePeers, ForgedLinkProbesEndTheSessionAndTheWorkerGoesOn) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/probes.log");
    const auto probe = static_cast<uint16_t>(SessionMessage::kLinkProbe);
    struct Case {
        std::vector<uint8_t> payload;
        int repeats;
        const char* want;
    };
    const Case cases[] = {
        {std::vector<uint8_t>(65, 0), 1, "a ping of 65 bytes"},
        {std::vector<uint8_t>((1u << 20) + 1, 1), 1, "a bulk probe of 1048577 bytes"},
        {{9, 9}, 1, "a link probe of unknown kind 9"},
        {{}, 1, "an empty link probe"},
        {{0, 1}, 65, "more than 64 link probes"},
    };
    for (const Case& c : cases) {
        auto root = greet_when_free(worker.address());
        Frame answer;
        int answered = 0;
        for (int i = 0; i < c.repeats; ++i) {
            root->send(probe, c.payload);
            if (i + 1 < c.repeats) {
                root->recv(answer, 5000);
                EXPECT_EQ(answer.payload, c.payload);
                ++answered;
            }
        }
        // The session ends: the connection closes without another answer.
        EXPECT_THROW(root->recv(answer, 5000), Error) << c.want;
        EXPECT_EQ(answered, c.repeats - 1);
        expect_logged_soon(worker, c.want);
    }
    expect_root_succeeds(worker);
}

}  // namespace tessera

namespace tessera {

// A root's compaction (kShift: a context shift or eviction) and attention
// request (kMass) checked like any step: a frame of the wrong size, a value
// that could wrap, a sequence the worker does not keep, positions past its
// context or out of order, a count it does not track end the session by name;
// the worker goes on.
TEST(HostilePeers, ForgedCompactionsAndAttentionRequestsEndTheSessionAndTheWorkerGoesOn) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/shift.log");
    struct Case {
        SessionMessage type;
        std::vector<uint32_t> values;
        const char* want;
    };
    const Case cases[] = {
        {SessionMessage::kShift, {0, 1}, "shift message of 8 bytes is truncated"},
        {SessionMessage::kShift, {0, 0x80000000u, 0}, "keeping 0 of 2147483648 positions is out of range"},
        {SessionMessage::kShift, {0, 10, 3, 1}, "shift message keeping 3 positions has 16 bytes"},
        {SessionMessage::kShift, {0, 10, 1, 10}, "shift keeps position 10 of 10"},
        {SessionMessage::kShift, {3, 10, 1, 0}, "cannot compact sequence 3"},
        {SessionMessage::kShift, {0, 65, 1, 0}, "cannot compact sequence 0: 1 of 65 positions kept (context 64"},
        {SessionMessage::kShift, {0, 10, 2, 5, 5}, "kept position 5 at 1 is not after 5"},
        {SessionMessage::kMass, {0, 100000}, "attention of 100000 positions asked (context 64)"},
        {SessionMessage::kMass, {0, 10, 7}, "attention request of 10 positions has 12 bytes"},
        {SessionMessage::kMass, {0, 10}, "attention is not tracked"},
    };
    for (const Case& c : cases) {
        auto root = greet_when_free(worker.address());
        send_json(*root, SessionMessage::kAssign, good_assign());
        ASSERT_TRUE(recv_json(*root, SessionMessage::kReady, "worker", 5000).value("ok", false));
        std::vector<uint8_t> payload(c.values.size() * 4);
        std::memcpy(payload.data(), c.values.data(), payload.size());
        root->send(static_cast<uint16_t>(c.type), payload);
        Frame answer;
        EXPECT_THROW(root->recv(answer, 5000), Error) << c.want;
        expect_logged_soon(worker, c.want);
    }
    expect_root_succeeds(worker);
}

}  // namespace tessera

namespace tessera {

// Sequence-parallel prefill's messages from a forged root: every malformed
// chunk or row message ends that session with an error naming what is wrong,
// and the worker serves the next root.
TEST(HostilePeers, ForgedPromptChunksAndRowsEndTheSessionAndTheWorkerGoesOn) {
    WorkerProcess worker({"-m", test::default_model()}, hostile_peers_dir() + "/sp.log");
    struct Message {
        SessionMessage type;
        std::vector<uint32_t> values;
    };
    struct Case {
        std::vector<Message> messages;
        const char* want;
    };
    // The default model keeps 4 heads of 8 F32 values: 256 bytes of K and V
    // rows a position.
    const Message chunk_at_10 = {SessionMessage::kSpChunk, {10, 0, 2, 1, 2}};
    const Case cases[] = {
        {{{SessionMessage::kSpChunk, {0, 0, 0}}}, "prompt chunk of 0 tokens at 0 (flags 0) is out of range"},
        {{{SessionMessage::kSpChunk, {0, 2, 1, 5}}}, "(flags 2) is out of range"},
        {{{SessionMessage::kSpChunk, {0, 0, 3, 1, 2}}}, "prompt chunk of 3 tokens has 20 bytes"},
        {{{SessionMessage::kSpChunk, {60, 0, 10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}}, "a prompt chunk of 10 tokens at 60 exceeds the context of 64"},
        {{{SessionMessage::kSpChunk, {0, 0, 1, 99999}}}, "token id 99999 is outside the vocabulary"},
        {{{SessionMessage::kSpRows, {0, 0, 1}}}, "unexpected sp-rows message"},
        {{chunk_at_10, {SessionMessage::kSpRows, {0, 0}}}, "KV rows message of 8 bytes is truncated"},
        {{chunk_at_10, {SessionMessage::kSpRows, {0, 5, 5}}}, "KV rows of layer 0 at 5..10 where layer 0's rows from 0 up to 10 were due"},
        {{chunk_at_10, {SessionMessage::kSpRows, {7, 0, 1}}}, "KV rows of layer 7 at 0..1"},
        {{chunk_at_10, {SessionMessage::kSpRows, {0, 0, 0x40000001u}}}, "are out of range"},
        {{chunk_at_10, {SessionMessage::kSpRows, {0, 0, 4, 1, 2, 3}}}, "12 bytes of exact KV rows for 4 positions, 1024 expected"},
    };
    json assign = good_assign();
    assign["role"] = "sequence";
    for (const Case& c : cases) {
        auto root = greet_when_free(worker.address());
        send_json(*root, SessionMessage::kAssign, assign);
        ASSERT_TRUE(recv_json(*root, SessionMessage::kReady, "worker", 5000).value("ok", false));
        for (const Message& m : c.messages) {
            std::vector<uint8_t> payload(m.values.size() * 4);
            std::memcpy(payload.data(), m.values.data(), payload.size());
            root->send(static_cast<uint16_t>(m.type), payload);
        }
        Frame answer;
        for (;;) {
            // Heartbeats of a chunk in progress, then the error and the hang-up.
            try {
                root->recv(answer, 5000);
            } catch (const Error&) {
                break;
            }
            if (answer.type != static_cast<uint16_t>(SessionMessage::kHeartbeat) &&
                answer.type != static_cast<uint16_t>(SessionMessage::kError)) {
                ADD_FAILURE() << c.want << ": " << tp_message_name(answer.type);
                break;
            }
        }
        expect_logged_soon(worker, c.want);
    }
    // A handoff to a tensor-parallel rank (after prefill) that claims rows
    // the node never computed, assigns another role, another context or
    // layers the model lacks, or sends rows out of order.
    {
        json handoff = good_assign();
        handoff["handoff_positions"] = 20;
        handoff["handoff_from"] = 10;
        json sequence = handoff;
        sequence["role"] = "sequence";
        json layers = handoff;
        layers["handoff_from"] = 0;
        layers["slice"]["layers"] = {0, 9};
        json other_ctx = handoff;
        other_ctx["n_ctx"] = 32;
        json from_zero = handoff;
        from_zero["handoff_from"] = 0;
        const std::vector<std::pair<json, std::string>> handoffs = {
            {handoff, "a handoff of positions 10..20 to a node whose cache holds 0"},
            {sequence, "a handoff must assign a tensor-parallel rank or a pipeline stage"},
            {other_ctx, "a handoff must assign a tensor-parallel rank or a pipeline stage of its own, with this node's "
                        "context (64)"},
            {layers, "a handoff of layers 0..9 of a model of 5"},
            {from_zero, "KV rows of layer 0 at 5..6 where layer 0's rows from 0 up to 20 were due"}};
        for (const auto& [message, want] : handoffs) {
            auto root = greet_when_free(worker.address());
            send_json(*root, SessionMessage::kAssign, assign);
            ASSERT_TRUE(recv_json(*root, SessionMessage::kReady, "worker", 5000).value("ok", false));
            send_json(*root, SessionMessage::kAssign, message);
            const uint32_t rows_skipping_ahead[] = {0, 5, 1};
            root->send(static_cast<uint16_t>(SessionMessage::kSpRows),
                       std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(rows_skipping_ahead),
                                                sizeof rows_skipping_ahead));
            Frame answer;
            try {
                while (true) root->recv(answer, 5000);
            } catch (const Error&) {
            }
            expect_logged_soon(worker, want);
        }
    }
    // Codebooks named by a malformed digest, or that this worker does not hold.
    for (const auto& [digest, want] : {std::pair<std::string, std::string>{"../../etc", "invalid digest"},
                                       {"0123456789abcdef", "holds no codebooks"}}) {
        auto root = greet_when_free(worker.address());
        json a = assign;
        a["codebooks"] = digest;
        send_json(*root, SessionMessage::kAssign, a);
        const json ready = recv_json(*root, SessionMessage::kReady, "worker", 5000);
        EXPECT_FALSE(ready.value("ok", true));
        EXPECT_NE(ready.value("error", std::string()).find(want), std::string::npos) << ready.dump();
    }
    expect_root_succeeds(worker);
}

}  // namespace tessera

namespace tessera {

// A sequence-parallel node that only beats, or says nothing at all, after
// its chunk: the root names it within its deadline rather than waiting on.
// The node misbehaves for 12 s and the root must be done within 9 s (with a
// 6 s misbehaviour and a 5 s bound, a whole run took 5.9-6.3 s under
// AddressSanitizer on a 2-core Xeon: start, a 400-token prompt, then the
// 1.5 s deadline), so a root that waited on still fails.
TEST(HostilePeers, RootDropsASequenceNodeThatOnlyBeatsOrFallsSilent) {
    const std::string prompt = std::string(400, 'a') + " Once upon a time";
    struct Case {
        std::function<void(FrameChannel&)> behave;
        const char* want;
    };
    const Case cases[] = {
        {[](FrameChannel& channel) { beat_without_answering(channel, 40); }, "sends heartbeats but no rows for 1500 ms"},
        {[](FrameChannel&) { std::this_thread::sleep_for(std::chrono::seconds(12)); }, "sent nothing for 1500 ms"},
    };
    for (const Case& c : cases) {
        // Only the chunk gets the behaviour: the rows after it are let pass.
        bool first = true;
        FakeWorker fake(nullptr, [&c, &first](FrameChannel& channel, const Frame&) {
            if (std::exchange(first, false)) c.behave(channel);
        });
        const auto start = std::chrono::steady_clock::now();
        const test::ProcessResult r = test::run_process(
            test::tessera_cmd({"run", "--workers", fake.address_text(), "--prefill", "sp", "-b", "32", "-p", prompt, "-n",
                               "4", "--temp", "0", "-t", "1", "--step-timeout-ms", "1500", "--timeout-ms", "1500",
                               "--recover-ms", "0"}),
            60);
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_NE(r.err.find(c.want), std::string::npos) << r.err;
        EXPECT_LT(seconds_since(start), 9.0);
    }
}

}  // namespace tessera
