#include "cluster/tp_worker.h"

#include "cluster/heartbeat.h"
#include "cluster/json_messages.h"
#include "cluster/planner.h"
#include "cluster/session_messages.h"
#include "cluster/slice_cache.h"
#include "cluster/speed_probe.h"
#include "cluster/stage_loop.h"
#include "cluster/tp_decoder.h"
#include "cluster/tp_messages.h"
#include "model/slice_forward.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/timer.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

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
    const SliceFootprint share = slice_footprint(model, slice, config.n_ctx, config.kv_type);
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
    // Hands a connected previous stage to the session waiting for one (its
    // session may still be setting up: wait for it up to timeout_ms).
    bool deliver(PreviousStage& stage, int timeout_ms) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (!changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                               [&] { return awaiting_previous_ && !previous_; })) {
            return false;
        }
        previous_ = std::move(stage);
        changed_.notify_all();
        return true;
    }
    PreviousStage await_previous(int timeout_ms) {
        std::unique_lock<std::mutex> lock(mutex_);
        awaiting_previous_ = true;
        changed_.notify_all();
        const bool arrived =
            changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return previous_.has_value(); });
        awaiting_previous_ = false;
        if (!arrived) throw make_error("the previous stage did not connect within {} ms", timeout_ms);
        PreviousStage stage = std::move(*previous_);
        previous_.reset();
        return stage;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool session_ = false;
    bool stop_ = false;
    int connections_ = 0;
    bool awaiting_previous_ = false;
    std::optional<PreviousStage> previous_;
};

struct Worker {
    const WorkerOptions& options;
    const LlamaModel* full_model;
    ThreadPool& pool;
    WorkerState& state;
};

void serve_steps(FrameChannel& channel, const Worker& w, const LlamaModel& model, const Slice& slice,
                 const ForwardConfig& config, SliceForward& forward, WireFormat partial_format);

