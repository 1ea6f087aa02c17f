#include "cluster/pipeline/pipeline_decoder.h"

#include "cluster/session/heartbeat.h"
#include "cluster/session/root_links.h"

#include "cluster/session/json_messages.h"
#include "cluster/planner/planner.h"
#include "cluster/session/session_messages.h"
#include "cluster/planner/speed_probe.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/system_memory.h"
#include "util/timer.h"

#include <poll.h>

#include <algorithm>

namespace tessera {

namespace {

constexpr int kStallCheckMs = 250;

std::string stage_name(const std::string& address, size_t stage) {
    return fmt::format("stage {} ({})", stage, address);
}

}  // namespace

PipelineDecoder::PipelineDecoder(const LlamaModel& model, const PipelineConfig& config)
    : config_(config), pool_(config.n_threads) {
    if (!config.weights.empty() && config.weights.size() != config.stages.size() + 1) {
        throw make_error("{} weights given for {} stages", config.weights.size(), config.stages.size() + 1);
    }
    if (config.groups.size() > config.stages.size() + 1 || config.group_weights.size() > config.stages.size() + 1) {
        throw make_error("groups given for {} stages, the plan has {}",
                         std::max(config.groups.size(), config.group_weights.size()), config.stages.size() + 1);
    }
    const std::vector<HelloReply> hellos = connect_stages(model);
    assign_stages(model, hellos, nullptr);
}

PipelineDecoder::PipelineDecoder(const LlamaModel& model, const PipelineConfig& config, AdoptedWorkers adopted)
    : config_(config), pool_(config.n_threads) {
    adopted.check();
    config_.stages = adopted.addresses;
    config_.groups.clear();
    config_.group_weights.clear();
    if (!config_.weights.empty() && config_.weights.size() != adopted.channels.size() + 1) {
        throw make_error("{} weights given for {} stages", config_.weights.size(), adopted.channels.size() + 1);
    }
    stages_.resize(adopted.channels.size() + 1);
    stages_[0].address = "root";
    for (size_t i = 0; i < adopted.channels.size(); ++i) {
        channels_.push_back(std::move(adopted.channels[i]));
        stages_[i + 1].address = adopted.addresses[i].str();
        stages_[i + 1].round_trip_ms = adopted.round_trip_ms[i];
    }
    assign_stages(model, adopted.hellos, &adopted);
}

std::vector<HelloReply> PipelineDecoder::connect_stages(const LlamaModel& model) {
    const PipelineConfig& config = config_;
    const size_t n_stages = config.stages.size() + 1;
    stages_.resize(n_stages);
    stages_[0].address = "root";
    const std::string fingerprint = model.file().fingerprint_hex();
    const auto name = [&](size_t i) { return stage_name(config.stages[i].str(), i + 1); };
    std::vector<RootLink> nodes = connect_nodes(config.stages, {config.connect_timeout_ms, config.limits, config.key.get()},
                                                fingerprint, name, [](size_t, const FrameChannel&, json&) {});
    for (size_t i = 0; i < nodes.size(); ++i) {
        stages_[i + 1].address = config.stages[i].str();
        stages_[i + 1].round_trip_ms = nodes[i].round_trip_ms;
        channels_.push_back(std::move(nodes[i].channel));
    }
    std::vector<HelloReply> hellos;
    for (size_t i = 0; i < channels_.size(); ++i) {
        const std::string who = name(i);
        const HelloReply& f = nodes[i].hello;
        if (!f.ok && f.busy) throw NodeBusy(fmt::format("{} is busy serving another root", who));
        if (!f.ok && f.fingerprint.empty()) throw make_error("{} refused the session: {}", who, f.error);
        if (!f.ok || !f.has_model) {
            throw make_error("{} holds a different model or none (fingerprint {} != {} of {})", who,
                             f.fingerprint.empty() ? "none" : f.fingerprint, fingerprint, model.path());
        }
        hellos.push_back(f);
    }
    return hellos;
}

void PipelineDecoder::assign_stages(const LlamaModel& model, const std::vector<HelloReply>& hellos,
                                    const AdoptedWorkers* adopted) {
    const PipelineConfig& config = config_;
    const ModelHParams& hp = model.hparams();
    const size_t n_stages = channels_.size() + 1;
    const std::vector<HostPort> alone;
    auto group_of = [&](size_t s) -> const std::vector<HostPort>& {
        return s < config.groups.size() ? config.groups[s] : alone;
    };
    std::vector<double> probes(n_stages, -1.0);
    std::vector<uint64_t> free_memory(n_stages, available_memory_bytes());
    for (size_t i = 0; i < hellos.size(); ++i) {
        probes[i + 1] = hellos[i].probe_seconds;
        free_memory[i + 1] = hellos[i].free_memory;
        stages_[i + 1].device = hellos[i].device;
    }
    probes[0] = probe_seconds(model, pool_);
    for (double& p : probes) {
        if (p <= 0) p = probes[0];
        probe_seconds_ = std::max(probe_seconds_, p);
    }
    // A stage that is a tensor-parallel group counts as fast as its members
    // together (each assumed as fast as its leader).
    std::vector<double> weights = config.weights;
    if (weights.empty()) {
        weights = weights_from_probes(probes);
        for (size_t s = 0; s < n_stages; ++s) weights[s] *= static_cast<double>(group_of(s).size() + 1);
    }
    const std::vector<std::pair<int, int>> blocks = plan_layer_blocks(hp.n_layer, weights, config.layers);
    const ReductionUnits units = reduction_units(model);
    const int n_cached = config.forward.n_ctx * std::max(1, config.forward.n_seq);
    uint64_t root_weight_budget = UINT64_MAX;
    for (size_t s = 0; s < n_stages; ++s) {
        std::vector<double> group_weights = s < config.group_weights.size() ? config.group_weights[s]
                                                                            : std::vector<double>();
        if (group_weights.empty()) group_weights.assign(group_of(s).size() + 1, 1.0);
        if (group_weights.size() != group_of(s).size() + 1) {
            throw make_error("stage {}: {} weights for a group of {} nodes", s, group_weights.size(),
                             group_of(s).size() + 1);
        }
        // The leader's slice; each group's leader checks its members'
        // slices. The leader chooses the split of the experts (tp_decoder.cpp:
        // the balanced one only where its members' memory, which the root
        // does not hear, holds it) and reports its own share when ready; the
        // root checks the share of choose_moe_split's choice here.
        const bool cpu_leader = s == 0 ? !config.root_device : stages_[s].device.empty();
        const MoeSplit split = config.moe_split.value_or(choose_moe_split(hp, group_weights, units, cpu_leader));
        const Slice slice =
            plan_group(hp, GroupScope::stage(blocks[s], s == 0, s + 1 == n_stages), group_weights, units, split)[0];
        stages_[s].slice = slice;
        stages_[s].weight = weights[s];
        for (const HostPort& member : group_of(s)) stages_[s].group.push_back(member.str());
        const SliceFootprint f = slice_footprint(model, slice, n_cached, config.forward.kv_types);
        stages_[s].footprint_bytes = f.total();
        // A tensor-parallel group's members check their own shares; a worker
        // also counts its working buffers (the root knows its own).
        const uint64_t extra = s == 0 ? slice_scratch_bytes(hp, slice, config.forward.n_batch, config.forward.n_ctx,
                                                            config.n_threads)
                                      : 0;
        const MemoryFit fit = memory_fit(f, extra, free_memory[s], config.forward.offload);
        if (!fit.fits) {
            throw PlanRefused(fmt::format("plan refused: stage {} ({}) {} ({} bytes short)", s, stages_[s].address,
                                          describe_shortfall(f, extra, free_memory[s], config.forward.offload),
                                          f.total() + extra - std::min(f.total() + extra, free_memory[s])));
        }
        stages_[s].streamed_bytes = fit.streamed_bytes;
        if (s == 0) root_weight_budget = fit.weight_budget;
    }
    for (size_t i = 0; i < channels_.size(); ++i) {
        const Slice& s = stages_[i + 1].slice;
        json assign = {{"role", "stage"},
                       {"slice", slice_to_json(s)},
                       {"last", i + 2 == n_stages},
                       {"prev", i > 0},
                       {"n_ctx", config.forward.n_ctx},
                       {"n_batch", config.forward.n_batch},
                       {"n_seq", config.forward.n_seq},
                       {"kv_type_k", kv_type_text(config.forward.kv_types.k)},
                       {"kv_type_v", kv_type_text(config.forward.kv_types.v)},
                       {"partial_format", 0}};
        if (config.forward.sparse.enabled) assign["sparse"] = sparse_json(config.forward.sparse);
        if (config.forward.track_attention) assign["track_attention"] = true;
        if (config.forward.offload) assign["offload"] = true;
        if (i + 2 < n_stages) assign["next"] = stages_[i + 2].address;
        if (!stages_[i + 1].group.empty()) {
            assign["group"] = stages_[i + 1].group;
            if (i + 1 < config.group_weights.size()) assign["group_weights"] = config.group_weights[i + 1];
            if (config.moe_split) assign["moe_split"] = moe_split_name(*config.moe_split);
        }
        if (adopted != nullptr) {
            assign["handoff_positions"] = adopted->handoff_positions;
            assign["handoff_from"] = adopted->handoff_from[i];
        }
        send_json(*channels_[i], SessionMessage::kAssign, assign);
        if (adopted != nullptr && adopted->after_assign) adopted->after_assign(i, *channels_[i], stages_[i + 1].slice);
    }
    for (size_t i = 0; i < channels_.size(); ++i) {
        const std::string who = stage_name(stages_[i + 1].address, i + 1);
        const json ready = recv_json(*channels_[i], SessionMessage::kReady, who, kSetupReplyTimeoutMs);
        const JsonFields r(ready, who, "ready");
        if (!r.boolean("ok", false)) throw make_error("{} refused its stage: {}", who, r.string("error", 4096, "?"));
        // A group's leader reports the share it planned for itself (the
        // split of the experts its members' memory allowed).
        StageInfo& stage = stages_[i + 1];
        stage.slice = parse_reported_slice(r, stage.slice);
        validate_slice(stage.slice, hp);
        stage.footprint_bytes = slice_footprint(model, stage.slice, n_cached, config.forward.kv_types).total();
    }
    // Every stage now waits for rows, watching for the root's silence: the
    // beat starts before the root loads its own stage (longer than a
    // stage's --root-silence-ms on a large model).
    beat_ = beat_to_nodes(channels_);
    before_root_load();
    if (config.root_device && !config.root_rank_device && !group_of(0).empty()) {
        throw make_error("the root's stage leads a tensor-parallel group: its device ({}) runs a stage alone here",
                         config.root_device_name);
    }
    if (group_of(0).empty()) {
        ForwardConfig root = config.forward;
        root.weight_budget = root_weight_budget;
        if (config.root_device) {
            stages_[0].device = config.root_device_name;
            forward_ = config.root_device(model, stages_[0].slice, root);
        } else {
            forward_ = std::make_unique<SliceForward>(model, stages_[0].slice, root, pool_);
        }
        front_ = forward_.get();
        block_ = forward_.get();
    } else {
        TpConfig tp;
        tp.workers = group_of(0);
        if (!config.group_weights.empty()) tp.weights = config.group_weights[0];
        tp.moe_split = config.moe_split;
        tp.forward = config.forward;
        tp.n_threads = config.n_threads;
        tp.limits = config.limits;
        tp.connect_timeout_ms = config.connect_timeout_ms;
        tp.key = config.key;
        tp.layer_begin = stages_[0].slice.layer_begin;
        tp.layer_end = stages_[0].slice.layer_end;
        tp.first = true;
        tp.last = n_stages == 1;
        tp.shard_vocab = false;  // this decoder computes the logits through the root's own head
        if (config.root_rank_device) {
            tp.root_device = config.root_rank_device;
            tp.root_device_name = config.root_device_name;
            stages_[0].device = config.root_device_name;
        }
        group_ = std::make_unique<TensorParallelDecoder>(model, tp);
        // The share the group planned for the root (its split of the experts).
        stages_[0].slice = group_->ranks()[0].slice;
        stages_[0].footprint_bytes = group_->ranks()[0].footprint_bytes;
        front_ = &group_->root_forward();
        block_ = group_.get();
    }
    x_.resize(static_cast<size_t>(front_->n_batch()) * hp.n_embd);
    logits_.resize(static_cast<size_t>(hp.n_vocab));
}

PipelineDecoder::~PipelineDecoder() {
    beat_.reset();  // no beat after the goodbye
    for (auto& channel : channels_) {
        try {
            channel->send(static_cast<uint16_t>(SessionMessage::kShutdown), std::span<const uint8_t>());
        } catch (const Error&) {
            // A stage that is already gone needs no goodbye.
        }
    }
}

// Waits for the next logits from the last stage, watching every stage: an
// error or a hang-up anywhere in the chain is reported by stage and address.
int PipelineDecoder::step_deadline_ms(uint32_t n_tok) const {
    if (config_.step_timeout_ms > 0) return config_.step_timeout_ms;
    // The probe times one layer's gate and up products for one position; a
    // hundred times that for every layer and position, on top of the io
    // timeout, separates a stalled plan from a slow one.
    const double work = 100.0 * probe_seconds_ * front_->hparams().n_layer * n_tok * 1e3;
    return config_.limits.io_timeout_ms + static_cast<int>(std::min(1e8, work));
}

void PipelineDecoder::receive_logits(float* dst, uint32_t rows, uint32_t positions) {
    const int width = front_->hparams().n_vocab;
    FrameChannel& last = *channels_.back();
    // Every stage beats once a second while a session lasts: one silent for
    // the io timeout has stalled (a stopped process, a dead host).
    const double start = now_seconds();
    const int deadline_ms = step_deadline_ms(positions);
    std::vector<double> heard(channels_.size(), start);
    for (;;) {
        // Heartbeats prove the stages live, not that the rows move.
        if ((now_seconds() - start) * 1e3 > deadline_ms) {
            throw make_error("{} sends heartbeats but no logits for {} ms (--step-timeout-ms)",
                             stage_name(stages_.back().address, stages_.size() - 1), deadline_ms);
        }
        std::vector<pollfd> fds;
        for (auto& c : channels_) fds.push_back({c->fd(), POLLIN, 0});
        const int ready = ::poll(fds.data(), fds.size(), kStallCheckMs);
        const double now = now_seconds();
        for (size_t i = 0; i < channels_.size(); ++i) {
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) continue;
            if ((now - heard[i]) * 1e3 > config_.limits.io_timeout_ms) {
                throw make_error("{} stalled: nothing heard from it for {} ms", stage_name(stages_[i + 1].address, i + 1),
                                 static_cast<int>((now - heard[i]) * 1e3));
            }
        }
        if (ready <= 0) continue;
        for (size_t i = 0; i < channels_.size(); ++i) {
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
            const std::string who = stage_name(stages_[i + 1].address, i + 1);
            try {
                channels_[i]->recv(frame_);
            } catch (const Error& e) {
                throw make_error("{} stopped responding: {}", who, e.what());
            }
            heard[i] = now_seconds();
            stages_[i + 1].bytes_received += frame_.payload.size();
            const auto type = static_cast<SessionMessage>(frame_.type);
            if (type == SessionMessage::kHeartbeat) continue;
            if (type == SessionMessage::kError) parse_json_message(frame_, SessionMessage::kLogits, who);  // throws "failed: ..."
            const LogitsNeed* need = need_.get();
            const SessionMessage want = need != nullptr ? SessionMessage::kCandidates : SessionMessage::kLogits;
            if (type != want || channels_[i].get() != &last) {
                throw make_error("{}: unexpected {} message", who, tp_message_name(frame_.type));
            }
            if (need != nullptr) {
                place_candidates(frame_.payload, static_cast<int>(rows), width, 0, *need, dst, static_cast<size_t>(width),
                                 who.c_str());
                stages_.back().steps++;
                stages_.back().step_seconds += now_seconds() - last_sent_;
                return;
            }
            const StepHeader got = decode_step(frame_.payload, received_, who.c_str());
            if (got.n_tok != rows || got.width != static_cast<uint32_t>(width)) {
                throw make_error("{}: {} rows of logits where {} were due", who, got.n_tok, rows);
            }
            require_finite(received_.data(), received_.size(), who);
            std::copy(received_.begin(), received_.end(), dst);
            stages_.back().steps++;
            stages_.back().step_seconds += now_seconds() - last_sent_;
            return;
        }
    }
}

