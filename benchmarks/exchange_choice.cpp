// Which rows should sequence-parallel prefill's compressed exchange send
// (issue 24, item 2)? The K and V rows a decoder stores (what Tessera sends),
// or the layer's hidden states (what Astra sends: each receiver projects them
// to K and V itself)? Compared at equal bits per position and layer on a real
// model and a held text:
//
//   - codebooks for both, fitted on a calibration text by the same k-means
//     (eval/vq_fit.h): K/V codebooks of G groups each for K and V, hidden
//     codebooks of 2G groups of the layer's normed attention input, so both
//     send 2G indices a position and layer;
//   - a 2-node sequence-parallel prompt simulated in one process exactly as
//     the nodes compute it: the first chunk exactly; the second chunk over the
//     first chunk's rows as the second node rebuilds them (from K/V indices,
//     or projected from decoded hidden states, SliceForward::kv_from_input);
//     then the root's cache holds its own chunk exactly and the second
//     chunk's rows rebuilt, and generates; the logits of the positions after
//     the prompt (teacher-forced with a single node's greedy picks) against a
//     single node: KL and top-1 (eval/logit_agreement.h);
//   - exact bytes beside them: F16 K/V rows against F16 hidden states.
//
//   make exchange_choice && ./exchange_choice --calibration FILE --held FILE [-m MODEL] [--groups 1,4,16]
#include "eval/logit_agreement.h"
#include "eval/vq_fit.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "util/error.h"
#include "util/thread_pool.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tessera {
namespace {

struct Options {
    std::string model = "models/stories260K.gguf";
    std::string calibration, held;
    std::vector<int> groups = {1, 4, 16};
    int codes = 1024;
    int prompt = 256;
    int positions = 64;
    int iterations = 12;
    int threads = 2;
};

std::vector<int32_t> tokens_of(const LlamaModel& model, const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw make_error("cannot read {}", path);
    std::stringstream text;
    text << in.rdbuf();
    return make_tokenizer(load_vocab(model.file()))->encode(text.str(), true);
}

// Per layer: the normed attention inputs, and K (before RoPE) and V rows.
struct LayerRows {
    std::vector<std::vector<float>> h, k, v;
};

// Runs positions [pos0, pos0 + n) of `tokens` through every layer of the
// forward, one layer at a time, and appends each layer's normed attention
// input (before the layer) and K/V rows (after it) to `rows`; returns the
// residual rows after the last layer.
std::vector<float> run_layers(SliceForward& f, std::span<const int32_t> tokens, int pos0, LayerRows* rows,
                              const std::function<void(int layer)>& before_layer = {}) {
    const ModelHParams& hp = f.hparams();
    const auto n = static_cast<int>(tokens.size());
    const auto n_embd = static_cast<size_t>(hp.n_embd);
    const size_t kv_dim = static_cast<size_t>(hp.n_head_kv) * hp.head_dim;
    std::vector<float> x(n * n_embd), h(n * n_embd), k(n * kv_dim), v(n * kv_dim);
    f.embed(tokens, x.data());
    const SeqRun run{0, pos0, n};
    for (int layer = 0; layer < hp.n_layer; ++layer) {
        if (before_layer) before_layer(layer);
        if (rows != nullptr) {
            f.norm_attention_input(layer, x.data(), h.data(), n);
            rows->h[static_cast<size_t>(layer)].insert(rows->h[static_cast<size_t>(layer)].end(), h.begin(), h.end());
        }
        f.forward_layer(layer, x.data(), std::span<const SeqRun>(&run, 1));
        if (rows != nullptr) {
            f.read_kv_floats(layer, pos0, n, k.data(), v.data());
            rows->k[static_cast<size_t>(layer)].insert(rows->k[static_cast<size_t>(layer)].end(), k.begin(), k.end());
            rows->v[static_cast<size_t>(layer)].insert(rows->v[static_cast<size_t>(layer)].end(), v.begin(), v.end());
        }
    }
    return x;
}

LayerRows empty_rows(int n_layer) {
    LayerRows r;
    r.h.resize(static_cast<size_t>(n_layer));
    r.k.resize(r.h.size());
    r.v.resize(r.h.size());
    return r;
}

// Fits one kind of a codebook on rows of `width` values, every layer and group.
double fit(KvCodebooks& books, KvCodebooks::Kind kind, const std::vector<std::vector<float>>& rows, int width,
           const VqFitOptions& o, ThreadPool& pool) {
    std::mt19937_64 rng(o.seed);
    double error = 0.0, variance = 0.0;
    for (int layer = 0; layer < books.n_layer(); ++layer) {
        const std::vector<float>& all = rows[static_cast<size_t>(layer)];
        const int64_t n = static_cast<int64_t>(all.size()) / width;
        for (int g = 0; g < books.groups(); ++g) {
            double var = 0.0;
            error += fit_codebook_group(books, layer, kind, g, all.data() + static_cast<size_t>(g) * books.group_dim(), width,
                                        n, o, rng, pool, &var);
            variance += var;
        }
    }
    return variance > 0 ? error / variance : 0.0;
}

// n rows of `width` values through one kind's codebook: each group replaced by its nearest codeword.
std::vector<float> quantized(const KvCodebooks& books, int layer, KvCodebooks::Kind kind, const float* rows, int n,
                             int width) {
    std::vector<float> out(static_cast<size_t>(n) * width);
    const int d = books.group_dim();
    for (int t = 0; t < n; ++t) {
        for (int g = 0; g < books.groups(); ++g) {
            const int c = books.nearest(layer, kind, g, rows + static_cast<size_t>(t) * width + static_cast<size_t>(g) * d);
            std::copy_n(books.codewords(layer, kind, g) + static_cast<size_t>(c) * d, d,
                        out.data() + static_cast<size_t>(t) * width + static_cast<size_t>(g) * d);
        }
    }
    return out;
}

enum class Exchange { kExact, kKvRows, kHidden };

// The rows of positions [pos0, pos0 + n) of every layer as a receiver
// rebuilds them from what it was sent, stored in f's cache.
void store_rebuilt(SliceForward& f, Exchange e, const LayerRows& rows, size_t first_row, int pos0, int n,
                   const KvCodebooks* kv, const KvCodebooks* hidden) {
    const ModelHParams& hp = f.hparams();
    const int kv_dim = hp.n_head_kv * hp.head_dim;
    const int n_embd = static_cast<int>(hp.n_embd);
    for (int layer = 0; layer < hp.n_layer; ++layer) {
        const auto l = static_cast<size_t>(layer);
        std::vector<float> k, v;
        if (e == Exchange::kKvRows) {
            k = quantized(*kv, layer, KvCodebooks::kKeys, rows.k[l].data() + first_row * kv_dim, n, kv_dim);
            v = quantized(*kv, layer, KvCodebooks::kValues, rows.v[l].data() + first_row * kv_dim, n, kv_dim);
        } else if (e == Exchange::kHidden) {
            const std::vector<float> h =
                quantized(*hidden, layer, KvCodebooks::kKeys, rows.h[l].data() + first_row * n_embd, n, n_embd);
            k.resize(static_cast<size_t>(n) * kv_dim);
            v.resize(k.size());
            f.kv_from_input(layer, h.data(), n, k.data(), v.data());
        } else {
            continue;  // the rows as computed
        }
        f.write_kv_floats(layer, pos0, n, k.data(), v.data());
    }
}

// A 2-node sequence-parallel prompt and the positions after it, fed `forced`.
LogitAgreement simulate(const LlamaModel& model, const ForwardConfig& fc, int threads, std::span<const int32_t> prompt,
                        const ForcedRun& reference, Exchange e, const KvCodebooks* kv, const KvCodebooks* hidden) {
    const ModelHParams& hp = model.hparams();
    const int p = static_cast<int>(prompt.size());
    const int c = p / 2;
    LocalDecoder node(model, fc, threads);
    SliceForward& f = node.forward();
    // The first chunk, exactly (the root), its rows as computed kept aside.
    LayerRows first = empty_rows(hp.n_layer);
    run_layers(f, prompt.subspan(0, static_cast<size_t>(c)), 0, &first);
    std::vector<std::vector<uint8_t>> exact_first(static_cast<size_t>(hp.n_layer));
    for (int layer = 0; layer < hp.n_layer; ++layer) f.read_kv_rows(layer, 0, c, exact_first[static_cast<size_t>(layer)]);
    // The second node sees the first chunk rebuilt and computes its own.
    store_rebuilt(f, e, first, 0, 0, c, kv, hidden);
    LayerRows second = empty_rows(hp.n_layer);
    const std::vector<float> x = run_layers(f, prompt.subspan(static_cast<size_t>(c)), c, &second);
    std::vector<float> logits(static_cast<size_t>(hp.n_vocab));
    f.logits(x.data() + static_cast<size_t>(p - c - 1) * hp.n_embd, 1, logits.data());
    // The root: its own chunk as computed, the second chunk rebuilt.
    for (int layer = 0; layer < hp.n_layer; ++layer) f.write_kv_rows(layer, 0, c, exact_first[static_cast<size_t>(layer)]);
    store_rebuilt(f, e, second, 0, c, p - c, kv, hidden);
    std::vector<float> all(logits);
    for (size_t i = 0; i + 1 < reference.tokens.size(); ++i) {
        const int32_t t = reference.tokens[i];
        const float* l = node.eval(std::span<const int32_t>(&t, 1), p + static_cast<int>(i));
        all.insert(all.end(), l, l + hp.n_vocab);
    }
    return compare_logits(reference.logits, all, hp.n_vocab);
}

void run(const Options& o) {
    const LlamaModel model(o.model);
    const ModelHParams& hp = model.hparams();
    const int kv_dim = hp.n_head_kv * hp.head_dim;
    const int n_embd = static_cast<int>(hp.n_embd);
    const std::vector<int32_t> calibration = tokens_of(model, o.calibration);
    const std::vector<int32_t> held = tokens_of(model, o.held);
    if (static_cast<int>(held.size()) < o.prompt) throw make_error("{}: fewer than {} tokens", o.held, o.prompt);
    ForwardConfig fc;
    fc.n_ctx = o.prompt + o.positions;
    fc.n_batch = o.prompt / 2;  // each chunk one batch: the single node's grid too
    // Calibration rows, window after window.
    LayerRows cal = empty_rows(hp.n_layer);
    {
        ForwardConfig wc = fc;
        wc.n_ctx = wc.n_batch = 256;
        LocalDecoder d(model, wc, o.threads);
        for (size_t s = 0; s + 1 < calibration.size(); s += 256) {
            const size_t n = std::min<size_t>(256, calibration.size() - s);
            run_layers(d.forward(), std::span<const int32_t>(calibration).subspan(s, n), 0, &cal);
        }
    }
    std::fprintf(stderr, "%zu calibration positions a layer\n", cal.h[0].size() / n_embd);
    const std::span<const int32_t> prompt(held.data(), static_cast<size_t>(o.prompt));
    LocalDecoder single(model, fc, o.threads);
    const ForcedRun reference = greedy_run(single, prompt, o.positions);
    ThreadPool pool(o.threads);
    VqFitOptions vo;
    vo.codes = o.codes;
    vo.iterations = o.iterations;
    const LogitAgreement exact = simulate(model, fc, o.threads, prompt, reference, Exchange::kExact, nullptr, nullptr);
    std::printf("model %s: K/V rows %d + %d values, hidden states %d values a position and layer\n", o.model.c_str(),
                kv_dim, kv_dim, n_embd);
    std::printf("exact: K/V rows %d bytes (F16), hidden states %d bytes a position and layer; KL %.2g (simulation "
                "check: 0 is a single node's logits)\n",
                2 * kv_dim * 2, n_embd * 2, exact.kl_max);
    std::printf("| indices a position and layer | bits | sent | fit error | KL mean | KL max | top-1 |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
    for (const int g : o.groups) {
        KvCodebooks kv(hp.n_layer, kv_dim, g, o.codes, model.file().fingerprint_hex());
        const double ek = fit(kv, KvCodebooks::kKeys, cal.k, kv_dim, vo, pool);
        const double ev = fit(kv, KvCodebooks::kValues, cal.v, kv_dim, vo, pool);
        KvCodebooks hidden(hp.n_layer, n_embd, 2 * g, o.codes, model.file().fingerprint_hex());
        const double eh = fit(hidden, KvCodebooks::kKeys, cal.h, n_embd, vo, pool);
        const LogitAgreement a = simulate(model, fc, o.threads, prompt, reference, Exchange::kKvRows, &kv, nullptr);
        const LogitAgreement b = simulate(model, fc, o.threads, prompt, reference, Exchange::kHidden, nullptr, &hidden);
        std::printf("| %d | %d | K/V rows (%d groups of %d each) | K %.4f V %.4f | %.4g | %.4g | %.1f%% |\n", 2 * g,
                    kv.bits_per_position(), g, kv.group_dim(), ek, ev, a.kl_mean, a.kl_max, 100 * a.top1);
        std::printf("| %d | %d | hidden states (%d groups of %d) | %.4f | %.4g | %.4g | %.1f%% |\n", 2 * g,
                    2 * g * kv.index_bits(), 2 * g, hidden.group_dim(), eh, b.kl_mean, b.kl_max, 100 * b.top1);
        std::fflush(stdout);
    }
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
    tessera::Options o;
    CLI::App app("Sequence-parallel prefill's compressed exchange: K/V rows against hidden states at equal bits");
    app.add_option("-m,--model", o.model, "GGUF model")->capture_default_str();
    app.add_option("--calibration", o.calibration, "Text the codebooks are fitted on")->required();
    app.add_option("--held", o.held, "Held text: its prompt and the positions after it are compared")->required();
    app.add_option("--groups", o.groups, "K/V groups G (hidden states get 2G)")->capture_default_str()->delimiter(',');
    app.add_option("--codes", o.codes, "Codes per group")->capture_default_str();
    app.add_option("--prompt", o.prompt, "Prompt tokens (two chunks of half)")->capture_default_str();
    app.add_option("--positions", o.positions, "Positions compared after the prompt")->capture_default_str();
    app.add_option("--iterations", o.iterations, "k-means iterations")->capture_default_str();
    app.add_option("-t,--threads", o.threads, "Threads")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    try {
        tessera::run(o);
    } catch (const tessera::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
