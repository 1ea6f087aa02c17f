// tessera perplexity: llama-perplexity's perplexity and KL-divergence modes.
//   -m MODEL -f TEXT                              PPL of MODEL over TEXT
//   -m BASE -f TEXT --kl-divergence-base FILE     the same, and saves BASE's
//                                                 distributions to FILE (llama.cpp's
//                                                 format: eval/kl_divergence.h)
//   -m MODEL --kl-divergence --kl-divergence-base FILE
//                                                 KL divergence of MODEL from them
// Progress and the results go to stdout in llama.cpp's format; details to stderr.
#include "apps/attention_flags.h"
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "apps/text_input.h"
#include "eval/kl_divergence.h"
#include "eval/perplexity.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "util/error.h"
#include "util/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <utility>

#include <unistd.h>

namespace tessera {

namespace {

struct PerplexityOptions {
    std::string model;
    std::string text_file;
    int n_ctx = 0;
    int n_batch = 512;
    int n_threads = 0;
    int n_chunks = -1;
    std::string kl_base;
    bool kl_divergence = false;
    AttentionFlags attention;
    ParallelOptions parallel;
};

constexpr int kDefaultContext = 512;

void print_eta(const ChunkReport& c) {
    // Chunks done, as a bar on a terminal (quarter lines in a log) when the
    // results go elsewhere; on the same terminal the [i] values are the
    // progress, and a bar would be drawn over them.
    static std::unique_ptr<Progress> progress;
    if (c.index == 0 && !isatty(STDOUT_FILENO)) {
        progress = std::make_unique<Progress>("perplexity", static_cast<double>(c.n_chunk), "chunks");
    }
    if (progress) {
        progress->update(static_cast<double>(c.index + 1));
        if (c.index + 1 == c.n_chunk) {
            progress->finish();
            progress.reset();
        }
    }
    if (c.index != 0) return;
    std::fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", c.seconds,
                 c.seconds * c.n_chunk / 60.0);
}

// The statistics and the lines of llama-perplexity --kl-divergence.
void print_kl_result(const KlResult& r) {
    const double ppl = r.nll.ppl();
    const double ppl_base = r.nll_base.ppl();
    std::printf("\n====== Perplexity statistics ======\n");
    std::printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, r.nll.ppl_error());
    std::printf("Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_base, r.nll_base.ppl_error());
    std::printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * r.nll_correlation());
    std::printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r.ln_ratio.mean(), r.ln_ratio.mean_error());
    const double ratio = std::exp(r.ln_ratio.mean());
    std::printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", ratio, ratio * r.ln_ratio.mean_error());
    std::printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", ppl - ppl_base, r.ppl_diff_error());
    std::printf("\n====== KL divergence statistics ======\n");
    std::printf("Mean    KLD: %10.6f ± %10.6f\n", r.kld.mean(), r.kld.mean_error());
    std::printf("Maximum KLD: %10.6f\n", r.max_kld());
    std::printf("99.9%%   KLD: %10.6f\n", r.kld_quantile(0.999));
    std::printf("99.0%%   KLD: %10.6f\n", r.kld_quantile(0.99));
    std::printf("95.0%%   KLD: %10.6f\n", r.kld_quantile(0.95));
    std::printf("90.0%%   KLD: %10.6f\n", r.kld_quantile(0.90));
    std::printf("Median  KLD: %10.6f\n", r.kld_quantile(0.5));
    std::printf("10.0%%   KLD: %10.6f\n", r.kld_quantile(0.10));
    std::printf(" 5.0%%   KLD: %10.6f\n", r.kld_quantile(0.05));
    std::printf(" 1.0%%   KLD: %10.6f\n", r.kld_quantile(0.01));
    std::printf(" 0.1%%   KLD: %10.6f\n", r.kld_quantile(0.001));
    std::printf("Minimum KLD: %10.6f\n", r.min_kld());
    std::printf("\n====== Token probability statistics ======\n");
    std::printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * r.p_diff.mean(), 100.0 * r.p_diff.mean_error());
    std::printf("Maximum Δp: %6.3f%%\n", 100.0 * r.p_diff_quantile(1.0));
    const std::pair<const char*, double> p_diff_levels[] = {{"99.9%", 0.999}, {"99.0%", 0.99}, {"95.0%", 0.95},
                                                            {"90.0%", 0.90},  {"75.0%", 0.75}, {"Median", 0.5},
                                                            {"25.0%", 0.25},  {"10.0%", 0.10}, {" 5.0%", 0.05},
                                                            {" 1.0%", 0.01},  {" 0.1%", 0.001}};
    for (const auto& [label, p] : p_diff_levels) std::printf("%-8sΔp: %6.3f%%\n", label, 100.0 * r.p_diff_quantile(p));
    std::printf("Minimum Δp: %6.3f%%\n", 100.0 * r.p_diff_quantile(0.0));
    std::printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * r.p_diff_rms(), 100.0 * r.p_diff_rms_error());
    std::printf("Same top p: %7.3f ± %6.3f %%\n", 100.0 * r.same_top(), 100.0 * r.same_top_error());
}