void PipelineDecoder::run(std::span<const int32_t> tokens, int pos, bool all, float* out) {
    if (tokens.empty()) throw make_error("internal: eval of no tokens");
    if (pos < 0 || pos + static_cast<int64_t>(tokens.size()) > n_ctx()) {
        throw make_error("positions {}..{} exceed the context of {} tokens", pos, pos + tokens.size(), n_ctx());
    }
    const ModelHParams& hp = front_->hparams();
    // With stages, micro-batches keep every stage busy on a long prompt.
    const size_t step = std::min<size_t>(front_->n_batch(),
                                         channels_.empty() ? front_->n_batch() : std::max(1, config_.micro_batch));
    for (size_t b = 0; b < tokens.size(); b += step) {
        const std::span<const int32_t> batch = tokens.subspan(b, std::min(step, tokens.size() - b));
        const int n_tok = static_cast<int>(batch.size());
        const bool last_batch = b + step >= tokens.size();
        front_->embed(batch, x_.data());
        const double t0 = now_seconds();
        block_->forward_layers(x_.data(), pos + static_cast<int>(b), n_tok);
        stages_[0].steps++;
        stages_[0].step_seconds += now_seconds() - t0;
        if (channels_.empty()) {
            if (all) front_->logits(x_.data(), n_tok, out + b * hp.n_vocab);
            else if (last_batch) front_->logits(x_.data() + static_cast<size_t>(n_tok - 1) * hp.n_embd, 1, out);
            continue;
        }
        uint32_t flags = 0;
        if (all) flags = kWantAllLogits;
        else if (last_batch) flags = kWantLastLogits;
        const StepHeader header{flags, static_cast<uint32_t>(pos + static_cast<int>(b)), static_cast<uint32_t>(n_tok),
                                static_cast<uint32_t>(hp.n_embd), WireFormat::F32};
        send_need();
        encode_step(header, x_.data(), message_);
        send_to_first_stage(SessionMessage::kStageInput, message_);
        last_sent_ = now_seconds();
        // Every position's logits (perplexity) are large: take each batch's
        // before sending the next, so no stage ever blocks on a full socket
        // while the root blocks on another. Only generation pipelines.
        if (all) receive_logits(out + b * hp.n_vocab, static_cast<uint32_t>(n_tok), static_cast<uint32_t>(n_tok));
        else if (last_batch) receive_logits(out, 1, static_cast<uint32_t>(tokens.size()));
    }
}

