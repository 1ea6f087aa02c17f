// tessera quantize: convert a GGUF model's weight matrices to another type,
// like llama-quantize (one line per tensor, sizes before and after). On a
// terminal a progress bar replaces the lines (-v keeps them), and only the
// tensors worth a word (fallbacks, mixes this build cannot write) are listed
// after it.
#include "apps/commands.h"
#include "model/quantize_model.h"
#include "util/error.h"
#include "util/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

namespace tessera {

namespace {

struct QuantizeOptions {
    std::string input;
    std::string output;
    std::string type;
    int n_threads = 0;
    bool pure = false;
    bool allow_requantize = false;
    bool verbose = false;
    std::string imatrix;
};

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::string dims_of(const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += fmt::format("{}{:6}", i ? "," : "", ne[i]);
    return s + "]";
}

void quantize_main(const QuantizeOptions& o) {
    const auto target = parse_quantize_target(o.type);
    if (!target) throw make_error("'{}' is not a quantization type (use one of {})", o.type, quantize_target_names());
    QuantizeParams params;
    params.target = *target;
    params.n_threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    params.pure = o.pure;
    params.allow_requantize = o.allow_requantize;
    std::optional<ImportanceMatrix> importance;
    if (!o.imatrix.empty()) {
        importance = read_importance_matrix(o.imatrix);
        params.importance = &*importance;
        std::fprintf(stderr, "quantize: importance matrix %s: %zu entries, %d chunks%s%s\n", o.imatrix.c_str(),
                     importance->entries.size(), importance->chunk_count,
                     importance->datasets.empty() ? "" : " of ", importance->datasets.empty() ? "" : importance->datasets.front().c_str());
    }

    std::fprintf(stderr, "quantize: %s -> %s as %s (general.file_type %u), %d threads\n", o.input.c_str(),
                 o.output.c_str(), target->name.c_str(), target->file_type, params.n_threads);
    const bool bar = Progress::on_terminal() && !o.verbose;
    std::unique_ptr<Progress> progress;
    std::vector<std::string> notes;  // with a bar: the lines worth keeping, shown after it
    const QuantizeSummary s = quantize_model(o.input, o.output, params, [&](const TensorQuantPlan& p, size_t done, size_t total) {
        const int width = static_cast<int>(fmt::format("{}", total).size());
        std::string line = fmt::format("[{:>{}}/{}] {:>3}% {:<28} {:<16} {:>5} -> {:<5} {:9.3f} MiB -> {:9.3f} MiB",
                                       done, width, total, done * 100 / total, p.name, dims_of(p.ne),
                                       quant_type_name(p.from), quant_type_name(p.to), mib(p.bytes_in), mib(p.bytes_out));
        if (!p.converted && p.to == p.from) line += "  (copied)";
        if (p.mix_unavailable()) {
            line += fmt::format("  (llama.cpp's mix has {} here, which this build cannot write)", quant_type_name(p.mixed));
        }
        if (p.fell_back()) {
            line += fmt::format("  fallback: {} columns are not a multiple of {}'s block of {}, using {}", p.ne[0],
                                quant_type_name(p.wanted), layout_of(p.wanted).block_size, quant_type_name(p.to));
        }
        if (!bar) {
            std::fprintf(stderr, "%s\n", line.c_str());
            return;
        }
        if (p.mix_unavailable() || p.fell_back()) notes.push_back(line);
        if (!progress) progress = std::make_unique<Progress>("quantizing " + o.output, static_cast<double>(total), "tensors");
        progress->update(static_cast<double>(done));
        if (done == total) progress->finish();
    });
    for (const std::string& line : notes) std::fprintf(stderr, "%s\n", line.c_str());
    size_t n_fallback = 0;
    for (const auto& p : s.tensors) n_fallback += p.fell_back() ? 1 : 0;
    std::fprintf(stderr, "quantize: model size = %.2f MiB, quantized size = %.2f MiB (%.1f%%), %zu tensors, %zu fell back, %.2f s\n",
                 mib(s.file_bytes_in), mib(s.file_bytes_out),
                 s.file_bytes_in ? 100.0 * static_cast<double>(s.file_bytes_out) / static_cast<double>(s.file_bytes_in) : 0.0,
                 s.tensors.size(), n_fallback, s.seconds);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
    auto o = std::make_shared<QuantizeOptions>();
    CLI::App* cmd = app.add_subcommand("quantize", "Convert a GGUF model's weight matrices to another type (like llama-quantize)");
    cmd->add_option("input", o->input, "Source GGUF model (F32, F16 or quantized weights)")->required();
    cmd->add_option("output", o->output, "GGUF file to write")->required();
    cmd->add_option("type", o->type, "Target: " + quantize_target_names() + " (Q4_K_M / Q4_K_S: llama.cpp's mixes)")
        ->required();
    cmd->add_option("-t,--threads", o->n_threads, "Threads converting rows (0: one per CPU)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1024));
    cmd->add_option("--imatrix", o->imatrix,
                    "llama-imatrix's importance matrix (GGUF or legacy .dat): importance-weighted quantizers, as "
                    "llama-quantize --imatrix; needed by the IQ2_* and IQ3_XXS targets");
    cmd->add_flag("--pure", o->pure, "Every weight matrix in the target type: no llama.cpp mix (output.weight Q6_K, ...)");
    cmd->add_flag("--allow-requantize", o->allow_requantize,
                  "Accept a source whose matrices are already quantized (the rounding errors add up)");
    cmd->add_flag("-v,--verbose", o->verbose, "A line per tensor on a terminal too (elsewhere there always is)");
    cmd->callback([o] { quantize_main(*o); });
}

}  // namespace tessera
