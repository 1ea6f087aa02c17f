#include "cluster/tensor_parallel/tp_decoder.h"

#include "cluster/session/json_messages.h"
#include "cluster/planner/planner.h"
#include "cluster/session/root_links.h"
#include "cluster/session/session_messages.h"
#include "cluster/planner/speed_probe.h"
#include "cluster/tensor_parallel/tp_layers.h"
#include "model/slice_file.h"
#include "ops/fixed_sum.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/system_memory.h"
#include "util/timer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

namespace tessera {

namespace {

// A worker probes its speed and maps its slice during the handshake.

std::string worker_name(const std::string& address, size_t rank) { return fmt::format("worker {} (rank {})", address, rank); }

}  // namespace

void TensorParallelDecoder::check_config(size_t n_ranks) const {
    if (!config_.weights.empty() && config_.weights.size() != n_ranks) {
        throw make_error("{} weights given for {} ranks (the root and {} workers)", config_.weights.size(), n_ranks,
                         n_ranks - 1);
    }
    if (config_.topology == PartialTopology::kReduceScatter && config_.fast) {
        throw make_error("--exchange reduce-scatter needs exact partials (not --fast)");
    }
}

TensorParallelDecoder::TensorParallelDecoder(const LlamaModel& model, const TpConfig& config)
    : config_(config), pool_(config.n_threads) {
    // Checked before any worker is reached.
    check_config(config.workers.size() + 1);
    std::vector<std::unique_ptr<ShmLink>> links;  // per worker, where one is taken
    connect_workers(model, links);
    assign_slices(model, links, nullptr);
}

TensorParallelDecoder::TensorParallelDecoder(const LlamaModel& model, const TpConfig& config, AdoptedWorkers adopted)
    : config_(config), pool_(config.n_threads) {
    adopted.check();
    const size_t n_workers = adopted.channels.size();
    check_config(n_workers + 1);
    config_.workers = adopted.addresses;
    ranks_.resize(n_workers + 1);
    ranks_[0].address = "root";
    ranks_[0].free_memory = available_memory_bytes();
    for (size_t i = 0; i < n_workers; ++i) {
        channels_.push_back(std::move(adopted.channels[i]));
        ranks_[i + 1].address = adopted.addresses[i].str();
        ranks_[i + 1].round_trip_ms = adopted.round_trip_ms[i];
        ranks_[i + 1].sealed = channels_.back()->sealed();
        ranks_[i + 1].probe_seconds = adopted.hellos[i].probe_seconds;
        ranks_[i + 1].free_memory = adopted.hellos[i].free_memory;
        ranks_[i + 1].device = adopted.hellos[i].device;
    }
    std::vector<std::unique_ptr<ShmLink>> links;
    assign_slices(model, links, &adopted);
}

void TensorParallelDecoder::connect_workers(const LlamaModel& model, std::vector<std::unique_ptr<ShmLink>>& links) {
    const TpConfig& config = config_;
    const size_t n_ranks = config.workers.size() + 1;
    ranks_.resize(n_ranks);
    ranks_[0].address = "root";
    ranks_[0].free_memory = available_memory_bytes();

    // Connect and check that every worker holds this very model.
    const std::string fingerprint = model.file().fingerprint_hex();
    const auto name = [&](size_t i) { return worker_name(config.workers[i].str(), i + 1); };
    const auto hello = [&](size_t, const FrameChannel& channel, json& message) {
        message["n_ranks"] = n_ranks;
        // Shared memory only with a worker that proved the key.
        message["shm"] = config.shared_memory && channel.sealed() && channel.peer_is_loopback();
    };
    std::vector<RootLink> nodes =
        connect_nodes(config.workers, {config.connect_timeout_ms, config.limits, config.key.get()}, fingerprint, name, hello);
    for (size_t i = 0; i < nodes.size(); ++i) {
        const size_t rank = i + 1;
        ranks_[rank].address = config.workers[i].str();
        ranks_[rank].round_trip_ms = nodes[i].round_trip_ms;
        ranks_[rank].handshake_ms = nodes[i].handshake_ms;
        ranks_[rank].sealed = nodes[i].channel->sealed();
        channels_.push_back(std::move(nodes[i].channel));
    }
    for (size_t i = 0; i < channels_.size(); ++i) {
        const std::string who = worker_name(ranks_[i + 1].address, i + 1);
        const HelloReply& f = nodes[i].hello;
        require_hello_ok(f, who, fingerprint, model.path());
        // A worker without the model file cannot time it: it counts as fast
        // as the root (negative: filled in once the root has probed itself).
        ranks_[i + 1].probe_seconds = f.probe_seconds;
        ranks_[i + 1].free_memory = f.free_memory;
        ranks_[i + 1].device = f.device;
        // A worker on this host offers a shared-memory link; if its segment
        // cannot be opened here (another machine behind a relay, another
        // user, no /dev/shm) the frames stay on TCP.
        if (!f.shm_name.empty() && channels_[i]->sealed()) {
            try {
                links.resize(channels_.size());
                links[i] = ShmLink::open(f.shm_name, f.shm_nonce);
                links[i]->unlink();  // mapped on both sides now: nothing to leave behind in /dev/shm
            } catch (const std::exception&) {
                links[i].reset();
            }
        }
    }
}

void TensorParallelDecoder::assign_slices(const LlamaModel& model, std::vector<std::unique_ptr<ShmLink>>& links,
                                          const AdoptedWorkers* adopted) {
    const TpConfig& config = config_;
    const ModelHParams& hp = model.hparams();
    const size_t n_ranks = channels_.size() + 1;
    const PartialTopology topology = config.topology.value_or(auto_topology(static_cast<int>(n_ranks), !config.fast));

    // Plan: shares follow measured speed unless weights are given.
    ranks_[0].probe_seconds = probe_seconds(model, pool_);
    for (TpRankInfo& r : ranks_) {
        if (r.probe_seconds <= 0) r.probe_seconds = ranks_[0].probe_seconds;
    }
    std::vector<double> weights = config.weights;
    if (weights.empty()) {
        std::vector<double> seconds;
        for (const TpRankInfo& r : ranks_) seconds.push_back(r.probe_seconds);
        weights = weights_from_probes(seconds);
    }
    const int layer_end = config.layer_end > 0 ? config.layer_end : hp.n_layer;
    if (config.layer_begin < 0 || config.layer_begin >= layer_end || layer_end > hp.n_layer) {
        throw make_error("layers {}..{} are not a block of this model's {} layers", config.layer_begin, layer_end,
                         hp.n_layer);
    }
    const ReductionUnits units = reduction_units(model);
    const bool whole_model = config.first && config.last && config.layer_begin == 0 && layer_end == hp.n_layer;
    // The GPU forward computes one rectangle of the experts: no mixed or
    // balanced split where a rank runs on one.
    bool all_cpu = !config.root_device;
    for (const TpRankInfo& r : ranks_) all_cpu = all_cpu && r.device.empty();
    const int n_cached = config.forward.n_ctx * std::max(1, config.forward.n_seq);
    const auto scratch = [&](const Slice& s) {
        return slice_scratch_bytes(hp, s, config.forward.n_batch, config.forward.n_ctx, config.n_threads);
    };
    // A group of the whole model also splits the output head's rows; a stage
    // of a pipeline keeps its head whole on its root.
    const GroupScope scope = whole_model && config.shard_vocab
                                 ? GroupScope{}
                                 : GroupScope::stage({config.layer_begin, layer_end}, config.first, config.last);
    if (config.moe_split) {
        moe_split_ = *config.moe_split;
    } else {
        // The balanced split where every host has the memory for its ranks'
        // shares of it (workers on this host, as --local starts, share the
        // root's memory; a worker's working buffers counted as the root's).
        // A pipeline stage's leader decides for its group: the root of the
        // pipeline never hears the members' memory.
        moe_split_ = choose_moe_split_within_memory(hp, weights, units, all_cpu, scope, [&](std::span<const Slice> slices) {
            std::vector<HostShare> shares;
            for (size_t r = 0; r < slices.size(); ++r) {
                const bool here = r == 0 || channels_[r - 1]->peer_is_loopback();
                shares.push_back({here ? std::string() : config_.workers[r - 1].host,
                                  slice_footprint(model, slices[r], n_cached, config.forward.kv_types).total() +
                                      scratch(slices[r]),
                                  ranks_[r].free_memory});
            }
            return shares_fit_hosts(shares);
        });
    }
    const std::vector<Slice> plan = plan_group(hp, scope, weights, units, moe_split_);
    uint64_t root_weight_budget = UINT64_MAX;
    for (size_t r = 0; r < n_ranks; ++r) {
        ranks_[r].slice = plan[r];
        ranks_[r].weight = weights[r];
        const SliceFootprint f = slice_footprint(model, plan[r], n_cached, config.forward.kv_types);
        ranks_[r].footprint_bytes = f.total();
        // Workers also count their working buffers themselves (the root knows its own).
        const uint64_t extra = r == 0 ? scratch(plan[r]) : 0;
        const MemoryFit fit = memory_fit(f, extra, ranks_[r].free_memory, config.forward.offload);
        if (!fit.fits) {
            throw PlanRefused(fmt::format("plan refused: rank {} ({}) {} ({} bytes short)", r, ranks_[r].address,
                                          describe_shortfall(f, extra, ranks_[r].free_memory, config.forward.offload),
                                          f.total() + extra - std::min(f.total() + extra, ranks_[r].free_memory)));
        }
        ranks_[r].streamed_bytes = fit.streamed_bytes;
        if (r == 0) root_weight_budget = fit.weight_budget;
    }

    const WireFormat partial_format = config.fast ? WireFormat::Q8_0 : WireFormat::Fixed;
    // Every rank's address, for the mesh the workers build among themselves.
    json mesh = json::array();
    for (const HostPort& w : config.workers) mesh.push_back(w.str());
    const std::string token = new_mesh_token();
    // A peer may take this long per row of a step before it counts as
    // stalled: a hundred times the slowest rank's probe (one layer's gate and
    // up products for one position: about a step's work per row).
    double slowest_probe = 0.0;
    for (const TpRankInfo& r : ranks_) slowest_probe = std::max(slowest_probe, r.probe_seconds);
    row_budget_ms_ = config.step_timeout_ms > 0 ? 0.0 : 100.0 * slowest_probe * 1e3;
    for (size_t i = 0; i < channels_.size(); ++i) {
        const Slice& s = plan[i + 1];
        json assign = {{"slice", slice_to_json(s)},
                       {"n_ctx", config.forward.n_ctx},
                       {"n_batch", config.forward.n_batch},
                       {"n_seq", config.forward.n_seq},
                       {"kv_type_k", kv_type_text(config.forward.kv_types.k)},
                       {"kv_type_v", kv_type_text(config.forward.kv_types.v)},
                       {"partial_format", static_cast<int>(partial_format)},
                       {"rank", i + 1},
                       {"mesh", mesh},
                       {"mesh_token", token},
                       {"row_budget_ms", row_budget_ms_},
                       {"partial_bands", std::max(1, config.partial_bands)},
                       {"exchange", partial_topology_name(topology)},
                       {"shm", i < links.size() && links[i] != nullptr}};
        if (config.forward.sparse.enabled) assign["sparse"] = sparse_json(config.forward.sparse);
        if (config.forward.track_attention) assign["track_attention"] = true;
        if (config.forward.offload) assign["offload"] = true;
        if (adopted != nullptr) {
            assign["handoff_positions"] = adopted->handoff_positions;
            assign["handoff_from"] = adopted->handoff_from[i];
        }
        send_json(*channels_[i], SessionMessage::kAssign, assign);
        if (adopted != nullptr && adopted->after_assign) adopted->after_assign(i, *channels_[i], plan[i + 1]);
        // Both sides switch after kAssign, the last frame on TCP.
        if (i < links.size() && links[i] != nullptr) {
            channels_[i]->use_shared_memory(std::move(links[i]));
            ranks_[i + 1].shared_memory = true;
        }
    }
    for (size_t i = 0; i < channels_.size(); ++i) {
        const std::string who = worker_name(ranks_[i + 1].address, i + 1);
        json ready = recv_json(*channels_[i], SessionMessage::kReady, who, kSetupReplyTimeoutMs);
        if (!JsonFields(ready, who, "ready").boolean("ok", false) &&
            JsonFields(ready, who, "ready").boolean("need_slice", false)) {
            send_slice(model, i, plan[i + 1]);
            ready = recv_json(*channels_[i], SessionMessage::kReady, who, kSetupReplyTimeoutMs);
        }
        const JsonFields r(ready, who, "ready");
        if (!r.boolean("ok", false)) throw make_error("{} refused its slice: {}", who, r.string("error", 4096, "?"));
    }
    // Every worker now waits in its step loop, watching for the root's
    // silence: the beat starts before the root loads its own share, which
    // takes longer than a worker's --root-silence-ms on a large model.
    beat_ = beat_to_nodes(channels_);
    before_root_load();
    ForwardConfig root = config.forward;
    root.weight_budget = root_weight_budget;
    if (config.root_device) {
        ranks_[0].device = config.root_device_name;
        forward_ = config.root_device(model, plan[0], root);
    } else {
        forward_ = std::make_unique<SliceForward>(model, plan[0], root, pool_);
    }
    const size_t rows = static_cast<size_t>(forward_->n_batch()) * hp.n_embd;
    x_.resize(rows);
    h_.resize(rows);
    std::vector<ExchangePeer> peers(n_ranks);
    for (size_t i = 0; i < channels_.size(); ++i) {
        // Room for two steps' partials in flight each way (partial_exchange.cpp).
        channels_[i]->set_socket_buffers(kMeshSocketBufferBytes);
        peers[i + 1] = {channels_[i].get(), worker_name(ranks_[i + 1].address, i + 1), nullptr};
    }
    exchange_ = std::make_unique<PartialExchange>(0, std::move(peers), !config.fast);
    exchange_->set_bands(config.partial_bands);
    exchange_->set_topology(topology);
    direct_sent_.assign(n_ranks, 0);
    direct_received_.assign(n_ranks, 0);
    for (size_t r = 1; r < n_ranks; ++r) {
        if (plan[r].n_vocab_rows() > 0) head_workers_.push_back(r - 1);
    }
}

void TensorParallelDecoder::send_slice(const LlamaModel& model, size_t worker, const Slice& slice) {
    // Written to a temporary file by the GGUF writer, then streamed in frames
    // well under the channel's size cap.
    const std::string path = fmt::format("{}/tessera-slice-{}-{}.gguf", std::filesystem::temp_directory_path().string(),
                                         ::getpid(), worker + 1);
    write_slice_file(model, slice, path);
    const uint64_t checksum = file_checksum(path);
    send_json(*channels_[worker], SessionMessage::kSliceBegin, {{"bytes", std::filesystem::file_size(path)}});
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> chunk(8u << 20);
    uint64_t bytes = 0;
    const double total_mib = static_cast<double>(std::filesystem::file_size(path)) / 1048576.0;
    // Tiny slices (tests, toy models) go too fast to be worth a display.
    std::optional<Progress> progress;
    if (total_mib >= 16.0) progress.emplace(fmt::format("sending rank {} its slice", worker + 1), total_mib, "MiB");
    while (in) {
        in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
        const auto n = static_cast<size_t>(in.gcount());
        if (n == 0) break;
        channels_[worker]->send(static_cast<uint16_t>(SessionMessage::kSliceData), std::span<const uint8_t>(chunk.data(), n));
        bytes += n;
        if (progress) progress->update(static_cast<double>(bytes) / 1048576.0);
    }
    if (progress) progress->finish();
    std::filesystem::remove(path);
    send_json(*channels_[worker], SessionMessage::kSliceEnd, {{"bytes", bytes}, {"checksum", fmt::format("{:016x}", checksum)}});
    stats_.slice_bytes_sent += bytes;
}

TensorParallelDecoder::~TensorParallelDecoder() {
    beat_.reset();  // no beat after the goodbye
    for (auto& channel : channels_) {
        try {
            channel->send(static_cast<uint16_t>(SessionMessage::kShutdown), std::span<const uint8_t>());
        } catch (const Error&) {
            // A worker that is already gone needs no goodbye.
        }
    }
}

int TensorParallelDecoder::step_deadline_ms(int n_tok) const {
    if (config_.step_timeout_ms > 0) return config_.step_timeout_ms;
    return exchange_deadline_ms(config_.limits.io_timeout_ms, row_budget_ms_, n_tok);
}

std::string TensorParallelDecoder::receive_reply(size_t worker, SessionMessage want, int deadline_ms) {
    FrameChannel& channel = *channels_[worker];
    std::string who = worker_name(ranks_[worker + 1].address, worker + 1);
    const double start = now_seconds();
    for (;;) {
        try {
            channel.recv(frame_);
        } catch (const Error& e) {
            throw make_error("{} stopped responding: {}", who, e.what());
        }
        direct_received_[worker + 1] += frame_.payload.size();
        const auto type = static_cast<SessionMessage>(frame_.type);
        if (type == SessionMessage::kHeartbeat) {
            // Beats prove the process lives, not that it makes progress.
            if ((now_seconds() - start) * 1e3 > deadline_ms) {
                throw make_error("{} sends heartbeats but no result for {} ms (--step-timeout-ms)", who, deadline_ms);
            }
            continue;
        }
        if (type == SessionMessage::kError) parse_json_message(frame_, want, who);  // throws "failed: ..."
        if (type != want) throw make_error("{}: unexpected {} message", who, tp_message_name(frame_.type));
        return who;
    }
}

void TensorParallelDecoder::receive_logits(size_t worker, const StepHeader& sent, uint32_t width) {
    const std::string who = receive_reply(worker, SessionMessage::kPartial, step_deadline_ms(static_cast<int>(sent.n_tok)));
    const StepHeader got = decode_step(frame_.payload, received_, who.c_str());
    if (got.layer != sent.layer || got.n_tok != sent.n_tok || got.width != width) {
        throw make_error("{}: logits for layer {} ({} rows of {}) where layer {} ({} rows of {}) were due", who,
                         got.layer, got.n_tok, got.width, sent.layer, sent.n_tok, width);
    }
    require_finite(received_.data(), received_.size(), who);
}

void TensorParallelDecoder::send_to(size_t worker, SessionMessage type, std::span<const uint8_t> payload) {
    try {
        channels_[worker]->send(static_cast<uint16_t>(type), payload);
    } catch (const Error& e) {
        throw make_error("{}: {}", worker_name(ranks_[worker + 1].address, worker + 1), e.what());
    }
    direct_sent_[worker + 1] += payload.size();
}

void TensorParallelDecoder::head(const float* x, int n_tok, float* logits) {
    const ModelHParams& hp = forward_->hparams();
    forward_->norm_output_input(x, h_.data(), n_tok);
    // Every rank computes the logits of its vocab rows; the root places the
    // workers' rows beside its own. Each logit is the same dot product a
    // single node computes, so the exact mode stays exact.
    const StepHeader header{static_cast<uint32_t>(hp.n_layer), 0, static_cast<uint32_t>(n_tok),
                            static_cast<uint32_t>(hp.n_embd), config_.fast ? WireFormat::Q8_0 : WireFormat::F32};
    if (need_.take_change(message_)) {
        for (size_t w : head_workers_) send_to(w, SessionMessage::kHeadNeed, message_);
    }
    encode_step(header, h_.data(), message_);
    for (size_t w : head_workers_) send_to(w, SessionMessage::kHead, message_);
    const double start = now_seconds();
    forward_->head_rows(h_.data(), n_tok, logits, hp.n_vocab);
    const double computed = now_seconds();
    for (size_t w : head_workers_) {
        const Slice& s = ranks_[w + 1].slice;
        if (const LogitsNeed* need = need_.get()) {
            const std::string who = receive_reply(w, SessionMessage::kCandidates, step_deadline_ms(n_tok));
            place_candidates(frame_.payload, n_tok, s.n_vocab_rows(), s.vocab_begin, *need, logits,
                             static_cast<size_t>(hp.n_vocab), who.c_str());
            continue;
        }
        receive_logits(w, header, static_cast<uint32_t>(s.n_vocab_rows()));
        for (int t = 0; t < n_tok; ++t) {
            std::copy_n(received_.data() + static_cast<size_t>(t) * s.n_vocab_rows(), s.n_vocab_rows(),
                        logits + static_cast<size_t>(t) * hp.n_vocab + s.vocab_begin);
        }
    }
    stats_.own_seconds += computed - start;
    stats_.wait_seconds += now_seconds() - computed;
    update_stats();
}

void TensorParallelDecoder::set_logits_need(const LogitsNeed* need) { need_.set(need); }

void TensorParallelDecoder::update_stats() {
    // The root's own messages to each worker, and the exchange's partials.
    stats_.bytes_sent = stats_.bytes_received = 0;
    stats_.banded_syncs = exchange_->banded_exchanges();
    const auto& peers = exchange_->peer_stats();
    for (size_t r = 1; r < ranks_.size(); ++r) {
        ranks_[r].bytes_sent = direct_sent_[r] + peers[r].bytes_sent;
        ranks_[r].bytes_received = direct_received_[r] + peers[r].bytes_received;
        stats_.bytes_sent += ranks_[r].bytes_sent;
        stats_.bytes_received += ranks_[r].bytes_received;
    }
}

void TensorParallelDecoder::compact_context(int seq, std::span<const int> kept, int n_used) {
    forward_->compact_context(seq, kept, n_used);  // checks the values first
    encode_compaction(seq, kept, n_used, message_);
    for (size_t i = 0; i < channels_.size(); ++i) send_to(i, SessionMessage::kShift, message_);
}

void TensorParallelDecoder::add_attention_mass(int seq, int n_used, int64_t* totals) {
    forward_->add_attention_mass(seq, n_used, totals);
    encode_mass_request(seq, n_used, nullptr, message_);
    for (size_t i = 0; i < channels_.size(); ++i) send_to(i, SessionMessage::kMass, message_);
    for (size_t i = 0; i < channels_.size(); ++i) {
        const std::string who = receive_reply(i, SessionMessage::kMass, step_deadline_ms(n_used));
        add_mass(frame_.payload, n_used, totals, who.c_str());
    }
}

void TensorParallelDecoder::forward_layers(float* x, int pos0, int n_tok) {
    const SeqRun run{0, pos0, n_tok};
    forward_layers(x, std::span<const SeqRun>(&run, 1));
}

void TensorParallelDecoder::forward_layers(float* x, std::span<const SeqRun> runs) {
    // Checked here, before any rank is sent a step: a refused batch leaves
    // the group in step.
    const int n_tok = forward_->check_runs(runs);
    const int64_t n_embd = forward_->hparams().n_embd;
    // Every rank starts the batch from the same residual rows.
    encode_seq_runs(runs, message_);
    for (size_t i = 0; i < channels_.size(); ++i) send_to(i, SessionMessage::kSeqRuns, message_);
    const StepHeader header{static_cast<uint32_t>(forward_->slice().layer_begin), 0, static_cast<uint32_t>(n_tok),
                            static_cast<uint32_t>(n_embd), WireFormat::F32};
    encode_step(header, x, message_);
    for (size_t i = 0; i < channels_.size(); ++i) send_to(i, SessionMessage::kResidual, message_);
    TpLayerTimes times;
    times.peer_seconds.assign(ranks_.size(), 0.0);
    run_tp_layers(*forward_, *exchange_, x, runs, step_deadline_ms(n_tok), scratch_, times);
    ranks_[0].steps += times.syncs;
    ranks_[0].step_seconds += times.compute_seconds;
    for (size_t r = 1; r < ranks_.size(); ++r) {
        ranks_[r].steps += times.syncs;
        ranks_[r].step_seconds += times.peer_seconds[r];
    }
    stats_.syncs += times.syncs;
    stats_.own_seconds += times.compute_seconds;
    stats_.wait_seconds += times.wait_seconds;
    stats_.attention_wait_seconds += times.attention_wait_seconds;
    stats_.ffn_wait_seconds += times.ffn_wait_seconds;
    update_stats();
}

const float* TensorParallelDecoder::eval_seqs(std::span<const SeqEval> evals) {
    if (!config_.first || !config_.last) throw make_error("internal: eval on a group that is one stage of a pipeline");
    const ModelHParams& hp = forward_->hparams();
    const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
    SeqBatches batches(evals, forward_->n_batch());
    seq_logits_.resize(batches.output_rows() * n_vocab);
    while (batches.next(batch_)) {
        forward_->embed(batch_.tokens, x_.data());
        forward_layers(x_.data(), batch_.runs);
        if (batch_.rows.empty()) continue;
        batch_.gather_rows(x_.data(), hp.n_embd, last_x_);
        head_out_.resize(batch_.rows.size() * n_vocab);
        head(last_x_.data(), static_cast<int>(batch_.rows.size()), head_out_.data());
        batch_.scatter_logits(head_out_.data(), n_vocab, seq_logits_.data());
    }
    return seq_logits_.data();
}

// eval and eval_all are one sequence's eval_seqs: the same batches, syncs
// and head.
const float* TensorParallelDecoder::eval(std::span<const int32_t> tokens, int pos) {
    const SeqEval e{0, pos, tokens, false};
    return eval_seqs(std::span<const SeqEval>(&e, 1));
}

const float* TensorParallelDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    const SeqEval e{0, pos, tokens, true};
    return eval_seqs(std::span<const SeqEval>(&e, 1));
}

}  // namespace tessera
