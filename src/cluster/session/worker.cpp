#include "cluster/session/worker.h"

#include "cluster/session/heartbeat.h"
#include "cluster/sequence_parallel/kv_handoff.h"
#include "cluster/session/json_messages.h"
#include "cluster/planner/link_probe.h"
#include "cluster/planner/planner.h"
#include "cluster/session/session_messages.h"
#include "cluster/session/slice_cache.h"
#include "cluster/session/worker_status.h"
#include "cluster/planner/speed_probe.h"
#include "cluster/sequence_parallel/sp_node.h"
#include "model/kv_codebooks.h"
#include "cluster/pipeline/stage_loop.h"
#include "cluster/session/head_candidates.h"
#include "cluster/tensor_parallel/partial_exchange.h"
#include "cluster/tensor_parallel/tp_decoder.h"
#include "cluster/tensor_parallel/tp_layers.h"
#include "cluster/session/messages.h"
#include "model/slice_forward.h"
#include "net/discovery.h"
#include "net/handshake.h"
#include "ops/cpu_target.h"
#include "util/disk_speed.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/timer.h"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <unistd.h>

namespace tessera {

namespace {

constexpr int kHandshakeTimeoutMs = 30000;
// Each direction of a shared-memory link. A token's frames (tens of KiB)
// then reuse the same few pages, warm in cache, and a prompt batch of
// partials (512 rows of F64, 8 MiB) streams through in 16 turns.
constexpr size_t kShmRingBytes = 512u << 10;
// Connections in their handshake at once; more are closed at once, so a
// flood of idle connections costs nothing but its sockets.
constexpr int kMaxConnections = 64;
constexpr int kAcceptPollMs = 200;

// What a session's slice took, for benchmarks and memory tests.
void log_peak_memory(const LlamaModel& model, const Slice& slice, const ForwardConfig& config,
                     const WorkerOptions& options) {
    if (!options.log) return;
    const SliceFootprint share = slice_footprint(model, slice, config.n_ctx, config.kv_types);
    options.log(fmt::format("peak resident memory {:.1f} MiB; slice {:.1f} MiB of weights + {:.1f} MiB of KV cache",
                            peak_resident_memory_bytes() / 1048576.0, share.weight_bytes / 1048576.0,
                            share.kv_bytes / 1048576.0));
}

// The worker's shared state: the one session, and the previous stage a
// pipeline session waits for (it connects to this worker's port like a root).
class WorkerState {
public:
    // Claims the session slot; false if a session is running or the worker stops.
    bool claim() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (session_ || stop_) return false;
        session_ = true;
        return true;
    }
    void release(bool stop) {
        std::lock_guard<std::mutex> lock(mutex_);
        session_ = false;
        stop_ = stop_ || stop;
        changed_.notify_all();
    }
    bool stopping() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stop_;
    }
    bool enter_connection() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (connections_ >= kMaxConnections) return false;
        ++connections_;
        return true;
    }
    void leave_connection() {
        std::lock_guard<std::mutex> lock(mutex_);
        --connections_;
        changed_.notify_all();
    }
    void wait_for_connections() {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return connections_ == 0; });
    }
    // Hands a connection of a previous stage or a mesh peer to the session
    // waiting for it (its session may still be setting up: wait for it up
    // to timeout_ms).
    bool deliver(PreviousStage& stage, int timeout_ms) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                               [&] { return incoming_.size() < awaiting_; })) {
            return false;
        }
        incoming_.push_back(std::move(stage));
        changed_.notify_all();
        return true;
    }
    // Waits for n such connections; `what` names them in the error.
    std::vector<PreviousStage> await_incoming(size_t n, int timeout_ms, const char* what) {
        std::unique_lock<std::mutex> lock(mutex_);
        awaiting_ = n;
        changed_.notify_all();
        const bool arrived =
            changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return incoming_.size() >= n; });
        awaiting_ = 0;
        std::vector<PreviousStage> got = std::move(incoming_);
        incoming_.clear();
        changed_.notify_all();
        if (!arrived) throw make_error("{} of {} {} connected within {} ms", got.size(), n, what, timeout_ms);
        return got;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool session_ = false;
    bool stop_ = false;
    int connections_ = 0;
    size_t awaiting_ = 0;  // connections the session waits for
    std::vector<PreviousStage> incoming_;
};

struct Worker {
    const WorkerOptions& options;
    const LlamaModel* full_model;
    ThreadPool& pool;
    WorkerState& state;
    const KvCodebooks* codebooks;  // --codebooks, checked against the model (null: none)
    WorkerStatusBoard& board;
    const DiscoveryAdvertiser* advertiser;  // --advertise (null: not advertising)
    std::string listen;                     // the address it listens on, as bound
};

