#include "hostile_peer.h"

#include "model/llama_model.h"
#include "net/handshake.h"
#include "tessera_cli.h"
#include "test_paths.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace tessera::test {

std::string default_model() { return source_dir() + "/models/stories260K.gguf"; }

std::string default_fingerprint() {
    static const std::string fingerprint = LlamaModel(default_model()).file().fingerprint_hex();
    return fingerprint;
}

std::string make_key_file(const std::string& dir, const std::string& name) {
    const std::string path = dir + "/" + name;
    std::remove(path.c_str());
    const ProcessResult r = run_process(tessera_cmd({"keygen", "-o", path}), 30);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return path;
}

WorkerProcess::WorkerProcess(const std::vector<std::string>& extra_args, const std::string& log_path)
    : log_path_(log_path) {
    const bool listen_given = std::find(extra_args.begin(), extra_args.end(), "--listen") != extra_args.end();
    std::string command = "exec " + tessera_binary() + " worker -t 1" + (listen_given ? "" : " --listen 127.0.0.1:0");
    for (const std::string& a : extra_args) command.append(" '").append(a).append("'");
    command += " 2> " + log_path;
    process_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{"/bin/sh", "-c", command});
    const std::string line = process_->read_line(30);
    const std::string prefix = "listening on port ";
    EXPECT_EQ(line.rfind(prefix, 0), 0u) << line << "\n" << log();
    address_ = {"127.0.0.1", static_cast<uint16_t>(std::stoi(line.substr(prefix.size())))};
}

std::string WorkerProcess::log() const {
    std::ifstream in(log_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::unique_ptr<FrameChannel> connect_as_root(const HostPort& address, const WireKey* key, int timeout_ms) {
    auto channel = std::make_unique<FrameChannel>(TcpStream::connect(address, timeout_ms),
                                                  ChannelLimits{64u << 20, timeout_ms, 0});
    authenticate_as_client(*channel, key, timeout_ms);
    return channel;
}

json good_hello() {
    json hello = hello_json(default_fingerprint());
    hello["rank"] = 1;
    hello["n_ranks"] = 2;
    hello["shm"] = false;
    return hello;
}

json good_assign() {
    return {{"slice", {{"layers", {0, 5}}, {"kv_heads", {0, 4}}, {"ffn", {0, 172}}, {"vocab", {0, 512}}}},
            {"n_ctx", 64},
            {"n_batch", 8},
            {"kv_type_k", "f32"},
            {"kv_type_v", "f32"},
            {"partial_format", 3},
            {"rank", 1},
            {"mesh", {"127.0.0.1:9"}},  // this worker's own entry: it connects to no other
            {"mesh_token", "0123456789abcdef0123456789abcdef"},
            {"shm", false}};
}

ProcessResult run_root(const std::string& workers, const std::string& key_file, const std::vector<std::string>& extra) {
    std::vector<std::string> argv = tessera_cmd({"run", "--workers", workers, "-p", "Once upon a time", "-n", "8",
                                                 "--temp", "0", "-t", "1", "--json", "--timeout-ms", "3000"});
    if (!key_file.empty()) {
        argv.push_back("--key");
        argv.push_back(key_file);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv, 60);
}

uint64_t peak_memory_of(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    }
    return 0;
}

FakeWorker::FakeWorker(const WireKey* key, StepHandler on_step, json hello_reply, std::unique_ptr<ShmLink> link)
    : listener_(std::make_unique<TcpListener>(HostPort{"127.0.0.1", 0})) {
    if (hello_reply.is_null()) {
        hello_reply = {{"ok", true}, {"threads", 1}, {"free_memory", 1ull << 34}, {"has_model", true},
                       {"fingerprint", default_fingerprint()}, {"probe_seconds", 1e-5}};
    }
    // This release's protocol fields unless the test gives its own; a null
    // "protocol" leaves them out, as a worker before 0.9 did.
    if (!hello_reply.contains("protocol")) hello_reply.update(protocol_fields());
    if (hello_reply["protocol"].is_null()) {
        hello_reply.erase("protocol");
        hello_reply.erase("version");
    }
    link_ = std::move(link);
    thread_ = std::thread([this, key, on_step, hello_reply] {
        try {
            FrameChannel channel(listener_->accept(30000), ChannelLimits{64u << 20, 30000, 0});
            authenticate_as_server(channel, key, 5000, 64u << 20);
            recv_json(channel, SessionMessage::kHello, "root", 5000);
            send_json(channel, SessionMessage::kHelloReply, hello_reply);
            if (hello_reply["ok"] != true) return;
            const json assign = recv_json(channel, SessionMessage::kAssign, "root", 30000);
            if (link_ && assign.value("shm", false)) channel.use_shared_memory(std::move(link_));
            send_json(channel, SessionMessage::kReady, {{"ok", true}});
            Frame frame;
            for (;;) {
                channel.recv(frame, 30000);
                if (frame.type == static_cast<uint16_t>(SessionMessage::kShutdown)) return;
                // A batch's runs and residual rows need no answer: the root's
                // partials and head steps do.
                if (frame.type == static_cast<uint16_t>(SessionMessage::kSeqRuns) ||
                    frame.type == static_cast<uint16_t>(SessionMessage::kResidual) ||
                    frame.type == static_cast<uint16_t>(SessionMessage::kHeadNeed)) {
                    continue;
                }
                on_step(channel, frame);
            }
        } catch (const Error&) {
            // The root hung up: what the test checks is on its side.
        }
    });
}

StepHeader step_header(const Frame& frame) {
    std::vector<double> exact;
    std::vector<float> rows;
    try {
        return decode_exact_step(frame.payload, exact, "root");
    } catch (const Error&) {
        return decode_step(frame.payload, rows, "root");
    }
}

void answer_with_zeros(FrameChannel& channel, const Frame& step) {
    StepHeader h = step_header(step);
    h.format = WireFormat::Fixed;
    std::vector<double> partial(static_cast<size_t>(h.width) * h.n_tok, 0.0);
    std::vector<uint8_t> out;
    encode_exact_step(h, partial.data(), out);
    channel.send(static_cast<uint16_t>(SessionMessage::kPartial), out);
}

FakeWorker::~FakeWorker() { thread_.join(); }

std::string FakeWorker::address_text() const { return "127.0.0.1:" + std::to_string(listener_->port()); }

}  // namespace tessera::test
