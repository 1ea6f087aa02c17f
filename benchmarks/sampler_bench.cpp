// What drawing a token costs apart from the model, on a vocabulary of random
// logits: the whole vocabulary ordered by logit (sampling without top-k, the
// OpenAI API's default) by the radix order against the comparison sort it
// replaced, alternated in rounds, and the whole sample() around it. Prints
// microseconds per token of each and the ratio of the two orders.
//
// `make sampler_bench && ./sampler_bench [--vocab 201088] [--tokens 50] [--rounds 5]`
// Not a test: the figures depend on the machine.
#include "engine/logit_order.h"
#include "engine/sampler.h"
#include "util/timer.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

using namespace tessera;

int main(int argc, char** argv) {
    CLI::App app{"the sampler's cost per token on a vocabulary of random logits"};
    int32_t vocab = 201088;  // gpt-oss (o200k); Qwen 3: 151936, Llama 3: 128256
    int tokens = 50, rounds = 5;
    app.add_option("--vocab", vocab, "vocabulary size")->check(CLI::Range(1, 1 << 24));
    app.add_option("--tokens", tokens, "tokens per round")->check(CLI::Range(1, 100000));
    app.add_option("--rounds", rounds, "rounds, alternating the orders")->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);

    std::vector<float> logits(static_cast<size_t>(vocab));
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : logits) x = normal(rng);
    std::vector<int32_t> ids;
    std::vector<uint64_t> scratch;
    SamplerParams params;
    params.top_k = 0;
    params.top_p = 1.0f;
    params.min_p = 0.0f;
    params.temperature = 1.0f;
    Sampler sampler(params);

    std::vector<double> radix, comparison, sample;
    int64_t checksum = 0;
    auto time_per_token = [&](auto&& step) {
        const double t0 = now_seconds();
        for (int t = 0; t < tokens; ++t) {
            logits[static_cast<size_t>(t) % logits.size()] += 0.25f;  // each token's logits differ
            step();
        }
        return (now_seconds() - t0) / tokens * 1e6;
    };
    for (int r = 0; r < rounds; ++r) {
        radix.push_back(time_per_token([&] {
            order_by_logit(logits.data(), vocab, ids, scratch);
            checksum += ids.front();
        }));
        comparison.push_back(time_per_token([&] {
            order_by_logit_reference(logits.data(), vocab, ids);
            checksum -= ids.front();
        }));
        sample.push_back(time_per_token([&] { checksum += sampler.sample(logits.data(), vocab); }));
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::printf("vocabulary %d, %d tokens x %d rounds (medians, microseconds per token)\n", vocab, tokens, rounds);
    std::printf("  order, radix:            %10.1f\n", median(radix));
    std::printf("  order, comparison sort:  %10.1f\n", median(comparison));
    std::printf("  radix / comparison:      %10.3f\n", median(radix) / median(comparison));
    std::printf("  sample(), top-k off:     %10.1f\n", median(sample));
    std::printf("(checksum %lld)\n", static_cast<long long>(checksum));
}