void PipelineDecoder::set_logits_need(const LogitsNeed* need) { need_.set(need); }

void PipelineDecoder::send_need() {
    // Along the stages, in order with the rows, to the last one.
    if (!channels_.empty() && need_.take_change(message_)) send_to_first_stage(SessionMessage::kHeadNeed, message_);
}

void PipelineDecoder::send_to_first_stage(SessionMessage type, std::span<const uint8_t> payload) {
    try {
        channels_[0]->send(static_cast<uint16_t>(type), payload);
        stages_[1].bytes_sent += payload.size();
    } catch (const Error& e) {
        throw make_error("{}: {}", stage_name(stages_[1].address, 1), e.what());
    }
}

void PipelineDecoder::compact_context(int seq, std::span<const int> kept, int n_used) {
    block_->compact_context(seq, kept, n_used);
    if (channels_.empty()) return;
    encode_compaction(seq, kept, n_used, message_);
    send_to_first_stage(SessionMessage::kShift, message_);
}

void PipelineDecoder::add_attention_mass(int seq, int n_used, int64_t* totals) {
    block_->add_attention_mass(seq, n_used, totals);
    if (channels_.empty()) return;
    encode_mass_request(seq, n_used, totals, message_);
    send_to_first_stage(SessionMessage::kMass, message_);
    FrameChannel& last = *channels_.back();
    const std::string who = stage_name(stages_.back().address, stages_.size() - 1);
    const double start = now_seconds();
    for (;;) {
        try {
            last.recv(frame_);
        } catch (const Error& e) {
            throw make_error("{} stopped responding: {}", who, e.what());
        }
        const auto type = static_cast<SessionMessage>(frame_.type);
        if (type == SessionMessage::kHeartbeat) {
            if ((now_seconds() - start) * 1e3 > step_deadline_ms(static_cast<uint32_t>(n_used))) {
                throw make_error("{} sends heartbeats but no attention totals", who);
            }
            continue;
        }
        if (type == SessionMessage::kError) parse_json_message(frame_, SessionMessage::kMass, who);  // throws "failed: ..."
        if (type != SessionMessage::kMass) throw make_error("{}: unexpected {} message", who, tp_message_name(frame_.type));
        // The sums of every stage: they replace the running totals sent.
        std::fill(totals, totals + n_used, int64_t{0});
        add_mass(frame_.payload, n_used, totals, who.c_str());
        return;
    }
}