void perplexity_main(const PerplexityOptions& o) {
    if (o.kl_divergence && o.kl_base.empty()) {
        throw make_error("--kl-divergence compares against a base file: give it with --kl-divergence-base FILE");
    }
    if (!o.kl_divergence && o.text_file.empty()) throw make_error("give the text to score with -f FILE");
    const KvCacheTypes kv_types = resolve_cache_types(o.attention);
    const int n_threads = o.n_threads > 0 ? o.n_threads : default_threads(o.parallel);
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    const LlamaModel model(model_path);
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    const Vocab& vocab = tokenizer->vocab();
    if (vocab.size() != model.hparams().n_vocab) {
        throw make_error("{}: the tokenizer has {} tokens but the embedding has {}", model_path, vocab.size(),
                         model.hparams().n_vocab);
    }
    // As llama.cpp: each chunk is evaluated with BOS in place of its first
    // token when the vocabulary adds BOS; base files hold the tokens as they are.
    const int32_t bos = vocab.add_bos ? vocab.bos_id : -1;

    std::unique_ptr<KlBaseFile> base;
    ChunkPlan plan;
    std::vector<int32_t> tokens;
    if (o.kl_divergence) {
        base = std::make_unique<KlBaseFile>(o.kl_base);
        const KlBaseHeader& h = base->header();
        // llama.cpp's format has no vocabulary fingerprint: the size is all
        // there is to check (and the tokens, against -f when it is given).
        if (static_cast<int64_t>(h.n_vocab) != vocab.size()) {
            throw make_error("{}: written by a model with another vocabulary ({} tokens) than {} ({} tokens)",
                             o.kl_base, h.n_vocab, model_path, vocab.size());
        }
        if (o.n_ctx > 0 && o.n_ctx != h.plan.n_ctx) {
            throw make_error("{}: holds chunks of {} tokens, not -c {} (leave -c out to use the file's)", o.kl_base,
                             h.plan.n_ctx, o.n_ctx);
        }
        plan = h.plan;
        if (o.n_chunks >= 0) plan.n_chunk = std::min(plan.n_chunk, o.n_chunks);
        if (!o.text_file.empty()) {
            // The file carries its own tokens; a text given as well must be the
            // one it was made from (the file holds its first n_chunk * n_ctx
            // tokens: whole chunks, or fewer with --chunks).
            const std::vector<int32_t> text_tokens = tokenizer->encode(read_text_file(o.text_file), true);
            const std::span<const int32_t> file_tokens = base->tokens();
            const size_t n = std::min(text_tokens.size(), file_tokens.size());
            const auto diff = std::mismatch(file_tokens.begin(), file_tokens.begin() + static_cast<std::ptrdiff_t>(n),
                                            text_tokens.begin());
            if (text_tokens.size() < file_tokens.size() || diff.first != file_tokens.begin() + static_cast<std::ptrdiff_t>(n)) {
                throw make_error("{}: was made from another text or tokenization than {} ({} tokens in its chunks, "
                                 "{} in the text, first difference at token {})",
                                 o.kl_base, o.text_file, file_tokens.size(), text_tokens.size(),
                                 diff.first - file_tokens.begin());
            }
        }
    } else {
        std::fprintf(stderr, "perplexity: tokenizing the input ..\n");
        tokens = tokenizer->encode(read_text_file(o.text_file), true);
        PerplexityParams params;
        params.n_ctx = o.n_ctx > 0 ? o.n_ctx : kDefaultContext;
        params.n_chunks = o.n_chunks;
        plan = plan_chunks(tokens.size(), params);
        std::fprintf(stderr, "perplexity: %zu tokens\n", tokens.size());
    }

    ForwardConfig config;
    config.n_ctx = plan.n_ctx;
    config.kv_types = kv_types;
    config.sparse = resolve_sparse(o.attention);
    config.n_batch = std::min(o.n_batch, plan.n_ctx);  // a chunk is the most one call evaluates
    // Any mode: the KL divergence of --fast tensor parallel against a single
    // node's base file is how its quality cost is measured.
    const DecoderSetup setup = make_decoder(model, config, n_threads, o.parallel);
    print_plan(setup);
    Decoder& decoder = *setup.decoder;
    std::fprintf(stderr, "perplexity: calculating %s over %d chunks, n_ctx=%d, batch_size=%d, %d scored tokens each, %d threads\n",
                 o.kl_divergence ? "KL divergence" : "perplexity", plan.n_chunk, plan.n_ctx, config.n_batch,
                 plan.n_scored(), n_threads);

    if (o.kl_divergence) {
        std::printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              "
                    "Δp RMS            Same top p\n");
        const KlResult r = compute_kl_divergence(decoder, *base, bos, plan.n_chunk, [](const KlChunkReport& c) {
            print_eta({c.index, c.n_chunk, c.ppl, c.seconds});
            std::printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
                        c.index + 1, c.ppl, c.ppl_error, c.ln_ratio, c.ln_ratio_error, c.kld, c.kld_error,
                        100.0 * c.p_diff_rms, 100.0 * c.p_diff_rms_error, 100.0 * c.same_top, 100.0 * c.same_top_error);
            std::fflush(stdout);
        });
        print_kl_result(r);
        return;
    }

    auto on_chunk = [](const ChunkReport& c) {
        print_eta(c);
        std::printf("[%d]%.4f,", c.index + 1, c.ppl);
        std::fflush(stdout);
    };
    PerplexityResult r;
    if (!o.kl_base.empty()) {
        std::fprintf(stderr, "perplexity: saving the distributions of the scored tokens to %s\n", o.kl_base.c_str());
        r = write_kl_base(decoder, tokens, plan, bos, o.kl_base, on_chunk);
    } else {
        r = compute_perplexity(decoder, chunk_inputs(tokens, plan, bos), plan, on_chunk);
    }
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.nll.ppl(), r.nll.ppl_error());
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
    auto o = std::make_shared<PerplexityOptions>();
    CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a model over a text, and KL divergence between two models (like llama-perplexity)");
    cmd->add_option("-m,--model", o->model, "GGUF model file (default: the bundled stories260K)");
    cmd->add_option("-f,--file", o->text_file, "Text to score (optional with --kl-divergence: then it must be the base file's)");
    cmd->add_option("-c,--ctx-size", o->n_ctx, "Tokens per chunk; the second half of each is scored (0: 512, or the base file's)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1 << 20));
    cmd->add_option("-b,--batch-size", o->n_batch, "Positions processed at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 20));
    cmd->add_option("-t,--threads", o->n_threads, "Threads (0: one per CPU)")->capture_default_str()->check(CLI::Range(0, 1024));
    cmd->add_option("--chunks", o->n_chunks, "Chunks to evaluate (-1: all)")->capture_default_str();
    cmd->add_option("--kl-divergence-base", o->kl_base,
                    "Without --kl-divergence: save the model's distributions to this file; with it: compare against them");
    cmd->add_flag("--kl-divergence", o->kl_divergence, "Compute the KL divergence from the --kl-divergence-base file");
    add_parallel_flags(cmd, o->parallel);
    add_attention_flags(cmd, o->attention);
    cmd->callback([o] { perplexity_main(*o); });
}

}  // namespace tessera
