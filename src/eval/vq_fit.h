// `tessera vq-fit`: codebooks of a model's K and V rows (model/kv_codebooks.h)
// fitted on a calibration text. The model runs over the text in windows of
// its context; every layer's K (before RoPE) and V rows are collected, and
// k-means (Lloyd's iterations from distinct random rows) fits each group's
// codewords. What a codebook cannot fine-tune (Astra trains its codebooks
// with the model) is measured instead: the fit's relative error per kind.
#pragma once

#include "model/kv_codebooks.h"
#include "model/llama_model.h"
#include "util/thread_pool.h"

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>

namespace tessera {

struct VqFitOptions {
    int groups = 1;
    int codes = 1024;
    int iterations = 12;
    int n_ctx = 0;          // calibration window (0: the model's, at most 2048)
    int max_rows = 32768;   // rows per layer kept for k-means (evenly spaced)
    uint64_t seed = 1;
};

struct VqFitReport {
    int64_t rows = 0;  // positions of the text collected per layer
    // Squared error of the fitted rows over their variance, averaged over
    // layers: 0 is lossless, 1 is no better than each group's mean.
    double relative_error_k = 0.0, relative_error_v = 0.0;
};

// Lloyd's k-means of one group of one kind's codebook over n rows (row t's
// group at rows + t * stride, group_dim values), from distinct random rows;
// returns the squared error of the fit and, through `variance`, the rows'
// squared distance to their mean. The norms are left current.
double fit_codebook_group(KvCodebooks& books, int layer, KvCodebooks::Kind kind, int group, const float* rows,
                          int64_t stride, int64_t n, const VqFitOptions& options, std::mt19937_64& rng,
                          ThreadPool& pool, double* variance);

KvCodebooks fit_kv_codebooks(const LlamaModel& model, std::span<const int32_t> tokens, const VqFitOptions& options,
                             int n_threads, VqFitReport* report = nullptr,
                             const std::function<void(const std::string&)>& log = {});

}  // namespace tessera