// What a worker computes with, as its hello-reply and its status say it:
// threads, SIMD target, and the memory a share must fit (its GPU's, named,
// when it computes on one).
json worker_facts(const Worker& w) {
    const WorkerOptions& options = w.options;
    json j = {{"threads", w.pool.size()}, {"cpu_target", cpu_target_name()}, {"free_memory", available_memory_bytes()}};
    if (options.stage_device) {
        j["device"] = options.device_name;
        j["free_memory"] = std::min<uint64_t>(options.device_memory, available_memory_bytes());
    }
    return j;
}

// What `tessera status` and /metrics show (worker_status.h).
json worker_status_json(const Worker& w) {
    const WorkerOptions& options = w.options;
    json j = protocol_fields();
    j.update(worker_facts(w));
    j["listen"] = w.listen;
    j["keyed"] = options.key != nullptr;
    json models = json::array();
    if (w.full_model != nullptr) {
        std::error_code ec;
        const auto bytes = std::filesystem::file_size(w.full_model->path(), ec);
        models.push_back({{"kind", "model file"},
                          {"name", std::filesystem::path(w.full_model->path()).filename().string()},
                          {"fingerprint", w.full_model->file().fingerprint_hex()},
                          {"bytes", ec ? 0 : bytes}});
    }
    for (const CachedSlice& c : SliceCache(options.cache_dir, options.cache_max_bytes).entries()) {
        models.push_back({{"kind", "cached slice"}, {"name", c.name}, {"fingerprint", c.fingerprint}, {"bytes", c.bytes}});
    }
    j["models"] = std::move(models);
    j.update(w.board.snapshot());
    if (w.advertiser != nullptr) j["discovery"] = discovery_counters_json(w.advertiser->counters());
    return j;
}

// A tensor-parallel rank's links to the other workers of its group, indexed
// by rank (the root's entry, and this rank's, empty).
using MeshLinks = std::vector<std::unique_ptr<FrameChannel>>;

void serve_steps(FrameChannel& channel, const Worker& w, const LlamaModel& model, const Slice& slice,
                 const ForwardConfig& config, RankRunner& forward, const AssignMessage& assign, MeshLinks& mesh);

// Connects to the workers of higher rank and takes the connections of those
// of lower rank (each proves the session's token).
MeshLinks build_mesh(const AssignMessage& assign, const Worker& w, const std::string& fingerprint) {
    const size_t n_ranks = assign.mesh.size() + 1;
    MeshLinks mesh(n_ranks);
    for (size_t r = static_cast<size_t>(assign.rank) + 1; r < n_ranks; ++r) {
        const HostPort& address = assign.mesh[r - 1];
        const std::string who = fmt::format("worker {} (rank {})", address.str(), r);
        try {
            auto channel = std::make_unique<FrameChannel>(TcpStream::connect(address, w.options.limits.io_timeout_ms),
                                                          w.options.limits);
            authenticate_as_client(*channel, w.options.key.get(), w.options.limits.io_timeout_ms);
            send_json(*channel, SessionMessage::kMeshHello,
                      {{"token", assign.mesh_token}, {"rank", assign.rank}, {"fingerprint", fingerprint}});
            mesh[r] = std::move(channel);
        } catch (const Error& e) {
            throw make_error("{} of this group: {}", who, e.what());
        }
    }
    const size_t lower = static_cast<size_t>(assign.rank) - 1;
    for (PreviousStage& peer : w.state.await_incoming(lower, kHandshakeTimeoutMs, "workers of lower rank")) {
        const std::string name = peer.channel->peer();
        if (peer.type != static_cast<uint16_t>(SessionMessage::kMeshHello)) {
            throw make_error("{}: a previous stage connected where a worker of this group was due", name);
        }
        const MeshHello hello = parse_mesh_hello(peer.hello, name);
        if (hello.token != assign.mesh_token) throw make_error("{}: a mesh peer of another session", name);
        if (hello.rank < 1 || hello.rank > assign.rank - 1 || mesh[static_cast<size_t>(hello.rank)]) {
            throw make_error("{}: a mesh peer claiming rank {} (this worker is rank {})", name, hello.rank, assign.rank);
        }
        mesh[static_cast<size_t>(hello.rank)] = std::move(peer.channel);
    }
    for (auto& link : mesh) {
        if (link) link->set_socket_buffers(kMeshSocketBufferBytes);
    }
    return mesh;
}

// Every hello-reply carries this worker's protocol and release, so a root of
// another release names both in its error, whatever else the reply says.
void send_hello_reply(FrameChannel& channel, json reply) {
    reply.update(protocol_fields());
    send_json(channel, SessionMessage::kHelloReply, reply);
}

// Runs a session's loop; a failure is told to the root (kError) before it
// ends the session.
template <class F>
void telling_the_root(FrameChannel& channel, F&& serve) {
    try {
        serve();
    } catch (const std::exception& e) {
        try {
            send_json(channel, SessionMessage::kError, {{"error", e.what()}});
        } catch (const Error&) {
        }
        throw;
    }
}