// One root's session: hello checked, slice assigned, then steps until shutdown.
void serve_session(FrameChannel& channel, const json& hello_message, const Worker& w) {
    const WorkerOptions& options = w.options;
    const LlamaModel* full_model = w.full_model;
    const std::string peer = channel.peer();
    HelloMessage hello;
    try {
        hello = parse_hello(hello_message, peer);
    } catch (const Error& e) {
        send_json(channel, TpMessage::kHelloReply, {{"ok", false}, {"error", e.what()}});
        throw;
    }
    const std::string& root_fingerprint = hello.fingerprint;
    if (full_model != nullptr && root_fingerprint != full_model->file().fingerprint_hex()) {
        // The root (authenticated, or this worker is insecure by choice)
        // learns our fingerprint to name both in its error; nothing else.
        send_json(channel, TpMessage::kHelloReply,
                  {{"ok", false}, {"error", "holds a different model"}, {"fingerprint", full_model->file().fingerprint_hex()}});
        throw make_error("root {} runs another model (fingerprint {} != this worker's {})", peer, root_fingerprint,
                         full_model->file().fingerprint_hex());
    }
    json reply = {{"threads", w.pool.size()}, {"free_memory", available_memory_bytes()}, {"has_model", full_model != nullptr}};
    if (full_model != nullptr) {
        reply["fingerprint"] = full_model->file().fingerprint_hex();
        reply["probe_seconds"] = probe_seconds(*full_model, w.pool);
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
    send_json(channel, TpMessage::kHelloReply, reply);

    const json assign_message = recv_json(channel, TpMessage::kAssign, peer, kHandshakeTimeoutMs);
    AssignMessage assign;
    try {
        assign = parse_assign(assign_message, peer);
    } catch (const Error& e) {
        send_json(channel, TpMessage::kReady, {{"ok", false}, {"error", e.what()}});
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
    const WireFormat partial_format = assign.partial_format;
    std::unique_ptr<LlamaModel> slice_model;  // cache mode: this session's slice file
    std::unique_ptr<SliceForward> forward;
    std::unique_ptr<TensorParallelDecoder> group;  // a stage this worker leads as a tensor-parallel group
    StageLinks links;
    const bool stage = assign.stage;
    try {
        slice.outputs = stage && assign.last;
        if (stage && full_model == nullptr) throw make_error("a pipeline stage needs the model file (-m)");
        config.n_ctx = assign.n_ctx;
        config.n_batch = assign.n_batch;
        config.n_seq = assign.n_seq;
        config.private_weights = options.private_weights;
        config.kv_type = assign.kv_type;
        if (stage) {
            links.has_prev = assign.prev;
            // Stages connect only to the address their authenticated root sent.
            links.next = assign.next;
            links.fingerprint = root_fingerprint;
            links.key = options.key.get();
        }
        if (full_model == nullptr) {
            // No model file: use the cached slice, or have the root send it once.
            SliceCache cache(options.cache_dir, options.cache_max_bytes);
            slice_model = cache.open(root_fingerprint, slice);
            if (!slice_model) {
                send_json(channel, TpMessage::kReady, {{"ok", false}, {"need_slice", true}});
                slice_model = cache.receive(channel, root_fingerprint, slice, kHandshakeTimeoutMs);
                if (!slice_model) throw make_error("{}: the received slice file is not the slice asked for", peer);
                if (options.log) options.log(fmt::format("received and cached {}", cache.path_of(root_fingerprint, slice)));
            } else if (options.log) {
                options.log(fmt::format("using the cached slice {}", cache.path_of(root_fingerprint, slice)));
            }
        }
        const LlamaModel& model = full_model != nullptr ? *full_model : *slice_model;
        validate_slice(slice, model.hparams());
        // Every sequence (serve --parallel) has its own cache of n_ctx positions.
        const SliceFootprint need = slice_footprint(model, slice, config.n_ctx * config.n_seq, config.kv_type);
        const uint64_t scratch = slice_scratch_bytes(model.hparams(), slice, config.n_batch, config.n_ctx, w.pool.size());
        const uint64_t have = available_memory_bytes();
        if (need.total() + scratch > have) {
            throw make_error("its slice needs {} bytes ({} of weights, {} of KV cache, {} of working buffers) but only "
                             "{} are available", need.total() + scratch, need.weight_bytes, need.kv_bytes, scratch, have);
        }
        if (stage && !assign.group.empty()) {
            // Hybrid plan: this stage is a tensor-parallel group led by this
            // worker, which plans the group and checks its members' memory.
            TpConfig tp;
            tp.workers = assign.group;
            tp.weights = assign.group_weights;
            tp.forward = config;
            tp.n_threads = w.pool.size();
            tp.limits = options.limits;
            tp.key = options.key;
            tp.layer_begin = slice.layer_begin;
            tp.layer_end = slice.layer_end;
            tp.first = false;
            tp.last = slice.outputs;
            group = std::make_unique<TensorParallelDecoder>(model, tp);
        } else {
            forward = std::make_unique<SliceForward>(model, slice, config, w.pool);
        }
    } catch (const std::exception& e) {
        send_json(channel, TpMessage::kReady, {{"ok", false}, {"error", e.what()}});
        throw;
    }
    const LlamaModel& model = full_model != nullptr ? *full_model : *slice_model;
    if (stage) {
        try {
            const AcceptPrevious accept_previous = [&](int timeout_ms) { return w.state.await_previous(timeout_ms); };
            if (group) {
                serve_stage(channel, accept_previous, *group, group->root_forward(), links, options.limits, options.log);
            } else {
                serve_stage(channel, accept_previous, *forward, *forward, links, options.limits, options.log);
            }
            log_peak_memory(model, slice, config, options);
        } catch (const std::exception& e) {
            try {
                send_json(channel, TpMessage::kError, {{"error", e.what()}});
            } catch (const Error&) {
            }
            throw;
        }
        return;
    }
    send_json(channel, TpMessage::kReady, {{"ok", true}});
    if (options.log) {
        options.log(fmt::format("serving {} to {}{}", describe_slice(slice), peer,
                                channel.on_shared_memory() ? " through shared memory" : ""));
    }
    serve_steps(channel, w, model, slice, config, *forward, partial_format);
}

// The step loop of a tensor-parallel rank.
void serve_steps(FrameChannel& channel, const Worker& w, const LlamaModel& model, const Slice& slice,
                 const ForwardConfig& config, SliceForward& forward, WireFormat partial_format) {
    const WorkerOptions& options = w.options;
    const std::string peer = channel.peer();
    const int64_t n_embd = model.hparams().n_embd;
    std::vector<float> h, partial_float;
    std::vector<double> partial(static_cast<size_t>(forward.n_batch()) * n_embd);
    std::vector<float> head_logits;  // grows once, to the largest batch of logits asked for
    uint64_t steps = 0;
    std::vector<SeqRun> runs;      // the last kSeqRuns
    double compute_seconds = 0.0;  // decoding, computing and encoding steps
    std::vector<uint8_t> out;
    std::mutex send_mutex;
    Heartbeat heartbeat(channel, send_mutex);
    // Time from a reply to the next step (gaps between tokens included, idle
    // spells of a user typing not): what this worker waited on the root.
    double waited_seconds = 0.0, last_sent = 0.0;
    uint64_t waits = 0;
    Frame frame;
    for (;;) {
        // Idle between requests is fine (a user may be typing); a frame that
        // has started must arrive whole within its budget.
        while (!channel.poll(kHeartbeatIntervalMs)) {
        }
        channel.recv(frame);
        if (const double waited = now_seconds() - last_sent; last_sent > 0 && waited < 0.01) {
            waited_seconds += waited;
            ++waits;
        }
        const auto type = static_cast<TpMessage>(frame.type);
        if (type == TpMessage::kHeartbeat) continue;
        if (type == TpMessage::kShutdown) {
            log_peak_memory(model, slice, config, options);
            if (options.log && steps > 0) {
                options.log(fmt::format("{} steps, {:.1f} us computing each on average, {:.1f} us waiting before each",
                                        steps, compute_seconds / static_cast<double>(steps) * 1e6,
                                        waits > 0 ? waited_seconds / static_cast<double>(waits) * 1e6 : 0.0));
            }
            return;
        }
        if (type == TpMessage::kSeqRuns) {
            // The next batch's sequences: checked against this worker's
            // sequences and context when a step uses them.
            try {
                runs = decode_seq_runs(frame.payload, peer.c_str());
            } catch (const std::exception& e) {
                std::lock_guard<std::mutex> lock(send_mutex);
                send_json(channel, TpMessage::kError, {{"error", e.what()}});
                throw;
            }
            continue;
        }
        if (type != TpMessage::kAttention && type != TpMessage::kFfn && type != TpMessage::kHead) {
            throw make_error("{}: unexpected {} message", peer, tp_message_name(frame.type));
        }
        heartbeat.set_busy(true);
        const double start = now_seconds();
        try {
            const StepHeader step = decode_step(frame.payload, h, peer.c_str());
            if (step.width != n_embd || step.n_tok < 1 || step.n_tok > static_cast<uint32_t>(forward.n_batch())) {
                throw make_error("{}: step of {} rows x {} does not fit this worker (width {}, batch {})", peer,
                                 step.n_tok, step.width, n_embd, forward.n_batch());
            }
            const int n_tok = static_cast<int>(step.n_tok);
            StepHeader reply_header = step;
            reply_header.format = partial_format;
            if (type != TpMessage::kHead &&
                (step.layer < static_cast<uint32_t>(slice.layer_begin) || step.layer >= static_cast<uint32_t>(slice.layer_end))) {
                throw make_error("{}: step for layer {}, outside this worker's layers {}..{}", peer, step.layer,
                                 slice.layer_begin, slice.layer_end);
            }
            if (type == TpMessage::kHead) {
                // Logits are floats (F32 where the partials are exact).
                if (partial_format == WireFormat::F64) reply_header.format = WireFormat::F32;
                const int64_t rows = slice.n_vocab_rows();
                if (rows == 0) throw make_error("{}: asked for logits, but this rank holds no rows of the head", peer);
                head_logits.resize(std::max(head_logits.size(), static_cast<size_t>(n_tok * rows)));
                forward.head_rows(h.data(), n_tok, head_logits.data(), rows);
                reply_header.width = static_cast<uint32_t>(rows);
                encode_step(reply_header, head_logits.data(), out);
            } else if (type == TpMessage::kAttention && (step.flags & kStepOverRuns) != 0) {
                int64_t rows = 0;
                for (const SeqRun& r : runs) rows += r.n_tok;
                if (runs.empty() || rows != n_tok) {
                    throw make_error("{}: step of {} rows over runs of {} rows", peer, n_tok, rows);
                }
                forward.attention_partial(static_cast<int>(step.layer), h.data(), runs, partial.data());
            } else if (type == TpMessage::kAttention) {
                if (static_cast<uint64_t>(step.pos0) + step.n_tok > static_cast<uint64_t>(forward.n_ctx())) {
                    throw make_error("{}: positions {}..{} exceed the context of {}", peer, step.pos0,
                                     static_cast<uint64_t>(step.pos0) + step.n_tok, forward.n_ctx());
                }
                forward.attention_partial(static_cast<int>(step.layer), h.data(), static_cast<int>(step.pos0), n_tok,
                                          partial.data());
            } else {
                forward.ffn_partial(static_cast<int>(step.layer), h.data(), n_tok, partial.data());
            }
            if (type != TpMessage::kHead) {
                const size_t n = static_cast<size_t>(n_tok) * n_embd;
                if (partial_format == WireFormat::F64) {
                    encode_exact_step(reply_header, partial.data(), out);
                } else {
                    partial_float.resize(std::max(partial_float.size(), n));
                    for (size_t j = 0; j < n; ++j) partial_float[j] = static_cast<float>(partial[j]);
                    encode_step(reply_header, partial_float.data(), out);
                }
            }
        } catch (const std::exception& e) {
            heartbeat.set_busy(false);
            std::lock_guard<std::mutex> lock(send_mutex);
            send_json(channel, TpMessage::kError, {{"error", e.what()}});
            throw;
        }
        heartbeat.set_busy(false);
        compute_seconds += now_seconds() - start;
        ++steps;
        std::lock_guard<std::mutex> lock(send_mutex);
        channel.send(static_cast<uint16_t>(TpMessage::kPartial), out);
        last_sent = now_seconds();
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
        if (frame.type == static_cast<uint16_t>(TpMessage::kStageHello)) {
            PreviousStage stage{std::move(channel), parse_json_message(frame, TpMessage::kStageHello, peer)};
            if (!w.state.deliver(stage, kHandshakeTimeoutMs)) {
                send_json(*stage.channel, TpMessage::kError, {{"error", "no stage here waits for a previous stage"}});
                throw make_error("a previous stage connected, but no session waits for one");
            }
            return;
        }
        const json hello = parse_json_message(frame, TpMessage::kHello, peer);
        if (!w.state.claim()) {
            send_json(*channel, TpMessage::kHelloReply,
                      {{"ok", false}, {"busy", true}, {"error", "busy: serving another root"}});
            if (options.log) options.log(fmt::format("{}: told it is busy (serving another root)", peer));
            return;
        }
        if (!options.key && options.insecure && options.log) {
            options.log(fmt::format("warning: serving {} without a key (--insecure): anyone on the network can use, "
                                    "read or impersonate this worker", peer));
        }
        try {
            serve_session(*channel, hello, w);
            if (options.log) options.log(fmt::format("session with {} ended", peer));
        } catch (const std::exception& e) {
            if (options.log) options.log(fmt::format("session with {} failed: {}", peer, e.what()));
            if (options.once) session_error = e.what();
        }
        w.state.release(options.once);
    } catch (const std::exception& e) {
        if (options.log) options.log(fmt::format("connection from {} dropped: {}", peer, e.what()));
    }
}

}  // namespace

void run_tp_worker(const WorkerOptions& options) {
    std::unique_ptr<LlamaModel> model;
    if (!options.model_path.empty()) model = std::make_unique<LlamaModel>(options.model_path);
    ThreadPool pool(options.n_threads);
    TcpListener listener(options.listen);
    if (options.on_listening) options.on_listening(listener.port());
    WorkerState state;
    const Worker w{options, model.get(), pool, state};
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
