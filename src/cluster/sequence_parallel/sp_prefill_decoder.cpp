#include "cluster/sequence_parallel/sp_prefill_decoder.h"

#include "cluster/session/heartbeat.h"
#include "cluster/session/root_links.h"

#include "cluster/session/json_messages.h"
#include "cluster/sequence_parallel/kv_handoff.h"
#include "cluster/planner/planner.h"
#include "cluster/session/session_messages.h"
#include "cluster/session/messages.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/timer.h"

#include <poll.h>

#include <algorithm>

namespace tessera {

namespace {


std::string node_name(const std::string& address, size_t node) { return fmt::format("node {} ({})", node, address); }

}  // namespace

SpPrefillDecoder::SpPrefillDecoder(const LlamaModel& model, const SpPrefillConfig& config)
    : config_(config),
      model_(model),
      hparams_(model.hparams()),
      local_(std::make_unique<LocalDecoder>(model, config.forward, config.n_threads)),
      codec_(std::make_unique<SpRowCodec>(local_->forward(), config.codebooks.get())) {
    const ModelHParams& hp = model.hparams();
    n_ctx_ = local_->n_ctx();
    row_bytes_ = local_->forward().kv_rows_bytes(1);
    const size_t n_nodes = config.workers.size() + 1;
    if (!config.weights.empty() && config.weights.size() != n_nodes) {
        throw make_error("{} weights given for {} nodes", config.weights.size(), n_nodes);
    }
    if (config.forward.n_seq != 1 || config.forward.track_attention) {
        throw make_error("sequence-parallel prefill keeps one sequence and does not track attention (no --parallel, "
                         "no --context-full evict)");
    }
    if (config.group && config.pipeline) throw make_error("internal: generation handed to a group and a pipeline");
    if (config.codebooks) {
        config.codebooks->require_model(model.file().fingerprint_hex(), hp.n_layer, hp.n_head_kv * hp.head_dim);
    }
    nodes_.resize(n_nodes);
    held_.assign(n_nodes, 0);
    nodes_[0].address = "root";
    for (size_t i = 0; i < n_nodes; ++i) nodes_[i].weight = config.weights.empty() ? 1.0 : config.weights[i];
    const std::string fingerprint = model.file().fingerprint_hex();
    const auto name = [&](size_t i) { return node_name(config.workers[i].str(), i + 1); };
    std::vector<RootLink> links = connect_nodes(config.workers, {config.connect_timeout_ms, config.limits, config.key.get()},
                                                fingerprint, name, [](size_t, const FrameChannel&, json&) {});
    for (size_t i = 0; i < links.size(); ++i) {
        nodes_[i + 1].address = config.workers[i].str();
        nodes_[i + 1].round_trip_ms = links[i].round_trip_ms;
        channels_.push_back(std::move(links[i].channel));
    }
    // Every node holds the whole model and a whole cache.
    const Slice whole = full_slice(hp);
    const SliceFootprint need = slice_footprint(model, whole, config.forward.n_ctx, config.forward.kv_types);
    for (size_t i = 0; i < channels_.size(); ++i) {
        const std::string who = name(i);
        const HelloReply& f = links[i].hello;
        require_hello_ok(f, who, fingerprint, model.path());
        if (!f.has_model) throw make_error("{} has no model file: sequence-parallel prefill needs the whole model on every node", who);
        hellos_.push_back(f);
        if (need.total() > f.free_memory) {
            throw PlanRefused(fmt::format("plan refused: {} needs {} bytes ({} of weights, {} of KV cache) but has {} "
                                          "available ({} bytes short)", who, need.total(), need.weight_bytes,
                                          need.kv_bytes, f.free_memory, need.total() - f.free_memory));
        }
        json assign = {{"role", "sequence"},
                       {"slice", slice_to_json(whole)},
                       {"n_ctx", config.forward.n_ctx},
                       {"n_batch", config.forward.n_batch},
                       {"kv_type_k", kv_type_text(config.forward.kv_types.k)},
                       {"kv_type_v", kv_type_text(config.forward.kv_types.v)},
                       {"partial_format", 0}};
        if (config.forward.sparse.enabled) assign["sparse"] = sparse_json(config.forward.sparse);
        if (config.codebooks) assign["codebooks"] = config.codebooks->digest();
        send_json(*channels_[i], SessionMessage::kAssign, assign);
    }
    for (size_t i = 0; i < channels_.size(); ++i) {
        const std::string who = node_name(nodes_[i + 1].address, i + 1);
        const json ready = recv_json(*channels_[i], SessionMessage::kReady, who, kSetupReplyTimeoutMs);
        const JsonFields r(ready, who, "ready");
        if (!r.boolean("ok", false)) throw make_error("{} refused its role: {}", who, r.string("error", 4096, "?"));
    }
    beat_ = beat_to_nodes(channels_);
}

std::string SpPrefillDecoder::describe_exchange() const {
    if (!config_.codebooks) {
        return fmt::format("exact K/V rows, {} bytes a position and layer; the root's cache holds them as computed",
                           row_bytes_);
    }
    const KvCodebooks& b = *config_.codebooks;
    return fmt::format("codebook indices, {} bits a position and layer ({} groups, {} codes; exact rows: {} bits); the "
                       "root's cache of the other nodes' positions is rebuilt from them", b.bits_per_position(),
                       b.groups(), b.codes(), 8 * row_bytes_);
}

SpPrefillDecoder::~SpPrefillDecoder() {
    beat_.reset();  // no beat after the goodbye
    for (auto& channel : channels_) {
        try {
            channel->send(static_cast<uint16_t>(SessionMessage::kShutdown), std::span<const uint8_t>());
        } catch (const Error&) {
            // A node that is already gone needs no goodbye.
        }
    }
}

void SpPrefillDecoder::set_logits_need(const LogitsNeed* need) {
    need_ = need != nullptr ? std::optional<LogitsNeed>(*need) : std::nullopt;
    if (handed_ != nullptr) handed_->set_logits_need(need);
}

Decoder& SpPrefillDecoder::generator(int pos) {
    if (handed_ != nullptr) return *handed_;
    if (hands_off() && pos > 0 && pos <= n_ctx_) {
        hand_off(pos);
        handed_->set_logits_need(need_ ? &*need_ : nullptr);
        return *handed_;
    }
    root_alone_from(pos);
    return *local_;
}

void SpPrefillDecoder::root_alone_from(int pos) {
    for (int& held : held_) held = std::min(held, std::max(pos, 0));
}

const float* SpPrefillDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    return generator(pos).eval_all(tokens, pos);
}