// The forward a rank or stage runs, as its assign sets it.
ForwardConfig forward_config_of(const AssignMessage& assign, bool private_weights) {
    ForwardConfig config;
    config.n_ctx = assign.n_ctx;
    config.n_batch = assign.n_batch;
    config.n_seq = assign.n_seq;
    config.private_weights = private_weights;
    config.kv_types = assign.kv_types;
    config.sparse = assign.sparse;
    config.track_attention = assign.track_attention;
    return config;
}

// Checks that the slice fits this worker's memory (streaming its later
// layers where the root allows offload) and sets config's weight budget;
// returns the memory available.
uint64_t fit_in_memory(const LlamaModel& model, const Slice& slice, const AssignMessage& assign, int threads,
                       ForwardConfig& config) {
    // Every sequence (serve --parallel) has its own cache of n_ctx positions.
    const SliceFootprint need = slice_footprint(model, slice, config.n_ctx * config.n_seq, config.kv_types);
    const uint64_t scratch = slice_scratch_bytes(model.hparams(), slice, config.n_batch, config.n_ctx, threads);
    const uint64_t have = available_memory_bytes();
    const bool offload = assign.offload && config.private_weights;
    const MemoryFit fit = memory_fit(need, scratch, have, offload);
    if (!fit.fits) throw make_error("its slice {}", describe_shortfall(need, scratch, have, offload));
    config.weight_budget = fit.weight_budget;
    return have;
}

// The previous stage of a pipeline, connected to this worker's port.
AcceptPrevious accept_previous_stage(const Worker& w) {
    return [&w](int timeout_ms) {
        std::vector<PreviousStage> got = w.state.await_incoming(1, timeout_ms, "previous stages");
        if (got[0].type != static_cast<uint16_t>(SessionMessage::kStageHello)) {
            throw make_error("{}: a mesh peer connected where the previous stage was due", got[0].channel->peer());
        }
        return std::move(got[0]);
    };
}

// Generation handed from sequence-parallel prefill to a tensor-parallel group
// or a pipeline of the same nodes: this node's rows of its rank's heads (or
// its stage's layers) are taken from the whole model's cache, the whole
// model's forward is released, and the node loads its slice, puts the rows in
// its cache and serves steps like any other rank or stage.
void serve_handoff(FrameChannel& channel, const Worker& w, const LlamaModel& model, const std::string& fingerprint,
                   std::unique_ptr<SliceForward> whole, const AssignMessage& assign) {
    const WorkerOptions& options = w.options;
    Slice slice = assign.slice;
    slice.outputs = assign.stage && assign.last;
    ForwardConfig config;
    MeshLinks mesh;
    std::unique_ptr<SliceForward> forward;
    uint64_t kv_bytes = 0;
    try {
        validate_slice(slice, model.hparams());
        HeldKvRows rows = take_kv_rows(*whole, slice, assign.handoff_positions);
        kv_bytes = rows.bytes();
        whole.reset();
        if (!assign.stage) mesh = build_mesh(assign, w, fingerprint);
        config = forward_config_of(assign, options.private_weights);
        fit_in_memory(model, slice, assign, w.pool.size(), config);
        forward = std::make_unique<SliceForward>(model, slice, config, w.pool);
        put_kv_rows(*forward, rows);
    } catch (const std::exception& e) {
        send_json(channel, SessionMessage::kReady, {{"ok", false}, {"error", e.what()}});
        throw;
    }
    w.board.set_role(fmt::format("{} (after sequence-parallel prefill), {}",
                                 assign.stage ? "pipeline stage" : fmt::format("tensor-parallel rank {}", assign.rank),
                                 describe_slice(slice)));
    if (options.log) {
        options.log(fmt::format("generation handed over: serving {} to {} as a {}, its cache keeping {} prompt "
                                "positions ({:.2f} MiB) from the prefill", describe_slice(slice), channel.peer(),
                                assign.stage ? "pipeline stage" : "tensor-parallel rank", assign.handoff_positions,
                                kv_bytes / 1048576.0));
    }
    if (assign.stage) {
        StageLinks links;
        links.has_prev = assign.prev;
        links.next = assign.next;
        links.fingerprint = fingerprint;
        links.key = options.key.get();
        links.root_silence_ms = options.root_silence_ms;
        links.pulse = w.board.pulse();
        telling_the_root(channel, [&] {
            serve_stage(channel, accept_previous_stage(w), *forward, *forward, links, options.limits, options.log);
            log_peak_memory(model, slice, config, options);
        });
        return;
    }
    send_json(channel, SessionMessage::kReady, {{"ok", true}});
    serve_steps(channel, w, model, slice, config, *forward, assign, mesh);
}

