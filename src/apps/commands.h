// The subcommands of the tessera binary. Each adds itself to the CLI with its
// flags (declared once, with default and help: --help is the documentation)
// and a callback that does the work and throws an Error on failure.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace tessera {

void add_run_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_gen_model_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_convert_tokenizer_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_worker_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_keygen_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_status_command(CLI::App& app);
void add_convert_hf_command(CLI::App& app);
void add_vq_commands(CLI::App& app);  // vq-fit, vq-eval

// The bundled model (models/stories260K.gguf beside the binary's build tree,
// or in the current directory), used when -m is not given.
std::string default_model_path();

}  // namespace tessera