const float* SpPrefillDecoder::eval_seqs(std::span<const SeqEval> evals) {
    int pos = n_ctx_;
    for (const SeqEval& e : evals) pos = std::min(pos, e.pos);
    return generator(evals.empty() ? 0 : pos).eval_seqs(evals);
}

void SpPrefillDecoder::compact_context(int seq, std::span<const int> kept, int n_used) {
    generator(n_used).compact_context(seq, kept, n_used);
    if (handed_ == nullptr) root_alone_from(0);  // every position may have moved
}

void SpPrefillDecoder::add_attention_mass(int seq, int n_used, int64_t* totals) {
    Decoder& decoder = handed_ != nullptr ? *handed_ : static_cast<Decoder&>(*local_);
    decoder.add_attention_mass(seq, n_used, totals);
}

void SpPrefillDecoder::hand_off(int positions) {
    // A handoff that failed took the channels with it: no second try.
    if (channels_.size() + 1 < nodes_.size()) throw make_error("the nodes were lost in a failed handoff");
    const double start = now_seconds();
    const int n_batch = local_->forward().n_batch();
    AdoptedWorkers adopted;
    beat_.reset();  // the group or pipeline that adopts the channels beats on them
    adopted.channels = std::move(channels_);
    channels_.clear();
    adopted.hellos = hellos_;
    adopted.addresses = config_.workers;
    for (size_t i = 1; i < nodes_.size(); ++i) {
        adopted.round_trip_ms.push_back(nodes_[i].round_trip_ms);
        adopted.handoff_from.push_back(std::min(held_[i], positions));
    }
    adopted.handoff_positions = positions;
    // The rows each node's cache lacks, of the layers it keeps, as prefill sends them.
    adopted.after_assign = [this, from = adopted.handoff_from, positions, n_batch](size_t worker, FrameChannel& channel,
                                                                                  const Slice& slice) {
        const size_t node = worker + 1;
        for (int layer = slice.layer_begin; layer < slice.layer_end; ++layer) {
            for (int b = from[worker]; b < positions; b += n_batch) {
                codec_->encode(layer, b, std::min(n_batch, positions - b), message_);
                try {
                    channel.send(static_cast<uint16_t>(SessionMessage::kSpRows), message_);
                } catch (const Error& e) {
                    throw make_error("{}: {}", node_name(nodes_[node].address, node), e.what());
                }
                nodes_[node].bytes_sent += message_.size();
                handoff_.bytes_sent += message_.size();
            }
        }
    };
    SliceForward* root = nullptr;
    if (config_.group) {
        TpConfig tp = *config_.group;
        tp.forward = config_.forward;
        tp.n_threads = config_.n_threads;
        tp.limits = config_.limits;
        tp.key = config_.key;
        if (tp.weights.empty()) tp.weights = config_.weights;
        group_ = std::make_unique<TensorParallelDecoder>(model_, tp, std::move(adopted));
        root = dynamic_cast<SliceForward*>(&group_->root_forward());  // a CPU rank: --prefill sp takes no --device
        handed_ = group_.get();
    } else {
        PipelineConfig pc = *config_.pipeline;
        pc.forward = config_.forward;
        pc.n_threads = config_.n_threads;
        pc.limits = config_.limits;
        pc.key = config_.key;
        if (pc.weights.empty() && pc.layers.empty()) pc.weights = config_.weights;
        pipeline_ = std::make_unique<PipelineDecoder>(model_, pc, std::move(adopted));
        root = pipeline_->root_forward();
        handed_ = pipeline_.get();
    }
    // The root's own rows, then the whole model goes.
    const HeldKvRows rows = take_kv_rows(local_->forward(), root->slice(), positions);
    codec_.reset();
    local_.reset();
    put_kv_rows(*root, rows);
    handoff_.positions = positions;
    handoff_.seconds = now_seconds() - start;
}