// One root's session: hello checked, slice assigned, then steps until shutdown.
// Returns false for a survey (link probes, then kShutdown before any assign).
// Checks a root's hello: its release, its fields, its model. A refusal is
// answered here, before the worker is claimed, so that a refused root never
// holds it (a second root arriving just after was told "busy").
HelloMessage accept_hello(FrameChannel& channel, const json& hello_message, const Worker& w) {
    const LlamaModel* full_model = w.full_model;
    const std::string peer = channel.peer();
    HelloMessage hello;
    try {
        hello = parse_hello(hello_message, peer);
    } catch (const Error& e) {
        send_hello_reply(channel, {{"ok", false}, {"error", e.what()}});
        throw;
    }
    const std::string& root_fingerprint = hello.fingerprint;
    if (full_model != nullptr && root_fingerprint != full_model->file().fingerprint_hex()) {
        // The root (authenticated, or this worker is insecure by choice)
        // learns our fingerprint to name both in its error; nothing else.
        send_hello_reply(channel,
                         {{"ok", false}, {"error", "holds a different model"}, {"fingerprint", full_model->file().fingerprint_hex()}});
        throw make_error("root {} runs another model (fingerprint {} != this worker's {})", peer, root_fingerprint,
                         full_model->file().fingerprint_hex());
    }
    return hello;
}

