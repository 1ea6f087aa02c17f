// tessera: one large language model on several small machines at once.
#include "apps/attention_flags.h"
#include "apps/commands.h"
#include "ops/cpu_target.h"
#include "ops/group_prefetch.h"
#include "util/error.h"
#include "util/version.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

int main(int argc, char** argv) {
    CLI::App app{"tessera: run one LLM across several small machines (GGUF models, llama.cpp-style tools)"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Show the help of every subcommand");
    app.set_version_flag("--version", std::string("tessera ") + tessera::tessera_version());
    tessera::add_run_command(app);
    tessera::add_chat_command(app);
    tessera::add_serve_command(app);
    tessera::add_tokenize_command(app);
    tessera::add_gen_model_command(app);
    tessera::add_convert_command(app);
    tessera::add_convert_tokenizer_command(app);
    tessera::add_convert_hf_command(app);
    tessera::add_bench_command(app);
    tessera::add_worker_command(app);
    tessera::add_quantize_command(app);
    tessera::add_perplexity_command(app);
    tessera::add_plan_command(app);
    tessera::add_keygen_command(app);
    tessera::add_devices_command(app);
    tessera::add_status_command(app);
    tessera::add_vq_commands(app);
    // Before the subcommand (tessera --cpu-target avx2 bench ...); set in the
    // environment too, so that the workers --local starts run on it as well.
    app.add_option_function<std::string>(
           "--cpu-target",
           [](const std::string& name) {
               tessera::limit_cpu_target(name);
               setenv("TESSERA_CPU_TARGET", name.c_str(), 1);
           },
           "Run the kernels on this SIMD target or a lesser one (x86: avx3_dl, avx3, avx2, sse4, ssse3, "
           "portable; ARM: sve2, sve, neon; also TESSERA_CPU_TARGET): to compare kernels, or nodes of different CPU "
           "kinds")
        ->trigger_on_parse();
    app.add_option_function<std::string>(
           "--prefetch",
           [](const std::string& name) {
               tessera::set_group_prefetch(tessera::group_prefetch_from_name(name));
               setenv("TESSERA_PREFETCH", name.c_str(), 1);
           },
           "How the grouped kernels prefetch the weights they stream: l2 (8 KiB ahead into L2), l2+l1 (12 KiB "
           "ahead into L2 and 3 KiB into L1), by-type (l2+l1 for Q5_K, Q6_K and IQ4_XS, l2 for the rest), none "
           "(the hardware prefetchers alone), none-by-type (l2 for Q5_1, Q3_K, F16 and BF16, none "
           "for the rest) or auto (l2+l1 on Intel CPUs, by-type on AMD Zen 5, none-by-type on AMD Zen 3/4, l2 on "
           "others; also TESSERA_PREFETCH). "
           "Speed only: the results are the same bits")
        ->trigger_on_parse();
    for (int i = 1; i < argc; ++i) {
        if (const char* long_name = tessera::long_name_of_llama_short_option(argv[i])) {
            argv[i] = const_cast<char*>(long_name);
        }
    }
    try {
        tessera::limit_cpu_target_from_environment();
        tessera::set_group_prefetch_from_environment();
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
