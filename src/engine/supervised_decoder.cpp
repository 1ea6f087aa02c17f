#include "engine/supervised_decoder.h"

#include "net/handshake.h"
#include "util/error.h"
#include "util/timer.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace tessera {

namespace {

// A failing call is retried after at most this many recoveries; an error that
// a new plan does not cure (say, a bug) is then reported, not looped on.
constexpr int kMaxRecoveriesPerCall = 8;
constexpr int kProbeTimeoutMs = 1000;

// Whether a node answers and proves the key within the probe's time: a
// stopped process accepts the connection (the kernel does) but never
// completes the handshake.
bool answers(const HostPort& node, const WireKey* key) {
    try {
        FrameChannel channel(TcpStream::connect(node, kProbeTimeoutMs), ChannelLimits{1u << 20, kProbeTimeoutMs, 0});
        authenticate_as_client(channel, key, kProbeTimeoutMs);
        return true;
    } catch (const Error&) {
        return false;
    }
}

}  // namespace

SupervisedDecoder::SupervisedDecoder(const LlamaModel& model, const ForwardConfig& config, int n_threads,
                                     ParallelOptions options, RecoveryOptions recovery,
                                     std::function<void(const std::string&)> log)
    : model_(model), config_(config), n_threads_(n_threads), options_(std::move(options)),
      recovery_(std::move(recovery)), log_(std::move(log)) {
    // A node may still be winding down its previous session: ask again for a
    // while. Any other failure to start is reported at once.
    const double start = now_seconds();
    for (int delay_ms = 50;; delay_ms = std::min(delay_ms * 2, 500)) {
        try {
            build();
            return;
        } catch (const NodeBusy&) {
            if ((now_seconds() - start) * 1e3 > std::min(recovery_.budget_ms, 10000)) throw;
            std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        }
    }
}

SupervisedDecoder::~SupervisedDecoder() { teardown(); }

void SupervisedDecoder::build() {
    setup_ = make_decoder(model_, config_, n_threads_, options_);
    setup_.decoder->set_logits_need(need_ ? &*need_ : nullptr);
}

void SupervisedDecoder::set_logits_need(const LogitsNeed* need) {
    need_ = need != nullptr ? std::optional<LogitsNeed>(*need) : std::nullopt;
    if (setup_.decoder) setup_.decoder->set_logits_need(need);
}

const float* SupervisedDecoder::eval(std::span<const int32_t> tokens, int pos) {
    return run({std::vector<int32_t>(tokens.begin(), tokens.end()), pos, false});
}

const float* SupervisedDecoder::eval_all(std::span<const int32_t> tokens, int pos) {
    return run({std::vector<int32_t>(tokens.begin(), tokens.end()), pos, true});
}

const float* SupervisedDecoder::eval_seqs(std::span<const SeqEval> evals) {
    Call call;
    for (const SeqEval& e : evals) {
        call.parts.push_back({e.seq, e.pos, call.tokens.size(), e.tokens.size()});
        call.tokens.insert(call.tokens.end(), e.tokens.begin(), e.tokens.end());
    }
    return run(std::move(call));
}

const float* SupervisedDecoder::apply(const Call& call) {
    if (call.compact) {
        setup_.decoder->compact_context(call.parts[0].seq, call.kept, call.parts[0].pos);
        return nullptr;
    }
    if (call.parts.empty()) {
        return call.all ? setup_.decoder->eval_all(call.tokens, call.pos) : setup_.decoder->eval(call.tokens, call.pos);
    }
    seq_evals_.clear();
    for (const SeqPart& p : call.parts) {
        seq_evals_.push_back({p.seq, p.pos, std::span<const int32_t>(call.tokens).subspan(p.begin, p.n)});
    }
    return setup_.decoder->eval_seqs(seq_evals_);
}

void SupervisedDecoder::compact_context(int seq, std::span<const int> kept, int n_used) {
    Call call;
    call.compact = true;
    call.parts.push_back({seq, n_used, 0, 0});
    call.kept.assign(kept.begin(), kept.end());
    run(std::move(call));
}

void SupervisedDecoder::add_attention_mass(int seq, int n_used, int64_t* totals) {
    std::vector<int64_t> before(totals, totals + n_used);
    for (int recoveries = 0;; ++recoveries) {
        try {
            setup_.decoder->add_attention_mass(seq, n_used, totals);
            return;
        } catch (const PlanRefused&) {
            throw;
        } catch (const Error& e) {
            if (recovery_.budget_ms <= 0 || !options_.parallel() || recoveries >= kMaxRecoveriesPerCall) throw;
            std::copy(before.begin(), before.end(), totals);
            recover(e.what());
        }
    }
}