bool serve_session(FrameChannel& channel, const HelloMessage& hello, const Worker& w) {
    const WorkerOptions& options = w.options;
    const LlamaModel* full_model = w.full_model;
    const std::string peer = channel.peer();
    const std::string& root_fingerprint = hello.fingerprint;
    json reply = worker_facts(w);
    reply["has_model"] = full_model != nullptr;
    if (full_model != nullptr) {
        reply["fingerprint"] = full_model->file().fingerprint_hex();
        reply["probe_seconds"] =
            options.device_probe ? options.device_probe(*full_model) : probe_seconds(*full_model, w.pool);
        // For a plan that would have this worker stream layers from disk.
        reply["disk_read_bps"] = disk_read_bytes_per_second(full_model->path());
    }
    // A root on this host may take its frames through shared memory, once it
    // has proved the key (the segment's name and nonce travel sealed).
    std::unique_ptr<ShmLink> link;
    if (hello.shm && channel.sealed() && channel.peer_is_loopback()) {
        try {
            link = ShmLink::create(kShmRingBytes);
            reply["shm_name"] = link->name();
            reply["shm_nonce"] = link->nonce_hex();
        } catch (const Error& e) {
            if (options.log) options.log(fmt::format("no shared memory, staying on TCP: {}", e.what()));
        }
    }
    reply["ok"] = true;
    send_hello_reply(channel, reply);

    // The root may time the link first; a survey (tessera plan --measure)
    // ends there.
    Frame frame;
    for (int probes = 0;;) {
        channel.recv(frame, kHandshakeTimeoutMs);
        if (frame.type == static_cast<uint16_t>(SessionMessage::kShutdown)) return false;
        if (frame.type != static_cast<uint16_t>(SessionMessage::kLinkProbe)) break;
        answer_link_probe(channel, frame, probes, peer);
    }
    const json assign_message = parse_json_message(frame, SessionMessage::kAssign, peer);
    AssignMessage assign;
    try {
        assign = parse_assign(assign_message, peer);
    } catch (const Error& e) {
        send_json(channel, SessionMessage::kReady, {{"ok", false}, {"error", e.what()}});
        throw;
    }
    // Both sides switch after kAssign, the last frame on TCP.
    if (link && assign.shm) {
        link->unlink();
        channel.use_shared_memory(std::move(link));
    }
    link.reset();
    Slice slice = assign.slice;
    ForwardConfig config;
    MeshLinks mesh;
    std::unique_ptr<LlamaModel> slice_model;  // cache mode: this session's slice file
    std::unique_ptr<SliceForward> forward;
    std::unique_ptr<SliceRunner> on_device;        // a stage on this worker's device (options.stage_device)
    std::unique_ptr<RankRunner> rank_on_device;    // a rank's share on it (options.rank_device)
    std::unique_ptr<TensorParallelDecoder> group;  // a stage this worker leads as a tensor-parallel group
    StageLinks links;
    uint64_t have = 0;  // bytes of memory available for the slice
    const bool stage = assign.stage;
    try {
        slice.outputs = stage && assign.last;
        if (stage && full_model == nullptr) throw make_error("a pipeline stage needs the model file (-m)");
        if (options.stage_device && assign.sequence) {
            throw make_error("this worker computes on {}, which serves pipeline stages and tensor-parallel ranks only "
                             "for now (not a sequence-parallel chunk)", options.device_name);
        }
        if (assign.sequence) {
            // Sequence-parallel prefill: every node holds the whole model.
            if (full_model == nullptr) throw make_error("sequence-parallel prefill needs the model file (-m)");
            slice = full_slice(full_model->hparams());
            if (!assign.codebooks.empty()) {
                if (w.codebooks == nullptr) {
                    throw make_error("the root sends rows as codebook indices, and this worker holds no codebooks "
                                     "(start it with --codebooks FILE)");
                }
                if (w.codebooks->digest() != assign.codebooks) {
                    throw make_error("the root's codebooks ({}) are not this worker's ({})", assign.codebooks,
                                     w.codebooks->digest());
                }
            }
        }
        // The group's links first: the other workers are loading too.
        if (!stage && !assign.sequence) mesh = build_mesh(assign, w, root_fingerprint);
        config = forward_config_of(assign, options.private_weights);
        if (stage) {
            links.has_prev = assign.prev;
            // Stages connect only to the address their authenticated root sent.
            links.next = assign.next;
            links.fingerprint = root_fingerprint;
            links.key = options.key.get();
            links.root_silence_ms = options.root_silence_ms;
            links.pulse = w.board.pulse();
        }
        if (full_model == nullptr) {
            // No model file: use the cached slice, or have the root send it once.
            SliceCache cache(options.cache_dir, options.cache_max_bytes);
            slice_model = cache.open(root_fingerprint, slice);
            if (!slice_model) {
                send_json(channel, SessionMessage::kReady, {{"ok", false}, {"need_slice", true}});
                slice_model = cache.receive(channel, root_fingerprint, slice, kHandshakeTimeoutMs);
                if (!slice_model) throw make_error("{}: the received slice file is not the slice asked for", peer);
                if (options.log) options.log(fmt::format("received and cached {}", cache.path_of(root_fingerprint, slice)));
            } else if (options.log) {
                options.log(fmt::format("using the cached slice {}", cache.path_of(root_fingerprint, slice)));
            }
        }
        const LlamaModel& model = full_model != nullptr ? *full_model : *slice_model;
        validate_slice(slice, model.hparams());
        w.board.set_role(assign.sequence ? std::string("sequence-parallel node, the whole model")
                         : stage         ? "pipeline stage, " + describe_slice(slice)
                                         : fmt::format("tensor-parallel rank {}, {}", assign.rank, describe_slice(slice)));
        const bool leads_group = stage && !assign.group.empty();
        if (!options.stage_device) {
            have = fit_in_memory(model, slice, assign, w.pool.size(), config);
        } else if (leads_group) {
            // Its rank of the group goes on the device below, as the root's does.
        } else if (stage) {
            on_device = options.stage_device(model, slice, config);
        } else {
            rank_on_device = options.rank_device(model, slice, config);
        }
        if (options.stage_device && options.log) {
            options.log(fmt::format("{}{} on {}", leads_group ? "its rank of " : "", describe_slice(slice),
                                    options.device_name));
        }
        if (on_device || rank_on_device) {
        } else if (leads_group) {
            // Hybrid plan: this stage is a tensor-parallel group led by this
            // worker, which plans the group and checks its members' memory.
            TpConfig tp;
            tp.workers = assign.group;
            tp.weights = assign.group_weights;
            tp.moe_split = assign.moe_split;
            tp.forward = config;
            tp.n_threads = w.pool.size();
            tp.limits = options.limits;
            tp.key = options.key;
            tp.layer_begin = slice.layer_begin;
            tp.layer_end = slice.layer_end;
            tp.first = false;
            tp.last = slice.outputs;
            if (options.stage_device) {
                // The leader's rank on its device, as a group member's is
                // (every layer of its share there: partials meet every layer).
                tp.root_device = options.rank_device;
                tp.root_device_name = options.device_name;
            }
            group = std::make_unique<TensorParallelDecoder>(model, tp);
        } else {
            forward = std::make_unique<SliceForward>(model, slice, config, w.pool);
            if (const StreamedLayers* streamed = forward->streamed(); streamed != nullptr && options.log) {
                options.log(fmt::format("streaming {} of its {} layers ({:.1f} MiB) from disk: {} bytes of "
                                        "memory hold the rest", streamed->streamed_count(), slice.n_layers(),
                                        streamed->streamed_bytes() / 1048576.0, have));
            }
        }
    } catch (const std::exception& e) {
        send_json(channel, SessionMessage::kReady, {{"ok", false}, {"error", e.what()}});
        throw;
    }
    const LlamaModel& model = full_model != nullptr ? *full_model : *slice_model;
    if (assign.sequence) {
        std::optional<AssignMessage> handoff;
        telling_the_root(channel, [&] {
            handoff = serve_prompt_chunks(channel, *forward, assign.codebooks.empty() ? nullptr : w.codebooks,
                                          options.root_silence_ms, w.board.pulse(), options.log);
            if (!handoff) log_peak_memory(model, slice, config, options);
        });
        if (handoff) serve_handoff(channel, w, model, root_fingerprint, std::move(forward), *handoff);
        return true;
    }
    if (stage) {
        telling_the_root(channel, [&] {
            const AcceptPrevious accept_previous = accept_previous_stage(w);
            if (on_device) {
                serve_stage(channel, accept_previous, *on_device, *on_device, links, options.limits, options.log);
            } else if (group) {
                serve_stage(channel, accept_previous, *group, group->root_forward(), links, options.limits, options.log);
            } else {
                serve_stage(channel, accept_previous, *forward, *forward, links, options.limits, options.log);
            }
            log_peak_memory(model, slice, config, options);
        });
        return true;
    }
    send_json(channel, SessionMessage::kReady, {{"ok", true}});
    if (options.log) {
        options.log(fmt::format("serving {} to {}{}", describe_slice(slice), peer,
                                channel.on_shared_memory() ? " through shared memory" : ""));
    }
    serve_steps(channel, w, model, slice, config, rank_on_device ? *rank_on_device : static_cast<RankRunner&>(*forward),
                assign, mesh);
    return true;
}

