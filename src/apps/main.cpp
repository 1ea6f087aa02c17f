// tessera: one large language model on several small machines at once.
#include "apps/attention_flags.h"
#include "apps/commands.h"
#include "util/error.h"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
    CLI::App app{"tessera: run one LLM across several small machines (GGUF models, llama.cpp-style tools)"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Show the help of every subcommand");
    tessera::add_run_command(app);
    tessera::add_chat_command(app);
    tessera::add_serve_command(app);
    tessera::add_tokenize_command(app);
    tessera::add_gen_model_command(app);
    tessera::add_convert_command(app);
    tessera::add_convert_tokenizer_command(app);
    tessera::add_bench_command(app);
    tessera::add_worker_command(app);
    tessera::add_quantize_command(app);
    tessera::add_perplexity_command(app);
    tessera::add_plan_command(app);
    tessera::add_keygen_command(app);
    tessera::add_vq_commands(app);
    for (int i = 1; i < argc; ++i) {
        if (const char* long_name = tessera::long_name_of_llama_short_option(argv[i])) {
            argv[i] = const_cast<char*>(long_name);
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const tessera::Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
    return 0;
}