const float* SpPrefillDecoder::eval(std::span<const int32_t> tokens, int pos) {
    const ModelHParams& hp = hparams_;
    const int n = static_cast<int>(tokens.size());
    if (handed_ != nullptr || channels_.empty() || n <= local_->forward().n_batch() || pos < 0 ||
        static_cast<int64_t>(pos) + n > n_ctx()) {
        return generator(pos).eval(tokens, pos);  // (errors included)
    }
    std::vector<double> weights;
    for (const SpNodeInfo& node : nodes_) weights.push_back(node.weight);
    // Later positions attend to more of the prompt: chunks are cut by cost,
    // not by position count, so the last node is not the slowest.
    const int n_batch = local_->forward().n_batch();
    const std::vector<double> costs =
        prefill_batch_costs(pos, n, n_batch, prefill_cost_model(hp, local_->forward().sparse()));
    chunks_ = plan_prompt_chunks(pos, n, n_batch, weights, costs);
    logits_node_ = 0;
    for (size_t i = 0; i < chunks_.size(); ++i) {
        nodes_[i].last_chunk = chunks_[i];
        if (chunks_[i].n_tok > 0) logits_node_ = i;
    }
    if (logits_node_ == 0) {
        root_alone_from(pos);
        return local_->eval(tokens, pos);
    }
    ++prompts_;
    received_.assign(chunks_.size(), std::vector<int>(static_cast<size_t>(hp.n_layer), 0));
    have_logits_ = false;
    // Each node's chunk, then the history before the prompt (rows the root
    // already holds), every layer's.
    for (size_t i = 1; i < chunks_.size(); ++i) {
        const PromptChunk& c = chunks_[i];
        if (c.n_tok == 0) continue;
        const std::span<const int32_t> own = tokens.subspan(static_cast<size_t>(c.pos0 - pos), static_cast<size_t>(c.n_tok));
        encode_sp_chunk(c.pos0, i == logits_node_ ? kSpWantLogits : 0, own, message_);
        channels_[i - 1]->send(static_cast<uint16_t>(SessionMessage::kSpChunk), message_);
        nodes_[i].bytes_sent += message_.size();
    }
    if (pos > 0) {
        for (int layer = 0; layer < hp.n_layer; ++layer) send_rows(layer, 0, pos, 0);
    }
    if (chunks_[0].n_tok > 0) run_first_chunk(tokens.subspan(0, static_cast<size_t>(chunks_[0].n_tok)), chunks_[0]);
    // Heartbeats prove a node alive, not that its rows move: silence past
    // the io timeout, or heartbeats without rows past the step timeout, end
    // the prompt with the nodes named.
    double last_heard = now_seconds(), last_progress = last_heard;
    while (!done()) {
        const uint64_t before = progress_;
        if (service(1000)) last_heard = now_seconds();
        if (progress_ != before) last_progress = now_seconds();
        const double now = now_seconds();
        if ((now - last_heard) * 1e3 > config_.limits.io_timeout_ms) {
            throw make_error("{} sent nothing for {} ms (stalled or unreachable)", awaited(), config_.limits.io_timeout_ms);
        }
        if ((now - last_progress) * 1e3 > config_.step_timeout_ms) {
            throw make_error("{} sends heartbeats but no rows for {} ms (--step-timeout-ms)", awaited(),
                             config_.step_timeout_ms);
        }
    }
    // Every node with a chunk now holds the positions up to its chunk's end.
    for (size_t i = 0; i < chunks_.size(); ++i) {
        held_[i] = chunks_[i].n_tok > 0 ? chunks_[i].pos0 + chunks_[i].n_tok : std::min(held_[i], pos);
    }
    return logits_.data();
}