// The step loop of a tensor-parallel rank: each batch's residual rows from
// the root, the group's layers run with the other ranks (tp_layers.h), the
// head's rows when the root asks for them.
void serve_steps(FrameChannel& channel, const Worker& w, const LlamaModel& model, const Slice& slice,
                 const ForwardConfig& config, RankRunner& forward, const AssignMessage& assign, MeshLinks& mesh) {
    const WorkerOptions& options = w.options;
    const std::string peer = channel.peer();
    const int64_t n_embd = model.hparams().n_embd;
    const bool exact = assign.partial_format == WireFormat::Fixed;
    std::vector<float> x, h;
    std::vector<float> head_logits;  // grows once, to the largest batch of logits asked for
    std::vector<SeqRun> runs;        // the last kSeqRuns
    LogitsNeed need;                 // the last kHeadNeed's, when has_need
    bool has_need = false;
    SessionMessage reply_type = SessionMessage::kPartial;
    TpLayerScratch scratch;
    TpLayerTimes times;
    uint64_t batches = 0;
    std::vector<uint8_t> out;
    std::mutex send_mutex;
    channel.set_socket_buffers(kMeshSocketBufferBytes);
    std::vector<ExchangePeer> peers(mesh.size());
    peers[0] = {&channel, fmt::format("the root {}", peer), &send_mutex};
    for (size_t r = 1; r < mesh.size(); ++r) {
        if (static_cast<int>(r) == assign.rank) continue;
        peers[r] = {mesh[r].get(), fmt::format("worker {} (rank {})", assign.mesh[r - 1].str(), r), nullptr};
    }
    PartialExchange exchange(assign.rank, std::move(peers), exact);
    exchange.set_bands(assign.partial_bands);
    exchange.set_topology(assign.topology);
    Heartbeat heartbeat(channel, send_mutex);
    SessionPulse* pulse = w.board.pulse();
    RootSilence root(options.root_silence_ms, peer, pulse);
    Frame frame;
    for (;;) {
        // Idle between requests is fine (a user may be typing, the root
        // beats meanwhile); a frame that has started must arrive whole within
        // its budget.
        while (!channel.poll(kHeartbeatIntervalMs)) root.check();
        channel.recv(frame);
        root.heard();
        const auto type = static_cast<SessionMessage>(frame.type);
        if (type == SessionMessage::kHeartbeat) continue;
        if (type == SessionMessage::kShutdown) {
            log_peak_memory(model, slice, config, options);
            if (options.log && times.syncs > 0) {
                options.log(fmt::format("{} batches, {} syncs: {:.1f} us computing and {:.1f} us exchanging partials "
                                        "per sync on average", batches, times.syncs,
                                        times.compute_seconds / static_cast<double>(times.syncs) * 1e6,
                                        times.wait_seconds / static_cast<double>(times.syncs) * 1e6));
            }
            return;
        }
        if (type == SessionMessage::kShift) {
            const ContextCompaction c = decode_compaction(frame.payload, peer.c_str());
            forward.compact_context(c.seq, c.kept, c.n_used);
            continue;
        }
        if (type == SessionMessage::kMass) {
            const MassRequest r = decode_mass_request(frame.payload, peer.c_str());
            if (r.n_used > forward.n_ctx()) {
                throw make_error("{}: attention of {} positions asked (context {})", peer, r.n_used, forward.n_ctx());
            }
            std::vector<int64_t> totals(static_cast<size_t>(r.n_used), 0);
            forward.add_attention_mass(r.seq, r.n_used, totals.data());
            encode_mass(totals.data(), r.n_used, out);
            const std::lock_guard<std::mutex> lock(send_mutex);
            channel.send(static_cast<uint16_t>(SessionMessage::kMass), out);
            continue;
        }
        if (type == SessionMessage::kHeadNeed) {
            has_need = decode_logits_need(frame.payload, model.hparams().n_vocab, need, peer.c_str());
            continue;
        }
        if (type != SessionMessage::kSeqRuns && type != SessionMessage::kResidual && type != SessionMessage::kHead) {
            throw make_error("{}: unexpected {} message", peer, tp_message_name(frame.type));
        }
        heartbeat.set_busy(true);
        bool reply = false;
        try {
            if (type == SessionMessage::kSeqRuns) {
                // The next batch's sequences: checked against this worker's
                // sequences and context before its layers run.
                runs = decode_seq_runs(frame.payload, peer.c_str());
            } else if (type == SessionMessage::kResidual) {
                const StepHeader step = decode_step(frame.payload, x, peer.c_str());
                if (step.width != n_embd || step.n_tok < 1 || step.n_tok > static_cast<uint32_t>(forward.n_batch()) ||
                    step.layer != static_cast<uint32_t>(slice.layer_begin)) {
                    throw make_error("{}: residual of {} rows x {} for layer {} does not fit this worker (width {}, "
                                     "batch {}, layers from {})", peer, step.n_tok, step.width, step.layer, n_embd,
                                     forward.n_batch(), slice.layer_begin);
                }
                int64_t rows = 0;
                for (const SeqRun& r : runs) rows += r.n_tok;
                if (runs.empty() || rows != static_cast<int64_t>(step.n_tok)) {
                    throw make_error("{}: residual of {} rows over runs of {} rows", peer, step.n_tok, rows);
                }
                require_finite(x.data(), x.size(), peer);
                run_tp_layers(forward, exchange, x.data(), runs,
                              exchange_deadline_ms(options.limits.io_timeout_ms, assign.row_budget_ms,
                                                   static_cast<int>(step.n_tok)),
                              scratch, times);
                runs.clear();  // each batch names its runs
                ++batches;
                if (pulse != nullptr) pulse->rows += step.n_tok;
            } else {
                const StepHeader step = decode_step(frame.payload, h, peer.c_str());
                if (step.width != n_embd || step.n_tok < 1 || step.n_tok > static_cast<uint32_t>(forward.n_batch())) {
                    throw make_error("{}: head step of {} rows x {} does not fit this worker (width {}, batch {})", peer,
                                     step.n_tok, step.width, n_embd, forward.n_batch());
                }
                const int n_tok = static_cast<int>(step.n_tok);
                // Logits are F32 (F16 with --fast).
                StepHeader reply_header = step;
                reply_header.format = exact ? WireFormat::F32 : WireFormat::F16;
                const int64_t rows = slice.n_vocab_rows();
                if (rows == 0) throw make_error("{}: asked for logits, but this rank holds no rows of the head", peer);
                head_logits.resize(std::max(head_logits.size(), static_cast<size_t>(n_tok * rows)));
                forward.head_rows(h.data(), n_tok, head_logits.data(), rows);
                if (has_need) {
                    // Checked here: the root sees only the candidates.
                    require_finite(head_logits.data(), static_cast<size_t>(n_tok * rows), "this worker's logits");
                    encode_candidates(head_logits.data(), n_tok, static_cast<int>(rows),
                                      static_cast<int32_t>(slice.vocab_begin), need, out);
                    reply_type = SessionMessage::kCandidates;
                } else {
                    reply_header.width = static_cast<uint32_t>(rows);
                    encode_step(reply_header, head_logits.data(), out);
                    reply_type = SessionMessage::kPartial;
                }
                reply = true;
            }
        } catch (const std::exception& e) {
            heartbeat.set_busy(false);
            std::lock_guard<std::mutex> lock(send_mutex);
            send_json(channel, SessionMessage::kError, {{"error", e.what()}});
            throw;
        }
        heartbeat.set_busy(false);
        if (reply) {
            std::lock_guard<std::mutex> lock(send_mutex);
            channel.send(static_cast<uint16_t>(reply_type), out);
        }
    }
}

