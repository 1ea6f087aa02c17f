#include "eval/bench.h"

#include "engine/sampler.h"

#include "model/llama_model.h"
#include "ops/group_prefetch.h"
#include "model/local_decoder.h"
#include "util/cpu_caches.h"
#include "util/error.h"
#include "util/mem_bandwidth.h"
#include "util/rng.h"
#include "util/timer.h"

#include <algorithm>
#include <map>

namespace tessera {

double BenchRate::min() const { return tps.empty() ? 0.0 : *std::min_element(tps.begin(), tps.end()); }

namespace {

// The probe of the ceiling: a read loop over a buffer no cache holds
// (util/mem_bandwidth.h), in whichever of the kernels' ways of streaming
// (ops/group_prefetch.h: no software prefetch, the far prefetch, far and
// near) reads fastest here, by the best of three short reads each. The
// ceiling is what the memory gives a read loop, not what the policy in force
// gives one: on a Zen 4 the far prefetch's read loop streams ~21 GB/s against
// ~33 without, and a kernel under l2 read as 1.05-1.2 of "its" ceiling.
// `way`: the fastest way's name (group_prefetch_name's).
ReadBandwidthProbe fastest_read_probe(ThreadPool& pool, std::string& way) {
    struct Way {
        const char* name;
        size_t far, near;
    };
    const Way ways[] = {{"none", 0, 0},
                        {"l2", static_cast<size_t>(far_prefetch_bytes(Ahead::kL2)), 0},
                        {"l2+l1", static_cast<size_t>(far_prefetch_bytes(Ahead::kL2AndL1)),
                         static_cast<size_t>(kL1PolicyNearBytes)}};
    ReadBandwidthProbe probe(pool, probe_bytes_beyond_caches(last_level_cache_bytes()), 0, 0);
    double best = -1.0;
    const Way* fastest = &ways[0];
    for (const Way& w : ways) {
        probe.set_prefetch(w.far, w.near);
        const double gbs = probe.measure(3);
        if (gbs > best) {
            best = gbs;
            fastest = &w;
        }
    }
    probe.set_prefetch(fastest->far, fastest->near);
    way = fastest->name;
    return probe;
}

double median_of(std::vector<double> values) {
    if (values.empty()) return 0.0;
    std::sort(values.begin(), values.end());
    const size_t mid = values.size() / 2;
    return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace

double BenchRate::median() const { return median_of(tps); }

double BenchResult::tg_bandwidth_gbs() const { return static_cast<double>(weight_bytes_per_token) * tg.median() / 1e9; }

double BenchResult::tg_bandwidth_fraction() const {
    // Each repetition against the ceiling measured beside it: the host's
    // bandwidth drifts between repetitions more than the engine's speed does.
    std::vector<double> fractions;
    for (size_t r = 0; r < tg.tps.size() && r < tg_ceiling_gbs.size(); ++r) {
        if (tg_ceiling_gbs[r] > 0) {
            fractions.push_back(static_cast<double>(weight_bytes_per_token) * tg.tps[r] / 1e9 / tg_ceiling_gbs[r]);
        }
    }
    return median_of(fractions);
}

double BenchResult::tg_peak_fraction() const {
    return mem_peak_gbs > 0 ? tg_bandwidth_gbs() / mem_peak_gbs : 0.0;
}

namespace {

uint64_t matrix_bytes(const Matrix& m) { return static_cast<uint64_t>(m.rows) * m.row_bytes; }

// What a token reads of the layers: every matrix, but of a mixture of
// experts the router and k of the n experts (experts_used of router.rows).
uint64_t layer_bytes(const SliceWeights& w, int experts_used) {
    uint64_t bytes = 0;
    for (const LayerWeights& l : w.layers) {
        for (const Matrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) bytes += matrix_bytes(*m);
        if (l.router.rows > 0) {
            uint64_t experts = matrix_bytes(l.gate_exps) + matrix_bytes(l.up_exps) + matrix_bytes(l.down_exps);
            for (const LayerWeights::ExpertTail& t : l.tails) experts += matrix_bytes(t.gate) + matrix_bytes(t.up) + matrix_bytes(t.down);
            // A router of BF16 values is read as BF16 from the private copy.
            const uint64_t router = matrix_bytes(l.router) / (holds_bf16_values(l.router) ? 2 : 1);
            bytes += router + experts / static_cast<uint64_t>(l.router.rows) * static_cast<uint64_t>(experts_used);
        }
    }
    return bytes;
}

// The last product before each of a tensor-parallel layer's syncs (wo,
// w_down): the part of the token's reading that bands overlap with the
// sync's transfer.
uint64_t sync_product_bytes(const SliceWeights& w, bool ffn) {
    uint64_t bytes = 0;
    for (const LayerWeights& l : w.layers) bytes += matrix_bytes(ffn ? l.w_down : l.wo);
    return bytes;
}

// What one generated token reads: every layer matrix and the output head in
// full, but only one row of the token embedding.
uint64_t weight_bytes_per_token(const SliceWeights& w, int experts_used) {
    return w.token_embd.row_bytes + matrix_bytes(w.output) + layer_bytes(w, experts_used);
}

std::vector<int32_t> random_tokens(int n, int n_vocab, uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (auto& t : tokens) t = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(n_vocab));
    return tokens;
}

}  // namespace

BenchResult run_bench(const BenchParams& params) {
    if (params.n_prompt < 0 || params.n_gen < 0 || params.n_prompt + params.n_gen == 0) {
        throw make_error("bench needs a prompt (-p) or a generation (-n) length above 0");
    }
    if (params.reps < 1) throw make_error("bench needs at least 1 repetition (-r), got {}", params.reps);
    const LlamaModel model(params.model_path);
    const ModelHParams& hp = model.hparams();

    BenchResult result;
    std::map<QuantType, uint64_t> bytes_by_type;
    for (const GgufTensorInfo& t : model.file().tensors()) {
        result.model_bytes += t.n_bytes;
        result.n_params += static_cast<uint64_t>(t.n_elements());
        bytes_by_type[t.type] += t.n_bytes;
    }
    const auto most = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    result.model_type = most == bytes_by_type.end() ? "?" : quant_type_name(most->first);
    const SliceWeights all = load_slice_weights(model, full_slice(hp));
    result.weight_bytes_per_token = weight_bytes_per_token(all, hp.n_expert_used);
    result.layer_weight_bytes_per_token = layer_bytes(all, hp.n_expert_used);
    result.wo_bytes_per_token = sync_product_bytes(all, false);
    result.w_down_bytes_per_token = sync_product_bytes(all, true);

    ForwardConfig config;
    if (params.depth < 0) throw make_error("--depth must be 0 or more, got {}", params.depth);
    config.n_ctx = params.depth + std::max(params.n_prompt, params.n_gen) + 1;
    config.kv_types = params.kv_types;
    config.sparse = params.sparse;
    config.n_batch = params.n_batch;
    const DecoderSetup setup = make_decoder(model, config, params.n_threads, params.parallel);
    Decoder& decoder = *setup.decoder;
    LogitsNeed sampler_need;
    sampler_need.top_k = SamplerParams().top_k;
    if (!params.all_logits) decoder.set_logits_need(&sampler_need);

    // One untimed run of each test first: page in the weights, warm caches.
    const std::vector<int32_t> prompt = random_tokens(std::max(params.n_prompt, 1), hp.n_vocab, 1);
    const std::vector<int32_t> gen = random_tokens(std::max(params.n_gen, 1), hp.n_vocab, 2);
    const int depth = params.depth;
    if (depth > 0) {
        if (params.depth_random) {
            auto* local = dynamic_cast<LocalDecoder*>(&decoder);
            if (local == nullptr) throw make_error("--depth-fill random needs one process (no --workers, --local or --stages)");
            local->fill_history(depth, 3);
        } else {
            decoder.eval(random_tokens(depth, hp.n_vocab, 3), 0);
        }
    }
    // Each repetition rewrites the positions after the history, never it.
    auto run_pp = [&] {
        const double start = now_seconds();
        decoder.eval(prompt, depth);
        return now_seconds() - start;
    };
    auto run_tg = [&] {
        const double start = now_seconds();
        for (int i = 0; i < params.n_gen; ++i) decoder.eval(std::span<const int32_t>(gen).subspan(i, 1), depth + i);
        return now_seconds() - start;
    };
    if (params.n_prompt > 0) {
        run_pp();
        result.pp.tokens = params.n_prompt;
        for (int r = 0; r < params.reps; ++r) result.pp.tps.push_back(params.n_prompt / run_pp());
    }
    if (params.n_gen > 0) {
        const double warmup_seconds = run_tg();
        result.tg.tokens = params.n_gen;
        const TensorParallelDecoder* tp = setup.tensor_parallel;
        const TensorParallelDecoder::Stats before = tp != nullptr ? tp->stats() : TensorParallelDecoder::Stats{};
        ThreadPool probe_pool(params.n_threads);
        ReadBandwidthProbe probe = fastest_read_probe(probe_pool, result.probe_prefetch);
        result.probe_bytes = probe.bytes_per_read();
        result.mem_peak_gbs = probe.measure();
        // The ceiling of a repetition is the higher of the bandwidths a read
        // loop sustains just before and just after it, each over as long as
        // the repetition took (the one after is the next one's before): the
        // host's bandwidth changes from second to second, a generation run is
        // an average over its whole length, and so must its ceiling be; the
        // higher of the two never flatters the fraction.
        double ceiling_before = probe.sustained(warmup_seconds);
        for (int r = 0; r < params.reps; ++r) {
            const double seconds = run_tg();
            result.tg.tps.push_back(params.n_gen / seconds);
            const double after = probe.sustained(seconds);
            result.tg_ceiling_gbs.push_back(std::max(ceiling_before, after));
            ceiling_before = after;
        }
        result.mem_peak_gbs = std::max(result.mem_peak_gbs, probe.measure());
        result.mem_bandwidth_gbs = median_of(result.tg_ceiling_gbs);
        if (tp != nullptr) {
            const TensorParallelDecoder::Stats& after = tp->stats();
            const double tokens = static_cast<double>(params.n_gen) * params.reps;
            const double workers = static_cast<double>(tp->ranks().size() - 1);
            result.ranks = static_cast<int>(tp->ranks().size());
            if (model.hparams().has_experts()) result.moe_split = moe_split_name(tp->moe_split());
            result.sealed = true;
            for (size_t r = 1; r < tp->ranks().size(); ++r) {
                result.sealed = result.sealed && tp->ranks()[r].sealed;
                result.handshake_ms = std::max(result.handshake_ms, tp->ranks()[r].handshake_ms);
            }
            result.wire_bytes_per_token_per_worker =
                (after.bytes_sent - before.bytes_sent + after.bytes_received - before.bytes_received) / tokens / workers;
            result.own_ms_per_token = (after.own_seconds - before.own_seconds) * 1e3 / tokens;
            result.wait_ms_per_token = (after.wait_seconds - before.wait_seconds) * 1e3 / tokens;
            result.attention_wait_ms_per_token =
                (after.attention_wait_seconds - before.attention_wait_seconds) * 1e3 / tokens;
            result.ffn_wait_ms_per_token = (after.ffn_wait_seconds - before.ffn_wait_seconds) * 1e3 / tokens;
            result.syncs_per_token = static_cast<int>((after.syncs - before.syncs) / tokens);
        }
    }
    if (params.n_gen == 0) {
        ThreadPool pool(params.n_threads);
        ReadBandwidthProbe probe = fastest_read_probe(pool, result.probe_prefetch);
        result.probe_bytes = probe.bytes_per_read();
        result.mem_peak_gbs = probe.measure(5);
        result.mem_bandwidth_gbs = probe.sustained(1.0);
    }
    return result;
}

}  // namespace tessera
