// tessera vq-fit: codebooks of a model's K/V rows for the compressed exchange
// of sequence-parallel prefill (eval/vq_fit.h).
// tessera vq-eval: how much that exchange costs in quality: a held text's
// prompt through sequence-parallel prefill exactly and with the codebooks,
// then the positions after it (teacher-forced with a single node's greedy
// picks), compared against a single node (eval/logit_agreement.h).
#include "apps/commands.h"
#include "apps/parallel_flags.h"
#include "apps/text_input.h"
#include "engine/decoder_setup.h"
#include "eval/logit_agreement.h"
#include "eval/vq_fit.h"
#include "model/llama_model.h"
#include "model/local_decoder.h"
#include "model/tokenizer.h"
#include "model/vocab.h"
#include "util/error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

namespace tessera {

namespace {

struct VqFitCliOptions {
    std::string model, text, output;
    VqFitOptions fit;
    int n_threads = 0;
};

int threads_or_all(int n) { return n > 0 ? n : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::vector<int32_t> text_tokens(const LlamaModel& model, const std::string& path) {
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(load_vocab(model.file()));
    return tokenizer->encode(read_text_file(path), true);
}

void run_vq_fit(const VqFitCliOptions& o) {
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    const LlamaModel model(model_path);
    const std::vector<int32_t> tokens = text_tokens(model, o.text);
    VqFitReport report;
    const KvCodebooks books = fit_kv_codebooks(model, tokens, o.fit, threads_or_all(o.n_threads), &report,
                                               [](const std::string& line) { std::fprintf(stderr, "vq-fit: %s\n", line.c_str()); });
    books.save(o.output);
    std::fprintf(stderr,
                 "vq-fit: wrote %s: %d layers, %d groups of %d values, %d codes: %d bits a position and layer (exact "
                 "F16 rows: %d); relative error K %.4f, V %.4f over %lld positions\n",
                 o.output.c_str(), books.n_layer(), books.groups(), books.group_dim(), books.codes(),
                 books.bits_per_position(), 2 * books.kv_dim() * 16, report.relative_error_k, report.relative_error_v,
                 static_cast<long long>(report.rows));
}

struct VqEvalCliOptions {
    std::string model, text, codebooks;
    int prompt_tokens = 256;
    int positions = 64;
    int n_ctx = 0;
    int n_batch = 64;
    int n_threads = 0;
    int local = 2;
    bool json = false;
};

void run_vq_eval(const VqEvalCliOptions& o) {
    const std::string model_path = o.model.empty() ? default_model_path() : o.model;
    const LlamaModel model(model_path);
    const std::vector<int32_t> tokens = text_tokens(model, o.text);
    if (static_cast<int>(tokens.size()) < o.prompt_tokens) {
        throw make_error("{} gives {} tokens, fewer than --prompt-tokens {}", o.text, tokens.size(), o.prompt_tokens);
    }
    const std::span<const int32_t> prompt(tokens.data(), static_cast<size_t>(o.prompt_tokens));
    ForwardConfig config;
    config.n_ctx = o.n_ctx > 0 ? o.n_ctx : o.prompt_tokens + o.positions;
    config.n_batch = o.n_batch;
    ParallelOptions parallel;
    parallel.local = o.local;
    parallel.prefill = "sp";
    const int n_threads = o.n_threads > 0 ? o.n_threads : default_threads(parallel);
    const int n_vocab = model.hparams().n_vocab;

    LocalDecoder single(model, config, n_threads);
    const ForcedRun reference = greedy_run(single, prompt, o.positions);
    const auto measure = [&](const std::string& codebooks, std::string* exchange) {
        ParallelOptions p = parallel;
        p.codebooks = codebooks;
        DecoderSetup setup = make_decoder(model, config, n_threads, p);
        const ForcedRun run = forced_run(*setup.decoder, prompt, reference.tokens);
        if (setup.sequence_parallel == nullptr || setup.sequence_parallel->prompts() != 1) {
            throw make_error("internal: the prompt did not run across the nodes");
        }
        *exchange = setup.sequence_parallel->describe_exchange();
        return compare_logits(reference.logits, run.logits, n_vocab);
    };
    std::string exact_exchange, vq_exchange;
    const LogitAgreement exact = measure("", &exact_exchange);
    const LogitAgreement vq = measure(o.codebooks, &vq_exchange);
    const KvCodebooks books = KvCodebooks::load(o.codebooks);
    if (o.json) {
        const nlohmann::json j = {
            {"model", model_path}, {"codebooks", o.codebooks}, {"groups", books.groups()}, {"codes", books.codes()},
            {"bits_per_position_layer", books.bits_per_position()}, {"exact_bits_per_position_layer", 2 * books.kv_dim() * 16},
            {"prompt_tokens", o.prompt_tokens}, {"positions", o.positions}, {"nodes", o.local},
            {"exact", {{"kl_mean", exact.kl_mean}, {"kl_max", exact.kl_max}, {"top1", exact.top1}}},
            {"compressed", {{"kl_mean", vq.kl_mean}, {"kl_max", vq.kl_max}, {"top1", vq.top1}}}};
        std::printf("%s\n", j.dump().c_str());
        return;
    }
    std::printf("prompt of %d tokens over %d nodes, %d positions after it, against one node:\n", o.prompt_tokens,
                o.local, o.positions);
    std::printf("  exact exchange (%s): KL mean %.3g, max %.3g, top-1 %.1f%%\n", exact_exchange.c_str(),
                exact.kl_mean, exact.kl_max, 100.0 * exact.top1);
    std::printf("  codebooks (%s): KL mean %.4f, max %.4f, top-1 %.1f%%\n", vq_exchange.c_str(), vq.kl_mean, vq.kl_max,
                100.0 * vq.top1);
}

}  // namespace

void add_vq_commands(CLI::App& app) {
    auto fit = std::make_shared<VqFitCliOptions>();
    CLI::App* cmd = app.add_subcommand(
        "vq-fit", "Fit codebooks of a model's K/V rows on a text, for sequence-parallel prefill's compressed exchange");
    cmd->add_option("-m,--model", fit->model, "GGUF model (default: the bundled stories260K)");
    cmd->add_option("-f,--file", fit->text, "Calibration text")->required();
    cmd->add_option("-o,--output", fit->output, "Codebook file to write (GGUF)")->required();
    cmd->add_option("--groups", fit->fit.groups, "Groups a row is cut into, each its own index (more: finer, more bits)")
        ->capture_default_str()
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--codes", fit->fit.codes, "Codewords per group (1024: 10 bits an index)")
        ->capture_default_str()
        ->check(CLI::Range(2, 65536));
    cmd->add_option("--iterations", fit->fit.iterations, "k-means iterations")->capture_default_str()->check(CLI::Range(1, 1000));
    cmd->add_option("--max-rows", fit->fit.max_rows, "Rows per layer kept for k-means (evenly spaced)")
        ->capture_default_str()
        ->check(CLI::Range(2, 1 << 24));
    cmd->add_option("-c,--ctx-size", fit->fit.n_ctx, "Calibration window (0: the model's context, at most 2048)")
        ->capture_default_str();
    cmd->add_option("-t,--threads", fit->n_threads, "Threads (0: one per CPU)")->capture_default_str();
    cmd->callback([fit] { run_vq_fit(*fit); });

    auto eval = std::make_shared<VqEvalCliOptions>();
    CLI::App* ev = app.add_subcommand(
        "vq-eval", "Measure sequence-parallel prefill's compressed exchange: KL and top-1 agreement against one node");
    ev->add_option("-m,--model", eval->model, "GGUF model (default: the bundled stories260K)");
    ev->add_option("--codebooks", eval->codebooks, "Codebooks from tessera vq-fit")->required();
    ev->add_option("-f,--file", eval->text, "A held text (not the calibration text): its first tokens are the prompt")->required();
    ev->add_option("--prompt-tokens", eval->prompt_tokens, "Prompt length")->capture_default_str()->check(CLI::Range(2, 1 << 20));
    ev->add_option("--positions", eval->positions, "Positions compared after the prompt")
        ->capture_default_str()
        ->check(CLI::Range(1, 1 << 16));
    ev->add_option("--local", eval->local, "Processes sharing the prompt")->capture_default_str()->check(CLI::Range(2, 64));
    ev->add_option("-b,--batch-size", eval->n_batch, "Batch (chunks are whole batches)")->capture_default_str()->check(CLI::Range(1, 8192));
    ev->add_option("-c,--ctx-size", eval->n_ctx, "Context (0: the prompt and the positions)")->capture_default_str();
    ev->add_option("-t,--threads", eval->n_threads, "Threads per process (0: the cores, shared)")->capture_default_str();
    ev->add_flag("--json", eval->json, "One JSON line");
    ev->callback([eval] { run_vq_eval(*eval); });
}

}  // namespace tessera