// One accepted connection: the key handshake within its deadline, then a
// root's session, a busy answer, or a previous stage handed to its session.
void handle_connection(TcpStream stream, const Worker& w, std::string& session_error) {
    const WorkerOptions& options = w.options;
    auto channel = std::make_unique<FrameChannel>(std::move(stream), options.limits);
    const std::string peer = channel->peer();
    try {
        authenticate_as_server(*channel, options.key.get(), options.limits.io_timeout_ms, options.limits.max_payload);
        Frame frame;
        channel->recv(frame, options.limits.io_timeout_ms);
        if (frame.type == static_cast<uint16_t>(SessionMessage::kStageHello) ||
            frame.type == static_cast<uint16_t>(SessionMessage::kMeshHello)) {
            const auto type = static_cast<SessionMessage>(frame.type);
            PreviousStage stage{std::move(channel), parse_json_message(frame, type, peer), frame.type};
            if (!w.state.deliver(stage, kHandshakeTimeoutMs)) {
                send_json(*stage.channel, SessionMessage::kError, {{"error", "no session here waits for this connection"}});
                throw make_error("a {} connected, but no session waits for one", tp_message_name(frame.type));
            }
            return;
        }
        if (frame.type == static_cast<uint16_t>(SessionMessage::kStatus)) {
            // Answered busy or not, to any release (so that status shows a
            // mismatched one), to a peer that proved the key.
            (void)parse_json_message(frame, SessionMessage::kStatus, peer);
            send_json(*channel, SessionMessage::kStatusReply, worker_status_json(w));
            return;
        }
        HelloMessage hello;
        try {
            hello = accept_hello(*channel, parse_json_message(frame, SessionMessage::kHello, peer), w);
        } catch (const std::exception& e) {
            if (options.log) options.log(fmt::format("session with {} refused: {}", peer, e.what()));
            // --once: a refused root ends the worker as a failed session did.
            if (options.once && w.state.claim()) {
                session_error = e.what();
                w.state.release(true);
            }
            return;
        }
        if (!w.state.claim()) {
            send_hello_reply(*channel, {{"ok", false}, {"busy", true}, {"error", "busy: serving another root"}});
            if (options.log) options.log(fmt::format("{}: told it is busy (serving another root)", peer));
            return;
        }
        if (!options.key && options.insecure && options.log) {
            options.log(fmt::format("warning: serving {} without a key (--insecure): anyone on the network can use, "
                                    "read or impersonate this worker", peer));
        }
        w.board.session_started(peer);
        // A survey does not count as --once's session.
        bool served = true;
        try {
            served = serve_session(*channel, hello, w);
            if (options.log) options.log(fmt::format("{} with {} ended", served ? "session" : "survey", peer));
        } catch (const std::exception& e) {
            if (options.log) options.log(fmt::format("session with {} failed: {}", peer, e.what()));
            if (options.once) session_error = e.what();
        }
        w.board.session_ended();
        w.state.release(options.once && served);
    } catch (const std::exception& e) {
        if (options.log) options.log(fmt::format("connection from {} dropped: {}", peer, e.what()));
    }
}

}  // namespace