// A call joins the history (what a new plan replays) once it has succeeded.
const float* SupervisedDecoder::run(Call call) {
    for (int recoveries = 0;; ++recoveries) {
        try {
            const float* out = apply(call);
            history_.push_back(std::move(call));
            return out;
        } catch (const PlanRefused&) {
            throw;
        } catch (const Error& e) {
            if (recovery_.budget_ms <= 0 || !options_.parallel() || recoveries >= kMaxRecoveriesPerCall) throw;
            recover(e.what());
        }
    }
}

void SupervisedDecoder::teardown() {
    // The decoder says goodbye to its nodes before --local workers are reaped.
    setup_.decoder.reset();
    setup_.tensor_parallel = nullptr;
    setup_.pipeline = nullptr;
    setup_.sequence_parallel = nullptr;
    setup_.local_workers.reset();
}

std::vector<HostPort> SupervisedDecoder::plan_nodes() const {
    if (options_.local > 1) return {};  // --local: fresh processes every time
    if (const std::optional<ClusterSpec> spec = cluster_spec_of(options_)) {
        std::vector<HostPort> nodes;
        for (const ClusterStage& s : spec->stages) nodes.insert(nodes.end(), s.nodes.begin(), s.nodes.end());
        return nodes;
    }
    return parse_host_port_list(options_.workers);
}

void SupervisedDecoder::drop_node(const HostPort& gone) {
    const std::shared_ptr<const WireKey> key = key_from_flag_or_env(options_.key_file);
    std::optional<HostPort> spare;
    while (!recovery_.spares.empty() && !spare) {
        const HostPort candidate = recovery_.spares.front();
        recovery_.spares.erase(recovery_.spares.begin());
        if (answers(candidate, key.get())) spare = candidate;
        else if (log_) log_(fmt::format("spare {} does not answer; skipped", candidate.str()));
    }
    stats_.replaced.push_back(gone.str() + " -> " + (spare ? spare->str() : "none"));
    for (EdgeHealth& h : health_) {
        if (h.node == gone.str()) h.lost = true;
    }
    if (log_) {
        log_(spare ? fmt::format("{} is gone: spare {} takes its place", gone.str(), spare->str())
                   : fmt::format("{} is gone: re-planning over the remaining nodes", gone.str()));
    }
    if (std::optional<ClusterSpec> spec = cluster_spec_of(options_)) {
        // A spare leaves the stages as they were, so the stage shares and
        // layer counts given (--weights, --stage-layers or the cluster file's)
        // still hold; without one a stage is smaller or gone, and the new
        // pipeline is sized by measured speed. (Shares within a stage's
        // group, which only a cluster file gives, are measured again.)
        options_.weights.clear();
        options_.stage_layers.clear();
        if (spare) {
            const auto given = [&](auto field) {
                return std::all_of(spec->stages.begin(), spec->stages.end(), [&](const ClusterStage& st) { return st.*field > 0; });
            };
            for (const ClusterStage& st : spec->stages) {
                if (given(&ClusterStage::weight)) options_.weights.push_back(st.weight);
                if (given(&ClusterStage::layers)) options_.stage_layers.push_back(st.layers);
            }
        }
        for (size_t s = 0; s < spec->stages.size(); ++s) {
            std::vector<HostPort>& nodes = spec->stages[s].nodes;
            const auto it = std::find_if(nodes.begin(), nodes.end(), [&](const HostPort& n) { return n.str() == gone.str(); });
            if (it == nodes.end()) continue;
            if (spare) *it = *spare;
            else nodes.erase(it);
            if (s > 0 && nodes.empty()) spec->stages.erase(spec->stages.begin() + static_cast<std::ptrdiff_t>(s));
            break;
        }
        for (ClusterStage& s : spec->stages) s.weights.clear();
        options_.cluster.clear();
        options_.stages = format_stages_option(*spec);
        if (spec->stages.size() == 1 && spec->stages[0].nodes.empty()) options_.stages.clear();  // the root alone
        return;
    }
    std::vector<HostPort> workers = parse_host_port_list(options_.workers);
    const auto it = std::find_if(workers.begin(), workers.end(), [&](const HostPort& n) { return n.str() == gone.str(); });
    if (it != workers.end()) {
        // Shares the user gave (--weights, root first) stay with the nodes
        // that remain, and a spare takes the lost node's: they say what the
        // user knows of each machine (its memory, its other load), which a
        // speed probe on a busy node does not.
        const size_t rank = 1 + static_cast<size_t>(it - workers.begin());
        if (spare) *it = *spare;
        else {
            workers.erase(it);
            if (rank < options_.weights.size()) options_.weights.erase(options_.weights.begin() + static_cast<std::ptrdiff_t>(rank));
        }
    }
    options_.workers = format_host_port_list(workers);
}

