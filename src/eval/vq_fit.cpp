#include "eval/vq_fit.h"

#include "model/local_decoder.h"
#include "util/error.h"
#include "util/thread_pool.h"

#include <algorithm>
#include <random>
#include <vector>

namespace tessera {

namespace {

// Assigns each of n rows its nearest codeword (rows of `stride` floats, the
// group at offset 0), the rows split over the pool's threads.
void assign(const KvCodebooks& books, int layer, KvCodebooks::Kind kind, int group, const float* rows, int64_t stride,
            int64_t n, std::vector<int>& out, ThreadPool& pool) {
    out.resize(static_cast<size_t>(n));
    pool.run([&](int thread, int n_threads) {
        const int64_t per = (n + n_threads - 1) / n_threads;
        const int64_t begin = std::min(n, per * thread), end = std::min(n, begin + per);
        if (end > begin) {
            books.nearest_rows(layer, kind, group, rows + begin * stride, stride, static_cast<int>(end - begin),
                               out.data() + begin);
        }
    });
}

}  // namespace

double fit_codebook_group(KvCodebooks& books, int layer, KvCodebooks::Kind kind, int group, const float* rows,
                          int64_t stride, int64_t n, const VqFitOptions& o, std::mt19937_64& rng, ThreadPool& pool,
                          double* variance) {
    const int d = books.group_dim();
    const int codes = books.codes();
    float* words = books.codewords(layer, kind, group);
    // Distinct random rows to start from.
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
    for (int c = 0; c < codes; ++c) {
        std::uniform_int_distribution<int64_t> pick(c, n - 1);
        std::swap(order[static_cast<size_t>(c)], order[static_cast<size_t>(pick(rng))]);
        std::copy_n(rows + order[static_cast<size_t>(c)] * stride, d, words + static_cast<size_t>(c) * d);
    }
    std::vector<int> index;
    std::vector<double> sums(static_cast<size_t>(codes) * d);
    std::vector<int64_t> counts(static_cast<size_t>(codes));
    for (int it = 0; it < o.iterations; ++it) {
        books.refresh_norms();
        assign(books, layer, kind, group, rows, stride, n, index, pool);
        std::fill(sums.begin(), sums.end(), 0.0);
        std::fill(counts.begin(), counts.end(), 0);
        for (int64_t t = 0; t < n; ++t) {
            const auto c = static_cast<size_t>(index[static_cast<size_t>(t)]);
            ++counts[c];
            for (int i = 0; i < d; ++i) sums[c * d + i] += rows[t * stride + i];
        }
        std::uniform_int_distribution<int64_t> any(0, n - 1);
        for (size_t c = 0; c < static_cast<size_t>(codes); ++c) {
            if (counts[c] == 0) {
                // An empty cell restarts at a random row.
                std::copy_n(rows + any(rng) * stride, d, words + c * d);
                continue;
            }
            for (int i = 0; i < d; ++i) words[c * d + i] = static_cast<float>(sums[c * d + i] / counts[c]);
        }
    }
    books.refresh_norms();
    assign(books, layer, kind, group, rows, stride, n, index, pool);
    std::vector<double> mean(static_cast<size_t>(d), 0.0);
    for (int64_t t = 0; t < n; ++t) {
        for (int i = 0; i < d; ++i) mean[static_cast<size_t>(i)] += rows[t * stride + i];
    }
    for (double& m : mean) m /= static_cast<double>(n);
    double error = 0.0, var = 0.0;
    for (int64_t t = 0; t < n; ++t) {
        const float* w = words + static_cast<size_t>(index[static_cast<size_t>(t)]) * d;
        for (int i = 0; i < d; ++i) {
            const double x = rows[t * stride + i];
            error += (x - w[i]) * (x - w[i]);
            var += (x - mean[static_cast<size_t>(i)]) * (x - mean[static_cast<size_t>(i)]);
        }
    }
    *variance = var;
    return error;
}

KvCodebooks fit_kv_codebooks(const LlamaModel& model, std::span<const int32_t> tokens, const VqFitOptions& o,
                             int n_threads, VqFitReport* report, const std::function<void(const std::string&)>& log) {
    const ModelHParams& hp = model.hparams();
    const int kv_dim = hp.n_head_kv * hp.head_dim;
    KvCodebooks books(hp.n_layer, kv_dim, o.groups, o.codes, model.file().fingerprint_hex());
    ForwardConfig fc;
    fc.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(hp.n_ctx_train > 0 ? hp.n_ctx_train : 2048, 2048);
    fc.n_batch = std::min(512, fc.n_ctx);
    LocalDecoder decoder(model, fc, n_threads);
    // Every layer's rows, window after window.
    std::vector<std::vector<float>> k(static_cast<size_t>(hp.n_layer)), v(k.size());
    std::vector<float> kw, vw;
    int64_t n_rows = 0;
    for (size_t start = 0; start + 1 < tokens.size(); start += static_cast<size_t>(fc.n_ctx)) {
        const size_t n = std::min(tokens.size() - start, static_cast<size_t>(fc.n_ctx));
        decoder.eval(tokens.subspan(start, n), 0);
        kw.resize(n * kv_dim);
        vw.resize(n * kv_dim);
        for (int layer = 0; layer < hp.n_layer; ++layer) {
            decoder.forward().read_kv_floats(layer, 0, static_cast<int>(n), kw.data(), vw.data());
            k[static_cast<size_t>(layer)].insert(k[static_cast<size_t>(layer)].end(), kw.begin(), kw.end());
            v[static_cast<size_t>(layer)].insert(v[static_cast<size_t>(layer)].end(), vw.begin(), vw.end());
        }
        n_rows += static_cast<int64_t>(n);
    }
    if (n_rows < o.codes) {
        throw make_error("the calibration text gives {} positions; fitting {} codes needs at least as many (a longer "
                         "text, or fewer --codes)", n_rows, o.codes);
    }
    // Evenly spaced rows when there are more than max_rows.
    const int64_t step = std::max<int64_t>(1, (n_rows + o.max_rows - 1) / o.max_rows);
    const int64_t kept = (n_rows + step - 1) / step;
    if (log) log(fmt::format("{} positions per layer, {} kept for k-means; {} groups of {} values, {} codes", n_rows, kept,
                             o.groups, books.group_dim(), o.codes));
    ThreadPool pool(n_threads);
    std::mt19937_64 rng(o.seed);
    std::vector<float> rows(static_cast<size_t>(kept) * kv_dim);
    double error[2] = {0, 0}, variance[2] = {0, 0};
    for (int layer = 0; layer < hp.n_layer; ++layer) {
        for (int kind = 0; kind < 2; ++kind) {
            const std::vector<float>& all = kind == 0 ? k[static_cast<size_t>(layer)] : v[static_cast<size_t>(layer)];
            for (int64_t t = 0; t < kept; ++t) {
                std::copy_n(all.data() + t * step * kv_dim, kv_dim, rows.data() + t * kv_dim);
            }
            for (int g = 0; g < o.groups; ++g) {
                double var = 0.0;
                error[kind] += fit_codebook_group(books, layer, static_cast<KvCodebooks::Kind>(kind), g,
                                         rows.data() + static_cast<size_t>(g) * books.group_dim(), kv_dim, kept, o, rng,
                                         pool, &var);
                variance[kind] += var;
            }
        }
        if (log) log(fmt::format("layer {} fitted", layer));
    }
    books.refresh_norms();
    if (report != nullptr) {
        report->rows = n_rows;
        report->relative_error_k = variance[0] > 0 ? error[0] / variance[0] : 0.0;
        report->relative_error_v = variance[1] > 0 ? error[1] / variance[1] : 0.0;
    }
    return books;
}

}  // namespace tessera
