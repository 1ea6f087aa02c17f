// tessera perplexity: llama-perplexity's perplexity and KL-divergence modes.
//   -m MODEL -f TEXT                              PPL of MODEL over TEXT
//   -m BASE -f TEXT --kl-divergence-base FILE     the same, and saves BASE's
//                                                 distributions to FILE
//   -m MODEL --kl-divergence --kl-divergence-base FILE
//                                                 KL divergence of MODEL from them
// Progress and the results go to stdout in llama.cpp's format; details to stderr.
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "engine/kl_divergence.h"
#include "engine/perplexity.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "util/error.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

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
    std::string cache_type = "f16";
    ParallelOptions parallel;
};

constexpr int kDefaultContext = 512;

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw make_error("{}: cannot read the text file", path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void print_eta(const ChunkReport& c) {
    if (c.index != 0) return;
    std::fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", c.seconds,
                 c.seconds * c.n_chunk / 60.0);
}

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
    std::printf("Mean PPL(Q)-PPL(base)         : %10.6f\n", ppl - ppl_base);
    std::printf("\n====== KL divergence statistics ======\n");
    std::printf("Mean    KLD: %10.6f ± %10.6f\n", r.kld.mean(), r.kld.mean_error());
    std::printf("Maximum KLD: %10.6f\n", r.max_kld());
    std::printf("99.9%%   KLD: %10.6f\n", r.kld_quantile(0.999));
    std::printf("99.0%%   KLD: %10.6f\n", r.kld_quantile(0.99));
    std::printf("Median  KLD: %10.6f\n", r.kld_quantile(0.5));
    std::printf("Minimum KLD: %10.6f\n", r.min_kld());
    std::printf("\n====== Token probability statistics ======\n");
    std::printf("Same top p: %7.3f ± %6.3f %%\n", 100.0 * r.same_top(), 100.0 * r.same_top_error());
}

void perplexity_main(const PerplexityOptions& o) {
    if (o.kl_divergence && o.kl_base.empty()) {
        throw make_error("--kl-divergence compares against a base file: give it with --kl-divergence-base FILE");
    }
    if (!o.kl_divergence && o.text_file.empty()) throw make_error("give the text to score with -f FILE");
    const auto kv_type = parse_quant_type(o.cache_type);
    if (!kv_type || (*kv_type != QuantType::F32 && *kv_type != QuantType::F16)) {
        throw make_error("--cache-type must be f32 or f16 (got '{}')", o.cache_type);
    }
    const int n_threads = o.n_threads > 0 ? o.n_threads : default_threads(o.parallel);
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    const LlamaModel model(model_path);
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    const Vocab& vocab = tokenizer->vocab();
    if (vocab.size() != model.hparams().n_vocab) {
        throw make_error("{}: the tokenizer has {} tokens but the embedding has {}", model_path, vocab.size(),
                         model.hparams().n_vocab);
    }
    const uint64_t fingerprint = vocab_fingerprint(vocab);
    const int32_t bos = vocab.add_bos ? vocab.bos_id : -1;

    std::unique_ptr<KlBaseFile> base;
    ChunkPlan plan;
    std::vector<int32_t> inputs;
    if (o.kl_divergence) {
        base = std::make_unique<KlBaseFile>(o.kl_base);
        const KlBaseHeader& h = base->header();
        if (h.vocab_fingerprint != fingerprint || static_cast<int64_t>(h.n_vocab) != vocab.size()) {
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
            // one it was made from (the file may hold only its first chunks: --chunks).
            const std::vector<int32_t> tokens = tokenizer->encode(read_text(o.text_file), true);
            PerplexityParams params;
            params.n_ctx = plan.n_ctx;
            const ChunkPlan text_plan = plan_chunks(tokens.size(), params);
            const std::vector<int32_t> text_inputs = chunk_inputs(tokens, text_plan, bos);
            const std::span<const int32_t> file_inputs = base->inputs();
            const size_t n = std::min(text_inputs.size(), file_inputs.size());
            const auto diff = std::mismatch(file_inputs.begin(), file_inputs.begin() + static_cast<std::ptrdiff_t>(n),
                                            text_inputs.begin());
            if (text_inputs.size() < file_inputs.size() || diff.first != file_inputs.begin() + static_cast<std::ptrdiff_t>(n)) {
                throw make_error("{}: was made from another text or tokenization than {} ({} vs {} tokens in chunks, "
                                 "first difference at token {})",
                                 o.kl_base, o.text_file, file_inputs.size(), text_inputs.size(),
                                 diff.first - file_inputs.begin());
            }
        }
    } else {
        std::fprintf(stderr, "perplexity: tokenizing the input ..\n");
        const std::vector<int32_t> tokens = tokenizer->encode(read_text(o.text_file), true);
        PerplexityParams params;
        params.n_ctx = o.n_ctx > 0 ? o.n_ctx : kDefaultContext;
        params.n_chunks = o.n_chunks;
        plan = plan_chunks(tokens.size(), params);
        inputs = chunk_inputs(tokens, plan, bos);
        std::fprintf(stderr, "perplexity: %zu tokens\n", tokens.size());
    }

    ForwardConfig config;
    config.n_ctx = plan.n_ctx;
    config.kv_type = *kv_type;
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
        std::printf("chunk             PPL          ln(PPL(Q)/PPL(base))          KL Divergence              Same top p\n");
        const KlResult r = compute_kl_divergence(decoder, *base, plan.n_chunk, [](const KlChunkReport& c) {
            print_eta({c.index, c.n_chunk, c.ppl, c.seconds});
            std::printf("%4d %12.4f %12.5f ± %10.5f %12.6f ± %10.6f %8.3f ± %6.3f %%\n", c.index + 1, c.ppl,
                        c.ln_ratio, c.ln_ratio_error, c.kld, c.kld_error, 100.0 * c.same_top, 100.0 * c.same_top_error);
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
        r = write_kl_base(decoder, inputs, plan, fingerprint, o.kl_base, on_chunk);
    } else {
        r = compute_perplexity(decoder, inputs, plan, on_chunk);
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
    cmd->add_option("--cache-type", o->cache_type, "KV cache type for K and V: f32 or f16")->capture_default_str();
    cmd->callback([o] { perplexity_main(*o); });
}

}  // namespace tessera