void SupervisedDecoder::recover(const std::string& failure) {
    const double start = now_seconds();
    if (log_) log_(fmt::format("lost the plan: {}; recovering", failure));
    collect_health();
    teardown();
    ++stats_.recoveries;
    const std::shared_ptr<const WireKey> key = key_from_flag_or_env(options_.key_file);
    std::map<std::string, double> down_since;
    std::string last = failure;
    int delay_ms = 100;
    for (;;) {
        if ((now_seconds() - start) * 1e3 > recovery_.budget_ms) {
            stats_.seconds_lost += now_seconds() - start;
            throw make_error("could not recover the plan within {} ms (--recover-ms): {}", recovery_.budget_ms, last);
        }
        bool all_answer = true, plan_changed = false;
        for (const HostPort& node : plan_nodes()) {
            if (answers(node, key.get())) {
                down_since.erase(node.str());
                continue;
            }
            all_answer = false;
            const double since = down_since.emplace(node.str(), now_seconds()).first->second;
            if ((now_seconds() - since) * 1e3 >= recovery_.grace_ms) {
                drop_node(node);
                down_since.erase(node.str());
                plan_changed = true;
                break;  // probe the new plan at once
            }
            last = fmt::format("{} does not answer", node.str());
        }
        if (all_answer) {
            ++stats_.attempts;
            for (const HostPort& node : plan_nodes()) {
                bool found = false;
                for (EdgeHealth& h : health_) {
                    if (h.node == node.str()) ++h.retries, found = true;
                }
                if (!found) health_.push_back({node.str(), "", 0, 0, 0, 1, false});
            }
            try {
                build();
                replay();
                stats_.seconds_lost += now_seconds() - start;
                if (log_) {
                    log_(fmt::format("recovered in {:.0f} ms; {} calls replayed", (now_seconds() - start) * 1e3,
                                     history_.size()));
                }
                return;
            } catch (const PlanRefused& e) {
                stats_.seconds_lost += now_seconds() - start;
                const size_t nodes = plan_nodes().size() + 1;
                throw PlanRefused(fmt::format("after losing a node, the model does not fit the remaining {} node{}: {}",
                                              nodes, nodes == 1 ? "" : "s", e.what()));
            } catch (const Error& e) {
                last = e.what();
                collect_health();
                teardown();
            }
        }
        if (plan_changed) continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        delay_ms = std::min(delay_ms * 2, 500);
    }
}

void SupervisedDecoder::replay() {
    for (const Call& call : history_) apply(call);
}

namespace {

void fold(std::vector<EdgeHealth>& health, const std::string& node, const std::string& role, double round_trip_ms,
          uint64_t sent, uint64_t received) {
    for (EdgeHealth& h : health) {
        if (h.node != node) continue;
        h.role = role;
        h.round_trip_ms = round_trip_ms;
        h.bytes_sent += sent;
        h.bytes_received += received;
        return;
    }
    health.push_back({node, role, round_trip_ms, sent, received, 0, false});
}

void fold_setup(std::vector<EdgeHealth>& health, const DecoderSetup& setup) {
    if (setup.tensor_parallel != nullptr) {
        const auto& ranks = setup.tensor_parallel->ranks();
        for (size_t r = 1; r < ranks.size(); ++r) {
            fold(health, ranks[r].address, fmt::format("rank {}", r), ranks[r].round_trip_ms, ranks[r].bytes_sent,
                 ranks[r].bytes_received);
        }
    }
    if (setup.pipeline != nullptr) {
        const auto& stages = setup.pipeline->stages();
        for (size_t s = 1; s < stages.size(); ++s) {
            fold(health, stages[s].address, fmt::format("stage {}", s), stages[s].round_trip_ms, stages[s].bytes_sent,
                 stages[s].bytes_received);
        }
    }
    if (setup.sequence_parallel != nullptr) {
        const auto& nodes = setup.sequence_parallel->nodes();
        for (size_t i = 1; i < nodes.size(); ++i) {
            fold(health, nodes[i].address, fmt::format("prefill {}", i), nodes[i].round_trip_ms, nodes[i].bytes_sent,
                 nodes[i].bytes_received);
        }
    }
}

}  // namespace

void SupervisedDecoder::collect_health() { fold_setup(health_, setup_); }

std::vector<EdgeHealth> SupervisedDecoder::edge_health() const {
    std::vector<EdgeHealth> health = health_;
    fold_setup(health, setup_);
    return health;
}

}  // namespace tessera