void run_worker(const WorkerOptions& options) {
    std::unique_ptr<LlamaModel> model;
    if (!options.model_path.empty()) model = std::make_unique<LlamaModel>(options.model_path);
    ThreadPool pool(options.n_threads);
    TcpListener listener(options.listen);
    // Keyless workers never advertise: discovery's secrecy is the key's.
    std::unique_ptr<DiscoveryAdvertiser> advertiser;
    if (options.advertise) {
        if (!options.key) {
            throw make_error("--advertise needs the cluster's key (--key FILE): only holders of the key may find this "
                             "worker, and a worker without one is never advertised");
        }
        char host[256] = {};
        if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
        advertiser = std::make_unique<DiscoveryAdvertiser>(*options.key, listener.port(), options.discovery_port, host,
                                                           options.log);
        if (options.log) {
            options.log(fmt::format("answering discovery on UDP port {} to holders of the cluster key (TCP port {})",
                                    options.discovery_port, listener.port()));
        }
    }
    std::unique_ptr<KvCodebooks> codebooks;
    if (!options.codebooks_path.empty()) {
        if (!model) throw make_error("--codebooks needs the model file (-m) they were fitted on");
        codebooks = std::make_unique<KvCodebooks>(KvCodebooks::load(options.codebooks_path));
        codebooks->require_model(model->file().fingerprint_hex(), model->hparams().n_layer,
                                 model->hparams().n_head_kv * model->hparams().head_dim);
    }
    WorkerState state;
    WorkerStatusBoard board;
    const Worker w{options, model.get(), pool, state, codebooks.get(), board, advertiser.get(),
                   HostPort{options.listen.host, listener.port()}.str()};
    if (options.publish_status) options.publish_status([&w] { return worker_status_json(w); });
    // Announced only now, so whoever waits for the address (a test, a
    // supervisor) finds --metrics-port already answering, never a 503.
    if (options.on_listening) options.on_listening(listener.port());
    std::string session_error;  // --once: why the one session failed
    while (!state.stopping()) {
        TcpStream stream;
        try {
            stream = listener.accept(kAcceptPollMs);
        } catch (const Error&) {
            continue;  // no connection yet (or a transient accept error)
        }
        if (!state.enter_connection()) continue;  // closed at once: too many handshakes in flight
        std::thread([&w, &state, &session_error, s = std::move(stream)]() mutable {
            handle_connection(std::move(s), w, session_error);
            state.leave_connection();
        }).detach();
    }
    state.wait_for_connections();
    if (!session_error.empty()) throw Error(session_error);
}

}  // namespace tessera