void SpPrefillDecoder::run_first_chunk(std::span<const int32_t> tokens, const PromptChunk& chunk) {
    SliceForward& forward = local_->forward();
    const ModelHParams& hp = local_->hparams();
    const auto n_embd = static_cast<size_t>(hp.n_embd);
    const int n = chunk.n_tok;
    const int n_batch = forward.n_batch();
    x_.resize(static_cast<size_t>(n) * n_embd);
    forward.embed(tokens, x_.data());
    for (int layer = 0; layer < hp.n_layer; ++layer) {
        for (int b = 0; b < n; b += n_batch) {
            const SeqRun run{0, chunk.pos0 + b, std::min(n_batch, n - b)};
            forward.forward_layer(layer, x_.data() + static_cast<size_t>(b) * n_embd, std::span<const SeqRun>(&run, 1));
        }
        send_rows(layer, chunk.pos0, n, 0);
        // Rows the other nodes have sent meanwhile go on to the nodes after them.
        while (service(0)) {
        }
    }
}

void SpPrefillDecoder::send_rows(int layer, int pos0, int n, size_t after_node) {
    const int n_batch = local_->forward().n_batch();
    for (int b = 0; b < n; b += n_batch) {
        codec_->encode(layer, pos0 + b, std::min(n_batch, n - b), message_);
        for (size_t j = after_node + 1; j < chunks_.size(); ++j) {
            if (chunks_[j].n_tok == 0) continue;
            channels_[j - 1]->send(static_cast<uint16_t>(SessionMessage::kSpRows), message_);
            nodes_[j].bytes_sent += message_.size();
        }
    }
}

