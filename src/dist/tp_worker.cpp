#include "dist/tp_worker.h"

#include "dist/heartbeat.h"
#include "dist/planner.h"
#include "dist/speed_probe.h"
#include "dist/stage_loop.h"
#include "dist/tp_decoder.h"
#include "dist/tp_messages.h"
#include "model/slice_file.h"
#include "model/slice_forward.h"
#include "util/error.h"
#include "ops/fixed_sum.h"
#include "util/timer.h"
#include "util/system_memory.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace tessera {

namespace {

using json = nlohmann::json;

constexpr int kHandshakeTimeoutMs = 30000;
// Each direction of a shared-memory link. A token's frames (tens of KiB)
// then reuse the same few pages, warm in cache, and a prompt batch of
// partials (512 rows of F64, 8 MiB) streams through in 16 turns.
constexpr size_t kShmRingBytes = 512u << 10;

void send_json(FrameChannel& channel, TpMessage type, const json& j) {
    const std::string text = j.dump();
    channel.send(static_cast<uint16_t>(type),
                 std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

json parse_json(const Frame& frame, TpMessage expected, const std::string& peer) {
    if (frame.type != static_cast<uint16_t>(expected)) {
        throw make_error("{}: expected a {} message, got {}", peer, tp_message_name(static_cast<uint16_t>(expected)),
                         tp_message_name(frame.type));
    }
    const json j = json::parse(frame.payload.begin(), frame.payload.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw make_error("{}: malformed {} message", peer, tp_message_name(frame.type));
    return j;
}

Slice parse_slice(const json& s) {
    Slice slice;
    slice.layer_begin = s.at("layers").at(0);
    slice.layer_end = s.at("layers").at(1);
    slice.kv_head_begin = s.at("kv_heads").at(0);
    slice.kv_head_end = s.at("kv_heads").at(1);
    slice.ffn_begin = s.at("ffn").at(0);
    slice.ffn_end = s.at("ffn").at(1);
    if (s.contains("vocab")) {
        slice.vocab_begin = s.at("vocab").at(0);
        slice.vocab_end = s.at("vocab").at(1);
    }
    slice.embeds = false;
    slice.outputs = false;
    return slice;
}

// A cached slice file, if it is the one asked for (else nullptr).
std::unique_ptr<LlamaModel> open_cached_slice(const std::string& path, const std::string& fingerprint,
                                              const Slice& slice) {
    if (!std::filesystem::exists(path)) return nullptr;
    try {
        auto model = std::make_unique<LlamaModel>(path);
        const std::optional<Slice> stored = stored_slice(model->file());
        if (stored && slice_source_fingerprint(model->file()) == fingerprint &&
            describe_slice(*stored) == describe_slice(slice)) {
            return model;
        }
    } catch (const Error&) {
        // A damaged cache entry is replaced by a fresh transfer.
    }
    return nullptr;
}

// Receives a slice file from the root (kSliceData frames, then kSliceEnd with
// its size and XXH3), checks it and moves it into place.
void receive_slice_file(FrameChannel& channel, const std::string& path, const std::string& peer) {
    const std::string partial = path + ".partial";
    {
        std::ofstream out(partial, std::ios::binary | std::ios::trunc);
        if (!out) throw make_error("cannot write the slice cache file {}", partial);
        Frame frame;
        uint64_t bytes = 0;
        for (;;) {
            channel.recv(frame, kHandshakeTimeoutMs);
            if (frame.type == static_cast<uint16_t>(TpMessage::kSliceData)) {
                out.write(reinterpret_cast<const char*>(frame.payload.data()),
                          static_cast<std::streamsize>(frame.payload.size()));
                bytes += frame.payload.size();
                continue;
            }
            const json end = parse_json(frame, TpMessage::kSliceEnd, peer);
            out.close();
            if (!out || end.at("bytes").get<uint64_t>() != bytes) {
                throw make_error("{}: slice transfer incomplete ({} bytes received, {} announced)", peer, bytes,
                                 end.at("bytes").get<uint64_t>());
            }
            const uint64_t checksum = file_checksum(partial);
            if (fmt::format("{:016x}", checksum) != end.at("checksum").get<std::string>()) {
                throw make_error("{}: slice transfer corrupted (checksum {:016x} != {})", peer, checksum,
                                 end.at("checksum").get<std::string>());
            }
            break;
        }
    }
    std::filesystem::rename(partial, path);
}

// What a session's slice took, for benchmarks and memory tests.
void log_peak_memory(const LlamaModel& model, const Slice& slice, const ForwardConfig& config,
                     const WorkerOptions& options) {
    if (!options.log) return;
    const SliceFootprint share = slice_footprint(model, slice, config.n_ctx, config.kv_type);
    options.log(fmt::format("peak resident memory {:.1f} MiB; slice {:.1f} MiB of weights + {:.1f} MiB of KV cache",
                            peak_resident_memory_bytes() / 1048576.0, share.weight_bytes / 1048576.0,
                            share.kv_bytes / 1048576.0));
}

// One root's session: handshake, slice assignment, then steps until shutdown.
void serve_session(FrameChannel& channel, TcpListener& listener, const LlamaModel* full_model, ThreadPool& pool,
                   const WorkerOptions& options) {
    const std::string peer = channel.peer();
    Frame frame;
    channel.recv(frame, kHandshakeTimeoutMs);
    const json hello = parse_json(frame, TpMessage::kHello, peer);
    const std::string root_fingerprint = hello.value("fingerprint", std::string("?"));
    json reply = {{"threads", pool.size()}, {"free_memory", available_memory_bytes()}, {"has_model", full_model != nullptr}};
    if (full_model != nullptr) {
        reply["fingerprint"] = full_model->file().fingerprint_hex();
        reply["model"] = full_model->path();
        if (root_fingerprint != full_model->file().fingerprint_hex()) {
            reply["ok"] = false;
            reply["error"] = "holds a different model";
            send_json(channel, TpMessage::kHelloReply, reply);
            throw make_error("root {} runs another model (fingerprint {} != this worker's {})", peer, root_fingerprint,
                             full_model->file().fingerprint_hex());
        }
        reply["probe_seconds"] = probe_seconds(*full_model, pool);
    }
    // A root on this host may take its frames through shared memory.
    std::unique_ptr<ShmLink> link;
    if (hello.value("shm", false) && channel.peer_is_loopback()) {
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

    channel.recv(frame, kHandshakeTimeoutMs);
    const json assign = parse_json(frame, TpMessage::kAssign, peer);
    // Both sides switch after kAssign, the last frame on TCP.
    if (link && assign.value("shm", false)) {
        link->unlink();
        channel.use_shared_memory(std::move(link));
    }
    link.reset();
    Slice slice;
    ForwardConfig config;
    WireFormat partial_format = WireFormat::F32;
    std::unique_ptr<LlamaModel> slice_model;  // cache mode: this session's slice file
    std::unique_ptr<SliceForward> forward;
    std::unique_ptr<TensorParallelDecoder> group;  // a stage this worker leads as a tensor-parallel group
    const bool stage = assign.value("role", std::string("tensor")) == "stage";
    try {
        slice = parse_slice(assign.at("slice"));
        slice.outputs = stage && assign.value("last", false);
        if (stage && full_model == nullptr) throw make_error("a pipeline stage needs the model file (-m)");
        config.n_ctx = assign.at("n_ctx");
        config.n_batch = assign.at("n_batch");
        config.private_weights = options.private_weights;
        config.kv_type = assign.at("kv_type") == "f32" ? QuantType::F32 : QuantType::F16;
        const int format = assign.at("partial_format").get<int>();
        if (format < 0 || format > static_cast<int>(WireFormat::F64)) throw make_error("unknown partial format {}", format);
        partial_format = static_cast<WireFormat>(format);
        if (full_model == nullptr) {
            // No model file: use the cached slice, or have the root send it once.
            std::filesystem::create_directories(options.cache_dir);
            const std::string path = options.cache_dir + "/" + slice_file_name(root_fingerprint, slice);
            slice_model = open_cached_slice(path, root_fingerprint, slice);
            if (!slice_model) {
                send_json(channel, TpMessage::kReady, {{"ok", false}, {"need_slice", true}});
                receive_slice_file(channel, path, peer);
                slice_model = open_cached_slice(path, root_fingerprint, slice);
                if (!slice_model) throw make_error("{}: the received slice file is not the slice asked for", peer);
                if (options.log) options.log(fmt::format("received and cached {}", path));
            } else if (options.log) {
                options.log(fmt::format("using the cached slice {}", path));
            }
        }
        const LlamaModel& model = full_model != nullptr ? *full_model : *slice_model;
        validate_slice(slice, model.hparams());
        const SliceFootprint need = slice_footprint(model, slice, config.n_ctx, config.kv_type);
        const uint64_t have = available_memory_bytes();
        if (need.total() > have) {
            throw make_error("its slice needs {} bytes ({} of weights, {} of KV cache) but only {} are available",
                             need.total(), need.weight_bytes, need.kv_bytes, have);
        }
        if (stage && assign.contains("group")) {
            // Hybrid plan: this stage is a tensor-parallel group led by this
            // worker, which plans the group and checks its members' memory.
            TpConfig tp;
            for (const auto& member : assign.at("group")) tp.workers.push_back(parse_host_port(member.get<std::string>()));
            if (assign.contains("group_weights")) tp.weights = assign["group_weights"].get<std::vector<double>>();
            tp.forward = config;
            tp.n_threads = pool.size();
            tp.limits = options.limits;
            tp.layer_begin = slice.layer_begin;
            tp.layer_end = slice.layer_end;
            tp.first = false;
            tp.last = slice.outputs;
            group = std::make_unique<TensorParallelDecoder>(model, tp);
        } else {
            forward = std::make_unique<SliceForward>(model, slice, config, pool);
        }
    } catch (const std::exception& e) {
        send_json(channel, TpMessage::kReady, {{"ok", false}, {"error", e.what()}});
        throw;
    }
    if (stage) {
        StageLinks links;
        links.has_prev = assign.value("prev", false);
        if (assign.contains("next") && assign["next"].is_string()) links.next = parse_host_port(assign["next"]);
        links.fingerprint = root_fingerprint;
        try {
            if (group) {
                serve_stage(channel, listener, *group, group->root_forward(), links, options.limits, options.log);
            } else {
                serve_stage(channel, listener, *forward, *forward, links, options.limits, options.log);
            }
            log_peak_memory(full_model != nullptr ? *full_model : *slice_model, slice, config, options);
        } catch (const Error& e) {
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
    const LlamaModel& model = full_model != nullptr ? *full_model : *slice_model;

    const int64_t n_embd = model.hparams().n_embd;
    std::vector<float> h, partial_float;
    std::vector<double> partial(static_cast<size_t>(forward->n_batch()) * n_embd);
    std::vector<float> head_logits;  // grows once, to the largest batch of logits asked for
    uint64_t steps = 0;
    double compute_seconds = 0.0;  // decoding, computing and encoding steps
    std::vector<uint8_t> out;
    std::mutex send_mutex;
    Heartbeat heartbeat(channel, send_mutex);
    // Time from a reply to the next step (gaps between tokens included, idle
    // spells of a user typing not): what this worker waited on the root.
    double waited_seconds = 0.0, last_sent = 0.0;
    uint64_t waits = 0;
    for (;;) {
        // Idle between requests is fine (a user may be typing); a frame that
        // has started must arrive whole within the channel's timeout.
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
        if (type != TpMessage::kAttention && type != TpMessage::kFfn && type != TpMessage::kHead) {
            throw make_error("{}: unexpected {} message", peer, tp_message_name(frame.type));
        }
        heartbeat.set_busy(true);
        const double start = now_seconds();
        try {
            const StepHeader step = decode_step(frame.payload, h, peer.c_str());
            if (step.width != n_embd || step.n_tok < 1 || step.n_tok > static_cast<uint32_t>(forward->n_batch())) {
                throw make_error("{}: step of {} rows x {} does not fit this worker (width {}, batch {})", peer,
                                 step.n_tok, step.width, n_embd, forward->n_batch());
            }
            const int n_tok = static_cast<int>(step.n_tok);
            StepHeader reply_header = step;
            reply_header.format = partial_format;
            if (type == TpMessage::kHead) {
                // Logits are floats (F32 where the partials are exact).
                if (partial_format == WireFormat::F64) reply_header.format = WireFormat::F32;
                const int64_t rows = slice.n_vocab_rows();
                if (rows == 0) throw make_error("{}: asked for logits, but this rank holds no rows of the head", peer);
                head_logits.resize(std::max(head_logits.size(), static_cast<size_t>(n_tok * rows)));
                forward->head_rows(h.data(), n_tok, head_logits.data(), rows);
                reply_header.width = static_cast<uint32_t>(rows);
                encode_step(reply_header, head_logits.data(), out);
            } else if (type == TpMessage::kAttention) {
                if (step.pos0 + step.n_tok > static_cast<uint32_t>(forward->n_ctx())) {
                    throw make_error("{}: positions {}..{} exceed the context of {}", peer, step.pos0,
                                     step.pos0 + step.n_tok, forward->n_ctx());
                }
                forward->attention_partial(static_cast<int>(step.layer), h.data(), static_cast<int>(step.pos0), n_tok,
                                           partial.data());
            } else {
                forward->ffn_partial(static_cast<int>(step.layer), h.data(), n_tok, partial.data());
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
        } catch (const Error& e) {
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

}  // namespace

void run_tp_worker(const WorkerOptions& options) {
    std::unique_ptr<LlamaModel> model;
    if (!options.model_path.empty()) model = std::make_unique<LlamaModel>(options.model_path);
    ThreadPool pool(options.n_threads);
    TcpListener listener(options.listen);
    if (options.on_listening) options.on_listening(listener.port());
    for (;;) {
        FrameChannel channel(listener.accept(-1), options.limits);
        try {
            serve_session(channel, listener, model.get(), pool, options);
            if (options.log) options.log(fmt::format("session with {} ended", channel.peer()));
        } catch (const Error& e) {
            if (options.log) options.log(fmt::format("session with {} failed: {}", channel.peer(), e.what()));
            if (options.once) throw;
        }
        if (options.once) return;
    }
}

}  // namespace tessera