const float* PipelineDecoder::eval(std::span<const int32_t> tokens, int pos) {
    run(tokens, pos, false, logits_.data());
    return logits_.data();
}

const float* PipelineDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    all_logits_.resize(tokens.size() * logits_.size());
    run(tokens, pos, true, all_logits_.data());
    return all_logits_.data();
}

const float* PipelineDecoder::eval_seqs(std::span<const SeqEval> evals) {
    const ModelHParams& hp = front_->hparams();
    const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
    // Batches of a micro-batch's size, as a prompt goes through (a long
    // prompt joining keeps every stage busy).
    const int step = channels_.empty() ? front_->n_batch() : std::min(front_->n_batch(), std::max(1, config_.micro_batch));
    SeqBatches batches(evals, step);
    seq_logits_.resize(batches.output_rows() * n_vocab);
    while (batches.next(batch_)) {
        const int n_tok = front_->check_runs(batch_.runs);
        front_->embed(batch_.tokens, x_.data());
        const double t0 = now_seconds();
        block_->forward_layers(x_.data(), batch_.runs);
        stages_[0].steps++;
        stages_[0].step_seconds += now_seconds() - t0;
        if (channels_.empty()) {
            if (batch_.rows.empty()) continue;
            batch_.gather_rows(x_.data(), hp.n_embd, last_x_);
            run_logits_.resize(batch_.rows.size() * n_vocab);
            front_->logits(last_x_.data(), static_cast<int>(batch_.rows.size()), run_logits_.data());
            batch_.scatter_logits(run_logits_.data(), n_vocab, seq_logits_.data());
            continue;
        }
        // The runs go ahead of their rows, and every stage passes them on;
        // the last stage answers with each run's last row's logits (every
        // row's for a run with all_logits).
        encode_seq_runs(batch_.runs, message_);
        StepHeader header{batch_.rows.empty() ? 0u : static_cast<uint32_t>(kWantRunLogits), 0,
                          static_cast<uint32_t>(n_tok), static_cast<uint32_t>(hp.n_embd), WireFormat::F32, kStepOverRuns};
        send_to_first_stage(SessionMessage::kSeqRuns, message_);
        send_need();
        encode_step(header, x_.data(), message_);
        send_to_first_stage(SessionMessage::kStageInput, message_);
        last_sent_ = now_seconds();
        if (batch_.rows.empty()) continue;
        // The reply's rows: run by run, every row or the last one; which
        // reply row holds each batch row.
        reply_row_.assign(static_cast<size_t>(n_tok), -1);
        int reply_rows = 0, row = 0;
        for (const SeqRun& r : batch_.runs) {
            if (r.all_logits) {
                for (int t = 0; t < r.n_tok; ++t) reply_row_[static_cast<size_t>(row + t)] = reply_rows++;
            } else {
                reply_row_[static_cast<size_t>(row + r.n_tok - 1)] = reply_rows++;
            }
            row += r.n_tok;
        }
        run_logits_.resize(static_cast<size_t>(reply_rows) * n_vocab);
        receive_logits(run_logits_.data(), static_cast<uint32_t>(reply_rows), static_cast<uint32_t>(n_tok));
        for (size_t f = 0; f < batch_.rows.size(); ++f) {
            const int k = reply_row_[static_cast<size_t>(batch_.rows[f])];
            if (k < 0) throw make_error("internal: batch row {} has no logits in the last stage's reply", batch_.rows[f]);
            std::copy_n(run_logits_.data() + static_cast<size_t>(k) * n_vocab, n_vocab,
                        seq_logits_.data() + batch_.dest[f] * n_vocab);
        }
    }
    return seq_logits_.data();
}

}  // namespace tessera