bool SpPrefillDecoder::service(int timeout_ms) {
    std::vector<pollfd> fds;
    std::vector<size_t> node_of;
    for (size_t i = 1; i < chunks_.size(); ++i) {
        if (chunks_[i].n_tok == 0) continue;
        fds.push_back({channels_[i - 1]->fd(), POLLIN, 0});
        node_of.push_back(i);
    }
    if (fds.empty() || ::poll(fds.data(), static_cast<nfds_t>(fds.size()), timeout_ms) <= 0) return false;
    for (size_t k = 0; k < fds.size(); ++k) {
        if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const size_t node = node_of[k];
        const std::string who = node_name(nodes_[node].address, node);
        try {
            channels_[node - 1]->recv(frame_);
        } catch (const Error& e) {
            throw make_error("{}: {}", who, e.what());
        }
        nodes_[node].bytes_received += frame_.payload.size();
        handle(node, frame_);
    }
    return true;
}

void SpPrefillDecoder::handle(size_t node, const Frame& frame) {
    const std::string who = node_name(nodes_[node].address, node);
    const ModelHParams& hp = local_->hparams();
    const auto type = static_cast<SessionMessage>(frame.type);
    if (type == SessionMessage::kHeartbeat) return;
    if (type == SessionMessage::kError) (void)parse_json_message(frame, SessionMessage::kSpRows, who);  // throws "failed"
    if (type == SessionMessage::kLogits) {
        std::vector<float> logits;
        const StepHeader h = decode_step(frame.payload, logits, who.c_str());
        const PromptChunk& c = chunks_[node];
        if (node != logits_node_ || have_logits_ || h.n_tok != 1 || h.width != static_cast<uint32_t>(hp.n_vocab) ||
            h.pos0 != static_cast<uint32_t>(c.pos0 + c.n_tok - 1)) {
            throw make_error("{}: logits of {} rows x {} at {} were not asked for", who, h.n_tok, h.width, h.pos0);
        }
        require_finite(logits.data(), logits.size(), who);
        logits_ = std::move(logits);
        have_logits_ = true;
        ++progress_;
        return;
    }
    if (type != SessionMessage::kSpRows) throw make_error("{}: unexpected {} message", who, tp_message_name(frame.type));
    const SpRowsHeader h = decode_sp_rows_header(frame.payload, who.c_str());
    const PromptChunk& c = chunks_[node];
    if (h.layer >= hp.n_layer || h.pos0 != c.pos0 + received_[node][static_cast<size_t>(h.layer)] ||
        static_cast<int64_t>(h.pos0) + h.n > c.pos0 + c.n_tok) {
        throw make_error("{}: KV rows of layer {} at {}..{} outside what its chunk {}..{} has left", who, h.layer, h.pos0,
                         static_cast<int64_t>(h.pos0) + h.n, c.pos0, c.pos0 + c.n_tok);
    }
    codec_->store(h, frame.payload, who);
    received_[node][static_cast<size_t>(h.layer)] += h.n;
    ++progress_;
    // On to the nodes after this one, as they came.
    for (size_t j = node + 1; j < chunks_.size(); ++j) {
        if (chunks_[j].n_tok == 0) continue;
        channels_[j - 1]->send(static_cast<uint16_t>(SessionMessage::kSpRows), frame.payload);
        nodes_[j].bytes_sent += frame.payload.size();
    }
}

std::string SpPrefillDecoder::awaited() const {
    std::string names;
    for (size_t i = 1; i < chunks_.size(); ++i) {
        if (chunks_[i].n_tok == 0) continue;
        const bool rows_due = std::any_of(received_[i].begin(), received_[i].end(), [&](int r) { return r < chunks_[i].n_tok; });
        if (rows_due || (i == logits_node_ && !have_logits_)) {
            names += (names.empty() ? "" : ", ") + node_name(nodes_[i].address, i);
        }
    }
    return names.empty() ? std::string("the sequence-parallel nodes") : names;
}

bool SpPrefillDecoder::done() const {
    if (!have_logits_) return false;
    for (size_t i = 1; i < chunks_.size(); ++i) {
        for (const int r : received_[i]) {
            if (r < chunks_[i].n_tok) return false;
        }
    }
    return true;
}

}  // namespace tessera
